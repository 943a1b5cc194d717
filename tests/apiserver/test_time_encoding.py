"""Times as kube-apiserver serves them once decoded into Go structs: metav1.Time marshals UTC to the
second (a fraction cut, an offset applied) and its zero as `null`; MicroTime's zero is `null` too. A
time field that is a Go value (a condition's lastProbeTime) sent null, or left out, is `null`; a
pointer (a pod's status.startTime) sent null is nil, left out, and one sent as the zero time is
`null` (a pointer at the zero time, which protobuf sends as an empty Timestamp);
ObjectMeta's creationTimestamp is omitzero since 1.33 (kubernetes#130989): a template's zero or
null one is left out. Over HTTP."""

from __future__ import annotations

import asyncio
import json

import pytest

from nanokube.apiserver import protobuf
from tests.apiserver.test_omitempty import KUBECTL
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
    assert status["conditions"] == [{"type": "Ready", "status": "True", "lastProbeTime": None,
                                     "lastTransitionTime": None}]


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


async def _kubectl(tmp_path, *args: str) -> str:
    proc = await asyncio.create_subprocess_exec(KUBECTL, "--kubeconfig", str(tmp_path / "kubeconfig"), *args,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def test_value_times_left_out_are_served_null_and_what_is_read_back_is_no_change(tmp_path):
    """A running pod's conditions without lastProbeTime and its running state without startedAt:
    `kubectl get pod -o json` shows both null, as kube-apiserver serves a zero metav1.Time value;
    the object read and sent back (PUT) is no write: same resourceVersion and managedFields."""
    async with served(tmp_path) as (_, api):
        status = await _status(api, {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T08:00:00Z"}],
            "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": True, "restartCount": 0,
                                   "state": {"running": {}}}]})
        assert status["conditions"][0]["lastProbeTime"] is None
        shown = json.loads(await _kubectl(tmp_path, "get", "pod", "p", "-o", "json", "--show-managed-fields"))
        assert shown["status"]["conditions"] == [{"type": "Ready", "status": "True", "lastProbeTime": None,
                                                  "lastTransitionTime": "2026-01-01T08:00:00Z"}]
        assert shown["status"]["containerStatuses"][0]["state"] == {"running": {"startedAt": None}}
        for path in (f"{PODS}/p", f"{PODS}/p/status"):
            code, body = await _raw(api, "PUT", path, shown)
            assert code == 200, body
            again = json.loads(body)
            assert again["metadata"]["resourceVersion"] == shown["metadata"]["resourceVersion"]
            assert again["metadata"]["managedFields"] == shown["metadata"]["managedFields"]
        code, body = await _raw(api, "POST", "/api/v1/nodes", {"metadata": {"name": "n"}, "status": {
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}})
        assert code == 201, body
        assert json.loads(body)["status"]["conditions"] == [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                                             "lastHeartbeatTime": None, "lastTransitionTime": None}]


async def test_a_pointer_time_sent_as_the_zero_time_is_served_null(api):
    """Go decodes it into a pointer at the zero time and serves that as null (nil would be left out);
    in protobuf it is an empty Timestamp, which a Go client reads as that pointer."""
    status = await _status(api, {"startTime": ZERO})
    assert "startTime" in status and status["startTime"] is None, status

    def get():
        r = api.rest_client.pool_manager.request("GET", api.configuration.host + f"{PODS}/p", preload_content=True,
                                                 headers={"Accept": "application/vnd.kubernetes.protobuf"})
        return r.data
    assert protobuf.decode(await asyncio.to_thread(get))["status"]["startTime"] == ZERO


async def test_an_apiservice_condition_without_its_transition_time_is_served_null(api):
    """kube-aggregator's APIServiceCondition.lastTransitionTime is a metav1.Time value too."""
    url = "/apis/apiregistration.k8s.io/v1/apiservices"
    code, body = await _raw(api, "POST", url, {"metadata": {"name": "v1.example.com"}, "spec": {
        "group": "example.com", "version": "v1", "groupPriorityMinimum": 1000, "versionPriority": 15,
        "service": {"namespace": "default", "name": "api"}}})
    assert code == 201, body
    for _ in range(10):  # the server's availability controller writes the status too: a conflict is tried again
        svc = json.loads(body)
        svc["status"] = {"conditions": [{"type": "Available", "status": "False", "reason": "Testing"}]}
        code, body = await _raw(api, "PUT", f"{url}/v1.example.com/status", svc)
        if code != 409:
            break
        code, body = await _raw(api, "GET", f"{url}/v1.example.com", {})
    assert code == 200, body
    assert json.loads(body)["status"]["conditions"] == [
        {"type": "Available", "status": "False", "reason": "Testing", "lastTransitionTime": None}]
