"""ServiceAccount admission, over HTTP with the official client: the default account, the refusal of
a pod whose account does not exist, the projected kube-api-access volume and its mounts,
automountServiceAccountToken, imagePullSecrets, enforce-mountable-secrets and mirror pods."""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from nanokube.apiserver.admission.service_account import RETRY_INTERVAL, ServiceAccount
from nanokube.clock import VirtualClock
from nanokube.machinery import errors
from tests.controllers import make_stack
from tests.served import served

MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


def pod(name: str, **spec) -> dict:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "app", "image": "busybox"}], **spec}}


async def call(fn, *args, **kw):
    return await asyncio.to_thread(fn, *args, _preload_content=False, **kw)


async def create(core: client.CoreV1Api, body: dict, ns: str = "default") -> dict:
    return json.loads((await call(core.create_namespaced_pod, ns, body)).data)


async def refused(core: client.CoreV1Api, body: dict, ns: str = "default") -> tuple[int, str]:
    with pytest.raises(ApiException) as e:
        await call(core.create_namespaced_pod, ns, body)
    return e.value.status, json.loads(e.value.body)["message"]


@pytest.fixture
async def core(tmp_path):
    async with served(tmp_path, disable_admission_plugins=()) as (_, api_client):
        core = client.CoreV1Api(api_client)
        await call(core.create_namespaced_service_account, "default", {"metadata": {"name": "default"}})
        yield core


async def test_a_pod_gets_the_default_account_and_the_api_access_volume(core):
    body = pod("web")
    body["spec"]["initContainers"] = [{"name": "init", "image": "busybox"}]
    body["spec"]["containers"].append({"name": "own", "image": "busybox", "volumeMounts": [
        {"name": "mine", "mountPath": MOUNT}]})
    body["spec"]["volumes"] = [{"name": "mine", "emptyDir": {}}]
    got = await create(core, body)
    spec = got["spec"]
    assert (spec["serviceAccountName"], spec["serviceAccount"]) == ("default", "default")
    vol = spec["volumes"][-1]
    assert re.fullmatch(r"kube-api-access-[bcdfghjklmnpqrstvwxz2456789]{5}", vol["name"])
    assert vol["projected"] == {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
    ]}
    mount = {"name": vol["name"], "readOnly": True, "mountPath": MOUNT}
    assert spec["initContainers"][0]["volumeMounts"] == [mount]
    assert spec["containers"][0]["volumeMounts"] == [mount]
    assert spec["containers"][1]["volumeMounts"] == [{"name": "mine", "mountPath": MOUNT}], "its own mount wins"


async def test_an_existing_api_access_volume_is_reused_and_nothing_added_when_every_container_mounts_there(core):
    own = {"name": "kube-api-access-mine", "emptyDir": {}}
    got = await create(core, pod("reuse", volumes=[own]))
    assert [v["name"] for v in got["spec"]["volumes"]] == ["kube-api-access-mine"]
    assert got["spec"]["containers"][0]["volumeMounts"] == [
        {"name": "kube-api-access-mine", "readOnly": True, "mountPath": MOUNT}]
    body = pod("covered")
    body["spec"]["containers"][0]["volumeMounts"] = [{"name": "x", "mountPath": MOUNT}]
    body["spec"]["volumes"] = [{"name": "x", "emptyDir": {}}]
    assert [v["name"] for v in (await create(core, body))["spec"]["volumes"]] == ["x"]


async def test_a_missing_account_refuses_the_pod(core):
    status, message = await refused(core, pod("lost", serviceAccountName="robot"))
    assert (status, message) == (403, 'pods "lost" is forbidden: error looking up service account '
                                      'default/robot: serviceaccount "robot" not found')
    await call(core.create_namespaced_service_account, "default", {"metadata": {"name": "robot"}})
    assert (await create(core, pod("found", serviceAccountName="robot")))["spec"]["serviceAccountName"] == "robot"


async def test_automount_is_the_pods_choice_else_the_accounts(core):
    await call(core.create_namespaced_service_account, "default",
               {"metadata": {"name": "quiet"}, "automountServiceAccountToken": False})
    names = {}
    for name, spec in (("pod-off", {"automountServiceAccountToken": False}),
                       ("sa-off", {"serviceAccountName": "quiet"}),
                       ("pod-on", {"serviceAccountName": "quiet", "automountServiceAccountToken": True})):
        got = await create(core, pod(name, **spec))
        names[name] = [v["name"][:16] for v in got["spec"].get("volumes") or []]
    assert names == {"pod-off": [], "sa-off": [], "pod-on": ["kube-api-access-"]}


async def test_image_pull_secrets_come_from_the_account_when_the_pod_names_none(core):
    await call(core.create_namespaced_service_account, "default", {
        "metadata": {"name": "puller"}, "imagePullSecrets": [{"name": "registry"}]})
    got = await create(core, pod("pulls", serviceAccountName="puller"))
    assert got["spec"]["imagePullSecrets"] == [{"name": "registry"}]
    own = await create(core, pod("own", serviceAccountName="puller", imagePullSecrets=[{"name": "mine"}]))
    assert own["spec"]["imagePullSecrets"] == [{"name": "mine"}]


async def test_an_account_enforcing_mountable_secrets_limits_what_its_pods_reference(core):
    await call(core.create_namespaced_service_account, "default", {
        "metadata": {"name": "strict", "annotations": {"kubernetes.io/enforce-mountable-secrets": "true"}},
        "secrets": [{"name": "ok"}], "imagePullSecrets": [{"name": "pull"}]})
    why = "is not allowed because service account strict does not reference that"
    cases = {
        "volume": ({"volumes": [{"name": "s", "secret": {"secretName": "other"}}]},
                   f'volume with secret.secretName="other" {why} secret'),
        "env": ({"containers": [{"name": "app", "image": "busybox", "env": [
            {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "other", "key": "k"}}}]}]},
                f'container app with envVar PW referencing secret.secretName="other" {why} secret'),
        "envfrom": ({"initContainers": [{"name": "init", "image": "busybox", "envFrom": [{"secretRef": {"name": "other"}}]}]},
                    f'init container init with envFrom referencing secret.secretName="other" {why} secret'),
        "pull": ({"imagePullSecrets": [{"name": "pull"}, {"name": "other"}]},
                 f'imagePullSecrets[1].name="other" {why} imagePullSecret'),
    }
    for name, (spec, message) in cases.items():
        assert await refused(core, pod(name, serviceAccountName="strict", **spec)) == (
            403, f'pods "{name}" is forbidden: {message}')
    fine = pod("fine", serviceAccountName="strict", volumes=[{"name": "s", "secret": {"secretName": "ok"}}])
    assert (await create(core, fine))["spec"]["imagePullSecrets"] == [{"name": "pull"}]


async def test_mirror_pods_are_left_alone_and_may_reference_no_account_or_secret(core):
    mirror = {"kubernetes.io/config.mirror": "abc"}
    body = pod("static", nodeName="n1")
    body["metadata"]["annotations"] = mirror
    got = await create(core, body)
    assert "serviceAccountName" not in got["spec"] and "volumes" not in got["spec"]
    named = pod("named", nodeName="n1", serviceAccountName="default")
    named["metadata"]["annotations"] = mirror
    assert await refused(core, named) == (403, 'pods "named" is forbidden: a mirror pod may not reference service accounts')
    secret = pod("secret", nodeName="n1", volumes=[{"name": "s", "secret": {"secretName": "x"}}])
    secret["metadata"]["annotations"] = mirror
    assert await refused(core, secret) == (403, 'pods "secret" is forbidden: a mirror pod may not reference secrets')


async def test_a_pod_created_right_after_its_namespace_waits_for_the_default_account():
    """The default account is looked up again (upstream: up to ten times, 100-200 ms apart) while its
    controller has not made it yet: the create succeeds once it exists, instead of a 403. The
    server's clock is virtual: the retries wait for the test to move it on."""
    s = await make_stack()
    clock = s.rest.clock = VirtualClock()
    s.rest.admission.service_account = ServiceAccount(s.rest)
    try:
        pods = s.client.resource("", "v1", "pods")
        waiting = asyncio.create_task(pods.create(pod("early"), "default"))
        await clock.advance(0)
        assert not waiting.done() and clock.next_due() is not None, "the create missed the account and waits"
        await s.client.resource("", "v1", "serviceaccounts").create({"metadata": {"name": "default"}}, "default")
        await clock.advance(RETRY_INTERVAL[1])
        assert (await waiting)["spec"]["serviceAccountName"] == "default"
    finally:
        await s.close()


async def test_ephemeral_containers_are_held_to_an_enforcing_account(core):
    """An update through pods/ephemeralcontainers may not reference a Secret the enforcing account
    does not list; the ephemeral container gets no token mount."""
    await call(core.create_namespaced_service_account, "default", {
        "metadata": {"name": "strict", "annotations": {"kubernetes.io/enforce-mountable-secrets": "True"}},
        "secrets": [{"name": "ok"}]})
    await create(core, pod("debugged", serviceAccountName="strict"))

    def debug(name: str, secret: str) -> dict:
        return {"spec": {"ephemeralContainers": [{"name": name, "image": "busybox", "envFrom": [
            {"secretRef": {"name": secret}}]}]}}
    with pytest.raises(ApiException) as e:
        await call(core.patch_namespaced_pod_ephemeralcontainers, "debugged", "default", debug("dbg", "other"))
    assert (e.value.status, json.loads(e.value.body)["message"]) == (
        403, 'pods "debugged" is forbidden: ephemeral container dbg with envFrom referencing secret.secretName="other" '
             "is not allowed because service account strict does not reference that secret")
    got = json.loads((await call(core.patch_namespaced_pod_ephemeralcontainers, "debugged", "default",
                                 debug("dbg", "ok"))).data)
    assert "volumeMounts" not in got["spec"]["ephemeralContainers"][0]


async def test_an_account_a_policy_names_after_admit_is_looked_up_and_held_to():
    """The account read for a request is not read again for the same name, but one a mutating
    policy names after admit ran (here an enforcing one) is looked up and checked."""
    s = await make_stack()
    s.rest.admission.service_account = ServiceAccount(s.rest)
    try:
        c = s.client
        await c.resource("", "v1", "serviceaccounts").create({"metadata": {"name": "default"}}, "default")
        await c.resource("", "v1", "serviceaccounts").create({"metadata": {
            "name": "strict", "annotations": {"kubernetes.io/enforce-mountable-secrets": "true"}}}, "default")
        group = "admissionregistration.k8s.io"
        await c.resource(group, "v1beta1", "mutatingadmissionpolicies").create({"metadata": {"name": "move"}, "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                                    "resources": ["pods"]}]},
            "matchConditions": [{"name": "moved", "expression": "object.metadata.name.startsWith('moved')"}],
            "reinvocationPolicy": "Never",
            "mutations": [{"patchType": "JSONPatch", "jsonPatch": {
                "expression": '[JSONPatch{op: "replace", path: "/spec/serviceAccountName", value: "strict"}]'}}]}})
        await c.resource(group, "v1beta1", "mutatingadmissionpolicybindings").create(
            {"metadata": {"name": "move"}, "spec": {"policyName": "move"}})
        pods = c.resource("", "v1", "pods")
        secret = {"volumes": [{"name": "s", "secret": {"secretName": "other"}}]}
        assert (await pods.create(pod("stays", **secret), "default"))["spec"]["serviceAccountName"] == "default"
        with pytest.raises(errors.APIError) as e:
            await pods.create(pod("moved", **secret), "default")
        assert (e.value.code, e.value.message) == (403, 'pods "moved" is forbidden: volume with secret.secretName="other" '
                                                        "is not allowed because service account strict does not "
                                                        "reference that secret")
    finally:
        await s.close()
