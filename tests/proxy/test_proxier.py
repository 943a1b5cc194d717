from nanokube.proxy.nftables.layout import TABLE, chain_base
from nanokube.proxy.nftables.nft import NftError
from nanokube.proxy.proxier import Proxier, service_ports
from tests.controllers import eventually, make_stack


def service(ip="10.96.0.20"):
    return {"metadata": {"name": "web", "namespace": "default"},
            "spec": {"clusterIP": ip, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}


def endpoint_slice(ips):
    return {"metadata": {"name": "web-abc", "namespace": "default",
                         "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4", "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
            "endpoints": [{"addresses": [ip], "conditions": {"ready": True}} for ip in ips]}


def test_service_ports_carry_affinity_traffic_policies_and_local_endpoints():
    svc = service()
    svc["spec"] |= {"type": "NodePort", "sessionAffinity": "ClientIP", "externalTrafficPolicy": "Local",
                    "internalTrafficPolicy": "Local"}
    svc["spec"]["ports"][0]["nodePort"] = 30080
    sl = endpoint_slice(["10.244.0.2", "10.244.1.2"])
    sl["endpoints"][0]["nodeName"] = "node-0"
    sl["endpoints"][1]["nodeName"] = "node-1"
    (sp,) = service_ports(svc, [sl], "node-1")
    assert sp.affinity_timeout == 10800 and sp.internal_local and sp.external_local and sp.node_port == 30080
    assert [(e.ip, e.port, e.local) for e in sp.endpoints] == [("10.244.0.2", 8080, False), ("10.244.1.2", 8080, True)]
    svc["spec"] |= {"type": "ClusterIP", "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 60}}}
    (sp,) = service_ports(svc, [sl], "node-1")
    assert sp.affinity_timeout == 60 and not sp.external_local, "externalTrafficPolicy applies to external types only"


def mod_of(nft, chain):
    try:
        objs = nft.list_table("ip", TABLE)
    except NftError:
        return None
    for o in objs:
        r = o.get("rule")
        if r and r["chain"] == chain and "vmap" in r["expr"][0]:
            return r["expr"][0]["vmap"]["key"]["numgen"]["mod"]
    return None


async def test_proxier_programs_services_and_syncs_changes_partially(netns, nft):
    s = await make_stack()
    svcs = s.client.resource("", "v1", "services")
    slices = s.client.resource("discovery.k8s.io", "v1", "endpointslices")
    await svcs.create(service())
    await slices.create(endpoint_slice(["10.244.1.1", "10.244.1.2"]))
    p = Proxier(s.client, "node-1", "192.168.0.1", netns=netns, min_sync_period=0.01)
    await p.start()
    try:
        chain = "service-" + chain_base("default/web/tcp/http")
        assert await eventually(lambda: _async(mod_of(nft, chain) == 2))
        assert await eventually(lambda: _async(p.syncs >= 1 and p.registry.get_sample_value(
            "kubeproxy_sync_full_proxy_rules_duration_seconds_count") >= 1))
        cur = await slices.get("web-abc", "default")
        await slices.update({**cur, **{k: v for k, v in endpoint_slice(
            ["10.244.1.1", "10.244.1.2", "10.244.1.3"]).items() if k != "metadata"}})
        assert await eventually(lambda: _async(mod_of(nft, chain) == 3))
        assert await eventually(lambda: _async(p.registry.get_sample_value(
            "kubeproxy_sync_partial_proxy_rules_duration_seconds_count") >= 1))
        assert not p.last_report.full
        assert p.registry.get_sample_value("kubeproxy_sync_proxy_rules_nftables_sync_failures_total") == 0
        await svcs.delete("web", "default")
        assert await eventually(lambda: _async(mod_of(nft, chain) is None))
    finally:
        await p.stop()
        await s.close()


async def _async(value):
    return value
