"""A container's own restartPolicy and restartPolicyRules (ContainerRestartRules and
RestartAllContainersOnContainerExits, on by default in 1.37), and the RestartContainer resize policy
a plain init container may not have (kubernetes#137458), through the official client."""

from __future__ import annotations

import asyncio
import json

import pytest
from kubernetes.client.rest import ApiException


def _pod(name: str, container: dict | None = None, **spec) -> dict:
    return {"metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "busybox", **(container or {})}], **spec}}


def _rule(action: str = "Restart", operator: str = "In", values: list | None = None) -> dict:
    return {"action": action, "exitCodes": {"operator": operator, "values": [42] if values is None else values}}


async def _create(core, body: dict):
    return await asyncio.to_thread(core.create_namespaced_pod, "default", body)


async def _refused(core, body: dict) -> str:
    with pytest.raises(ApiException) as e:
        await _create(core, body)
    assert e.value.status == 422, e.value.body
    return json.loads(e.value.body)["message"]


async def test_regular_containers_take_a_restart_policy_and_rules(core):
    created = await _create(core, _pod("p", {"restartPolicy": "Never", "restartPolicyRules": [
        _rule(), _rule("RestartAllContainers", "NotIn", [0])]}, restartPolicy="Never"))
    c = created.spec.containers[0]
    assert c.restart_policy == "Never"
    assert [(r.action, r.exit_codes.operator, r.exit_codes.values) for r in c.restart_policy_rules] == [
        ("Restart", "In", [42]), ("RestartAllContainers", "NotIn", [0])]
    assert await _refused(core, _pod("q", {"restartPolicy": "Sometimes"})) == (
        'Pod "q" is invalid: spec.containers[0].restartPolicy: Unsupported value: "Sometimes": '
        'supported values: "Always", "OnFailure", "Never"')


async def test_rules_need_the_policy_they_fall_back_to(core):
    assert await _refused(core, _pod("p", {"restartPolicyRules": [_rule()]})) == (
        'Pod "p" is invalid: spec.containers[0].restartPolicy: Required value: '
        "must specify restartPolicy when restart rules are used")
    init = {"name": "i", "image": "busybox", "restartPolicyRules": [_rule()]}
    assert await _refused(core, _pod("p", initContainers=[init])) == (
        'Pod "p" is invalid: spec.initContainers[0].restartPolicy: Required value: '
        "must specify restartPolicy when restart rules are used")


async def test_each_rule_is_checked(core):
    rules = [{"action": "DoNotRestart", "exitCodes": {"operator": "Equals", "values": [3]}},
             {"action": "Restart"}, {"action": "Restart", "exitCodes": {"operator": "", "values": [1]}}]
    assert await _refused(core, _pod("p", {"restartPolicy": "Always", "restartPolicyRules": rules})) == (
        'Pod "p" is invalid: [spec.containers[0].restartPolicyRules[0].action: Unsupported value: "DoNotRestart": '
        'supported values: "Restart", "RestartAllContainers", '
        'spec.containers[0].restartPolicyRules[0].exitCodes.operator: Unsupported value: "Equals": '
        'supported values: "In", "NotIn", '
        "spec.containers[0].restartPolicyRules[1].exitCodes: Required value: must be specified, "
        'spec.containers[0].restartPolicyRules[2].exitCodes.operator: Unsupported value: "": '
        'supported values: "In", "NotIn"]')


async def test_rule_and_exit_code_counts_are_bounded(core):
    rules = [_rule(values=list(range(256)))] + [_rule()] * 20
    assert await _refused(core, _pod("p", {"restartPolicy": "OnFailure", "restartPolicyRules": rules})) == (
        'Pod "p" is invalid: [spec.containers[0].restartPolicyRules: Too many: 21: must have at most 20 items, '
        "spec.containers[0].restartPolicyRules[0].exitCodes.values: Too many: 256: must have at most 255 items]")
    # any int32 exit code, or none: the bound is on the count, not the values
    await _create(core, _pod("q", {"restartPolicy": "Never", "restartPolicyRules": [
        _rule(values=[-1, 256, 300]), _rule(values=[])]}))


async def test_init_containers_take_any_container_restart_policy(core):
    inits = [{"name": "once", "image": "busybox", "restartPolicy": "Never",
              "restartPolicyRules": [_rule("RestartAllContainers")]},
             {"name": "retry", "image": "busybox", "restartPolicy": "OnFailure"},
             {"name": "sidecar", "image": "busybox", "restartPolicy": "Always",
              "restartPolicyRules": [_rule("RestartAllContainers")]}]
    created = await _create(core, _pod("p", initContainers=inits))
    assert [c.restart_policy for c in created.spec.init_containers] == ["Never", "OnFailure", "Always"]
    sidecar = {"name": "s", "image": "busybox", "restartPolicy": "Always", "restartPolicyRules": [_rule()]}
    assert await _refused(core, _pod("q", initContainers=[sidecar])) == (
        'Pod "q" is invalid: spec.initContainers[0].restartPolicyRules[0].action: Unsupported value: "Restart": '
        'supported values: "RestartAllContainers"')
    bad = {"name": "i", "image": "busybox", "restartPolicy": "Sometimes"}
    assert await _refused(core, _pod("q", initContainers=[bad])) == (
        'Pod "q" is invalid: spec.initContainers[0].restartPolicy: Unsupported value: "Sometimes": '
        'supported values: "Always", "OnFailure", "Never"')


async def test_a_plain_init_container_may_not_restart_on_resize(core):
    policy = [{"resourceName": "cpu", "restartPolicy": "RestartContainer"}]
    plain = {"name": "i", "image": "busybox", "resizePolicy": policy}
    assert await _refused(core, _pod("p", initContainers=[plain])) == (
        'Pod "p" is invalid: spec.initContainers[0].resizePolicy: Forbidden: '
        "RestartContainer resize policy is not supported for non-sidecar init containers")
    # NotRequired is fine on a plain init container, RestartContainer on a sidecar
    await _create(core, _pod("q", initContainers=[
        {**plain, "resizePolicy": [{"resourceName": "cpu", "restartPolicy": "NotRequired"}]},
        {"name": "s", "image": "busybox", "restartPolicy": "Always", "resizePolicy": policy}]))
