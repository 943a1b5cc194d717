"""Topology aware hints (KEP-2433): a Service annotated service.kubernetes.io/topology-mode: Auto
gets EndpointSlice hints in proportion to each zone's allocatable CPU of ready nodes, with
upstream's safeguards, events and node handling. Found by topo56: such a Service got none."""

import pytest

from nanokube.controllers.endpointslice import EndpointSliceController
from tests.controllers import eventually, make_stack
from tests.controllers.test_endpointslice import add_pod, service, slices_of, stop

ZONE = "topology.kubernetes.io/zone"
AUTO = {"service.kubernetes.io/topology-mode": "Auto"}
ENABLED = "Topology Aware Hints has been enabled, addressType: IPv4"


async def add_node(c, name, zone=None, cpu="4", ready=True, labels=None):
    nodes = c.resource("", "v1", "nodes")
    await nodes.create({"metadata": {"name": name, "labels": {**({ZONE: zone} if zone else {}), **(labels or {})}}})
    await set_node(c, name, cpu, ready)


async def set_node(c, name, cpu="4", ready=True):
    status = {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
              "allocatable": {"cpu": cpu or None, "memory": "8Gi", "pods": "110"}}
    await c.resource("", "v1", "nodes").patch(name, {"status": status}, subresource="status")


@pytest.fixture
async def stack():
    s = await make_stack()
    yield s
    await s.close()


async def start(c, per_slice=3):
    ctrl = EndpointSliceController(c, max_endpoints_per_slice=per_slice)
    await ctrl.start()
    return ctrl


async def auto_service(c, annotations=AUTO):
    svc = service()
    svc["metadata"]["annotations"] = dict(annotations)
    await c.resource("", "v1", "services").create(svc)


def hints(c, want):
    """Wait for the `web` slices' zone hints by address to be `want` (None: no hints)."""
    async def check():
        got = {ep["addresses"][0]: [z["name"] for z in (ep.get("hints") or {}).get("forZones") or []] or None
               for sl in await slices_of(c, "web") for ep in sl["endpoints"]}
        return got if got == want else None
    return eventually(check)


def events(c, *want):
    """Wait for the `web` Service's events to include `want` ((type, reason, message) each)."""
    async def check():
        items, _ = await c.resource("", "v1", "events").list("default")
        got = {(e["type"], e["reason"], e["message"]) for e in items if e["involvedObject"]["name"] == "web"
               and e["involvedObject"]["kind"] == "Service" and e["source"]["component"] == "endpoint-slice-controller"}
        return got if set(want) <= got else None
    return eventually(check)


async def test_hints_follow_each_zones_share_of_the_cpu(stack):
    """zone-a has 3/4 of the CPU: of four endpoints, two in each zone, it gets three, one of
    zone-b's given to it; a control-plane node's CPU counts for no zone."""
    c = stack.client
    await add_node(c, "a1", "zone-a", cpu="2")
    await add_node(c, "a2", "zone-a", cpu="1000m")
    await add_node(c, "b1", "zone-b", cpu="1")
    await add_node(c, "cp", "zone-b", cpu="8", labels={"node-role.kubernetes.io/control-plane": ""})
    ctrl = await start(c, per_slice=100)
    try:
        await auto_service(c)
        for name, ip, node in (("p1", "10.244.1.1", "a1"), ("p2", "10.244.1.2", "a2"),
                               ("p3", "10.244.2.1", "b1"), ("p4", "10.244.2.2", "b1")):
            await add_pod(c, name, ip, node=node)
        got = await hints(c, {"10.244.1.1": ["zone-a"], "10.244.1.2": ["zone-a"],
                              "10.244.2.1": ["zone-a"], "10.244.2.2": ["zone-b"]})
        assert got
        assert await events(c, ("Normal", "TopologyAwareHintsEnabled", ENABLED))
    finally:
        await stop(ctrl)


async def test_safeguards_remove_the_hints_and_say_why(stack):
    """Too few endpoints for the zones, a node turning not ready (nodes then in one zone only: the
    overloaded Service is synced again), a node without allocatable CPU, shares over the overload
    threshold, an endpoint without a zone: no hints, and a TopologyAwareHintsDisabled event each."""
    c = stack.client
    await add_node(c, "a1", "zone-a")
    await add_node(c, "b1", "zone-b")
    ctrl = await start(c)
    svcs = c.resource("", "v1", "services")

    async def resync(n):  # a change of the Service syncs it again
        await svcs.patch("web", {"metadata": {"labels": {"sync": str(n)}}}, namespace="default")
    try:
        await auto_service(c)
        await add_pod(c, "p1", "10.244.1.1", node="a1")
        assert await events(c, ("Warning", "TopologyAwareHintsDisabled",
                                "Insufficient number of endpoints (1 endpoints, 2 zones), addressType: IPv4"))
        await add_pod(c, "p2", "10.244.2.1", node="b1")
        assert await hints(c, {"10.244.1.1": ["zone-a"], "10.244.2.1": ["zone-b"]})
        await set_node(c, "b1", ready=False)
        assert await hints(c, {"10.244.1.1": None, "10.244.2.1": None})
        insufficient = "Insufficient Node information: allocatable CPU or zone not specified on one or more nodes"
        assert await events(c, ("Warning", "TopologyAwareHintsDisabled", f"{insufficient}, addressType: IPv4"))
        await set_node(c, "b1", cpu="")  # ready again, without allocatable CPU
        await resync(1)
        await eventually(lambda: _count(c, f"{insufficient}, addressType: IPv4", 2))
        await add_node(c, "c1", "zone-c")
        await set_node(c, "b1")
        await resync(2)  # three zones of a third each: four endpoints cannot give each two
        await add_pod(c, "p3", "10.244.1.2", node="a1")
        await add_pod(c, "p4", "10.244.2.2", node="b1")
        assert await events(c, ("Warning", "TopologyAwareHintsDisabled",
                                "Unable to allocate minimum required endpoints to each zone without exceeding "
                                "overload threshold (4 endpoints, 3 zones), addressType: IPv4"))
        await add_pod(c, "p5", "10.244.3.1", node="c1")
        await add_pod(c, "p6", "10.244.3.2", node="c1")
        assert await hints(c, {"10.244.1.1": ["zone-a"], "10.244.1.2": ["zone-a"], "10.244.2.1": ["zone-b"],
                               "10.244.2.2": ["zone-b"], "10.244.3.1": ["zone-c"], "10.244.3.2": ["zone-c"]})
        await add_node(c, "cp", labels={"node-role.kubernetes.io/master": ""})  # no zone, but excluded
        await add_pod(c, "p7", "10.244.9.1", node="cp")
        assert await hints(c, {"10.244.1.1": None, "10.244.1.2": None, "10.244.2.1": None, "10.244.2.2": None,
                               "10.244.3.1": None, "10.244.3.2": None, "10.244.9.1": None})
        assert await events(c, ("Warning", "TopologyAwareHintsDisabled",
                                "One or more endpoints do not have a zone specified, addressType: IPv4"))
    finally:
        await stop(ctrl)


async def _count(c, message, at_least):
    items, _ = await c.resource("", "v1", "events").list("default")
    return any(e["message"] == message and e.get("count", 1) >= at_least for e in items)


async def test_the_annotation_removed_or_deprecated_and_unchanged_slices(stack):
    """The deprecated topology-aware-hints: auto gives hints too; a new pod's slice is written while
    the full ones keep theirs (zone-a's share, 3/5, fits the new endpoint); removing the annotation
    removes them with a Disabled event."""
    c = stack.client
    await add_node(c, "a1", "zone-a", cpu="3")
    await add_node(c, "b1", "zone-b", cpu="2")
    ctrl = await start(c, per_slice=2)
    try:
        for name, ip, node in (("p1", "10.244.1.1", "a1"), ("p2", "10.244.1.2", "a1"),
                               ("p3", "10.244.2.1", "b1"), ("p4", "10.244.2.2", "b1")):
            await add_pod(c, name, ip, node=node)
        await auto_service(c, {"service.kubernetes.io/topology-aware-hints": "auto"})  # a first sync of all four
        want = {"10.244.1.1": ["zone-a"], "10.244.1.2": ["zone-a"], "10.244.2.1": ["zone-b"], "10.244.2.2": ["zone-b"]}
        assert await hints(c, want)
        before = {sl["metadata"]["name"]: sl["metadata"]["resourceVersion"] for sl in await slices_of(c, "web")}
        await add_pod(c, "p5", "10.244.1.3", node="a1")
        assert await hints(c, {**want, "10.244.1.3": ["zone-a"]})
        after = {sl["metadata"]["name"]: sl["metadata"]["resourceVersion"] for sl in await slices_of(c, "web")}
        assert {n: after.get(n) for n in before} == before  # the full slices were left alone
        await c.resource("", "v1", "services").patch(
            "web", {"metadata": {"annotations": {"service.kubernetes.io/topology-aware-hints": None}}},
            namespace="default")
        assert await hints(c, dict.fromkeys([*want, "10.244.1.3"]))
        assert await events(c, ("Warning", "TopologyAwareHintsDisabled",
                                "Topology Aware Hints has been disabled, addressType: IPv4"))
    finally:
        await stop(ctrl)


def _per_zone(got: dict) -> dict[str, int]:
    counts: dict[str, int] = {}
    for zones in got.values():
        for z in zones or ():
            counts[z] = counts.get(z, 0) + 1
    return counts


async def test_zones_over_their_share_give_to_zones_under_it_by_whole_endpoints(stack):
    """getGivingAndReceivingZones: endpoints move from the zone most over its desired share to
    the one most under it, one at a time, while both are at least half an endpoint off and one of
    them a whole one. zone-a has half the CPU and two of eight endpoints: zone-b and zone-c, one
    over each, give it one each. Which endpoint of a giving zone moves, and to which of several
    receiving zones, upstream leaves to Go's map order: only the counts are fixed."""
    c = stack.client
    await add_node(c, "a1", "zone-a", cpu="2")
    await add_node(c, "b1", "zone-b", cpu="1")
    await add_node(c, "c1", "zone-c", cpu="1")
    ctrl = await start(c, per_slice=100)
    try:
        await auto_service(c)
        pods = [("a1", "10.244.1.1"), ("a1", "10.244.1.2"), ("b1", "10.244.2.1"), ("b1", "10.244.2.2"),
                ("b1", "10.244.2.3"), ("c1", "10.244.3.1"), ("c1", "10.244.3.2"), ("c1", "10.244.3.3")]
        for i, (node, ip) in enumerate(pods):
            await add_pod(c, f"p{i}", ip, node=node)

        async def counts():
            got = {ep["addresses"][0]: [z["name"] for z in (ep.get("hints") or {}).get("forZones") or []]
                   for sl in await slices_of(c, "web") for ep in sl["endpoints"]}
            return got if len(got) == 8 and _per_zone(got) == {"zone-a": 4, "zone-b": 2, "zone-c": 2} else None
        got = await eventually(counts)
        assert got and all(got[ip] == ["zone-a"] for _, ip in pods[:2]), "zone-a's own stay"
    finally:
        await stop(ctrl)


async def test_a_zone_less_than_one_endpoint_off_both_ways_keeps_its_own(stack):
    """zone-a's share of ten endpoints is 6.6 and zone-b's 3.4: with six and four, zone-b is 0.6
    over and zone-a 0.6 under, neither a whole endpoint, so nothing moves (moving one would leave
    them 0.4 off the other way)."""
    c = stack.client
    await add_node(c, "a1", "zone-a", cpu="33")
    await add_node(c, "b1", "zone-b", cpu="17")
    ctrl = await start(c, per_slice=100)
    try:
        await auto_service(c)
        want = {}
        for i in range(10):
            ip = f"10.244.{1 if i < 6 else 2}.{i + 1}"
            await add_pod(c, f"p{i}", ip, node="a1" if i < 6 else "b1")
            want[ip] = ["zone-a" if i < 6 else "zone-b"]
        assert await hints(c, want)
    finally:
        await stop(ctrl)
