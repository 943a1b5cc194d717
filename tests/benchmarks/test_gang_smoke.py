"""Smoke test of the gang benchmark at toy sizes: every workload reports
every metric, preemption evicts only whole groups, the table and the CLI
flag work; timings are never compared against thresholds."""

from __future__ import annotations

import math

import pytest

from benchmarks import gang
from benchmarks.__main__ import main


def test_default_and_upstream_shapes():
    by = {w.name: w for w in gang.upstream_workloads()}
    g = by["GangScheduling"]
    assert (g.nodes, g.gangs, g.gang_size, g.pods) == (5000, 1000, 3, 3000)
    assert by["SingleGang1024"].pods == 1024 and by["WorkloadPreemption"].nodes == 100
    assert [w.name for w in gang.default_workloads()] == list(by)
    pre = next(w for w in gang.default_workloads() if w.kind == "preemption")
    assert pre.fill_gangs * pre.gang_size == 4 * pre.nodes  # the low gangs fill every CPU


@pytest.mark.timeout(180)
def test_every_workload_reports_every_metric():
    workloads = gang.toy_workloads()
    messages: list[str] = []
    results = gang.run(workloads, messages.append, timeout_s=90)
    assert list(results) == [w.name for w in workloads]
    for name, row in results.items():
        assert list(row) == list(gang.METRICS), name
        assert all(math.isfinite(v) and v >= 0 for v in row.values()), (name, row)
        assert row["end-to-end (pods/s)"] > 0 and row["time to all bound (s)"] > 0, (name, row)
    assert any("whole low-priority gang(s) evicted" in m for m in messages)
    reference = {"throughput avg of 1-s samples (pods/s)": 1.0,
                 "end-to-end (pods/s)": 2 * results["GangScheduling"]["end-to-end (pods/s)"]}
    table = gang.format_table(workloads, results, reference).splitlines()
    assert len(table) == 3 + len(workloads)
    assert table[2].startswith("GangScheduling") and table[2].rstrip().endswith("50%")
    assert table[-1].startswith("SchedulingBasic (reference)")


def test_cli_rejects_unknown_names():
    with pytest.raises(SystemExit):
        main(["--gang", "NoSuchWorkload"])
