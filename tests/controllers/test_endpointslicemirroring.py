"""EndpointSlice mirroring of the Endpoints written for Services without a selector."""

import pytest

from nanokube.controllers.endpointslicemirroring import EndpointSliceMirroringController, desired_slices
from tests.controllers import eventually, make_stack

SLICE_LABEL = "kubernetes.io/service-name"


@pytest.fixture
async def env():
    s = await make_stack()
    ctl = EndpointSliceMirroringController(s.client)
    await ctl.start()
    yield s.client
    await ctl.stop()
    await s.close()


def _slices(client, name: str):
    async def get():
        items, _ = await client.resource("discovery.k8s.io", "v1", "endpointslices").list(
            "default", label_selector=f"{SLICE_LABEL}={name}")
        return items
    return get


async def _service(client, name: str, selector: dict | None = None) -> None:
    spec = {"ports": [{"name": "pg", "port": 5432}], **({"selector": selector} if selector else {})}
    await client.resource("", "v1", "services").create({"metadata": {"name": name, "namespace": "default"}, "spec": spec})


async def test_endpoints_of_a_selectorless_service_are_mirrored(env):
    await _service(env, "db")
    eps = env.resource("", "v1", "endpoints")
    ep = await eps.create({"metadata": {"name": "db", "namespace": "default", "labels": {"team": "data"},
                                        "annotations": {"note": "x", "kubectl.kubernetes.io/last-applied-configuration": "{}"}},
                           "subsets": [{"addresses": [{"ip": "192.0.2.11"}, {"ip": "192.0.2.10", "hostname": "a"}],
                                        "notReadyAddresses": [{"ip": "192.0.2.12"}, {"ip": "192.0.2.11"}],
                                        "ports": [{"name": "pg", "port": 5432}]},
                                       {"addresses": [{"ip": "2001:db8::1"}], "ports": [{"name": "pg", "port": 5432}]}]})

    async def both():
        items = await _slices(env, "db")()
        return items if len(items) == 2 else None

    by_type = {s["addressType"]: s for s in await eventually(both)}
    v4 = by_type["IPv4"]
    assert v4["metadata"]["generateName"] == "db-"
    assert v4["metadata"]["labels"] == {"team": "data", SLICE_LABEL: "db",
                                        "endpointslice.kubernetes.io/managed-by": "endpointslicemirroring-controller.k8s.io"}
    assert v4["metadata"]["annotations"] == {"note": "x"}
    assert v4["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Endpoints", "name": "db",
                                                  "uid": ep["metadata"]["uid"], "controller": True,
                                                  "blockOwnerDeletion": True}]
    assert v4["ports"] == [{"name": "pg", "port": 5432, "protocol": "TCP"}]
    assert v4["endpoints"] == [
        {"addresses": ["192.0.2.10"], "conditions": {"ready": True}, "hostname": "a"},
        {"addresses": ["192.0.2.11"], "conditions": {"ready": True}},
        {"addresses": ["192.0.2.12"], "conditions": {"ready": False}}]
    assert by_type["IPv6"]["endpoints"] == [{"addresses": ["2001:db8::1"], "conditions": {"ready": True}}]

    await eps.update({**(await eps.get("db", "default")), "subsets": [
        {"addresses": [{"ip": "192.0.2.20"}], "ports": [{"name": "pg", "port": 5432}]}]})

    async def moved():
        items = await _slices(env, "db")()
        return items if [s["endpoints"] for s in items] == [
            [{"addresses": ["192.0.2.20"], "conditions": {"ready": True}}]] else None

    assert (await eventually(moved))[0]["metadata"]["name"] == v4["metadata"]["name"]  # updated in place


async def test_a_selector_or_the_skip_mirror_label_means_no_mirror(env):
    await _service(env, "web", {"app": "web"})
    await _service(env, "skipped")
    eps = env.resource("", "v1", "endpoints")
    subsets = [{"addresses": [{"ip": "192.0.2.1"}], "ports": [{"port": 80}]}]
    await eps.create({"metadata": {"name": "web", "namespace": "default"}, "subsets": subsets})
    await eps.create({"metadata": {"name": "skipped", "namespace": "default",
                                   "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}}, "subsets": subsets})
    await _service(env, "later")
    await eps.create({"metadata": {"name": "later", "namespace": "default"}, "subsets": subsets})
    assert await eventually(_slices(env, "later"))  # the controller has caught up with all three
    assert await _slices(env, "web")() == [] and await _slices(env, "skipped")() == []
    await env.resource("", "v1", "services").delete("later", "default")

    async def removed():
        return await _slices(env, "later")() == []

    assert await eventually(removed)


def test_invalid_and_excess_addresses_are_counted_not_mirrored():
    """What the InvalidIPAddress and TooManyAddressesToMirror events report (stored Endpoints hold
    valid IPs: an older server's data can hold others)."""
    subset = {"addresses": [{"ip": f"192.0.2.{i}"} for i in range(1, 5)] + [{"ip": "bogus"}], "ports": [{"port": 80}]}
    slices, invalid, skipped = desired_slices({"subsets": [subset]}, limit=3)
    assert (invalid, skipped) == (0, 2)  # the limit reached before the bogus one is looked at
    [(ports, endpoints)] = slices.values()
    assert [e["addresses"] for e in endpoints] == [["192.0.2.1"], ["192.0.2.2"], ["192.0.2.3"]]
    assert desired_slices({"subsets": [subset]}, limit=5)[1:] == (1, 1)
