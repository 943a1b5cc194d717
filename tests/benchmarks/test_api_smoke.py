"""Smoke test of the API benchmarks: the whole code path at toy sizes on the memory backend.

Asserts only that every metric is reported with a sane value; timings are
never compared against thresholds.
"""

from __future__ import annotations

import math
import os

import pytest

from benchmarks.api import (
    METRICS,
    BenchConfig,
    format_table,
    percentile,
    run_benchmarks,
)

TINY = BenchConfig(pods=50, concurrency=8, gets=40, lists=3, page_limit=20, watchers=5, watch_writes=10,
                   watch_timeout_s=60)


def test_percentile_interpolates_between_ranks():
    assert percentile([4.0, 1.0, 3.0, 2.0], 0.5) == 2.5
    assert percentile([1.0, 2.0, 3.0], 0.99) == pytest.approx(2.98)
    assert percentile([7.0], 0.99) == 7.0


@pytest.mark.timeout(180)
def test_memory_backend_reports_every_metric():
    messages: list[str] = []
    results = run_benchmarks(["memory"], TINY, messages.append)
    row = dict(results["memory"])
    assert list(row) == list(METRICS)
    assert all(math.isfinite(v) for v in row.values())
    share_before_ack = row.pop("watch events read before write ack (%)")
    assert 0 <= share_before_ack <= 100
    per_pod = row.pop("memory per pod (KiB/pod)")
    assert per_pod >= 0
    for name in [m for m in METRICS if " CPU per " in m]:  # counted in 10 ms ticks: a toy phase may take none
        assert row.pop(name) >= 0
    assert all(v > 0 for v in row.values()), row
    for name in ("pod create", "GET pod", "LIST all pods", "LIST paginated walk", "watch delivery"):
        assert row[f"{name} p99 (ms)"] >= row[f"{name} p50 (ms)"]
    pid = next(int(m.split("pid ")[1].split()[0]) for m in messages if "nanokube pid" in m)
    assert not os.path.exists(f"/proc/{pid}"), "the nanokube process outlived the benchmark"
    table = format_table(results)
    assert all(metric in table for metric in METRICS)
    assert table.splitlines()[0].split("|")[1].strip() == "memory"
