"""Smoke test of the pending-pods benchmark: both servers, every phase, at toy sizes.

Asserts that every metric is reported and that the scheduler really reported on every
pending pod (the run waits for it); timings are never compared against thresholds.
"""

from __future__ import annotations

import math

import pytest

from benchmarks.pending import METRICS, MODES, PendingConfig, format_table, run


@pytest.mark.timeout(240)
def test_both_modes_report_every_metric():
    cfg = PendingConfig(nodes=20, bound_pods=30, pending_pods=40, concurrency=8, settle_s=0.2)  # (30 pods settle at once)
    messages: list[str] = []
    results = run(cfg, messages.append)
    assert list(results) == list(MODES)
    for mode in MODES:
        assert list(results[mode]) == list(METRICS)
        assert all(math.isfinite(v) and v >= 0 for v in results[mode].values())
        assert results[mode]["pending pod creates (pods/s)"] > 0
        during, until_idle = (results[mode][m] for m in METRICS[3:5])
        assert 0 <= during <= until_idle
    assert any("scheduler: nanokube pid" in m for m in messages)
    table = format_table(cfg, results)
    assert "creates with the scheduler:" in table and "% of the rate without it" in table
    assert "without / with the scheduler:" in table
