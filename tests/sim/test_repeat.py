"""A replay repeats exactly: capacity planners compare policies by replaying one trace, so the same
inputs must give the same placements, and the same results, in every process, whatever its string
hash seed (set order) or memory layout (the order of sets of objects). The trace is made for ties:
openb-style GPU-share tasks on a few nodes, created and ending on whole seconds, so pods wait, are
retried at the instants others end, and meet their claims' updates at one virtual instant, where
only the components' order of work (which watcher hears an event first) decides who gets the GPUs."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

FGD = str(Path(__file__).resolve().parents[2] / "examples" / "simulate" / "fgd.yaml")
LEAST_ALLOCATED = str(Path(__file__).resolve().parents[2] / "examples" / "simulate" / "least-allocated.yaml")
#: fields of results.json that measure the machine, not the run
WALL_CLOCK = ("wall_s", "cpu_s", "events_per_s")

#: in a subprocess: the runs the CLI makes of an openb pod list with --keep-run-times (its controllers,
#: drain, the workload FGD measures against), through the driver, so the interpreter keeps the hash
#: seed it was started with (the CLI re-executes itself with 0); prints results.json's runs as the CLI
#: writes them, less the fields that measure the machine
PROGRAM = """
import asyncio, json, sys
from nanokube.cli_simulate import _fill_workload, _names
from nanokube.scheduler.config import load
from nanokube.sim import openb
from nanokube.sim.driver import run
from nanokube.sim.report import results_doc

nodes, pods, *configs = sys.argv[1:]
cluster, trace = openb.load_nodes(nodes), openb.load_pods(pods, run_times=True)
results = []
for name, path in zip(_names(configs), configs):
    cfg = load(path)
    _fill_workload(cfg, trace)
    results.append(asyncio.run(run(name, cluster, trace, cfg, seed=1, controllers="resourceclaim", progress=False,
                                   drain=True)))
runs = results_doc(results, {})["runs"]
for r in runs:
    for k in %r:
        r.pop(k)
print(json.dumps(runs, sort_keys=True))
""" % (WALL_CLOCK,)


def _openb(tmp_path: Path) -> tuple[Path, Path]:
    """Four GPU nodes and 90 tasks of whole and shared GPUs, arriving in bursts on whole seconds."""
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\n" + "".join(
        f"openb-node-{i:04d},64000,262144,{gpus},{model}\n"
        for i, (gpus, model) in enumerate([(8, "V100M32"), (4, "V100M16"), (2, "T4"), (8, "T4")])))
    rng = random.Random(7)
    rows = []
    for i in range(90):
        created = 10 * (i // 6)
        ran = rng.choice((20, 30, 40, 60, 90))
        whole = rng.random() < 0.4
        num_gpu, milli = (rng.choice((1, 2, 4, 8)), 1000) if whole else (1, rng.choice((250, 300, 500, 700)))
        spec = rng.choice(("", "", "T4", "V100M16|V100M32"))
        rows.append(f"openb-pod-{i:04d},{rng.choice((2000, 4000, 8000))},{rng.choice((4096, 16384))},{num_gpu},"
                    f"{milli},{spec},LS,Running,{created},{created + ran},{created}\n")
    pods = tmp_path / "pods.csv"
    pods.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
                    "deletion_time,scheduled_time\n" + "".join(rows))
    return nodes, pods


def _start(args: list[str], hash_seed: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    return subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)


def _finish(procs: list[subprocess.Popen]) -> list[str]:
    """Each one's stdout once it has ended; after a failure or a timeout those still running are killed (a
    replay left over from a timed-out run went on for 36 minutes, ten CPU-minutes, beside the next tests)."""
    try:
        outs = []
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err[-2000:]
            outs.append(out)
        return outs
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _results(path: Path) -> list[dict]:
    runs = json.loads(path.read_text())["runs"]
    for r in runs:
        for k in WALL_CLOCK:
            r.pop(k)
    return runs


def test_two_policies_compared_repeat_whatever_the_hash_seed(tmp_path):
    """The CLI (hash seed 0) and the same runs through the driver in an interpreter with hash seed 1:
    the same placements and the same results.json runs, for both policies."""
    nodes, pods = _openb(tmp_path)
    procs = [_start(["-c", PROGRAM, str(nodes), str(pods), FGD, LEAST_ALLOCATED], "1"),
             _start(["-m", "nanokube.cli", "simulate", "--cluster", str(nodes), "--trace", str(pods),
                     "--keep-run-times", "--seed", "1", "--scheduler-config", FGD,
                     "--scheduler-config", LEAST_ALLOCATED, "--quiet", "--out", str(tmp_path / "out")], "2")]
    driven, out = _finish(procs)
    driven = json.loads(driven)
    assert [r["name"] for r in driven] == ["fgd", "least-allocated"]
    # the trace makes its pods wait: retried at instants where others end, not all placed at once
    assert driven[0]["scheduled"] == 90
    assert max(driven[0]["scheduling_delay_s"]) > 0
    digests = [line.rsplit(" ", 1)[1] for line in out.splitlines() if " placements " in line]
    assert digests == [r["placement_hash"] for r in driven]
    assert _results(tmp_path / "out" / "results.json") == driven


async def test_objects_get_the_same_uids_and_the_names_made_of_them_in_every_run():
    """A Job's Workload and PodGroup are named after its uid: drawn from the seed, not the kernel."""
    from nanokube.node.cluster import parse_cluster
    from nanokube.sim.driver import run
    from nanokube.sim.trace import Trace, TraceEvent

    cluster = parse_cluster('pools:\n  - name: n\n    count: 2\n    capacity: {cpu: "4", memory: 16Gi}\n')
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "gang", "namespace": "default"},
           "spec": {"parallelism": 2, "completions": 2, "scheduling": {"schedulingPolicy": {"gang": {}}},
                    "template": {"metadata": {"annotations": {"sim.nanokube.io/run-seconds": "1"}}, "spec": {
                        "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}
    runs = [await run("r", cluster, Trace([TraceEvent(0.0, 0, "create", job)]), None, seed=3, until=5, progress=False)
            for _ in range(2)]
    groups = [list(r.metrics["gang_wait_s"]) for r in runs]
    assert len(groups[0]) == 1 and groups[0][0].startswith("default/gang-")
    assert groups[1] == groups[0]
    assert runs[1].placements == runs[0].placements and len(runs[0].placements) == 2


async def _service_picks(client) -> list[tuple[str, int]]:
    """The ClusterIP and node port three NodePort Services are given, none asked for."""
    services, picks = client.resource("", "v1", "services"), []
    for i in range(3):
        s = await services.create({"metadata": {"name": f"web-{i}", "namespace": "default"},
                                   "spec": {"type": "NodePort", "ports": [{"port": 80}]}})
        picks.append((s["spec"]["clusterIP"], s["spec"]["ports"][0]["nodePort"]))
    return picks


async def test_services_get_the_same_cluster_ips_and_node_ports_in_every_run_and_random_ones_in_up():
    """The allocators pick at random, as upstream's: a run draws the picks from its seed, a served
    cluster (`nanokube up`'s APIServer) from the kernel."""
    from nanokube.apiserver.app import APIServer
    from nanokube.apiserver.loopback import LocalClient
    from nanokube.clock import VirtualClock
    from nanokube.node.cluster import parse_cluster
    from nanokube.sim.stack import SimulatedControlPlane
    from nanokube.store.memory import MemoryStore

    cluster = parse_cluster('pools:\n  - name: n\n    count: 1\n    capacity: {cpu: "4", memory: 16Gi}\n')
    runs = []
    for seed in (3, 3, 4):
        plane = SimulatedControlPlane(cluster, VirtualClock(), seed=seed, controllers="resourceclaim")
        await plane.start()
        try:
            runs.append(await _service_picks(plane.client))
        finally:
            await plane.stop()
    assert runs[1] == runs[0] and runs[2] != runs[0]
    served = []
    for _ in range(2):
        server = APIServer(MemoryStore(), None, port=0)
        server.rest.admission.disable("ServiceAccount")
        await server.start()
        try:
            served.append(await _service_picks(LocalClient(server.rest)))
        finally:
            await server.stop()
    assert served[1] != served[0]  # three picks each from about a million addresses and 2,640 ports
