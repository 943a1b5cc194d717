"""Smoke test of the pending-pods benchmark: every mode's server, every phase, at toy sizes.

Asserts that every metric is reported and that the scheduler really reported on every
pending pod (the run waits for it, checking the server's count of report writes, then a LIST): in the own-process
mode only the separate `nanokube scheduler` can have, `up` running none. The servers run two
API workers, so the CPU rows must count the worker's process too. Timings are never compared
against thresholds.
"""

from __future__ import annotations

import math

import pytest

from benchmarks.__main__ import main
from benchmarks.pending import CHECKS, METRICS, MODES, PROCESS_METRICS, PendingConfig, format_table, run

BUSIEST = "busiest server process's share of the server CPU during the creates (%)"


@pytest.mark.timeout(300)
def test_every_mode_reports_every_metric():
    cfg = PendingConfig(nodes=20, bound_pods=30, pending_pods=40, concurrency=8, settle_s=0.2,  # (30 pods settle at once)
                        modes=tuple(MODES), api_workers=2)
    messages: list[str] = []
    results = run(cfg, messages.append)
    assert list(results) == list(MODES.values())
    for mode, rows in results.items():
        separate = mode == MODES["own-process"]
        assert list(rows) == [m for m in METRICS if separate or m not in PROCESS_METRICS]
        assert all(math.isfinite(v) and v >= 0 for v in rows.values())
        assert rows["pending pod creates (pods/s)"] > 0
        during, until_idle = (rows[m] for m in METRICS[3:5])
        assert 0 <= during <= until_idle
        assert rows["pending pods reported PodScheduled=False"] == (0 if mode == MODES["none"] else cfg.pending_pods)
        # the scheduler modes checked the reports at least once (the check that found them all); `none` never
        assert (rows[CHECKS] == 0) == (mode == MODES["none"])
        assert rows["server processes"] == 2
        assert 50 <= rows[BUSIEST] <= 100
    # the worker serves some of the connections and takes every write into its watch cache: its CPU is counted
    # (> 0) in every mode; that all three come out under /proc's 10 ms tick is left to chance
    assert min(rows[BUSIEST] for rows in results.values()) < 100
    process = results[MODES["own-process"]]
    during, until_idle = (process[m] for m in PROCESS_METRICS[:2])
    assert 0 <= during <= until_idle and until_idle > 0, "the scheduler process did the attempts"
    assert process["scheduler process connections at the last create"] > 0
    assert any(m.startswith("scheduler: nanokube pid") and ", API workers " in m for m in messages)
    census = [m for m in messages if m.startswith("  connections at the last create, per server process: ")]
    assert len(census) == 3 and all(" benchmark" in m for m in census), census
    assert " scheduler" in census[2] and " scheduler" not in census[0] + census[1]
    assert any(m.startswith("scheduler (own process): nanokube pid") and ", nanokube scheduler pid " in m
               for m in messages)
    table = format_table(cfg, results)
    assert table.splitlines()[0].endswith(", 2 API server workers")
    assert "creates with the scheduler: " in table and "creates with the scheduler (own process): " in table
    assert "without / with the scheduler:" in table and "without / with the scheduler (own process):" in table
    in_process_rows = [line for line in table.splitlines() if line.startswith(PROCESS_METRICS[0])]
    assert [cell.strip() for cell in in_process_rows[0].split("|")[1:3]] == ["-", "-"]


def test_a_client_cpu_that_moved_between_columns_is_flagged():
    """The lead's full-size run of session 38's end (pend57): the same creates cost the client 68% more
    CPU in the in-process column than without a scheduler, so that column ran on a busier machine."""
    def column(rate: float, server: float, client: float) -> dict[str, float]:
        return {METRICS[0]: rate, METRICS[3]: server, METRICS[5]: client}

    results = {MODES["none"]: column(1496, 0.68, 0.19), MODES["in-process"]: column(918, 1.09, 0.32),
               MODES["own-process"]: column(1002, 0.94, 0.22)}
    lines = format_table(PendingConfig(), results).splitlines()
    flagged = [line for line in lines if "the load moved between the columns" in line]
    assert flagged == ["  the benchmark client's CPU per create with the scheduler is 168% of its own without it "
                       "(the same creates): the load moved between the columns, so these ratios did too"]
    assert lines.index(flagged[0]) == lines.index("server CPU per create during the creates, without / with the "
                                                  "scheduler: 62%") + 1


def test_pending_modes_are_checked(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--pending", "1,1,1", "--pending-modes", "none,elsewhere"])
    assert exc.value.code == 2
    assert "--pending-modes: unknown elsewhere; choose from none, in-process, own-process" in capsys.readouterr().err
