"""Smoke test of the node agent benchmark at toy size with a short renew
interval: every metric is reported and consistent; timings are never
compared against thresholds."""

from __future__ import annotations

import math

import pytest

from benchmarks import nodes
from benchmarks.__main__ import main
from nanokube.node.cluster import load_cluster


def test_the_example_cluster_scales_to_any_size():
    for n in (1, 7, 1000):
        cluster = nodes.scaled_cluster(n)
        assert len(cluster.nodes()) == n
    # (5000 nodes' specs are a CPU-second to build: their pools are the example file's, and count 5000)
    large = load_cluster("examples/clusters/large-5000.yaml")
    assert nodes.scaled_cluster(5000) == large and sum(p.count for p in large.pools) == 5000


@pytest.mark.timeout(120)
def test_every_metric_is_reported_and_heartbeats_are_counted():
    messages: list[str] = []
    # (a 2 s window: one stall of the loop under a loaded CI machine must not take the rate past its bound)
    results = nodes.run([12], steady_s=2.0, progress=messages.append, renew_interval=0.25)
    row = results[12]
    assert list(row) == list(nodes.METRICS)
    assert all(math.isfinite(v) for v in row.values()), row
    assert row["start-up (s)"] > 0
    assert row["nodes Ready after start-up (%)"] == row["nodes Ready at end (%)"] == 100.0
    # 12 nodes renewing every 0.25 s: about 48 renewals a second, all counted as heartbeats
    assert 20 < row["lease renewals/s"] <= 60
    assert row["heartbeat requests/s"] == row["lease renewals/s"] + row["node status posts/s"]
    assert row["heartbeat lateness p99 (ms)"] >= row["heartbeat lateness p50 (ms)"]
    assert any("12 nodes: registered with" in m for m in messages)
    table = nodes.format_table(results).splitlines()
    assert table[0].split("|")[1].strip() == "12 nodes" and len(table) == 2 + len(nodes.METRICS)


@pytest.mark.timeout(120)
def test_cli_runs_the_node_benchmark(capsys, monkeypatch):
    monkeypatch.setattr(nodes, "RENEW_INTERVAL", 0.25)
    assert main(["--nodes", "5", "--steady", "0.5"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("metric") and "5 nodes" in out[0]
    assert out[2].startswith("start-up (s)")
