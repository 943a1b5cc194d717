"""Smoke test of the scheduler benchmark's process mode: `nanokube up` serving the API alone,
`nanokube scheduler` in its own process, the workload over HTTPS, at toy sizes.

Asserts what the mode reports and what it checks: every measured pod bound (the run waits for
each), none of the pods that fit nowhere bound and each reported unschedulable with one
FailedScheduling Event (only the separate scheduler process can have written them: `up` runs
none), its attempts read from that process's /metrics. Timings are never compared against
thresholds.
"""

from __future__ import annotations

import math

import pytest

from benchmarks import scheduler, scheduler_process
from benchmarks.__main__ import main

STUCK = ("stuck pods reported unschedulable", "FailedScheduling Events of the stuck pods")


@pytest.mark.timeout(240)
def test_the_process_mode_binds_every_measured_pod_and_reports_every_stuck_one():
    workloads = [w for w in scheduler.default_workloads(0.02)
                 if w.name in ("SchedulingBasic", "SchedulingWhileUnschedulable")]
    messages: list[str] = []
    results = scheduler_process.run(workloads, messages.append, timeout_s=120)
    assert list(results) == ["SchedulingBasic", "SchedulingWhileUnschedulable"]
    for w in workloads:
        row = results[w.name]
        assert list(row) == [*scheduler.METRICS, "placement hash", *scheduler_process.PROCESS_METRICS]
        assert row["end-to-end (pods/s)"] > 0
        server, sched, client = (row[m] for m in scheduler_process.PROCESS_METRICS[:3])
        assert sched > 0 and server > 0, "the attempts and the writes ran in the other processes"
        assert row["CPU-seconds of the measured phase"] == pytest.approx(server + sched + client)
    basic, stuck = results["SchedulingBasic"], results["SchedulingWhileUnschedulable"]
    assert [basic[m] for m in STUCK] == [0, 0]
    n = workloads[1].pods
    assert [stuck[m] for m in STUCK] == [n, n], "each stuck pod stays pending, reported once"
    unschedulable = "scheduler time per unschedulable attempt (ms)"
    assert math.isnan(basic[unschedulable]) and stuck[unschedulable] > 0
    assert sum(m.startswith(f"{w.name}: nanokube pid ") and ", nanokube scheduler pid " in m
               for w in workloads for m in messages) == 2


def test_misplaced_pods_are_named():
    basic, affinity = (next(w for w in scheduler.default_workloads() if w.kind == kind) for kind in ("basic", "affinity"))
    assert scheduler.misplaced(basic, {"pod-0": "node-1", "init-0": "node-1"}) == []
    assert scheduler.misplaced(basic, {"stuck-0": "node-3"}) == ["stuck-0 on node-3"]
    assert scheduler.misplaced(basic, {f"pod-{i}": "node-0" for i in range(41)}) == ["node-0 holds 41 pods"]
    assert scheduler.misplaced(affinity, {"pod-0": "node-2", "pod-1": "node-5"}) == ["pod-1 on node-5"]
    dra = next(w for w in scheduler.default_workloads() if w.kind == "dra-nvidia-mig")
    assert scheduler.misplaced(dra, {f"pod-{i}": "node-0" for i in range(8)}) == ["node-0 holds 8 pods"]


@pytest.mark.timeout(120)
def test_cli_runs_the_process_mode(capsys):
    assert main(["--scheduler", "SchedulingBasic", "--scale", "0.01", "--scheduler-mode", "process"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "sched CPU-s" in out[0] and out[2].startswith("SchedulingBasic")
    with pytest.raises(SystemExit):
        main(["--scheduler", "SchedulingBasic", "--scheduler-mode", "elsewhere"])
