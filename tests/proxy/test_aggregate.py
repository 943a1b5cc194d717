from prometheus_client import CollectorRegistry

from nanokube.metrics.exposition import render
from nanokube.proxy.aggregate import NodeLabelledMetrics
from nanokube.proxy.proxier import ProxyMetrics


def test_proxiers_share_one_family_per_name_with_a_node_label():
    regs = {"node-a": CollectorRegistry(), "node-b": CollectorRegistry()}
    metrics = {n: ProxyMetrics(r) for n, r in regs.items()}
    metrics["node-a"].failures.labels("IPv4").inc(2)
    metrics["node-b"].sync.labels("IPv6").observe(0.01)
    text = render(NodeLabelledMetrics(regs)).decode()  # as the API server's /metrics serves them
    assert text.count("# TYPE kubeproxy_sync_proxy_rules_duration_seconds histogram") == 1
    # each proxier's series by ip_family; a family that never failed has none, as client_golang's vectors
    assert 'kubeproxy_sync_proxy_rules_nftables_sync_failures_total{ip_family="IPv4",node="node-a"} 2\n' in text
    assert 'nftables_sync_failures_total{ip_family="IPv4",node="node-b"}' not in text
    assert 'kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv6",node="node-b"} 1\n' in text
    assert 'kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv6",node="node-a"}' not in text
    # upstream's buckets, ExponentialBuckets(0.001, 2, 15)
    v6 = 'kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv6",node="node-b"'
    assert f'{v6},le="0.001"}} 0\n' in text and f'{v6},le="0.008"}} 0\n' in text
    assert f'{v6},le="0.016"}} 1\n' in text and f'{v6},le="16.384"}} 1\n' in text
