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

#: in a subprocess: the run the CLI makes of an openb pod list with --keep-run-times (its controllers,
#: drain, the workload FGD measures against), through the driver, so the interpreter keeps the hash
#: seed it was started with (the CLI re-executes itself with 0); prints the placements and the summary
PROGRAM = """
import asyncio, json, sys
from nanokube.cli_simulate import _fill_workload
from nanokube.scheduler.config import load
from nanokube.sim import openb
from nanokube.sim.driver import run

nodes, pods, config = sys.argv[1:]
cluster, trace, cfg = openb.load_nodes(nodes), openb.load_pods(pods, run_times=True), load(config)
_fill_workload(cfg, trace)
r = asyncio.run(run("fgd", cluster, trace, cfg, seed=1, controllers="resourceclaim", progress=False, drain=True))
print(json.dumps({"hash": r.placement_hash, "placements": r.placements, "metrics": r.metrics,
                  "virtual_s": r.virtual_s, "events": r.events}, sort_keys=True))
"""


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


def _finish(proc: subprocess.Popen) -> str:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-2000:]
    return out


def test_a_replay_places_alike_whatever_the_hash_seed(tmp_path):
    nodes, pods = _openb(tmp_path)
    procs = [_start(["-c", PROGRAM, str(nodes), str(pods), FGD], seed) for seed in ("1", "2")]
    first, second = (json.loads(_finish(p)) for p in procs)
    # the trace makes its pods wait: retried at instants where others end, not all placed at once
    assert first["metrics"]["scheduled"] == 90
    assert max(first["metrics"]["scheduling_delay_s"]) > 0
    assert second["hash"] == first["hash"]
    assert second == first


def _results(path: Path) -> list[dict]:
    runs = json.loads(path.read_text())["runs"]
    for r in runs:
        for k in WALL_CLOCK:
            r.pop(k)
    return runs


def test_two_policies_compared_repeat(tmp_path):
    nodes, pods = _openb(tmp_path)
    procs = [_start(["-m", "nanokube.cli", "simulate", "--cluster", str(nodes), "--trace", str(pods),
                     "--keep-run-times", "--seed", "1", "--scheduler-config", FGD,
                     "--scheduler-config", LEAST_ALLOCATED, "--quiet", "--out", str(tmp_path / f"out{seed}")], seed)
             for seed in ("1", "2")]
    outs = [_finish(p) for p in procs]
    digests = [[line.rsplit(" ", 1)[1] for line in out.splitlines() if " placements " in line] for out in outs]
    assert len(digests[0]) == 2 and digests[1] == digests[0]
    first, second = _results(tmp_path / "out1" / "results.json"), _results(tmp_path / "out2" / "results.json")
    assert [r["name"] for r in first] == ["fgd", "least-allocated"]
    assert second == first



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
