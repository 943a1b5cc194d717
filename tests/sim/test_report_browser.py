"""report.html opened in headless Chromium: every chart draws, no script error,
no network (Chart.js is inlined). Skipped where no Chromium is installed
(scripts/setup.sh installs Debian's `chromium`)."""

from __future__ import annotations

import pytest

from nanokube.sim.driver import RunResult
from nanokube.sim.report import write_report

from .chromium import BROWSER, open_report


def _run(name: str, shift: float) -> RunResult:
    t = [0.0, 3600.0, 7200.0, 86400.0]
    metrics = {
        "pods": 3, "scheduled": 3, "unscheduled": 0, "total_gpu_milli": 8000,
        "series": {"t": t, "gpu_alloc_ratio": [0, 0.25 + shift, 0.5, 0.4], "fragmentation_ratio": [0, 0.05, 0.1, 0.02],
                   "pending": [0, 2, 1, 0]},
        "by_arrival": {"arrived_ratio": [0.0, 0.01, 0.02], "gpu_alloc_ratio": [0.0, 0.01, 0.02 - shift],
                       "fragmentation_ratio": [0.0, 0.001, 0.002 + shift], "fragmentation_rate": [0.0, 0.1, 0.2]},
        "scheduling_delay_s": [0.0, 1.5, 300.0], "gang_wait_s": {"default/trio": 290.0 + shift},
        "unscheduled_groups": [], "evictions": [{"pod": "default/trainer", "reason": "DeletionByDeviceTaintManager",
                                                 "t": 100.0}],
    }
    return RunResult(name, {"default/a": "node-0"}, 1.0, 0.8, 86400.0, 10, metrics)


@pytest.mark.skipif(BROWSER is None, reason="no chromium on PATH")
def test_report_charts_render_in_headless_chromium(tmp_path):
    write_report(str(tmp_path), [_run("least-allocated", 0.0), _run("fgd", 0.01)], {"cluster": "c.yaml",
                                                                                     "trace": "t.jsonl", "seed": 1})
    page, stderr = open_report(str(tmp_path / "report.html"))
    assert page == {"charts": "8", "errors": ""}, page
    assert "Uncaught" not in stderr, stderr[-2000:]
