"""Smoke test of the pod certificate benchmark at a toy size; no timing thresholds."""

from benchmarks import pki


def test_pki_benchmark_issues_every_request_and_reports_each_run():
    r = pki.run(n=30, rate=50.0)
    assert set(r) == {"burst", "at_50_per_s", "signer_only", "p256_sign"}
    assert r["burst"]["requests"] == 30 and r["at_50_per_s"]["requests"] == 30
    assert r["burst"]["p50_ms"] <= r["burst"]["p99_ms"]
    assert all(run["issued_per_s"] > 0 for run in r.values())
    table = pki.format_table(r)
    assert "signer_only" in table and "% of the P-256 signing rate" in table
