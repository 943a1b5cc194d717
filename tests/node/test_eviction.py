"""Node-pressure eviction (eviction.py): the ranking and messages alone, and a node agent's
eviction manager on a hand-driven clock evicting one running pod per pass, through the API."""

import contextlib
import json
from types import SimpleNamespace

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from multidict import CIMultiDict

from nanokube.apiserver.loopback import connector
from nanokube.clock import parse_time
from nanokube.machinery.quantity import parse_quantity
from nanokube.metrics.api import MetricsAPI
from nanokube.metrics.provider import MetricsProvider
from nanokube.metrics.usage import simulated_usage
from nanokube.node.cluster import parse_cluster
from nanokube.node.eviction import (HARD, IMAGEFS, IMAGEFS_INODES, MEMORY, NODEFS, NODEFS_INODES, PID_MAX, PIDS,
                                    Observation, PodStats, Threshold, message,
                                    rank_disk_pressure, rank_inode_pressure, rank_memory_pressure, rank_pid_pressure,
                                    storage_limited, storage_violation)
from nanokube.node.manager import NodeManager
from tests.controllers import becomes, eventually
from tests.node import api_on_manual_clock
from tests.node.test_lifecycle import phase_is

MI = 1024 * 1024
GI = 1024 * MI


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


def test_inodes_rank_by_priority_then_the_most_inodes_as_no_pod_requests_any():
    pods = [pod("few"), pod("important-many", 10), pod("many", storage="1Gi")]
    stats = {"few": PodStats(inodes=3), "important-many": PodStats(inodes=900), "many": PodStats(inodes=50)}
    assert names(rank_inode_pressure(pods, lambda p: stats[p["metadata"]["uid"]])) == ["many", "few", "important-many"]


def test_pids_rank_by_priority_then_the_most_processes():
    pods = [pod("few"), pod("important-many", 10), pod("many")]
    stats = {"few": PodStats(processes=1), "important-many": PodStats(processes=9), "many": PodStats(processes=3)}
    assert names(rank_pid_pressure(pods, lambda p: stats[p["metadata"]["uid"]])) == ["many", "few", "important-many"]


def test_the_message_names_the_threshold_what_was_left_and_each_container_over_its_request():
    p = pod("p", memory="128Mi")
    p["spec"]["containers"].append({"name": "side", "resources": {}})
    p["spec"]["containers"].append({"name": "modest", "resources": {"requests": {"memory": "1G"}}})
    p["spec"]["initContainers"] = [{"name": "proxy", "restartPolicy": "Always", "resources": {}}]
    stats = PodStats({"proxy": 2 * MI, "app": 1536 * 1024, "side": 4 * MI, "modest": 10 * MI, "debug": 64 * MI})
    # a sidecar counts; an ephemeral container (debug: in the stats, not in the spec) does not
    assert message(MEMORY, p, stats, Observation(50 * MI, 8 << 30)) == (
        "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. "
        "Container proxy was using 2Mi, request is 0, has larger consumption of memory. "
        "Container side was using 4Mi, request is 0, has larger consumption of memory. ",
        {"offending_containers": "proxy,side", "offending_containers_usage": "2Mi,4Mi", "starved_resource": "memory"})
    why, annotations = message(MEMORY, p, PodStats({"app": 200 * MI}), Observation(1000, 8 << 30))
    assert why.endswith(
        "available: 1k. Container app was using 200Mi, request is 128Mi, has larger consumption of memory. ")
    assert annotations == {"offending_containers": "app", "offending_containers_usage": "200Mi",
                           "starved_resource": "memory"}
    # a percentage threshold is that share of the capacity (a float32, as upstream holds it:
    # 109951164416 bytes, not a tenth of 1Ti); ephemeral storage compares each writable layer
    # with the container's request
    disk = PodStats(disk=3 * MI, rootfs={"app": 3 * MI, "side": 0})
    assert message(NODEFS, pod("p", storage="1Mi"), disk, Observation(1 << 30, 1 << 40)) == (
        "The node was low on resource: ephemeral-storage. Threshold quantity: 107374184Ki, available: 1Gi. "
        "Container app was using 3Mi, request is 1Mi, has larger consumption of ephemeral-storage. ",
        {"offending_containers": "app", "offending_containers_usage": "3Mi", "starved_resource": "ephemeral-storage"})
    # no stats, no containers to name and no annotations
    assert message(PIDS, p, None, Observation(200_000, 4_194_304)) == (
        "The node was low on resource: pids. Threshold quantity: 419430, available: 200k. ", {})
    assert [t.signal for t in HARD] == [MEMORY, NODEFS, NODEFS_INODES, IMAGEFS, IMAGEFS_INODES, PIDS]


def limited(volumes=(), containers=(), inits=()) -> dict:
    return {"metadata": {"name": "p"}, "spec": {
        "volumes": [{"name": n, "emptyDir": {"sizeLimit": q} if q else {}} for n, q in volumes],
        "initContainers": [{"name": n, "restartPolicy": "Always",
                            "resources": {"limits": {"ephemeral-storage": q}}} for n, q in inits],
        "containers": [{"name": n, "resources": {"limits": {"ephemeral-storage": q}} if q else {}}
                       for n, q in containers]}}


def test_local_storage_limits_in_upstreams_order_and_words():
    p = limited([("cache", "1Gi"), ("plain", None)], [("app", "1Gi"), ("side", "512Mi")])
    assert storage_limited(p) and not storage_limited(limited([("plain", None)], [("app", None)]))
    under = PodStats(disk=GI, volumes={"cache": GI, "plain": 5 * GI}, rootfs={"app": 0, "side": 0})
    assert storage_violation(p, under) is None  # at a limit is not past it; no limit, no check
    assert storage_violation(p, PodStats(disk=GI + 1, volumes={"cache": GI + 1})) == (
        "emptydirfs.limit", 'Usage of EmptyDir volume "cache" exceeds the limit "1Gi". ')
    # the pod's limit is its containers' sum (1536Mi), its usage the layers and emptyDirs together
    assert storage_violation(p, PodStats(disk=1537 * MI, volumes={"cache": GI}, rootfs={"side": 0})) == (
        "ephemeralpodfs.limit", "Pod ephemeral local storage usage exceeds the total limit of containers 1536Mi. ")
    assert storage_violation(p, PodStats(disk=600 * MI, rootfs={"app": 10 * MI, "side": 600 * MI})) == (
        "ephemeralcontainerfs.limit", 'Container side exceeded its local ephemeral storage limit "512Mi". ')
    # a sidecar's limit adds to the pod's; without a container's limit there is no pod limit
    sidecar = limited(containers=[("app", "1G")], inits=[("proxy", "1G")])
    assert storage_violation(sidecar, PodStats(disk=2 * 10**9, rootfs={"app": 0})) is None
    assert storage_violation(sidecar, PodStats(disk=2 * 10**9 + 1, rootfs={"app": 0}))[1] == \
        "Pod ephemeral local storage usage exceeds the total limit of containers 2G. "
    assert storage_violation(limited(containers=[("app", None)]), PodStats(disk=100 * GI)) is None


CLUSTER = parse_cluster("""\
pools:
  - name: small
    count: 1
    capacity: {cpu: "4", memory: 8Gi, pods: "6", ephemeral-storage: 100Gi}
""")


@contextlib.asynccontextmanager
async def node(cluster=CLUSTER):
    async with api_on_manual_clock() as (s, clock):
        mgr = NodeManager(connector(s.rest), cluster, clock)
        await mgr.start()
        try:
            yield s.client, clock, mgr
        finally:
            await mgr.stop()


def running(name: str, memory: str = "", **spec) -> dict:
    res = {"resources": {"requests": {"memory": memory}}} if memory else {}
    annotations = spec.pop("annotations", {})
    return {"metadata": {"name": name, "namespace": "default", "annotations": annotations},
            "spec": {"nodeName": "small-0",
                     "containers": [{"name": "app", "image": "busybox:1.36", "command": ["httpd", "-f"], **res}], **spec}}


def phase_in(pods, name: str, phases: set[str]):
    async def check():
        p = await pods.get(name, "default")
        return p if (p.get("status") or {}).get("phase") in phases else None
    return check


async def evictions(mgr) -> dict[str, float]:
    text = (await mgr.kubelet_for("small-0").serve(SimpleNamespace(method="GET", query={}, headers=CIMultiDict()),
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


async def evicted_annotations(client, name: str) -> list[dict]:
    items, _ = await client.resource("", "v1", "events").list("default")
    return [e["metadata"].get("annotations") for e in items
            if e["involvedObject"]["name"] == name and e["reason"] == "Evicted"]


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
        await client.resource("", "v1", "nodes").patch(  # as `nanokube fault node`: a pass at once
            "small-0", {"metadata": {"annotations": {"sim.nanokube.io/fault": "memory-pressure"}}},
            "application/merge-patch+json")
        p = await eventually(phase_is(pods, "best-effort", "Failed"))
        why = ("The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. "
               "Container app was using 4Mi, request is 0, has larger consumption of memory. ")
        assert (p["status"]["reason"], p["status"]["message"]) == ("Evicted", why)
        [target] = [c for c in p["status"]["conditions"] if c["type"] == "DisruptionTarget"]
        assert (target["status"], target["reason"], target["message"]) == ("True", "TerminationByKubelet", why)
        assert p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 143
        await becomes(events_of(client, "best-effort"), [("Warning", "Evicted", why)])
        assert await evicted_annotations(client, "best-effort") == [
            {"offending_containers": "app", "offending_containers_usage": "4Mi", "starved_resource": "memory"}]
        assert ("Warning", "EvictionThresholdMet", "Attempting to reclaim memory") in \
            await events_of(client, "small-0", "Node")()
        assert await phases(pods) == {"best-effort": "Failed", "burstable": "Running", "daemon": "Running"}
        assert await evictions(mgr) == {"memory.available": 1}
        # the leak shows where `kubectl top node` and the summary look: 50Mi of the 8Gi left
        summary = json.loads((await mgr.kubelet_for("small-0").serve(
            SimpleNamespace(method="GET", query={}, headers=CIMultiDict()), "/stats/summary")).text)
        assert (summary["node"]["memory"]["availableBytes"], summary["node"]["memory"]["workingSetBytes"]) == \
            (50 * MI, 8 * GI - 50 * MI)
        [top] = await MetricsProvider(client, clock).node_metrics()
        assert top["usage"]["memory"] == "8142Mi"
        # the next pass, a period later: the critical pod ranks before the burstable one (it
        # exceeds its request), but is passed over
        await clock.advance(9)
        assert (await pods.get("burstable", "default"))["status"]["phase"] == "Running"
        await clock.advance(1)
        p = await eventually(phase_is(pods, "burstable", "Failed"))
        assert p["status"]["message"] == "The node was low on resource: memory. Threshold quantity: 100Mi, " \
                                         "available: 50Mi. "
        await becomes(lambda: evicted_annotations(client, "burstable"), [
            {"offending_containers": "", "offending_containers_usage": "", "starved_resource": "memory"}])
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


async def test_a_soft_threshold_reports_pressure_at_once_and_evicts_once_met_for_its_grace_period():
    """evictionSoft (a joined kubelet's): memory.available<2Gi with a 30 s grace period. A pod
    leaving 1676Mi of the 8Gi: MemoryPressure at once, the pod evicted only by the pass at least
    30 s after the threshold was first met, its message naming the soft threshold's quantity;
    evictionMaxPodGracePeriod (5 s) under the pod's own 30 s is the grace its containers get."""
    async with node() as (client, clock, mgr):
        eviction = mgr.agents["small-0"].eviction
        eviction.soft, eviction.max_pod_grace_period = (Threshold(MEMORY, quantity=2 * GI, grace_period=30),), 5
        pods = client.resource("", "v1", "pods")
        await pods.create(running("quiet"))
        await pods.create(running("hog", "1Gi", annotations={"sim.nanokube.io/memory-usage": "6000Mi",
                                                             "sim.nanokube.io/stop-seconds": "10"}))
        await eventually(phase_is(pods, "quiet", "Running"))
        await eventually(phase_is(pods, "hog", "Running"))
        await clock.advance(10)
        assert await condition(client, "MemoryPressure") == "True"
        await clock.advance(10)
        assert await phases(pods) == {"quiet": "Running", "hog": "Running"}  # 20 s or less since first met
        for _ in range(2):
            await clock.advance(10)
        await clock.advance(5)
        p = await eventually(phase_is(pods, "hog", "Failed"))
        assert (p["status"]["reason"], p["status"]["message"]) == ("Evicted", (
            "The node was low on resource: memory. Threshold quantity: 2Gi, available: 1676Mi. "
            "Container app was using 6000Mi, request is 1Gi, has larger consumption of memory. "))
        # its container takes 10 s to stop: killed after the 5 s grace (its own 30 s would have let it exit)
        assert p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 137
        assert await evictions(mgr) == {"memory.available": 1}
        assert await phases(pods) == {"quiet": "Running", "hog": "Failed"}


async def test_an_evictions_reason_and_message_wait_for_the_terminal_phase():
    """mergePodStatus holds a terminal phase back while the pod's containers may run, and the
    eviction's reason and message with it. A pod evicted while its postStart hook runs is written
    Running once the hook ends (its container started), without them; Failed with them once its
    container, stopping 10 s after SIGTERM, is killed 2 s later (the immediate grace)."""
    async with node() as (client, clock, mgr):
        pods = client.resource("", "v1", "pods")
        p = running("hooked", annotations={"sim.nanokube.io/stop-seconds": "10"})
        p["spec"]["containers"][0]["lifecycle"] = {"postStart": {"exec": {"command": ["sleep", "5"]}}}
        await pods.create(p)

        async def started():  # its container started: the hook runs
            items, _ = await client.resource("", "v1", "events").list("default")
            return any(e["reason"] == "Started" and e["involvedObject"]["name"] == "hooked" for e in items)
        await eventually(started)
        await client.resource("", "v1", "nodes").patch(
            "small-0", {"metadata": {"annotations": {"sim.nanokube.io/fault": "memory-pressure"}}},
            "application/merge-patch+json")
        assert await eventually(lambda: evictions(mgr)) == {"memory.available": 1}
        assert (await pods.get("hooked", "default"))["status"]["phase"] == "Pending"
        await clock.advance(5)  # the hook ends: the container runs, and the pod is written so
        during = (await eventually(phase_is(pods, "hooked", "Running")))["status"]
        assert "running" in during["containerStatuses"][0]["state"]
        assert "reason" not in during and "message" not in during, during
        await clock.advance(2)
        after = (await eventually(phase_is(pods, "hooked", "Failed")))["status"]
        assert (after["reason"], after["message"]) == ("Evicted", (
            "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. "))
        assert after["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 137


def writer(name: str, script: str, limit: str = "", size_limit: str = "") -> dict:
    """A pod whose container runs `script` with an emptyDir at /cache (`size_limit` its sizeLimit)
    and `limit` its container's ephemeral-storage limit."""
    res = {"resources": {"limits": {"ephemeral-storage": limit}}} if limit else {}
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": "small-0", "restartPolicy": "Never",
                     "volumes": [{"name": "cache", "emptyDir": {"sizeLimit": size_limit} if size_limit else {}}],
                     "containers": [{"name": "app", "image": "busybox:1.36", "command": ["sh", "-c", script],
                                     "volumeMounts": [{"name": "cache", "mountPath": "/cache"}], **res}]}}


async def test_pods_past_their_local_storage_limits_are_evicted_without_node_pressure():
    """Each pass checks every running pod's emptyDirs, total and containers against their limits
    (as the summary measures them: what `dd` wrote), node pressure or not: all three writers go in
    one pass, a pod within its limits stays; no DisruptionTarget condition, no event annotations."""
    async with node() as (client, clock, mgr):
        pods = client.resource("", "v1", "pods")
        layer_hog = writer("layer-hog", "sleep 5; fallocate -l 2M /tmp/blob; sleep 3600", limit="1Mi")
        layer_hog["spec"]["containers"].append({"name": "side", "image": "busybox:1.36", "command": ["sleep", "inf"],
                                                "resources": {"limits": {"ephemeral-storage": "10Mi"}}})
        for p in (writer("cache-hog", "sleep 5; dd if=/dev/zero of=/cache/blob bs=1M count=2; sleep 3600",
                         size_limit="1Mi"), layer_hog,
                  writer("pod-hog", "sleep 5; dd if=/dev/zero of=/cache/blob bs=1M count=3 status=none; sleep 3600",
                         limit="2Mi"),
                  writer("tidy", "sleep 5; dd if=/dev/zero of=/cache/blob bs=1M count=1; sleep 3600",
                         limit="2Mi", size_limit="2Mi")):
            await pods.create(p)
        for name in ("cache-hog", "layer-hog", "pod-hog", "tidy"):
            await eventually(phase_is(pods, name, "Running"))
        await clock.advance(4)  # nothing written yet
        assert await evictions(mgr) == {}
        for _ in range(2):  # the writes at 5 s, the next pass within a period
            await clock.advance(5)
        expected = {
            "cache-hog": 'Usage of EmptyDir volume "cache" exceeds the limit "1Mi". ',
            "layer-hog": 'Container app exceeded its local ephemeral storage limit "1Mi". ',
            "pod-hog": "Pod ephemeral local storage usage exceeds the total limit of containers 2Mi. "}
        for name, why in expected.items():
            p = await eventually(phase_is(pods, name, "Failed"))
            assert (p["status"]["reason"], p["status"]["message"]) == ("Evicted", why)
            assert "DisruptionTarget" not in [c["type"] for c in p["status"].get("conditions") or ()]
            await becomes(events_of(client, name), [("Warning", "Evicted", why)])
        items, _ = await client.resource("", "v1", "events").list("default")
        assert not [e for e in items if e["reason"] == "Evicted" and e["metadata"].get("annotations")]
        assert await evictions(mgr) == {"emptydirfs.limit": 1, "ephemeralcontainerfs.limit": 1,
                                        "ephemeralpodfs.limit": 1}
        await clock.advance(30)
        assert (await pods.get("tidy", "default"))["status"]["phase"] == "Running"
        # the summary counts the tidy pod's storage as the manager does: its 1Mi and the directory's block,
        # the block of its log (dd's report on stderr) and that of its etc-hosts file
        summary = await stats_summary(mgr)
        [tidy] = [p for p in summary["pods"] if p["podRef"]["name"] == "tidy"]
        assert [v["usedBytes"] for v in tidy["volume"] if v["name"] == "cache"] == [MI + 4096]
        assert tidy["ephemeral-storage"]["usedBytes"] == MI + 3 * 4096
        assert tidy["containers"][0]["rootfs"]["usedBytes"] == 0
        assert tidy["containers"][0]["logs"]["usedBytes"] == 4096


async def stats_summary(mgr) -> dict:
    """small-0's /stats/summary, as its kubelet serves it."""
    return json.loads((await mgr.kubelet_for("small-0").serve(
        SimpleNamespace(method="GET", query={}, headers=CIMultiDict()), "/stats/summary")).text)


async def test_a_containers_logs_count_toward_its_ephemeral_storage_limit():
    """A container's log files are its ephemeral storage too (containerEphemeralStorageLimitEviction
    adds its logs to its writable layer): one printing 3000 lines, some 100 KiB as CRI log lines,
    and writing no file, is evicted past its 64Ki limit."""
    async with node() as (client, clock, mgr):
        pods = client.resource("", "v1", "pods")
        chatty = writer("chatty", "sleep 5; seq 1 3000; sleep 3600", limit="64Ki")
        chatty["spec"]["containers"].append({"name": "side", "image": "busybox:1.36", "command": ["sleep", "inf"],
                                             "resources": {"limits": {"ephemeral-storage": "10Mi"}}})
        await pods.create(chatty)
        await eventually(phase_is(pods, "chatty", "Running"))
        await clock.advance(4)
        [chatty] = (await stats_summary(mgr))["pods"]
        assert chatty["containers"][0]["logs"]["usedBytes"] == 0, "nothing printed yet"
        for _ in range(2):
            await clock.advance(5)
        why = 'Container app exceeded its local ephemeral storage limit "64Ki". '
        p = await eventually(phase_is(pods, "chatty", "Failed"))
        assert (p["status"]["reason"], p["status"]["message"]) == ("Evicted", why)
        assert await evictions(mgr) == {"ephemeralcontainerfs.limit": 1}


async def test_the_summary_counts_logs_configmaps_and_etc_hosts_in_a_pods_ephemeral_storage():
    """calcEphemeralStorage: a pod's ephemeral storage is its containers' writable layers and logs,
    its local ephemeral volumes (an emptyDir on disk, a configMap; not a secret, nor a memory-backed
    emptyDir) and its etc-hosts file."""
    async with node() as (client, clock, mgr):
        pods = client.resource("", "v1", "pods")
        await client.resource("", "v1", "configmaps").create(
            {"metadata": {"name": "cfg", "namespace": "default"}, "data": {"conf": "x" * 5000}})
        await client.resource("", "v1", "secrets").create(
            {"metadata": {"name": "sec", "namespace": "default"}, "stringData": {"key": "y" * 5000}})
        p = writer("mixed", "echo hello; echo data > /tmp/f; echo in memory > /mem/f; sleep 3600")
        p["spec"]["volumes"] += [{"name": "cfg", "configMap": {"name": "cfg"}}, {"name": "sec", "secret": {
            "secretName": "sec"}}, {"name": "mem", "emptyDir": {"medium": "Memory"}}]
        p["spec"]["containers"][0]["volumeMounts"] += [{"name": n, "mountPath": f"/{n}"} for n in ("cfg", "sec", "mem")]
        await pods.create(p)
        await eventually(phase_is(pods, "mixed", "Running"))
        await clock.advance(1)
        [mixed] = (await stats_summary(mgr))["pods"]
        volumes = {v["name"]: v["usedBytes"] for v in mixed["volume"]}
        container = mixed["containers"][0]
        assert (container["rootfs"]["usedBytes"], container["logs"]["usedBytes"]) == (4096, 4096)
        assert volumes["cfg"] > 4096 and volumes["sec"] > 4096
        assert mixed["ephemeral-storage"]["usedBytes"] == 4096 + 4096 + volumes["cache"] + volumes["cfg"] + 4096
        assert await condition(client, "DiskPressure") == "False"


async def test_a_host_network_pods_etc_hosts_is_its_nodes_copy_and_counts_in_its_ephemeral_storage():
    """ensureHostsFile gives a hostNetwork pod a copy of its node's /etc/hosts (nodeHostsFileContent:
    the host-network header, the node's lines, then spec.hostAliases); calcEphemeralStorage counts
    that file as it counts any pod's etc-hosts."""
    async with node() as (client, clock, mgr):
        pods = client.resource("", "v1", "pods")
        p = writer("host", "cat /etc/hosts; sleep 3600")
        p["spec"] |= {"hostNetwork": True, "hostAliases": [{"ip": "192.0.2.7", "hostnames": ["db"]}]}
        await pods.create(p)
        running = await eventually(phase_is(pods, "host", "Running"))
        await clock.advance(1)
        hosts = (await mgr.read_log("default", "host", "app", {})).decode()
        assert hosts.startswith("# Kubernetes-managed hosts file (host network).\n127.0.0.1\tlocalhost\n")
        assert hosts.endswith(f"{running['status']['podIP']}\tsmall-0\n\n# Entries added by HostAliases.\n"
                              "192.0.2.7\tdb\n")
        [host] = (await stats_summary(mgr))["pods"]
        container = host["containers"][0]
        assert host["ephemeral-storage"]["usedBytes"] == (container["rootfs"]["usedBytes"] + container["logs"]["usedBytes"]
                                                          + host["volume"][0]["usedBytes"] + 4096)


async def test_a_local_storage_eviction_stops_the_pod_in_two_seconds_whatever_its_own_grace():
    """localStorageEviction kills with immediateEvictionGracePeriodSeconds (1; before kubernetes
    PR 124063 it passed 0, which the pod workers' calculateEffectiveGracePeriod read as no override
    and replaced with the pod's terminationGracePeriodSeconds): the pod's grace is 1 s, which
    killContainer raises to its 2 s minimum. So a container ignoring SIGTERM, in a pod asking for an
    hour, is killed (137) 2 s after its SIGTERM, not an hour later."""
    async with node() as (client, clock, mgr):
        pods = client.resource("", "v1", "pods")
        p = writer("stubborn", "sleep 5; dd if=/dev/zero of=/cache/blob bs=1M count=2; sleep 3600", size_limit="1Mi")
        p["spec"]["terminationGracePeriodSeconds"] = 3600
        await pods.create(p)
        await eventually(phase_is(pods, "stubborn", "Running"))

        async def killing():  # SIGTERM follows the event: a clock advance before it would pass it by
            items, _ = await client.resource("", "v1", "events").list("default")
            return next((e for e in items if e["reason"] == "Killing"
                         and e["involvedObject"]["name"] == "stubborn"), None)
        for _ in range(2):  # the write at 5 s, the pass at 10 s
            await clock.advance(5)
        await eventually(killing)
        sigterm = clock.now()
        await clock.advance(1.5)
        during = (await pods.get("stubborn", "default"))["status"]
        # the terminal phase, and its reason and message with it, wait for the container (mergePodStatus)
        assert during["phase"] == "Running" and "reason" not in during and "message" not in during
        await clock.advance(0.5)
        p = await eventually(phase_is(pods, "stubborn", "Failed"))
        assert (p["status"]["reason"], p["status"]["message"]) == (
            "Evicted", 'Usage of EmptyDir volume "cache" exceeds the limit "1Mi". ')
        t = p["status"]["containerStatuses"][0]["state"]["terminated"]
        assert (t["exitCode"], t["reason"]) == (137, "Error")
        assert parse_time(t["finishedAt"]) - sigterm == 2, (t["finishedAt"], sigterm)


def tmpfs_writer(name: str, script: str, size_limit: str = "", memory_limit: str = "",
                 annotations: dict | None = None) -> dict:
    """writer's pod with its emptyDir at /cache memory-backed (a tmpfs), `memory_limit` its
    container's memory limit."""
    p = writer(name, script, size_limit=size_limit)
    p["spec"]["volumes"][0]["emptyDir"]["medium"] = "Memory"
    p["metadata"]["annotations"] = annotations or {}
    if memory_limit:
        p["spec"]["containers"][0]["resources"] = {"limits": {"memory": memory_limit}}
    return p


async def test_a_memory_backed_emptydir_is_charged_to_the_pods_memory_and_sized_as_its_tmpfs():
    """The summary lists a medium Memory emptyDir among the pod's volumes (du of its files), its
    capacity the tmpfs's size: the sizeLimit, else the pod's memory limit, else the node's
    allocatable memory; its pages count in the memory working set of the container mounting it
    (and so its pod's), as `kubectl top pod` (metrics.k8s.io) shows it, not in its ephemeral storage."""
    async with node() as (client, clock, mgr):
        pods = client.resource("", "v1", "pods")
        await pods.create(tmpfs_writer("sized", "dd if=/dev/zero of=/cache/blob bs=1M count=2; sleep 3600",
                                       size_limit="8Mi", memory_limit="64Mi"))
        await pods.create(tmpfs_writer("limited", "dd if=/dev/zero of=/cache/blob bs=1M count=1; sleep 3600",
                                       memory_limit="64Mi"))
        await pods.create(tmpfs_writer("unlimited", "sleep 3600"))
        for name in ("sized", "limited", "unlimited"):
            await eventually(phase_is(pods, name, "Running"))
        await clock.advance(1)
        summary = {p["podRef"]["name"]: p for p in (await stats_summary(mgr))["pods"]}
        app = web.Application()
        MetricsAPI(MetricsProvider(client, clock)).add_routes(app)
        async with TestClient(TestServer(app)) as http:
            top = {name: (await (await http.get(f"/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/{name}")).json())
                   ["containers"][0]["usage"]["memory"] for name in ("sized", "limited", "unlimited")}
        node_obj = await client.resource("", "v1", "nodes").get("small-0")
        allocatable = parse_quantity(node_obj["status"]["allocatable"]["memory"])
        for name, used, size in (("sized", 2 * MI, 8 * MI), ("limited", MI, 64 * MI), ("unlimited", 0, allocatable)):
            [cache] = summary[name]["volume"]
            assert (cache["name"], cache["usedBytes"], cache["capacityBytes"], cache["availableBytes"]) == \
                ("cache", used, size, size - used), name
            [app] = summary[name]["containers"]
            model = simulated_usage(await pods.get(name, "default"))["app"].memory
            assert app["memory"]["workingSetBytes"] == summary[name]["memory"]["workingSetBytes"] == model + used, name
            assert parse_quantity(top[name]) == model + used, name
            # its ephemeral storage: its container's writable layer and logs, and the etc-hosts file's block
            own = sum(c["rootfs"]["usedBytes"] + c["logs"]["usedBytes"] for c in summary[name]["containers"])
            assert summary[name]["ephemeral-storage"]["usedBytes"] == own + 4096, name
        assert await evictions(mgr) == {}


async def test_a_write_past_a_memory_backed_emptydirs_size_fails_and_nothing_is_evicted():
    """The kubelet mounts a medium Memory emptyDir as a tmpfs of its size (the sizeLimit here), so a
    write past it fails with ENOSPC once the free pages are filled, as `dd` and the shell report
    it and `df` shows the tmpfs full; its files never exceed the sizeLimit, so the eviction
    manager's emptyDir check (usage over the limit) never evicts the pod."""
    async with node() as (client, clock, mgr):
        pods = client.resource("", "v1", "pods")
        script = ("sleep 5; dd if=/dev/zero of=/cache/blob bs=1M count=2; echo dd=$?; echo more >> /cache/blob; "
                  "echo echo=$?; df | grep /cache; rm /cache/blob; echo small > /cache/note; cat /cache/note; "
                  "sleep 3600")
        await pods.create(tmpfs_writer("ram-hog", script, size_limit="1Mi"))
        await eventually(phase_is(pods, "ram-hog", "Running"))
        for _ in range(3):
            await clock.advance(5)
        log = (await mgr.read_log("default", "ram-hog", "app", {})).decode()
        assert log == ("dd: error writing '/cache/blob': No space left on device\n2+0 records in\n1+0 records out\n"
                       "1048576 bytes (1.0MB) copied, 0.000000 seconds, 0B/s\ndd=1\n"
                       "sh: write error: No space left on device\necho=1\n"
                       "tmpfs                     1024      1024         0 100% /cache\nsmall\n")
        assert (await pods.get("ram-hog", "default"))["status"]["phase"] == "Running"
        assert await evictions(mgr) == {}


async def test_files_in_a_memory_backed_emptydir_count_in_memory_pressure():
    """A pod using 7560Mi leaves the node 120Mi over its system share; the 24Mi it then writes to
    its tmpfs take the node under the 100Mi threshold: MemoryPressure, and the pod is evicted for
    memory."""
    async with node() as (client, clock, mgr):
        pods = client.resource("", "v1", "pods")
        await pods.create(tmpfs_writer("ram-filler", "sleep 5; dd if=/dev/zero of=/cache/blob bs=1M count=24; sleep 3600",
                                       annotations={"sim.nanokube.io/memory-usage": "7560Mi"}))
        await eventually(phase_is(pods, "ram-filler", "Running"))
        await clock.advance(4)
        assert await evictions(mgr) == {} and await condition(client, "MemoryPressure") == "False"
        for _ in range(2):
            await clock.advance(5)
        p = await eventually(phase_is(pods, "ram-filler", "Failed"))
        assert p["status"]["reason"] == "Evicted"
        assert p["status"]["message"].startswith("The node was low on resource: memory. Threshold quantity: 100Mi, ")
        assert await evictions(mgr) == {"memory.available": 1}
        assert await condition(client, "MemoryPressure") == "True"


#: a node with a 16Mi disk: 1024 inodes (one per 16 KiB), nodefs.inodesFree<5% below 51 free
TINY_DISK = parse_cluster("""\
pools:
  - name: small
    count: 1
    capacity: {cpu: "4", memory: 8Gi, pods: "6", ephemeral-storage: 16Mi}
""")


async def test_files_filling_the_nodes_inodes_report_disk_pressure_and_evict_the_pod_holding_most():
    """nodefs.inodesFree (and imagefs.inodesFree: the images' filesystem is the node's): a pod
    creating 1000 empty files leaves fewer than 5% of the node's 1024 inodes free, as the summary
    reports them. DiskPressure, and the pod holding the most inodes goes (no pod requests any),
    with upstream's message and event; the quiet pod stays."""
    async with node(TINY_DISK) as (client, clock, mgr):
        pods = client.resource("", "v1", "pods")
        await pods.create(writer("quiet", "sleep 3600"))
        await pods.create(writer("files", "sleep 5; cd /cache && touch $(seq 1 1000); sleep 3600"))
        for name in ("quiet", "files"):
            await eventually(phase_is(pods, name, "Running"))
        await clock.advance(1)
        fs = (await stats_summary(mgr))["node"]["fs"]
        assert (fs["inodes"], fs["capacityBytes"], fs["inodesFree"] > 1000) == (1024, 16 * MI, True)
        assert await condition(client, "DiskPressure") == "False"
        for _ in range(4):  # the files are there at 5 s, the pass after evicts
            await clock.advance(5)
        p = await eventually(phase_is(pods, "files", "Failed"))
        why = p["status"]["message"]
        assert why.startswith("The node was low on resource: inodes. Threshold quantity: 51, available: ")
        assert int(why.split("available: ")[1].rstrip(". ")) < 51 and why.endswith(". ")
        assert p["status"]["reason"] == "Evicted"
        assert await condition(client, "DiskPressure") == "True"
        assert await evicted_annotations(client, "files") == [
            {"offending_containers": "", "offending_containers_usage": "", "starved_resource": "inodes"}]
        assert ("Warning", "EvictionThresholdMet", "Attempting to reclaim inodes") in \
            await events_of(client, "small-0", "Node")()
        assert await evictions(mgr) == {"nodefs.inodesFree": 1}
        for _ in range(3):
            await clock.advance(10)
        assert await phases(pods) == {"quiet": "Running", "files": "Failed"}
        assert (await stats_summary(mgr))["node"]["fs"]["inodesFree"] > 1000


async def test_a_disk_filled_past_the_image_filesystems_threshold_evicts_for_imagefs_available():
    """imagefs.available<15% crosses before nodefs.available<10% on a node whose images share its
    disk: a pod writing 14Mi of the 16Mi leaves 12% free; evicted for imagefs.available, the
    ephemeral storage its container wrote (its writable layer and logs) named against its request."""
    async with node(TINY_DISK) as (client, clock, mgr):
        pods = client.resource("", "v1", "pods")
        await pods.create(writer("filler", "sleep 5; dd if=/dev/zero of=/tmp/blob bs=1M count=14; sleep 3600"))
        await eventually(phase_is(pods, "filler", "Running"))
        for _ in range(4):
            await clock.advance(5)
        p = await eventually(phase_is(pods, "filler", "Failed"))
        # 12% left: 14Mi written, a block each for dd's report in its log, etc-hosts and /cache
        assert p["status"]["message"] == (
            "The node was low on resource: ephemeral-storage. Threshold quantity: 2516582, available: 2036Ki. "
            "Container app was using 14340Ki, request is 0, has larger consumption of ephemeral-storage. ")
        assert await condition(client, "DiskPressure") == "True"
        assert await evictions(mgr) == {"imagefs.available": 1}


async def test_processes_past_a_pid_threshold_report_pid_pressure_and_a_negative_max_grace_is_one_second():
    """pid.available (a joined kubelet's evictionSoft here): the node's processes, one per running
    container, as the summary's rlimit reports them. PIDPressure, and the pod evicted after the
    grace period with evictionMaxPodGracePeriod -1: in 1.37 no deferral to the pod's own 30 s
    (whatever the flag's help says) but the pod workers' 1 s floor, so its slow stop is killed."""
    async with node() as (client, clock, mgr):
        eviction = mgr.agents["small-0"].eviction
        eviction.soft = (Threshold(PIDS, quantity=PID_MAX - 1, grace_period=10),)
        eviction.max_pod_grace_period = -1
        pods = client.resource("", "v1", "pods")
        await pods.create(running("slow", annotations={"sim.nanokube.io/stop-seconds": "10"}))
        await eventually(phase_is(pods, "slow", "Running"))
        await clock.advance(1)
        assert (await stats_summary(mgr))["node"]["rlimit"]["curproc"] == 1
        assert await condition(client, "PIDPressure") == "False"
        await pods.create(running("second"))
        await eventually(phase_is(pods, "second", "Running"))
        for _ in range(2):  # the pass a period after the first sees two processes
            await clock.advance(5)
        assert await condition(client, "PIDPressure") == "True"
        assert await phases(pods) == {"slow": "Running", "second": "Running"}
        for _ in range(3):  # the next pass, the threshold met for its 10 s: evicted, killed after 1 s
            await clock.advance(5)
        p = await eventually(phase_is(pods, "slow", "Failed"))
        assert p["status"]["message"] == \
            f"The node was low on resource: pids. Threshold quantity: {PID_MAX - 1}, available: {PID_MAX - 2}. "
        assert p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 137
        assert await evictions(mgr) == {"pid.available": 1}
