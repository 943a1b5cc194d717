"""Topology-aware routing (KEP-4444 trafficDistribution, KEP-3015 PreferSameZone/PreferSameNode): the
proxier sends cluster traffic from its node to the endpoints hinted for the node or its zone, and
falls back to all of them when the hints do not cover every ready endpoint or none matches. Found
by fuzz54: kube-proxy ignored hints."""

from nanokube.controllers.endpointslice import EndpointSliceController
from nanokube.proxy.nftables.layout import TABLE
from nanokube.proxy.nftables.nft import NftError
from nanokube.proxy.proxier import Proxier, service_ports
from tests.controllers import eventually, make_stack
from tests.controllers.test_endpointslice import add_pod, stop
from tests.controllers.test_endpointslice import service as es_service
from tests.controllers.test_topologycache import add_node, set_node
from tests.proxy.test_proxier import endpoint_slice, service

ZONE = "topology.kubernetes.io/zone"
VIP = "10.96.0.54"


def hinted(hints: dict[str, dict]) -> dict:
    """The `web` slice over `hints`' addresses, each with its hints (None: none)."""
    sl = endpoint_slice(list(hints))
    for ep in sl["endpoints"]:
        if hints[ep["addresses"][0]] is not None:
            ep["hints"] = hints[ep["addresses"][0]]
    return sl


def zones(*names):
    return {"forZones": [{"name": n} for n in names]}


def cluster_ips(svc, sl, node="node-1", zone="zone-a"):
    (sp,) = service_ports(svc, [sl], node, zone=zone)
    return [e.ip for e in sp.cluster_endpoints]


def test_zone_and_node_hints_pick_the_endpoints_and_fall_back_to_all():
    svc = service()
    sl = hinted({"10.244.1.1": zones("zone-a"), "10.244.1.2": zones("zone-b"), "10.244.1.3": zones("zone-a")})
    assert cluster_ips(svc, sl) == ["10.244.1.1", "10.244.1.3"]
    assert cluster_ips(svc, sl, zone="zone-c") == ["10.244.1.1", "10.244.1.2", "10.244.1.3"]  # none for the zone
    assert cluster_ips(svc, sl, zone="") == ["10.244.1.1", "10.244.1.2", "10.244.1.3"]  # node without a zone label
    sl["endpoints"][2]["conditions"] = {"ready": False}
    sl["endpoints"][2].pop("hints")  # a not-ready endpoint's missing hint does not matter
    assert cluster_ips(svc, sl) == ["10.244.1.1"]
    sl["endpoints"][2]["conditions"] = {"ready": True}  # a ready one without: all of them
    assert cluster_ips(svc, sl) == ["10.244.1.1", "10.244.1.2", "10.244.1.3"]
    node = {"10.244.1.1": {**zones("zone-a"), "forNodes": [{"name": "node-0"}]},
            "10.244.1.2": {**zones("zone-b"), "forNodes": [{"name": "node-1"}]},
            "10.244.1.3": {**zones("zone-a"), "forNodes": [{"name": "node-2"}]}}
    assert cluster_ips(svc, hinted(node)) == ["10.244.1.2"]  # PreferSameNode: this node's, though in zone-b
    assert cluster_ips(svc, hinted(node), node="node-9") == ["10.244.1.1", "10.244.1.3"]  # none here: the zone's


def test_local_traffic_policies_ignore_hints():
    svc = service()
    svc["spec"] |= {"type": "NodePort", "internalTrafficPolicy": "Local", "externalTrafficPolicy": "Local"}
    svc["spec"]["ports"][0]["nodePort"] = 30080
    sl = hinted({"10.244.1.1": zones("zone-b"), "10.244.1.2": zones("zone-a")})
    sl["endpoints"][0]["nodeName"] = "node-1"
    (sp,) = service_ports(svc, [sl], "node-1", zone="zone-a")
    assert [e.ip for e in sp.local_endpoints] == ["10.244.1.1"]


def kernel_endpoints(nft, ip="10.96.0.20"):
    """The endpoint addresses the kernel balances `ip`:80 over (`service-endpoints-tcp`), or None."""
    try:
        objs = nft.list_table("ip", TABLE)
    except NftError:
        return None
    maps = {o["map"]["name"]: o["map"].get("elem", []) for o in objs if "map" in o}
    got = sorted(v["concat"][0] for k, v in maps.get("service-endpoints-tcp", []) if k["concat"][:2] == [ip, 80])
    return got or None


async def test_a_node_in_zone_a_programs_only_zone_a_endpoints(netns, nft):
    s = await make_stack()
    nodes = s.client.resource("", "v1", "nodes")
    slices = s.client.resource("discovery.k8s.io", "v1", "endpointslices")
    await nodes.create({"metadata": {"name": "node-1", "labels": {ZONE: "zone-a"}}})
    svcs = s.client.resource("", "v1", "services")
    await svcs.create(service(VIP))
    await slices.create(hinted({"10.244.1.1": zones("zone-a"), "10.244.2.1": zones("zone-b"),
                                "10.244.1.2": zones("zone-a")}))
    p = Proxier(s.client, "node-1", "192.168.0.1", netns=netns, min_sync_period=0.01)
    await p.start()

    def kernel(want):
        async def check():
            return kernel_endpoints(nft, VIP) == want
        return eventually(check)
    try:
        assert await kernel(["10.244.1.1", "10.244.1.2"])
        await nodes.patch("node-1", {"metadata": {"labels": {ZONE: "zone-b"}}})  # the node's zone re-reads hints
        assert await kernel(["10.244.2.1"])
        cur = await slices.get("web-abc", "default")
        unhinted = hinted({"10.244.1.1": zones("zone-a"), "10.244.2.1": zones("zone-b"), "10.244.1.2": None})
        await slices.update({**cur, "endpoints": unhinted["endpoints"]})
        assert await kernel(["10.244.1.1", "10.244.1.2", "10.244.2.1"])  # one lacks a hint: all of them
        await svcs.delete("web", "default")
        assert await kernel(None)
    finally:
        await p.stop()
        await s.close()


async def test_topology_mode_auto_programs_the_zones_share_of_the_endpoints(netns, nft):
    """topology-mode Auto end to end (topo56): zone-a has 3/4 of the CPU, so the EndpointSlice
    controller hints one of zone-b's two endpoints for zone-a too, and node a1's rules balance over
    those three. Once zone-b's node is not ready, nodes are ready in one zone only: the hints go,
    and the rules use all four."""
    s = await make_stack()
    c = s.client
    await add_node(c, "a1", "zone-a", cpu="3")
    await add_node(c, "b1", "zone-b", cpu="1")
    ctrl = EndpointSliceController(c)
    await ctrl.start()
    svc = es_service(cluster_ip=VIP)
    svc["metadata"]["annotations"] = {"service.kubernetes.io/topology-mode": "Auto"}
    await c.resource("", "v1", "services").create(svc)
    for name, ip, node in (("a-1", "10.244.1.1", "a1"), ("a-2", "10.244.1.2", "a1"),
                           ("b-1", "10.244.2.1", "b1"), ("b-2", "10.244.2.2", "b1")):
        await add_pod(c, name, ip, node=node)
    p = Proxier(c, "a1", "192.168.0.1", netns=netns, min_sync_period=0.01)
    await p.start()

    async def programmed():
        got = kernel_endpoints(nft, VIP) or []
        return got if len(got) == 3 and got[:2] == ["10.244.1.1", "10.244.1.2"] else None
    try:
        assert await eventually(programmed)
        await set_node(c, "b1", cpu="1", ready=False)

        async def all_four():
            return kernel_endpoints(nft, VIP) == ["10.244.1.1", "10.244.1.2", "10.244.2.1", "10.244.2.2"]
        assert await eventually(all_four)
    finally:
        await p.stop()
        await stop(ctrl)
        await s.close()
