"""The simulated kubelet's status writes survive a server that fails some of them, as upstream's
status manager's do (pkg/kubelet/status/status_manager.go: a failed update is tried again on the
next sync, the pod's lifecycle going on meanwhile); a pod worker whose sync fails on a bug says so
with a FailedSync event and still removes the pod when it is deleted."""

import contextlib
import json

import pytest

from nanokube.apiserver.app import APIServer
from nanokube.client.http import HTTPClient
from nanokube.client.kubeconfig import Credentials
from nanokube.machinery.errors import APIError
from nanokube.node.cluster import default_cluster
from nanokube.node.manager import NodeManager
from nanokube.store.memory import MemoryStore
from nanokube.store.sqlite import SQLiteStore
from tests.controllers import becomes, eventually
from tests.node import ManualClock
from tests.node.test_lifecycle import SERVER, conds, gone, node_agents, phase_is, pod

SMP = "application/strategic-merge-patch+json"


def server_error():
    return APIError(500, "InternalError", "Internal error occurred: etcdserver: request timed out")


def too_many_requests():
    return APIError(429, "TooManyRequests", "The system is experiencing high contention; try again later")


def unavailable():
    return APIError(503, "ServiceUnavailable", "The server is currently unable to handle the request")


def fail_status_writes(rest, pod_name: str, faults: list) -> list:
    """Test-only fault on the API server: the next patches of pod `pod_name`'s status raise
    `faults` in turn (an exception, or a factory of one), then pass. Returns what was refused."""
    refused: list = []
    inner = rest.patch

    async def patch(res, version, namespace, name, patch_type, body, opts, subresource="", **kw):
        if res.plural == "pods" and subresource == "status" and name == pod_name and faults:
            fault = faults.pop(0)
            refused.append(body)
            raise fault() if callable(fault) else fault
        return await inner(res, version, namespace, name, patch_type, body, opts, subresource=subresource, **kw)
    rest.patch = patch
    return refused


@pytest.fixture
async def env():
    clock = ManualClock()
    async with node_agents(clock) as (s, _):
        yield s, s.client.resource("", "v1", "pods"), clock


async def _advance(clock: ManualClock, seconds: int) -> None:
    for _ in range(seconds):
        await clock.advance(1)


async def test_a_pod_whose_status_writes_fail_at_first_still_succeeds(env):
    s, pods, clock = env
    refused = fail_status_writes(s.rest, "job", [server_error, too_many_requests, unavailable])
    await pods.create(pod("job", annotations={"sim.nanokube.io/run-seconds": "3"}, restart="Never"))
    await eventually(lambda: _true(len(refused) >= 2))
    await _advance(clock, 20)  # the retries back off 1, 2, 4 s on the kubelet's clock
    p = await eventually(phase_is(pods, "job", "Succeeded"))
    assert len(refused) == 3
    term = p["status"]["containerStatuses"][0]["state"]["terminated"]
    assert term["exitCode"] == 0 and term["reason"] == "Completed"
    assert conds(p)["Ready"] == "False" and cond_reason(p, "Ready") == "PodCompleted"
    await _advance(clock, 20)  # no older status lands after the final one
    assert (await pods.get("job", "default"))["status"]["phase"] == "Succeeded"


async def test_a_running_pod_becomes_ready_once_its_status_lands(env):
    s, pods, clock = env
    refused = fail_status_writes(s.rest, "web", [server_error, too_many_requests])
    await pods.create(pod("web"))
    await eventually(lambda: _true(len(refused) == 2))
    await _advance(clock, 10)
    p = await eventually(phase_is(pods, "web", "Running"))
    assert conds(p)["Ready"] == "True" and p["status"]["containerStatuses"][0]["ready"]


async def test_a_failed_final_write_is_retried_before_a_deleted_pod_goes(env):
    s, pods, clock = env
    await pods.create(pod("slow", annotations={"sim.nanokube.io/stop-seconds": "1"}, grace=30))
    await eventually(phase_is(pods, "slow", "Running"))
    refused = fail_status_writes(s.rest, "slow", [server_error])
    await pods.delete("slow", "default")
    await _advance(clock, 1)
    await eventually(lambda: _true(len(refused) == 1))
    assert (await pods.get("slow", "default"))["metadata"]["deletionTimestamp"]
    await _advance(clock, 2)
    assert await eventually(gone(pods, "slow"))


async def test_a_sync_failing_on_a_bug_is_reported_and_the_pod_can_still_be_deleted(env):
    s, pods, clock = env
    fail_status_writes(s.rest, "odd", [RuntimeError("unexpected")])
    await pods.create(pod("odd"))

    async def failed_sync():
        events, _ = await s.client.resource("", "v1", "events").list(namespace="default")
        return [(e["type"], e["message"]) for e in events
                if e["reason"] == "FailedSync" and e["involvedObject"]["name"] == "odd"]
    await becomes(failed_sync, [("Warning", "error determining status: unexpected")])
    await pods.delete("odd", "default")
    assert await eventually(gone(pods, "odd"))


async def test_a_status_write_refused_as_forbidden_or_invalid_is_tried_again_up_to_every_sync_period(env):
    """403 and 422 are not the pod's end: the status manager keeps the status wanted and writes it
    again, backing off to its 10 s sync period (syncBatch), until it lands."""
    s, pods, clock = env
    at: list[float] = []

    def refusal(code: int, reason: str, message: str):
        def fault():
            at.append(clock.monotonic())
            return APIError(code, reason, message)
        return fault
    forbidden = refusal(403, "Forbidden", 'pods "job" is forbidden: node "gpu-0" can only update pods bound to it')
    invalid = refusal(422, "Invalid", 'Pod "job" is invalid: status.podIP: Invalid value: "x": must be a valid IP')
    faults = [forbidden, invalid] * 10
    fail_status_writes(s.rest, "job", faults)
    await pods.create(pod("job"))
    await eventually(lambda: _true(bool(at)))
    start = at[0]
    await _advance(clock, 54)
    # after the lifecycle's own writes as the pod starts, the status manager's retries
    assert [t - start for t in at if t > start] == [1, 3, 7, 15, 25, 35, 45]
    assert (await pods.get("job", "default")).get("status", {}).get("phase") != "Running"
    faults.clear()
    await clock.advance(1)
    p = await eventually(phase_is(pods, "job", "Running"))
    assert conds(p)["Ready"] == "True"


async def _failed_syncs(s, name: str) -> list[tuple[str, str, int]]:
    events, _ = await s.client.resource("", "v1", "events").list(namespace="default")
    return [(e["type"], e["message"], e.get("count", 1)) for e in events
            if e["reason"] == "FailedSync" and e["involvedObject"]["name"] == name]


async def _reasons(s, name: str) -> list[str]:
    events, _ = await s.client.resource("", "v1", "events").list(namespace="default")
    return [e["reason"] for e in events if e["involvedObject"]["name"] == name]


async def test_a_failed_sync_is_made_again_after_the_pod_workers_back_off(env):
    """The pod's first sync fails before its containers start: 10 s later (workerBackOffPeriod,
    on the kubelet's clock) it is synced again, and the pod runs."""
    s, pods, clock = env
    fail_status_writes(s.rest, "odd", [RuntimeError("unexpected")])
    await pods.create(pod("odd"))
    await becomes(lambda: _failed_syncs(s, "odd"), [("Warning", "error determining status: unexpected", 1)])
    await _advance(clock, 9)
    assert (await pods.get("odd", "default")).get("status", {}).get("phase") in (None, "Pending")
    await clock.advance(1)
    p = await eventually(phase_is(pods, "odd", "Running"))
    assert conds(p)["Ready"] == "True" and p["status"]["containerStatuses"][0]["state"]["running"]


async def test_a_running_pod_whose_sync_failed_acts_on_its_next_updates(env):
    """A write for an ephemeral container fails on a bug (FailedSync): the next update, a resize,
    syncs the pod again at once, with no back-off waited out: both are acted on; then a graceful
    delete stops its containers and removes it."""
    s, pods, clock = env
    app = {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
    await pods.create({"metadata": {"name": "web", "namespace": "default"},
                       "spec": {"nodeName": "gpu-0", "terminationGracePeriodSeconds": 5,
                                "containers": [{"name": "app", "image": "busybox:1.36", "command": list(SERVER),
                                                "resources": app}]}})
    await eventually(phase_is(pods, "web", "Running"))
    refused = fail_status_writes(s.rest, "web", [RuntimeError("unexpected")])
    await pods.patch("web", {"spec": {"ephemeralContainers": [{"name": "debugger", "image": "busybox:1.36",
                                                               "command": list(SERVER)}]}},
                     SMP, namespace="default", subresource="ephemeralcontainers")
    await becomes(lambda: _failed_syncs(s, "web"), [("Warning", "error determining status: unexpected", 1)])
    assert len(refused) == 1
    await pods.patch("web", {"spec": {"containers": [{"name": "app", "resources": {
        "requests": {"cpu": "1500m"}, "limits": {"cpu": "1500m"}}}]}}, SMP, namespace="default", subresource="resize")

    async def acted_on():
        p = await pods.get("web", "default")
        st = p["status"]
        return p if st.get("ephemeralContainerStatuses") and st.get("observedGeneration") == 3 and \
            st["containerStatuses"][0]["resources"]["limits"]["cpu"] == "1500m" else None
    p = await eventually(acted_on)
    assert p["status"]["ephemeralContainerStatuses"][0]["state"]["running"]

    async def resized():  # the recorder writes the Events from its queue, maybe after the status
        return {"ResizeStarted", "ResizeCompleted"} <= set(await _reasons(s, "web"))
    assert await eventually(resized)
    await pods.delete("web", "default")
    await becomes(lambda: _killed(s, "web"), ["Stopping container app"])
    assert await eventually(gone(pods, "web"))
    assert (await _failed_syncs(s, "web"))[0][2] == 1  # no sync failed again


async def test_a_resize_allocated_before_a_failed_sync_is_actuated_by_the_next_sync(env):
    """The write that reports a resize in progress fails on a bug, after the resize was allocated:
    the sync after the pod workers' back-off actuates it (the containers run with it, reported in
    their status) and completes it."""
    s, pods, clock = env
    app = {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
    await pods.create({"metadata": {"name": "web", "namespace": "default"},
                       "spec": {"nodeName": "gpu-0",
                                "containers": [{"name": "app", "image": "busybox:1.36", "command": list(SERVER),
                                                "resources": app}]}})
    await eventually(phase_is(pods, "web", "Running"))
    fail_status_writes(s.rest, "web", [RuntimeError("unexpected")])
    await pods.patch("web", {"spec": {"containers": [{"name": "app", "resources": {
        "requests": {"cpu": "1500m"}, "limits": {"cpu": "1500m"}}}]}}, SMP, namespace="default", subresource="resize")
    await becomes(lambda: _failed_syncs(s, "web"), [("Warning", "error determining status: unexpected", 1)])
    await _advance(clock, 10)

    async def actuated():
        p = await pods.get("web", "default")
        cs = p["status"]["containerStatuses"][0]
        return p if cs["resources"]["limits"]["cpu"] == "1500m" and not any(
            c["type"] == "PodResizeInProgress" for c in p["status"]["conditions"]) else None
    p = await eventually(actuated)
    assert p["status"]["containerStatuses"][0]["allocatedResources"]["cpu"] == "1500m"

    async def completed():  # the recorder writes the Event from its queue, maybe after the status
        return (await _reasons(s, "web")).count("ResizeCompleted")
    await becomes(completed, 1)


def fail_running_write(rest, pod_name: str, error: Exception) -> list:
    """Test-only fault: the first status patch of pod `pod_name` that reports a running container
    raises `error`; returns what was refused."""
    refused: list = []
    inner = rest.patch

    async def patch(res, version, namespace, name, patch_type, body, opts, subresource="", **kw):
        doc = json.loads(body) if isinstance(body, (bytes, str)) else body
        statuses = (doc.get("status") or {}).get("containerStatuses") or ()
        if res.plural == "pods" and subresource == "status" and name == pod_name and not refused and \
                any("running" in (cs.get("state") or {}) for cs in statuses):
            refused.append(body)
            raise error
        return await inner(res, version, namespace, name, patch_type, body, opts, subresource=subresource, **kw)
    rest.patch = patch
    return refused


async def test_a_sync_failing_once_the_containers_run_goes_on_with_them_not_starting_them_again(env):
    """The status write after the containers started fails on a bug: the next sync writes it and
    goes on with the running containers; none is started twice (one Started event, no restart)."""
    s, pods, clock = env
    refused = fail_running_write(s.rest, "web", RuntimeError("unexpected"))
    await pods.create(pod("web"))
    await becomes(lambda: _failed_syncs(s, "web"), [("Warning", "error determining status: unexpected", 1)])
    assert len(refused) == 1
    await _advance(clock, 10)
    p = await eventually(phase_is(pods, "web", "Running"))
    assert p["status"]["containerStatuses"][0]["restartCount"] == 0
    assert conds(p)["Ready"] == "True"
    events, _ = await s.client.resource("", "v1", "events").list(namespace="default")
    assert [e.get("count", 1) for e in events if e["reason"] in ("Created", "Started")
            and e["involvedObject"]["name"] == "web"] == [1, 1]


async def _killed(s, name: str) -> list[str]:
    events, _ = await s.client.resource("", "v1", "events").list(namespace="default")
    return [e["message"] for e in events if e["reason"] == "Killing" and e["involvedObject"]["name"] == name]


@contextlib.asynccontextmanager
async def _agents_over_http(port: int, clock: ManualClock, pods_dir):
    """The default cluster's node agents on an HTTPClient of the API server at `port` (which the
    test may restart meanwhile); yields the pods resource."""
    client = HTTPClient(Credentials(f"http://127.0.0.1:{port}", None), "test", clock=clock)
    await client.start()
    nodes = NodeManager(lambda _user, field_manager: client.named(field_manager), default_cluster(), clock,
                        pods_dir=str(pods_dir))
    await nodes.start()
    try:
        yield client.resource("", "v1", "pods")
    finally:
        await nodes.stop()
        await client.close()


async def test_agents_over_http_retry_what_the_server_refused(tmp_path):
    """The agent on an HTTPClient meets the refusals as decoded Status replies, and a server bug's 500."""
    clock = ManualClock()
    server = APIServer(MemoryStore(), None, port=0, clock=clock)
    await server.start()
    try:
        async with _agents_over_http(server.port, clock, tmp_path) as pods:
            refused = fail_status_writes(server.rest, "job", [too_many_requests, RuntimeError("a server bug"),
                                                              server_error])
            await pods.create(pod("job", annotations={"sim.nanokube.io/run-seconds": "3"}, restart="Never"))
            await eventually(lambda: _true(len(refused) >= 2))
            await _advance(clock, 20)
            p = await eventually(phase_is(pods, "job", "Succeeded"))
            assert len(refused) == 3 and p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    finally:
        await server.stop()


async def test_a_status_written_while_the_server_is_down_lands_once_it_is_back(tmp_path):
    """The agent's connection to the API server is refused while it restarts: the pod's final
    status, due meanwhile, is written once the server is back."""
    clock, db = ManualClock(), str(tmp_path / "state.db")
    server = APIServer(SQLiteStore(db), None, port=0, clock=clock)
    await server.start()
    port = server.port
    try:
        async with _agents_over_http(port, clock, tmp_path / "pods") as pods:
            await pods.create(pod("job", annotations={"sim.nanokube.io/run-seconds": "3"}, restart="Never"))
            await eventually(phase_is(pods, "job", "Running"))
            await server.stop()
            await clock.advance(3)  # the container ends; its status cannot be written
            server = APIServer(SQLiteStore(db), None, port=port, clock=clock)
            await server.start()
            assert (await pods.get("job", "default"))["status"]["phase"] == "Running"
            await _advance(clock, 20)
            await eventually(phase_is(pods, "job", "Succeeded"))
    finally:
        await server.stop()


def cond_reason(p, ctype):
    return next(c.get("reason") for c in p["status"]["conditions"] if c["type"] == ctype)


async def _true(value):
    return value
