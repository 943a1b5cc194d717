"""Node-pressure eviction (eviction.py): the ranking and messages alone, and a node agent's
eviction manager on a hand-driven clock evicting one running pod per pass, through the API."""

import contextlib
from types import SimpleNamespace

from nanokube.apiserver.loopback import connector
from nanokube.node.cluster import parse_cluster
from nanokube.node.eviction import (HARD, MEMORY, NODEFS, PIDS, Observation, PodStats, message,
                                    rank_disk_pressure, rank_memory_pressure, rank_pid_pressure)
from nanokube.node.manager import NodeManager
from tests.controllers import becomes, eventually
from tests.node import api_on_manual_clock
from tests.node.test_lifecycle import phase_is

MI = 1024 * 1024


def pod(name: str, priority: int = 0, memory: str | None = None, storage: str | None = None) -> dict:
    asks = {k: v for k, v in (("memory", memory), ("ephemeral-storage", storage)) if v}
    return {"metadata": {"name": name, "uid": name},
            "spec": {"priority": priority, "containers": [{"name": "app", "resources": {"requests": asks}}]}}


def names(pods: list[dict]) -> list[str]:
    return [p["metadata"]["name"] for p in pods]


def test_memory_ranks_pods_over_their_requests_then_by_priority_then_by_use_above_requests():
    pods = [pod("under", memory="1Gi"), pod("over-important", 1000, memory="100Mi"),
            pod("over-small", memory="100Mi"), pod("over-big", memory="100Mi"), pod("no-stats", 5000)]
    stats = {"under": PodStats({"app": 900 * MI}), "over-important": PodStats({"app": 2000 * MI}),
             "over-small": PodStats({"app": 101 * MI}), "over-big": PodStats({"app": 300 * MI})}
    ranked = rank_memory_pressure(pods, lambda p: stats.get(p["metadata"]["uid"]))
    # no stats first; of those over their requests the lower priority, then the most above; under last
    assert names(ranked) == ["no-stats", "over-big", "over-small", "over-important", "under"]


def test_disk_ranks_by_local_storage_against_ephemeral_storage_requests():
    pods = [pod("asked", storage="10Gi"), pod("small"), pod("big")]
    stats = {"asked": PodStats(disk=5 << 30), "small": PodStats(disk=MI), "big": PodStats(disk=2 << 30)}
    assert names(rank_disk_pressure(pods, lambda p: stats[p["metadata"]["uid"]])) == ["big", "small", "asked"]


def test_pids_rank_by_priority_then_the_most_processes():
    pods = [pod("few"), pod("important-many", 10), pod("many")]
    stats = {"few": PodStats(processes=1), "important-many": PodStats(processes=9), "many": PodStats(processes=3)}
    assert names(rank_pid_pressure(pods, lambda p: stats[p["metadata"]["uid"]])) == ["many", "few", "important-many"]


def test_the_message_names_the_threshold_what_was_left_and_each_container_over_its_request():
    p = pod("p", memory="128Mi")
    p["spec"]["containers"].append({"name": "side", "resources": {}})
    p["spec"]["containers"].append({"name": "modest", "resources": {"requests": {"memory": "1G"}}})
    stats = PodStats({"app": 1536 * 1024, "side": 4 * MI, "modest": 10 * MI})
    assert message(MEMORY, p, stats, Observation(50 * MI, 8 << 30)) == (
        "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. "
        "Container side was using 4Mi, request is 0, has larger consumption of memory. ")
    stats = PodStats({"app": 200 * MI})
    assert message(MEMORY, p, stats, Observation(1000, 8 << 30)).endswith(
        "available: 1k. Container app was using 200Mi, request is 128Mi, has larger consumption of memory. ")
    # a percentage threshold is that share of the capacity (a float32, as upstream holds it:
    # 109951164416 bytes, not a tenth of 1Ti)
    assert message(NODEFS, p, PodStats(disk=1), Observation(1 << 30, 1 << 40)) == (
        "The node was low on resource: ephemeral-storage. Threshold quantity: 107374184Ki, available: 1Gi. ")
    assert message(PIDS, p, None, Observation(200_000, 4_194_304)) == (
        "The node was low on resource: pids. Threshold quantity: 419430, available: 200k. ")
    assert {t.signal for t in HARD} == {MEMORY, NODEFS, PIDS}


CLUSTER = parse_cluster("""\
pools:
  - name: small
    count: 1
    capacity: {cpu: "4", memory: 8Gi, pods: "6"}
""")


@contextlib.asynccontextmanager
async def node():
    async with api_on_manual_clock() as (s, clock):
        mgr = NodeManager(connector(s.rest), CLUSTER, clock)
        await mgr.start()
        try:
            yield s.client, clock, mgr
        finally:
            await mgr.stop()


def running(name: str, memory: str = "", **spec) -> dict:
    res = {"resources": {"requests": {"memory": memory}}} if memory else {}
    annotations = spec.pop("annotations", {})
    return {"metadata": {"name": name, "namespace": "default", "annotations": annotations},
            "spec": {"nodeName": "small-0", "containers": [{"name": "app", "image": "busybox:1.36", **res}], **spec}}


def phase_in(pods, name: str, phases: set[str]):
    async def check():
        p = await pods.get(name, "default")
        return p if (p.get("status") or {}).get("phase") in phases else None
    return check


async def evictions(mgr) -> dict[str, float]:
    text = (await mgr.kubelet_for("small-0").serve(SimpleNamespace(method="GET", query={}, headers={}),
                                                   "/metrics")).text
    assert ("# HELP kubelet_evictions [ALPHA] Cumulative number of pod evictions by eviction signal" in text) == \
        ("kubelet_evictions{" in text)
    return {line.split('"')[1]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line.startswith("kubelet_evictions{")}


async def phases(pods) -> dict[str, str]:
    items, _ = await pods.list("default")
    return {p["metadata"]["name"]: p["status"].get("phase") for p in items}


def events_of(client, name: str, kind: str = "Pod"):
    async def get():
        items, _ = await client.resource("", "v1", "events").list("default")
        return [(e["type"], e["reason"], e["message"]) for e in items
                if e["involvedObject"]["name"] == name and e["involvedObject"]["kind"] == kind
                and e["type"] == "Warning"]
    return get


async def condition(client, kind: str) -> str:
    node = await client.resource("", "v1", "nodes").get("small-0")
    return next(c["status"] for c in node["status"]["conditions"] if c["type"] == kind)


async def test_a_memory_pressure_fault_evicts_one_pod_per_pass_in_rank_and_never_a_critical_one():
    async with node() as (client, clock, mgr):
        pods = client.resource("", "v1", "pods")
        for p in (running("best-effort"), running("burstable", "64Mi"),
                  running("daemon", priorityClassName="system-node-critical")):
            await pods.create(p)
            await eventually(phase_is(pods, p["metadata"]["name"], "Running"))
        await clock.advance(10)
        assert await evictions(mgr) == {}  # no pressure, no eviction
        await mgr.agents["small-0"].apply_faults("memory-pressure")  # a pass at once
        p = await eventually(phase_is(pods, "best-effort", "Failed"))
        why = ("The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. "
               "Container app was using 4Mi, request is 0, has larger consumption of memory. ")
        assert (p["status"]["reason"], p["status"]["message"]) == ("Evicted", why)
        [target] = [c for c in p["status"]["conditions"] if c["type"] == "DisruptionTarget"]
        assert (target["status"], target["reason"], target["message"]) == ("True", "TerminationByKubelet", why)
        assert p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 143
        await becomes(events_of(client, "best-effort"), [("Warning", "Evicted", why)])
        assert ("Warning", "EvictionThresholdMet", "Attempting to reclaim memory") in \
            await events_of(client, "small-0", "Node")()
        assert await phases(pods) == {"best-effort": "Failed", "burstable": "Running", "daemon": "Running"}
        assert await evictions(mgr) == {"memory.available": 1}
        # the next pass, a period later: the critical pod ranks before the burstable one (it
        # exceeds its request), but is passed over
        await clock.advance(9)
        assert (await pods.get("burstable", "default"))["status"]["phase"] == "Running"
        await clock.advance(1)
        p = await eventually(phase_is(pods, "burstable", "Failed"))
        assert p["status"]["message"] == "The node was low on resource: memory. Threshold quantity: 100Mi, " \
                                         "available: 50Mi. "
        for _ in range(3):
            await clock.advance(10)
        assert await phases(pods) == {"best-effort": "Failed", "burstable": "Failed", "daemon": "Running"}
        assert await evictions(mgr) == {"memory.available": 2}


async def test_a_pod_using_more_than_the_node_has_is_evicted_and_the_pressure_outlasts_it():
    """No fault: a pod's usage (the usage annotation, as `kubectl top` reports it) leaves less than
    100Mi of the node's 8Gi: the node reports MemoryPressure, and the pod furthest above its
    request goes; the condition stays for the 5-minute transition period after the last crossing."""
    async with node() as (client, clock, mgr):
        pods = client.resource("", "v1", "pods")
        await pods.create(running("quiet"))
        await pods.create(running("hog", "1Gi", annotations={"sim.nanokube.io/memory-usage": "7600Mi"}))
        await eventually(phase_is(pods, "quiet", "Running"))
        # the pass the hog's start wakes may evict it before it is seen Running, as upstream's memory
        # threshold notifier may; else the next periodic pass does
        await eventually(phase_in(pods, "hog", {"Running", "Failed"}))
        await clock.advance(10)
        p = await eventually(phase_is(pods, "hog", "Failed"))
        assert p["status"]["message"] == (
            "The node was low on resource: memory. Threshold quantity: 100Mi, available: 76Mi. "
            "Container app was using 7600Mi, request is 1Gi, has larger consumption of memory. ")
        assert await condition(client, "MemoryPressure") == "True"
        for _ in range(5):
            await clock.advance(10)
        assert await phases(pods) == {"quiet": "Running", "hog": "Failed"}
        assert await evictions(mgr) == {"memory.available": 1}
        await clock.advance(230)  # under 300 s since the crossing
        assert await condition(client, "MemoryPressure") == "True"
        await clock.advance(20)  # the pass 300 s after it
        assert await condition(client, "MemoryPressure") == "False"
