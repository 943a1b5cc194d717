"""Smoke test of the scheduler benchmark: every workload at toy sizes, every
metric present and positive; timings are never compared against thresholds."""

from __future__ import annotations

import asyncio
import math

import pytest

from benchmarks import scheduler
from benchmarks.__main__ import main


def test_default_sizes_scale_and_keep_whole_gangs_and_enough_devices():
    for w in scheduler.default_workloads(0.013):
        assert w.nodes >= 1 and w.pods >= 1
        if w.kind == "gang":
            assert w.pods % scheduler.GANG_SIZE == 0
        if w.devices_per_node:
            assert w.nodes * w.devices_per_node >= w.init_pods + w.pods
    basic = next(w for w in scheduler.upstream_workloads() if w.name == "SchedulingBasic")
    assert (basic.nodes, basic.init_pods, basic.pods, basic.floor) == (5000, 1000, 10000, 680)


@pytest.mark.timeout(240)
def test_every_workload_reports_every_metric():
    workloads = scheduler.default_workloads(0.02)
    messages: list[str] = []
    results = scheduler.run(workloads, messages.append, timeout_s=120)
    assert list(results) == [w.name for w in workloads]
    unschedulable_cost = "scheduler time per unschedulable attempt (ms)"
    for name, row in results.items():
        assert list(row) == [*scheduler.METRICS, "placement hash"], name
        assert len(row["placement hash"]) == 16 and int(row["placement hash"], 16) >= 0, name
        measured = {k: v for k, v in row.items() if k not in (unschedulable_cost, "placement hash")}
        assert all(math.isfinite(v) and v > 0 for v in measured.values()), (name, row)
        # only the workloads with pods that fit nowhere have unschedulable attempts to time
        assert math.isfinite(row[unschedulable_cost]) == (name in ("SchedulingWhileUnschedulable", "Unschedulable")), \
            (name, row)
        assert row["latency p99 (ms)"] >= row["latency p50 (ms)"], name
    table = scheduler.format_table(workloads, results).splitlines()
    assert len(table) == 2 + len(workloads)
    cells = [c.strip() for c in table[2].split("|")]
    assert cells[0] == "SchedulingBasic" and cells[-2:] == ["680", results["SchedulingBasic"]["placement hash"]]
    assert any("measured pods" in m for m in messages)


@pytest.mark.timeout(120)
def test_cli_runs_a_named_workload(capsys):
    assert main(["--scheduler", "SchedulingBasic", "--scale", "0.01"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("workload") and out[2].startswith("SchedulingBasic")
    with pytest.raises(SystemExit):
        main(["--scheduler", "NoSuchWorkload"])


async def test_throughput_samples_as_upstreams_collector(monkeypatch):
    """The first tick that sees a measured pod bound only starts the clock; a tick with none new
    is folded into the next sample, recorded once per second it spans; other pods do not count."""
    clock = [0.0]
    tracker = scheduler._BindTracker()
    steps = iter([[], ["a", "x"], ["b", "c", "d", "e"], ["x2"], ["f", "g"]])

    async def tick(_seconds):
        step = next(steps, None)
        if step is None:
            raise asyncio.CancelledError
        clock[0] += 1.0
        tracker.order.extend(step)

    monkeypatch.setattr(scheduler.asyncio, "sleep", tick)
    monkeypatch.setattr(scheduler.time, "perf_counter", lambda: clock[0])
    samples: list[float] = []
    with pytest.raises(asyncio.CancelledError):
        await scheduler._sample(tracker, list("abcdefg"), samples)
    assert samples == [4.0, 1.0, 1.0]
