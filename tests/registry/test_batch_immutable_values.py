"""A Job's immutable fields print, in their 422s, the values ValidateJobSpecUpdate holds: the internal
batch structs (no JSON tags: Go field names, unset pointers null) and a metav1.LabelSelector in its
field order, in upstream's order (selector, template, then the rest)."""

import asyncio
import json

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from nanokube.registry import batch
from nanokube.registry.base import all_resources
from tests.served import served


def test_internal_values():
    policy = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
                        {"action": "FailJob", "onExitCodes": {"containerName": "c", "operator": "In", "values": [42]}}]}
    assert batch._pod_failure_policy(policy) == {"Rules": [
        {"Action": "Ignore", "OnExitCodes": None, "OnPodConditions": [{"Type": "DisruptionTarget", "Status": "True"}]},
        {"Action": "FailJob", "OnExitCodes": {"ContainerName": "c", "Operator": "In", "Values": [42]},
         "OnPodConditions": None}]}
    assert list(batch._pod_failure_policy(policy)["Rules"][0]) == ["Action", "OnExitCodes", "OnPodConditions"]
    assert batch._success_policy({"rules": [{"succeededCount": 1}]}) == {
        "Rules": [{"SucceededIndexes": None, "SucceededCount": 1}]}


async def test_over_http_immutable_job_fields_print_internal_structs(tmp_path):
    spec = {"completions": 2, "parallelism": 2, "completionMode": "Indexed",
            "podFailurePolicy": {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]},
            "successPolicy": {"rules": [{"succeededIndexes": "0"}]},
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}
    async with served(tmp_path) as (_, api_client):
        jobs = client.BatchV1Api(api_client)
        made = await asyncio.to_thread(jobs.create_namespaced_job, "default", {"metadata": {"name": "j"}, "spec": spec})
        body = api_client.sanitize_for_serialization(made)
        body["spec"]["podFailurePolicy"] = {"rules": [
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]}
        body["spec"]["successPolicy"] = {"rules": [{"succeededCount": 1}]}
        with pytest.raises(ApiException) as e:
            await asyncio.to_thread(jobs.replace_namespaced_job, "j", "default", body)
    assert e.value.status == 422
    assert [(c["field"], c["message"]) for c in json.loads(e.value.body)["details"]["causes"]] == [
        ("spec.podFailurePolicy", 'Invalid value: {"Rules":[{"Action":"Ignore","OnExitCodes":null,"OnPodConditions":'
                                  '[{"Type":"DisruptionTarget","Status":"True"}]}]}: field is immutable'),
        ("spec.successPolicy", 'Invalid value: {"Rules":[{"SucceededIndexes":null,"SucceededCount":1}]}: '
                               "field is immutable")]


def test_selector_and_template_come_first_in_upstreams_order():
    strategy = next(r for r in all_resources() if r.group == "batch" and r.plural == "jobs").strategy
    old = {"metadata": {"name": "j", "namespace": "default", "uid": "u1"}, "spec": {
        "manualSelector": True, "completionMode": "NonIndexed",
        "selector": {"matchLabels": {"a": "b"}, "matchExpressions": [{"key": "k", "operator": "Exists"}]},
        "template": {"metadata": {"labels": {"a": "b", "k": "v"}}, "spec": {
            "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}
    strategy.default(old, "v1")
    new = json.loads(json.dumps(old))
    new["spec"]["completionMode"] = "Indexed"
    new["spec"]["selector"]["matchLabels"] = {"a": "b", "k": "v"}
    new["spec"]["template"]["spec"]["containers"][0]["image"] = "other"
    got = [(e.field, str(e)) for e in strategy.validate_update(new, old) if e.detail == "field is immutable"]
    assert [f for f, _ in got] == ["spec.selector", "spec.template", "spec.completionMode"]
    assert got[0][1] == ('spec.selector: Invalid value: {"matchLabels":{"a":"b","k":"v"},"matchExpressions":'
                         '[{"key":"k","operator":"Exists"}]}: field is immutable')
