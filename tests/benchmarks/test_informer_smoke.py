"""Smoke test of the in-process informer benchmark at a toy size; no timing thresholds."""

from benchmarks import informer


def test_informer_benchmark_syncs_both_ways_and_reports_the_watched_patches():
    r = informer.run(pods=100, reps=1, watchers=2)
    assert r["pods"] == 100 and r["watchers"] == 2
    assert r["streamed_sync_ms"] > 0 and r["list_sync_ms"] > 0
    assert r["patch_us"] > 0 and r["watched_patch_us"] > 0
    table = informer.format_table(r)
    assert "sync by streaming list" in table and "per event per informer" in table
