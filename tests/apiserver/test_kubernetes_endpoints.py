"""The `kubernetes` Service's Endpoints and EndpointSlice (kube-apiserver's lease endpoint
reconciler), over HTTP with the official client: they name every running API server's advertise
address, come back when deleted, lose edits to their addresses and labels, and lose a server's
address as soon as it stops."""

from __future__ import annotations

import asyncio
import contextlib
import functools

from kubernetes import client, config
from kubernetes.client.rest import ApiException

from nanokube.apiserver import kubernetes_service
from nanokube.apiserver.app import APIServer
from nanokube.apiserver.endpoint_reconciler import MasterLeases
from nanokube.clock import VirtualClock
from nanokube.pki.ca import ensure_pki
from nanokube.pki.kubeconfig import write_kubeconfig
from nanokube.store.memory import MemoryStore
from nanokube.store.sqlite import SQLiteStore
from tests.controllers import eventually

SKIP_MIRROR = {"endpointslice.kubernetes.io/skip-mirror": "true"}
SERVICE_NAME = {"kubernetes.io/service-name": "kubernetes"}


@contextlib.asynccontextmanager
async def apiserver(tmp_path, advertise: str, store=None, name: str = "a"):
    """A started server advertising `advertise`, and the official client's CoreV1Api and
    DiscoveryV1Api for it."""
    pki = ensure_pki(str(tmp_path))
    server = APIServer(store or MemoryStore(), pki, port=0, advertise=advertise)
    server.rest.admission.disable("ServiceAccount")
    await server.start()
    kubeconfig = str(tmp_path / f"kubeconfig-{name}")
    write_kubeconfig(kubeconfig, server.url, pki)
    api = config.new_client_from_config(config_file=kubeconfig)
    try:
        yield server, client.CoreV1Api(api), client.DiscoveryV1Api(api)
    finally:
        api.close()
        await server.stop()


def _read(call, *args):
    try:
        return call(*args).to_dict()
    except ApiException as e:
        if e.status != 404:
            raise
        return None


async def endpoints(core) -> dict | None:
    return await asyncio.to_thread(_read, core.read_namespaced_endpoints, "kubernetes", "default")


async def slices(disc) -> list[dict]:
    got = await asyncio.to_thread(disc.list_namespaced_endpoint_slice, "default",
                                  label_selector="kubernetes.io/service-name=kubernetes")
    return [s.to_dict() for s in got.items]


def _addresses(ep: dict | None) -> list[str]:
    return [a["ip"] for s in (ep or {}).get("subsets") or [] for a in s.get("addresses") or []]


def _slice_addresses(items: list[dict]) -> list[str]:
    return [a for s in items for e in s["endpoints"] or [] for a in e["addresses"]]


async def test_endpoints_and_slice_name_the_advertised_address(tmp_path, monkeypatch):
    monkeypatch.setattr(kubernetes_service, "INTERVAL", 0.05)
    async with apiserver(tmp_path, "192.0.2.10") as (server, core, disc):
        ep = await eventually(lambda: endpoints(core))
        assert ep["metadata"]["labels"] == SKIP_MIRROR
        [subset] = ep["subsets"]
        assert [a["ip"] for a in subset["addresses"]] == ["192.0.2.10"] and not subset["not_ready_addresses"]
        assert [(p["name"], p["port"], p["protocol"]) for p in subset["ports"]] == [("https", server.port, "TCP")]
        [sl] = await eventually(lambda: slices(disc))
        assert (sl["metadata"]["name"], sl["metadata"]["labels"], sl["address_type"]) == ("kubernetes", SERVICE_NAME, "IPv4")
        assert [(e["addresses"], e["conditions"]["ready"]) for e in sl["endpoints"]] == [(["192.0.2.10"], True)]
        assert [(p["name"], p["port"], p["protocol"]) for p in sl["ports"]] == [("https", server.port, "TCP")]
        await asyncio.sleep(0.3)  # several rounds: nothing written while both are right
        assert (await endpoints(core))["metadata"]["resource_version"] == ep["metadata"]["resource_version"]
        assert [s["metadata"]["resource_version"] for s in await slices(disc)] == [sl["metadata"]["resource_version"]]


async def test_deleted_or_edited_objects_are_put_back(tmp_path, monkeypatch):
    monkeypatch.setattr(kubernetes_service, "INTERVAL", 0.05)
    async with apiserver(tmp_path, "192.0.2.10") as (server, core, disc):
        await eventually(lambda: endpoints(core))
        await eventually(lambda: slices(disc))
        await asyncio.to_thread(core.delete_namespaced_endpoints, "kubernetes", "default")
        await asyncio.to_thread(disc.delete_namespaced_endpoint_slice, "kubernetes", "default")
        assert _addresses(await eventually(lambda: endpoints(core))) == ["192.0.2.10"]
        assert _slice_addresses(await eventually(lambda: slices(disc))) == ["192.0.2.10"]

        # addresses and labels are reset; a port edited after the first pass is left, as upstream's
        # reconciler corrects ports only when it starts
        edit = {"metadata": {"labels": {"endpointslice.kubernetes.io/skip-mirror": None, "team": "x"}},
                "subsets": [{"addresses": [{"ip": "192.0.2.99"}], "ports": [{"name": "https", "port": 1234}]}]}
        await asyncio.to_thread(core.patch_namespaced_endpoints, "kubernetes", "default", edit)
        slice_edit = {"metadata": {"labels": {"team": "x"}},
                      "endpoints": [{"addresses": ["192.0.2.99"], "conditions": {"ready": False}}]}
        await asyncio.to_thread(disc.patch_namespaced_endpoint_slice, "kubernetes", "default", slice_edit)
        stray = {"metadata": {"name": "kubernetes-stray", "labels": SERVICE_NAME}, "addressType": "IPv4",
                 "endpoints": [{"addresses": ["192.0.2.50"]}], "ports": [{"name": "https", "port": 6443}]}
        await asyncio.to_thread(disc.create_namespaced_endpoint_slice, "default", stray)

        async def restored():
            ep, items = await endpoints(core), await slices(disc)
            ok = (_addresses(ep) == ["192.0.2.10"] and ep["metadata"]["labels"] == SKIP_MIRROR
                  and [s["metadata"]["name"] for s in items] == ["kubernetes"]
                  and items[0]["metadata"]["labels"] == SERVICE_NAME
                  and [(e["addresses"], e["conditions"]["ready"]) for e in items[0]["endpoints"]] == [(["192.0.2.10"], True)])
            return (ep, items) if ok else None
        ep, _ = await eventually(restored)
        assert [p["port"] for p in ep["subsets"][0]["ports"]] == [1234]


async def test_every_running_server_is_listed_until_it_stops(tmp_path, monkeypatch):
    """Two servers on one store: each renews a lease on its address, both addresses are listed,
    and a server that stops takes its address out itself: its lease here outlives the test, so no expiry can."""
    monkeypatch.setattr(kubernetes_service, "INTERVAL", 0.05)
    monkeypatch.setattr(kubernetes_service, "MasterLeases", functools.partial(MasterLeases, ttl=3600))
    db = str(tmp_path / "state.db")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    async with apiserver(tmp_path / "a", "192.0.2.10", SQLiteStore(db, shared=True)) as (_, core, disc):
        await eventually(lambda: endpoints(core))
        async with apiserver(tmp_path / "b", "192.0.2.11", SQLiteStore(db, shared=True), "b"):
            async def both():
                ep, items = await endpoints(core), await slices(disc)
                return _addresses(ep) == _slice_addresses(items) == ["192.0.2.10", "192.0.2.11"]
            assert await eventually(both)

        async def one():
            ep, items = await endpoints(core), await slices(disc)
            return _addresses(ep) == _slice_addresses(items) == ["192.0.2.10"]
        assert await eventually(one)


async def test_a_loopback_server_advertises_no_endpoints(tmp_path, monkeypatch):
    """Endpoints may not name a loopback address: a server listening on 127.0.0.1 without an
    advertise address writes the Service only."""
    monkeypatch.setattr(kubernetes_service, "INTERVAL", 0.05)
    async with apiserver(tmp_path, None) as (server, core, disc):
        assert server.advertise is None
        svc = await eventually(lambda: asyncio.to_thread(_read, core.read_namespaced_service, "kubernetes", "default"))
        assert svc["spec"]["cluster_ip"] == "10.96.0.1"
        await asyncio.sleep(0.2)
        assert await endpoints(core) is None and await slices(disc) == []


async def test_a_restart_on_another_port_corrects_the_ports_once(tmp_path, monkeypatch):
    """The first pass after a start corrects the Service's and the endpoints' ports to the
    server's new port (upstream's reconcile at start), copying the cached Service it changes."""
    monkeypatch.setattr(kubernetes_service, "INTERVAL", 0.05)
    db = str(tmp_path / "state.db")
    async with apiserver(tmp_path, "192.0.2.10", SQLiteStore(db)) as (first, core, disc):
        await eventually(lambda: endpoints(core))
        old_port = first.port
    async with apiserver(tmp_path, "192.0.2.10", SQLiteStore(db), "b") as (server, core, disc):
        assert server.port != old_port

        async def moved():
            svc = await asyncio.to_thread(_read, core.read_namespaced_service, "kubernetes", "default")
            ep, items = await endpoints(core), await slices(disc)
            return (svc["spec"]["ports"][0]["target_port"], ep["subsets"][0]["ports"][0]["port"],
                    items[0]["ports"][0]["port"]) == (server.port,) * 3
        await eventually(moved)


async def test_an_expired_lease_is_deleted_with_the_kv_listed_and_no_row_read(tmp_path):
    """A lease nobody renewed is removed by whoever lists it, handing SQLite the KV it listed
    (Store.delete's prev): the DELETE runs alone, no SELECT of the row first."""
    clock = VirtualClock(start=1_800_000_000.0)
    store = SQLiteStore(str(tmp_path / "db.sqlite"))
    await store.start()
    statements: list[str] = []
    try:
        leases = MasterLeases(store, clock)
        await leases.update("10.0.0.1")
        await leases.update("10.0.0.2")
        await clock.advance(16)  # past both leases' 15 s
        await leases.update("10.0.0.2")
        store._db.set_trace_callback(statements.append)
        assert await leases.list() == ["10.0.0.2"]
        store._db.set_trace_callback(None)
        assert [q.split()[0] for q in statements if not q.startswith(("BEGIN", "COMMIT", "UPDATE meta"))] == [
            "SELECT", "DELETE"]  # the list, then the delete
        assert await store.get("/masterleases/10.0.0.1") is None
    finally:
        await store.close()
