"""The discrete-event driver: the same trace and seed place every pod alike,
and a run paced at real time (`speed=1`) agrees with the virtual one."""

from __future__ import annotations

from nanokube.node.cluster import parse_cluster
from nanokube.sim.driver import run
from nanokube.sim.trace import Trace, TraceEvent

CLUSTER = parse_cluster("""\
pools:
  - name: node
    count: 4
    capacity: {cpu: "4", memory: 16Gi}
""")


def _trace() -> Trace:
    events = []
    for i in range(12):
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": f"p{i:02d}", "namespace": "default",
                            "annotations": {"sim.nanokube.io/run-seconds": str(1 + i % 3)}},
               "spec": {"restartPolicy": "Never", "containers": [
                   {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1500m"}}}]}}
        events.append(TraceEvent(i * 0.5, i, "create", pod))
    return Trace(events)


async def test_same_seed_same_placements_and_paced_run_agrees_with_virtual_time():
    a = await run("a", CLUSTER, _trace(), None, seed=5, until=10, progress=False)
    b = await run("b", CLUSTER, _trace(), None, seed=5, until=10, progress=False)
    assert a.metrics["scheduled"] == 12 and a.placement_hash == b.placement_hash
    assert a.virtual_s == 10 and a.wall_s < 30
    paced = await run("paced", CLUSTER, _trace(), None, seed=5, until=10, speed=1.0, progress=False)
    assert paced.wall_s >= 9, "virtual time never ran ahead of real time"
    assert paced.placements == a.placements
    assert paced.metrics["scheduling_delay_s"] == a.metrics["scheduling_delay_s"]
