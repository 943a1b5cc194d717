"""The discrete-event driver against real time: the same trace run on the
virtual clock and on a real one (`speed=0.5`, components sleeping for
real, at half the wall clock's pace) places every pod alike and starts
and ends each within the scheduler's own tick (its backoff flush, 1 s) of
the other; and the same seed gives the same placements, generated names
included.

The trace (durations scaled down so the real-time run takes 20 s): 50
nodes (4 of them tainted for big jobs), 45 short pods in three bursts, two
gangs (one fits at once, one waits two seconds for two hogs to end), and a
Deployment that an HPA scales on a Pods metric. Bursts of 15 pods, at 0, 2
and 8, each pod running half a second or one, and a loaded machine (load 9
on two cores) works through a burst in under a second of real time, half a
second of the trace's at half speed, so the real-time run lags by less than
that, with no check of the machine's load. The small gang and the
Deployment come at 1, between the first two bursts; the 46 untainted nodes
hold all of them many times over, so where their pods end among those
writes changes no placement. Nothing ends while the big gang waits (the
second burst and the small gang end by 3, the big gang is created at 4 and
waits for the hogs' end at 6), so it is retried as often in both runs (each
retry draws from the scheduler's tie-breaking random numbers). A burst's
pods only go to the untainted nodes, so the big gang's end, on the tainted
ones, may coincide with one.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from nanokube.node.cluster import parse_cluster
from nanokube.sim.driver import run
from nanokube.sim.trace import Trace, TraceEvent

CLUSTER = parse_cluster("""\
pools:
  - name: small
    count: 46
    capacity: {cpu: "4", memory: 16Gi}
  - name: big
    count: 4
    capacity: {cpu: "4", memory: 16Gi}
    labels: {pool: big}
    taints: [{key: dedicated, value: big, effect: NoSchedule}]
""")
BIG = {"nodeSelector": {"pool": "big"}, "tolerations": [{"key": "dedicated", "operator": "Exists"}]}
UNTIL = 10.0
#: the scheduler's tick: backoffQ is flushed once a second
TICK = 1.0
#: the real-time run's pace: the trace's second is two of the wall clock's, doubling its margins for a loaded machine
SPEED = 0.5


def _pod(name: str, cpu: str, seconds: float, **spec) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default",
                         "annotations": {"sim.nanokube.io/run-seconds": str(seconds)}},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0, "containers": [
                {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}], **spec}}


def _gang(name: str, size: int, cpu: str, seconds: float, **spec) -> dict:
    pod = _pod("x", cpu, seconds, **spec)
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "default"},
            "spec": {"parallelism": size, "completions": size, "scheduling": {"schedulingPolicy": {"gang": {}}},
                     "template": {"metadata": {"annotations": pod["metadata"]["annotations"]}, "spec": pod["spec"]}}}


def _trace() -> Trace:
    rng = random.Random(17)
    writes: list[tuple[float, dict]] = [(0, _pod(f"hog-{i}", "3", 6, **BIG)) for i in range(2)]
    for second in (0, 2, 8):
        writes += [(second, _pod(f"p{second:02d}-{i:02d}", rng.choice(["500m", "1", "1500m"]), rng.choice([0.5, 1])))
                   for i in range(15)]
    web = _pod("x", "250m", 1000)
    web["metadata"] = {"labels": {"app": "web"}, "annotations": {"metrics.sim.nanokube.io/qps": "50"}}
    writes.append((1, {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
                       "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                                "template": {"metadata": web["metadata"], "spec": {**web["spec"], "restartPolicy": "Always"}}}}))
    writes.append((1, _gang("small-gang", 3, "1", 1)))
    writes.append((4, _gang("big-gang", 4, "3", 1, **BIG)))  # needs all four big nodes: waits for the hogs to end at 6
    writes.append((7, {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                        "metadata": {"name": "web", "namespace": "default"},
                        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                                 "minReplicas": 1, "maxReplicas": 4, "metrics": [{"type": "Pods", "pods": {
                                     "metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "10"}}}]}}))
    return Trace([TraceEvent(float(t), i, "create", o) for i, (t, o) in enumerate(sorted(writes, key=lambda w: w[0]))])


async def _loop_stalls(out: list) -> None:
    """Each turn's lateness, as (when, seconds late) in out: a loaded machine
    delays everything in the real-time run by as long as the process waits
    for the CPU, in one stall or in many turns each late by a little (a
    burst's work, done at a fraction of a core), which is no disagreement of
    the virtual clock's."""
    while True:
        t = time.monotonic()
        await asyncio.sleep(0.02)
        out.append((t, time.monotonic() - t - 0.02))


def _backlog(late: list, window: float) -> float:
    """The most lateness summed within `window` seconds: how far a chain of
    work (a pod's create, bind, start and end) can fall behind."""
    most = total = 0.0
    first = 0
    for t, d in late:
        total += d
        while late[first][0] <= t - window:
            total -= late[first][1]
            first += 1
        most = max(most, total)
    return most


def _placements(result) -> dict:
    """pod -> its node's pool; a gang (its Job's identical replicas) -> the pools of its nodes and how
    many distinct nodes it got. Nodes of one pool are interchangeable: the scheduler breaks score ties
    at random, and in real time a retried cycle moves the seeded draws of every later tie, so which of
    several equal nodes a pod gets is not a decision the two runs must share; the pool is (nodeSelector,
    taints, what fits)."""
    pool = lambda node: node.rsplit("-", 1)[0]  # noqa: E731
    out: dict = {}
    gangs: dict = {}
    for pod, node in result.placements.items():
        job = next((g for g in ("small-gang", "big-gang") if pod.startswith(f"default/{g}-")), None)
        if job:
            gangs.setdefault(job, []).append(node)
        else:
            out[pod] = pool(node)
    for job, nodes in gangs.items():
        out[job] = (sorted(map(pool, nodes)), len(set(nodes)))
    return out


#: the virtual-time run and its repeat, in a process of their own: what the test reads of each
VIRTUAL_TWICE = """
import asyncio, json, sys
sys.path.insert(0, sys.argv[1])
from nanokube.sim.driver import run
from tests.sim.test_driver import CLUSTER, UNTIL, _trace

async def twice():
    return [await run(name, CLUSTER, _trace(), None, seed=5, until=UNTIL, progress=False) for name in ("virtual", "again")]
print(json.dumps([{"placement_hash": r.placement_hash, "placements": r.placements, "metrics": r.metrics,
                   "virtual_s": r.virtual_s} for r in asyncio.run(twice())]))
"""


@pytest.mark.timeout(300)
async def test_virtual_time_agrees_with_real_time():
    # the real-time run mostly sleeps: the virtual runs go on beside it, in another process (their
    # share of the CPU is the loaded machine's own, which the lateness watch and the tolerance below
    # allow for); not in a thread: the API server's compiled schemas are cached per process, not per thread
    virtual_twice = await asyncio.create_subprocess_exec(
        sys.executable, "-c", VIRTUAL_TWICE, str(Path(__file__).resolve().parents[2]), stdout=asyncio.subprocess.PIPE)
    try:
        stalls: list = []
        watch = asyncio.create_task(_loop_stalls(stalls))
        real = await run("real", CLUSTER, _trace(), None, seed=5, until=UNTIL, speed=SPEED, progress=False)
        watch.cancel()
        backlog = _backlog(stalls, (1 + TICK) / SPEED)
        out, _ = await virtual_twice.communicate()
    finally:
        if virtual_twice.returncode is None:
            virtual_twice.kill()
            await virtual_twice.wait()
    assert virtual_twice.returncode == 0
    virtual, again = (SimpleNamespace(**r) for r in json.loads(out))
    m = virtual.metrics
    assert virtual.virtual_s == UNTIL and again.placement_hash == virtual.placement_hash
    # what the trace is meant to exercise happened
    web = [k for k in virtual.placements if k.startswith("default/web-")]
    assert len(web) == 4, f"the HPA scaled web from 1 to its maximum, 4 (50 qps at 10 per pod): {web}"
    small, big = (sorted(k for k in virtual.placements if k.startswith(f"default/{g}-")) for g in ("small-gang", "big-gang"))
    assert len(small) == 3 and len(big) == 4
    assert len({virtual.placements[k] for k in big}) == 4
    waits = {g.split("/")[1].split("-gang-")[0]: w for g, w in m["gang_wait_s"].items()}  # the Jobs' PodGroups
    assert waits["small"] < TICK and 2 <= waits["big"] <= 2 + TICK, m["gang_wait_s"]
    ended = {pod for pod, t in m["timeline"].items() if t[3] is not None}
    assert ended == set(m["timeline"]) - set(web), "every pod but web's ran to completion before the end"

    assert real.wall_s >= UNTIL / SPEED
    lag = max(r - v for pod, t in m["timeline"].items() for v, r in zip(t, real.metrics["timeline"][pod])
              if v is not None and r is not None)
    assert _placements(real) == _placements(virtual), \
        f"the real-time run lagged by up to {lag:.2f} s (loop behind by up to {backlog:.2f} s)"
    # the scheduler's tick, plus how far the process fell behind, in the trace's seconds, within a
    # burst's life (created at once, each pod ended a second later, a tick after at the most)
    tolerance = TICK + backlog * SPEED
    late = {}
    for pod, (created, bound, started, ended) in m["timeline"].items():
        other = real.metrics["timeline"][pod]
        for what, v, r in (("created", created, other[0]), ("started", started, other[2]), ("ended", ended, other[3])):
            if (v is None) != (r is None) or (v is not None and abs(r - v) > tolerance):
                late[f"{pod} {what}"] = (v, r)
    assert not late, f"{len(late)} times off by more than {tolerance:.2f} s: {late}"
