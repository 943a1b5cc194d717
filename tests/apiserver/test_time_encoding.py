"""Times as kube-apiserver serves them once decoded into Go structs: metav1.Time marshals UTC to the
second (a fraction cut, an offset applied) and its zero as `null`; MicroTime's zero is `null` too. A
time field that is a Go value (a condition's lastProbeTime) sent null stays `null`; a pointer (a
pod's status.startTime) sent null is nil, left out;
ObjectMeta's creationTimestamp is omitzero since 1.33 (kubernetes#130989): a template's zero or
null one is left out. Over HTTP."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.served import served

PODS = "/api/v1/namespaces/default/pods"
ZERO = "0001-01-01T00:00:00Z"


@pytest.fixture
async def api(tmp_path):
    async with served(tmp_path) as (_, api_client):
        yield api_client


async def _raw(api, method: str, path: str, body: dict) -> tuple[int, bytes]:
    def send():
        r = api.rest_client.pool_manager.request(method, api.configuration.host + path, preload_content=True,
                                                 body=json.dumps(body).encode(),
                                                 headers={"Content-Type": "application/json"})
        return r.status, r.data
    return await asyncio.to_thread(send)


async def _status(api, status: dict) -> dict:
    """The status a pod's /status PUT stores and answers."""
    code, body = await _raw(api, "POST", PODS, {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}})
    assert code == 201, body
    pod = json.loads(body)
    pod["status"] = status
    code, body = await _raw(api, "PUT", f"{PODS}/p/status", pod)
    assert code == 200, body
    return json.loads(body)["status"]


async def test_a_pointer_time_sent_null_is_left_out_and_a_value_time_kept_null(api):
    status = await _status(api, {"startTime": None, "conditions": [{"type": "Ready", "status": "True",
                                                                    "lastProbeTime": None}]})
    assert "startTime" not in status, status
    assert status["conditions"] == [{"type": "Ready", "status": "True", "lastProbeTime": None}]


async def test_zero_times_are_null_and_others_utc_to_the_second(api):
    status = await _status(api, {"conditions": [
        {"type": "Ready", "status": "True", "lastProbeTime": "0001-01-01T01:00:00+01:00",
         "lastTransitionTime": "2026-01-01T10:00:00.5+02:00"},
        {"type": "PodScheduled", "status": "True", "lastProbeTime": "2026-01-01T08:00:00.999999999Z",
         "lastTransitionTime": "2026-01-01T08:00:00Z"}]})
    assert status["conditions"] == [
        {"type": "Ready", "status": "True", "lastProbeTime": None, "lastTransitionTime": "2026-01-01T08:00:00Z"},
        {"type": "PodScheduled", "status": "True", "lastProbeTime": "2026-01-01T08:00:00Z",
         "lastTransitionTime": "2026-01-01T08:00:00Z"}]


async def test_a_zero_micro_time_is_null(api):
    code, body = await _raw(api, "POST", "/api/v1/namespaces/default/events", {
        "metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
        "reason": "R", "message": "m", "eventTime": "0001-01-01T00:00:00.000000Z"})
    assert code == 201 and json.loads(body)["eventTime"] is None, body


async def test_a_templates_zero_or_null_creation_timestamp_is_left_out(api):
    for i, stamp in enumerate((ZERO, None, "0001-01-01T00:00:00.000Z")):
        code, body = await _raw(api, "POST", "/apis/batch/v1/namespaces/default/jobs", {
            "metadata": {"name": f"j{i}"},
            "spec": {"template": {"metadata": {"creationTimestamp": stamp},
                                  "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}})
        assert code == 201, body
        assert "creationTimestamp" not in json.loads(body)["spec"]["template"]["metadata"], (stamp, body)
        assert b"0001-01-01" not in body
