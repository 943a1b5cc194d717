from prometheus_client import CollectorRegistry, generate_latest

from nanokube.proxy.aggregate import NodeLabelledMetrics
from nanokube.proxy.proxier import ProxyMetrics


def test_proxiers_share_one_family_per_name_with_a_node_label():
    regs = {"node-a": CollectorRegistry(), "node-b": CollectorRegistry()}
    metrics = {n: ProxyMetrics(r) for n, r in regs.items()}
    metrics["node-a"].failures.inc(2)
    metrics["node-b"].sync.observe(0.01)
    text = generate_latest(NodeLabelledMetrics(regs)).decode()
    assert text.count("# TYPE kubeproxy_sync_proxy_rules_duration_seconds histogram") == 1
    assert 'kubeproxy_sync_proxy_rules_nftables_sync_failures_total{node="node-a"} 2.0' in text
    assert 'kubeproxy_sync_proxy_rules_nftables_sync_failures_total{node="node-b"} 0.0' in text
    assert 'kubeproxy_sync_proxy_rules_duration_seconds_count{node="node-b"} 1.0' in text
    assert 'kubeproxy_sync_proxy_rules_duration_seconds_bucket{le="0.005",node="node-a"} 0.0' in text
