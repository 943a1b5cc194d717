"""The simulated control plane: its API server expires Events on the run's clock; and its
collector settings (gcsettle.settle): while it runs, what start-up built is frozen, the young
generation is collected every gcsettle.YOUNG allocations and the older ones never; once it
stops, the process's thresholds are back and nothing it froze stays out of reach of the
collector (a next run in the same process would otherwise keep this one's heap)."""

from __future__ import annotations

import gc

from nanokube.clock import VirtualClock
from nanokube.node.cluster import parse_cluster
from nanokube.gcsettle import NEVER, YOUNG
from nanokube.sim.stack import SimulatedControlPlane

CLUSTER = parse_cluster("""\
pools:
  - name: n
    count: 3
    capacity: {cpu: "4", memory: 16Gi}
""")


async def test_a_run_freezes_its_start_up_and_gives_the_collector_back_on_stop():
    before = gc.get_threshold()
    plane = SimulatedControlPlane(CLUSTER, VirtualClock(), controllers="resourceclaim")
    await plane.start()
    try:
        assert gc.get_threshold() == (YOUNG, NEVER, NEVER)
        assert gc.get_freeze_count() > 0
        nodes, _ = await plane.client.resource("", "v1", "nodes").list()
        assert len(nodes) == 3  # the plane works with the settings
    finally:
        await plane.stop()
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


async def test_the_plane_expires_events_on_its_virtual_clock():
    clock = VirtualClock()
    plane = SimulatedControlPlane(CLUSTER, clock, controllers="resourceclaim", event_ttl=30)
    await plane.start()
    try:
        await plane.client.resource("", "v1", "pods").create(
            {"metadata": {"name": "huge", "namespace": "default"},
             "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "64"}}}]}})
        events = plane.client.resource("", "v1", "events")

        async def failed_scheduling() -> list[str]:
            items, _ = await events.list("default", field_selector="involvedObject.name=huge")
            return [e["reason"] for e in items]

        await clock.advance(1)
        assert await failed_scheduling() == ["FailedScheduling"]
        await clock.advance(31)  # the scheduler reports an unchanged failure once: its Event is not rewritten
        assert await failed_scheduling() == []
    finally:
        await plane.stop()


async def test_a_pending_pods_failed_scheduling_event_outlives_the_ttl_and_a_scheduled_ones_expires():
    """The scheduler retries a pod that fits nowhere every 5 minutes and its event recorder
    refreshes the pod's FailedScheduling series every 30 (kube-scheduler's client-go recorder),
    so `kubectl get events` keeps showing it, with a growing count, hour after hour of the
    API server's one-hour Event TTL; once the other pod is scheduled its series ends and expires."""
    clock = VirtualClock()
    plane = SimulatedControlPlane(CLUSTER, clock, controllers="resourceclaim", event_ttl=3600)
    await plane.start()
    try:
        pods = plane.client.resource("", "v1", "pods")
        for name in ("nowhere", "later"):
            await pods.create({"metadata": {"name": name, "namespace": "default"},
                               "spec": {"nodeSelector": {"pool": name},
                                        "containers": [{"name": "c", "image": "busybox",
                                                        "command": ["sleep", "infinity"]}]}})
        events = plane.client.resource("", "v1", "events")

        async def failed_scheduling(name: str) -> list[dict]:
            items, _ = await events.list("default", field_selector=f"involvedObject.name={name},reason=FailedScheduling")
            return items

        counts = []
        for hour in range(1, 5):
            await clock.advance(3600)
            got = await failed_scheduling("nowhere")
            assert got, f"no FailedScheduling Event after {hour} h"
            counts.append(max((e.get("series") or {}).get("count", 1) for e in got))
            if hour == 1:
                assert await failed_scheduling("later")
                nodes, _ = await plane.client.resource("", "v1", "nodes").list()
                await plane.client.resource("", "v1", "nodes").patch(
                    nodes[0]["metadata"]["name"], {"metadata": {"labels": {"pool": "later"}}})
                await clock.advance(1)
                assert (await pods.get("later", "default"))["spec"].get("nodeName") == nodes[0]["metadata"]["name"]
        assert counts == sorted(counts) and counts[-1] > counts[0] > 1
        assert await failed_scheduling("later") == []  # not refreshed after it was scheduled: expired
    finally:
        await plane.stop()


async def test_an_idle_virtual_day_wakes_the_plane_a_few_times_not_every_second():
    """Virtual time jumps to the next timer, so a run costs what its components have to do: an
    idle cluster's day is a handful of timers (resyncs, the scheduler's flushes), not a kubelet
    plugin watcher's 1 s poll of each node's directory (86,400 passes a day; openb's 149 days
    were most of a run's CPU). The nodes still publish their simulated GPUs."""
    gpus = parse_cluster("""\
pools:
  - name: g
    count: 2
    capacity: {cpu: "8", memory: 32Gi}
    gpus: {count: 2, model: A100, memory: 80Gi, architecture: Ampere, driverVersion: "470.82.1", cudaVersion: "11.4",
           computeCapability: "8.0"}
""")
    clock = VirtualClock()
    plane = SimulatedControlPlane(gpus, clock, controllers="resourceclaim")
    await plane.start()
    try:
        slices, _ = await plane.client.resource("resource.k8s.io", "v1", "resourceslices").list()
        assert len(slices) == 2
        before = clock.wakeups
        await clock.advance(86400)
        assert clock.wakeups - before < 2000
    finally:
        await plane.stop()
