"""Smoke test of the proxy benchmark at a toy size in a private netns; no timing thresholds."""

from __future__ import annotations

import subprocess

import pytest

from benchmarks import proxy
from tests.proxy.conftest import _skip_reason


def test_proxy_benchmark_reports_every_number_and_leaves_no_namespace():
    if reason := _skip_reason():
        pytest.skip(reason)
    before = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    r = proxy.run(services=10, endpoints=5, changes=3)
    assert r["services"] == 10 and r["cold_full_sync_s"] > 0
    assert 0 < r["one_change_lines"] < r["cold_lines"]
    assert r["one_change_p50_ms"] <= r["one_change_max_ms"] and 0 < r["one_change_nft_p50_ms"]
    assert 0 < r["cold_nft_s"] <= r["cold_full_sync_s"]
    table = proxy.format_table(r).splitlines()
    assert "1 change p50" in table[1] and table[2].split()[:3] == ["10", "x", "5"]
    after = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    assert {x for x in after.splitlines() if "nk-bench" in x} == {x for x in before.splitlines() if "nk-bench" in x}
