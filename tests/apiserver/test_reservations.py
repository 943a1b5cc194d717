"""Service values recorded in the store (apiserver/reservations.py): two API server "workers" in one
process, each its own watch cache, resource index (so allocators) and REST, over one store."""

from __future__ import annotations

import asyncio
import copy
import ipaddress
from types import SimpleNamespace

import orjson
import pytest

from nanokube.apiserver.admission import Admission
from nanokube.apiserver.cache import WatchCache
from nanokube.apiserver.ipaddresses import ip_address_for
from nanokube.apiserver.loopback import LocalClient
from nanokube.apiserver import reservations
from nanokube.apiserver.reservations import NODE_PORTS, NodePortRepair
from nanokube.apiserver.rest import GenericREST, ResourceIndex
from nanokube.apiserver.workers import share_service_allocations
from nanokube.clock import Clock, VirtualClock
from nanokube.machinery.errors import APIError
from nanokube.registry.base import all_resources
from nanokube.store.memory import MemoryStore
from tests.controllers import tries

NS = "default"


@pytest.fixture
async def workers(monkeypatch):
    """Two workers whose dynamic picks scan their bands from the start (not a random place, as
    served), so that a test knows worker 0's next pick: its first plus its share's stride."""
    store = MemoryStore()
    await store.start()
    out = []
    for i in range(2):
        cache = WatchCache(store)
        rest = GenericREST(store, cache, ResourceIndex(all_resources()), Clock())
        rest.admission = Admission(rest)
        monkeypatch.setattr(rest.index.get("", "v1", "services").strategy.picks, "randrange", lambda size: 0)
        await cache.start()
        share_service_allocations(SimpleNamespace(index=rest.index, rest=rest, cache=cache, workers=2, worker=i))
        out.append(SimpleNamespace(store=store, cache=cache, index=rest.index, client=LocalClient(rest)))
    await out[0].client.resource("", "v1", "namespaces").create({"metadata": {"name": NS}})
    yield out
    for w in out:
        await w.cache.stop()
    await store.close()


def svc(name: str, **spec) -> dict:
    return {"metadata": {"name": name, "namespace": NS}, "spec": {"type": "NodePort", "ports": [{"port": 80}], **spec}}


def services(w):
    return w.client.resource("", "v1", "services")


def ipaddresses(w):
    return w.client.resource("networking.k8s.io", "v1", "ipaddresses")


async def _records(w) -> tuple[list, list]:
    """The IPAddresses and node port records in the store."""
    ips, _ = await w.store.list(w.index.get("networking.k8s.io", "v1", "ipaddresses").key_prefix())
    ports, _ = await w.store.list(NODE_PORTS)
    return [kv.key for kv in ips], [kv.key for kv in ports]


async def race(workers, bodies):
    return await asyncio.gather(*(services(workers[i % 2]).create(b) for i, b in enumerate(bodies)),
                                return_exceptions=True)


async def test_one_value_asked_for_through_both_workers_at_once_goes_to_one(workers):
    results = await race(workers, [svc(f"ip{i}", clusterIP="10.96.5.5") for i in range(6)])
    won = [r for r in results if isinstance(r, dict)]
    assert len(won) == 1 and won[0]["spec"]["clusterIPs"] == ["10.96.5.5"]
    lost = [r for r in results if not isinstance(r, dict)]
    for e in lost:
        name = e.message.split('"')[1]
        assert e.code == 422 and e.message == (
            f'Service "{name}" is invalid: spec.clusterIPs: Invalid value: ["10.96.5.5"]: '
            "failed to allocate IP 10.96.5.5: provided IP is already allocated")
    ipa = await ipaddresses(workers[0]).get("10.96.5.5")
    assert ipa["spec"]["parentRef"]["name"] == won[0]["metadata"]["name"]

    results = await race(workers, [svc(f"port{i}", ports=[{"port": 80, "nodePort": 31234}]) for i in range(6)])
    assert sum(isinstance(r, dict) for r in results) == 1
    assert all(e.code == 422 and e.message.endswith(
        "spec.ports[0].nodePort: Invalid value: 31234: provided port is already allocated")
        for e in results if not isinstance(e, dict))
    assert await workers[0].store.get(f"{NODE_PORTS}31234") is not None


async def test_a_dynamic_pick_recorded_by_the_other_worker_is_given_up_for_the_next(workers):
    a, b = workers
    first = await services(a).create(svc("first"))
    ip, port = first["spec"]["clusterIP"], first["spec"]["ports"][0]["nodePort"]
    nxt = ip.rsplit(".", 1)[0] + "." + str(int(ip.rsplit(".", 1)[1]) + 2)
    # what worker 0 picks next, asked for by value through worker 1 (whose Service 0 has not seen yet)
    body = {"metadata": {"name": "holder", "namespace": NS, "uid": "u-holder"}}
    await ipaddresses(b).create(ip_address_for(nxt, body))
    await b.store.create(f"{NODE_PORTS}{port + 2}", orjson.dumps({"uid": "u-holder"}))
    second = await services(a).create(svc("second"))
    assert second["spec"]["clusterIP"] not in (ip, nxt) and second["spec"]["clusterIPs"] == [second["spec"]["clusterIP"]]
    assert second["spec"]["ports"][0]["nodePort"] not in (port, port + 2)
    assert (await ipaddresses(a).get(second["spec"]["clusterIP"]))["spec"]["parentRef"]["name"] == "second"


async def test_records_go_with_the_values(workers):
    a, b = workers
    made = await services(a).create(svc("s", clusterIP="10.96.7.7", ports=[{"port": 80, "nodePort": 30777}]))
    assert made["spec"]["clusterIP"] == "10.96.7.7"
    # a create that fails (the name is taken) leaves nothing recorded
    with pytest.raises(APIError) as e:
        await services(b).create(svc("s", clusterIP="10.96.8.8", ports=[{"port": 80, "nodePort": 30888}]))
    assert e.value.code == 409
    assert await a.store.get(f"{NODE_PORTS}30888") is None
    with pytest.raises(APIError) as e:
        await ipaddresses(a).get("10.96.8.8")
    assert e.value.code == 404
    # an update that drops the node port frees it; the delete frees the address, at once
    await b.cache.sync()
    got = copy.deepcopy(await services(b).get("s", NS))
    got["spec"] = {**got["spec"], "type": "ClusterIP", "ports": [{"port": 80}]}
    got["spec"].pop("externalTrafficPolicy", None)
    await services(b).update(got)
    assert await a.store.get(f"{NODE_PORTS}30777") is None
    await services(b).delete("s", NS)
    with pytest.raises(APIError) as e:
        await ipaddresses(a).get("10.96.7.7")
    assert e.value.code == 404
    again = await services(a).create(svc("t", clusterIP="10.96.7.7", ports=[{"port": 80, "nodePort": 30777}]))
    assert again["spec"]["ports"][0]["nodePort"] == 30777


async def test_node_port_repair_frees_only_stale_records_no_service_holds(workers):
    a, _ = workers
    made = await services(a).create(svc("held", ports=[{"port": 80, "nodePort": 30100}]))
    clock = Clock()
    await a.store.create(f"{NODE_PORTS}30101", orjson.dumps({"uid": "gone", "at": clock.now() - 60}))
    await a.store.create(f"{NODE_PORTS}30102", orjson.dumps({"uid": "on-its-way", "at": clock.now()}))
    server = SimpleNamespace(store=a.store, cache=a.cache, clock=clock, index=a.index)
    assert await NodePortRepair(server, grace=10).repair() == [30101]
    kvs, _ = await a.store.list(NODE_PORTS)
    assert [kv.key for kv in kvs] == [f"{NODE_PORTS}30100", f"{NODE_PORTS}30102"]
    assert orjson.loads(kvs[0].value)["uid"] == made["metadata"]["uid"]


async def test_node_port_repair_passes_at_start_then_every_interval(workers):
    """As upstream's repair loop: a record a killed worker left is freed by the pass at start, not
    an interval later; one left after that by the next pass, RepairServicesInterval (3 minutes) on."""
    a, _ = workers
    clock = VirtualClock()
    await a.store.create(f"{NODE_PORTS}30101", orjson.dumps({"uid": "gone", "at": clock.now() - 60}))
    repair = NodePortRepair(SimpleNamespace(store=a.store, cache=a.cache, clock=clock, index=a.index), grace=10)
    await repair.start()
    try:
        assert await a.store.get(f"{NODE_PORTS}30101") is None
        await a.store.create(f"{NODE_PORTS}30102", orjson.dumps({"uid": "gone", "at": clock.now() - 60}))
        await clock.advance(179)
        assert await a.store.get(f"{NODE_PORTS}30102") is not None
        await clock.advance(1)
        assert await a.store.get(f"{NODE_PORTS}30102") is None
    finally:
        await repair.stop()


async def test_node_port_records_are_deleted_with_the_kv_read_so_sqlite_reads_no_row(workers, monkeypatch):
    """The repair and the freeing of a port hand the store the KV they read (Store.delete's prev),
    which SQLite deletes by without reading the row again."""
    a, _ = workers
    clock = Clock()
    handed = []
    delete = a.store.delete

    async def spy(key, expected=None, prev=None):
        handed.append((key, expected, prev))
        return await delete(key, expected, prev)

    monkeypatch.setattr(a.store, "delete", spy)
    stale = await a.store.create(f"{NODE_PORTS}30101", orjson.dumps({"uid": "gone", "at": clock.now() - 60}))
    server = SimpleNamespace(store=a.store, cache=a.cache, clock=clock, index=a.index)
    assert await NodePortRepair(server, grace=10).repair() == [30101]
    made = await services(a).create(svc("s"))
    key = f"{NODE_PORTS}{made['spec']['ports'][0]['nodePort']}"
    record = await a.store.get(key)
    await services(a).delete("s", NS)
    assert await a.store.get(key) is None
    assert handed[0] == (stale.key, stale.mod_revision, stale)
    assert (record.key, record.mod_revision, record) in handed and orjson.loads(record.value)["uid"] == made["metadata"]["uid"]


async def test_a_dynamic_pick_that_finds_no_free_record_reports_the_range_full(workers, monkeypatch):
    a, b = workers
    first = await services(a).create(svc("first", type="ClusterIP"))
    ip = first["spec"]["clusterIP"]
    nxt = ip.rsplit(".", 1)[0] + "." + str(int(ip.rsplit(".", 1)[1]) + 2)
    await ipaddresses(b).create(ip_address_for(nxt, {"metadata": {"name": "holder", "namespace": NS}}))
    monkeypatch.setattr(reservations, "_REPICKS", 1)
    with pytest.raises(APIError) as e:
        await services(a).create(svc("second", type="ClusterIP"))
    assert (e.value.code, e.value.reason, e.value.message) == (
        500, "InternalError", "Internal error occurred: failed to allocate a serviceIP: range is full")
    monkeypatch.setattr(reservations, "_REPICKS", 64)
    third = await services(a).create(svc("third", type="ClusterIP"))
    assert third["spec"]["clusterIP"] not in (ip, nxt)


async def test_a_dynamic_node_port_that_finds_no_free_record_reports_the_range_full(workers, monkeypatch):
    a, b = workers
    first = await services(a).create(svc("first"))
    port = first["spec"]["ports"][0]["nodePort"]
    await b.store.create(f"{NODE_PORTS}{port + 2}", orjson.dumps({"uid": "u-holder"}))
    monkeypatch.setattr(reservations, "_REPICKS", 1)
    records = await _records(a)
    with pytest.raises(APIError) as e:
        await services(a).create(svc("second"))
    assert (e.value.code, e.value.reason, e.value.message) == (
        500, "InternalError", "Internal error occurred: failed to allocate a nodePort: range is full")
    assert await _records(a) == records  # its address is not kept either
    monkeypatch.setattr(reservations, "_REPICKS", 64)
    third = await services(a).create(svc("third"))
    assert third["spec"]["ports"][0]["nodePort"] not in (port, port + 2)


async def test_a_request_cancelled_while_its_records_are_undone_still_removes_them(workers, monkeypatch):
    a, _ = workers
    await services(a).create(svc("taken"))
    store, deleting, go_on = a.store, asyncio.Event(), asyncio.Event()
    delete = store.delete

    async def held_delete(*args, **kwargs):
        deleting.set()
        await go_on.wait()
        return await delete(*args, **kwargs)

    monkeypatch.setattr(store, "delete", held_delete)
    # the name is taken: the write fails after the address and the port are recorded, and the undo starts
    request = asyncio.ensure_future(services(a).create(svc("taken", clusterIP="10.96.9.9",
                                                           ports=[{"port": 80, "nodePort": 30999}])))
    await asyncio.wait_for(deleting.wait(), 10)
    request.cancel()  # its client went away meanwhile
    with pytest.raises(asyncio.CancelledError):
        await request
    go_on.set()
    ip_key = a.index.get("networking.k8s.io", "v1", "ipaddresses").key(None, "10.96.9.9")
    for _ in tries():  # the undo goes on in a task of its own
        if await store.get(f"{NODE_PORTS}30999") is None and await store.get(ip_key) is None:
            break
        await asyncio.sleep(0.01)
    assert await store.get(f"{NODE_PORTS}30999") is None
    with pytest.raises(APIError) as e:
        await ipaddresses(a).get("10.96.9.9")
    assert e.value.code == 404


async def test_a_request_cancelled_while_a_record_is_written_has_it_removed(workers, monkeypatch):
    a, _ = workers
    store, written, answer = a.store, asyncio.Event(), asyncio.Event()
    create = store.create

    async def late_answer(key, value):  # the write is made; its answer is on its way when the request ends
        kv = await create(key, value)
        if key.startswith(NODE_PORTS):
            written.set()
            await answer.wait()
        return kv

    monkeypatch.setattr(store, "create", late_answer)
    request = asyncio.ensure_future(services(a).create(svc("s", clusterIP="10.96.9.10",
                                                           ports=[{"port": 80, "nodePort": 30998}])))
    await asyncio.wait_for(written.wait(), 10)
    request.cancel()
    with pytest.raises(asyncio.CancelledError):
        await request
    answer.set()
    for _ in tries():
        if await _records(a) == ([], []):
            break
        await asyncio.sleep(0.01)
    assert await _records(a) == ([], [])
    with pytest.raises(APIError) as e:
        await services(a).get("s", NS)
    assert e.value.code == 404


async def _cancelled_in_flight(request, writing: asyncio.Event, answer: asyncio.Event) -> None:
    """Runs `request`, cancels it once its store write is in flight (`writing`), lets the store
    answer, and waits until the tasks the request left (the write, an undo) have ended."""
    request = asyncio.ensure_future(request)
    await asyncio.wait_for(writing.wait(), 10)
    request.cancel()
    with pytest.raises(asyncio.CancelledError):
        await request
    answer.set()
    for _ in tries():
        if not reservations._BACKGROUND:
            break
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("taken", [False, True])
async def test_a_request_cancelled_while_its_service_is_written_keeps_the_records_of_a_service_stored(
        workers, monkeypatch, taken):
    """The Service's own write in flight when the request ends (its client gone, its deadline
    past): the store makes it all the same, and its ClusterIP and node port stay recorded, or
    the name was taken and the write fails, and they are removed."""
    a, _ = workers
    if taken:
        await services(a).create(svc("s"))
    before = await _records(a)
    ip, port = f"10.96.9.{11 + taken}", 30997 - taken
    store, writing, answer = a.store, asyncio.Event(), asyncio.Event()
    create = store.create

    async def late_answer(key, value):  # the write goes in; its answer is on its way when the request ends
        if key.endswith("/services/default/s"):
            writing.set()
            await answer.wait()
        return await create(key, value)

    monkeypatch.setattr(store, "create", late_answer)
    await _cancelled_in_flight(services(a).create(svc("s", clusterIP=ip, ports=[{"port": 80, "nodePort": port}])),
                               writing, answer)
    stored = await services(a).get("s", NS)
    ip_key = a.index.get("networking.k8s.io", "v1", "ipaddresses").key(None, ip)
    if taken:
        assert stored["spec"]["ports"][0]["nodePort"] != port and await _records(a) == before
    else:
        assert (stored["spec"]["clusterIP"], stored["spec"]["ports"][0]["nodePort"]) == (ip, port)
        assert await _records(a) == ([ip_key], [f"{NODE_PORTS}{port}"])


def _late_update(monkeypatch, store, name: str) -> tuple[asyncio.Event, asyncio.Event]:
    """Service `name`'s updates go in once `answer` is set, `writing` set meanwhile: (writing, answer)."""
    writing, answer = asyncio.Event(), asyncio.Event()
    update = store.update

    async def late_answer(key, *args):
        if key.endswith(f"/services/default/{name}"):
            writing.set()
            await answer.wait()
        return await update(key, *args)

    monkeypatch.setattr(store, "update", late_answer)
    return writing, answer


async def test_a_request_cancelled_while_its_update_is_written_keeps_the_records_of_its_new_values(
        workers, monkeypatch):
    """An update that gives a Service a node port, cancelled while its write is in flight: the
    store makes it, and the new port stays recorded."""
    a, _ = workers
    await services(a).create(svc("u", type="ClusterIP"))
    await _cancelled_in_flight(services(a).patch("u", {"spec": {"type": "NodePort", "ports": [
        {"port": 80, "nodePort": 30995}]}}, namespace=NS), *_late_update(monkeypatch, a.store, "u"))
    assert (await services(a).get("u", NS))["spec"]["ports"][0]["nodePort"] == 30995
    assert (await _records(a))[1] == [f"{NODE_PORTS}30995"]


@pytest.mark.parametrize("patch", [
    {"spec": {"ports": [{"port": 80, "nodePort": 30993}]}},  # a port moved: one record made, one freed
    {"spec": {"type": "ClusterIP", "ports": [{"port": 80, "nodePort": None}]}},  # ports dropped: none made
])
async def test_a_request_cancelled_while_its_update_is_written_frees_the_values_it_gave_up(
        workers, monkeypatch, patch):
    """An update that moves a Service off its node port, cancelled while its write is in flight: the
    store makes it, and the old port's record is removed as the answered update's would be."""
    a, _ = workers
    await services(a).create(svc("m", ports=[{"port": 80, "nodePort": 30994}]))
    await _cancelled_in_flight(services(a).patch("m", patch, namespace=NS), *_late_update(monkeypatch, a.store, "m"))
    stored = (await services(a).get("m", NS))["spec"]["ports"][0].get("nodePort")
    assert stored == patch["spec"]["ports"][0]["nodePort"]
    assert (await _records(a))[1] == ([f"{NODE_PORTS}{stored}"] if stored else [])


def local_lb(name: str, **spec) -> dict:
    return svc(name, type="LoadBalancer", externalTrafficPolicy="Local", allocateLoadBalancerNodePorts=False, **spec)


async def test_one_health_check_port_asked_for_through_both_workers_at_once_goes_to_one(workers):
    results = await race(workers, [local_lb(f"hc{i}", healthCheckNodePort=31500) for i in range(6)])
    won = [r for r in results if isinstance(r, dict)]
    assert len(won) == 1 and won[0]["spec"]["healthCheckNodePort"] == 31500
    assert all((e.code, e.message) == (500, "Internal error occurred: failed to allocate requested HealthCheck "
                                            "NodePort 31500: provided port is already allocated")
               for e in results if not isinstance(e, dict))
    kv = await workers[0].store.get(f"{NODE_PORTS}31500")
    assert orjson.loads(kv.value)["uid"] == won[0]["metadata"]["uid"]


async def test_a_health_check_port_picked_that_the_other_worker_recorded_is_given_up(workers):
    a, b = workers
    hc = (await services(a).create(local_lb("first")))["spec"]["healthCheckNodePort"]
    await b.store.create(f"{NODE_PORTS}{hc + 2}", orjson.dumps({"uid": "u-holder"}))  # worker 0's next pick
    second = await services(a).create(local_lb("second"))
    assert second["spec"]["healthCheckNodePort"] not in (hc, hc + 2)
    kv = await a.store.get(f"{NODE_PORTS}{second['spec']['healthCheckNodePort']}")
    assert orjson.loads(kv.value)["uid"] == second["metadata"]["uid"]


async def test_health_check_port_records_go_with_the_port(workers):
    a, b = workers
    made = await services(a).create(local_lb("s", healthCheckNodePort=30600))
    assert await a.store.get(f"{NODE_PORTS}30600") is not None
    # the repair loop leaves it: the Service holds it
    server = SimpleNamespace(store=a.store, cache=a.cache, clock=Clock(), index=a.index)
    assert await NodePortRepair(server, grace=-1).repair() == []
    # policy Cluster through the other worker: the record goes; Local again: a new one is recorded
    await b.cache.sync()
    got = copy.deepcopy(await services(b).get("s", NS))
    got["spec"]["externalTrafficPolicy"] = "Cluster"
    assert "healthCheckNodePort" not in (await services(b).update(got))["spec"]
    assert await a.store.get(f"{NODE_PORTS}30600") is None
    await a.cache.sync()
    got = copy.deepcopy(await services(a).get("s", NS))
    got["spec"]["externalTrafficPolicy"] = "Local"
    hc = (await services(a).update(got))["spec"]["healthCheckNodePort"]
    kv = await a.store.get(f"{NODE_PORTS}{hc}")
    assert orjson.loads(kv.value)["uid"] == made["metadata"]["uid"]
    await services(b).delete("s", NS)
    assert await _records(a) == ([], [])


async def test_one_node_port_of_two_protocols_is_recorded_once(workers):
    a, _ = workers
    made = await services(a).create(svc("dns", ports=[{"name": "tcp", "port": 53, "protocol": "TCP", "nodePort": 30053},
                                                      {"name": "udp", "port": 53, "protocol": "UDP", "nodePort": 30053}]))
    assert [p["nodePort"] for p in made["spec"]["ports"]] == [30053, 30053]
    assert (await _records(a))[1] == [f"{NODE_PORTS}30053"]


async def test_a_dual_stack_services_secondary_picked_that_the_other_worker_recorded_is_given_up(workers):
    """The secondary ClusterIP is recorded too; picked and found recorded by the other worker, another
    of its family is picked in its place, the primary kept."""
    a, b = workers
    ips = a.index.get("", "v1", "services").strategy.ips  # worker 0's allocator
    ips.set_extra_ranges({"v6": ["fd00:10:96::/108"]})
    try:
        dual = {"ipFamilyPolicy": "RequireDualStack"}
        first = await services(a).create(svc("first", **dual))
        v4, v6 = first["spec"]["clusterIPs"]
        assert (await ipaddresses(a).get(v6))["spec"]["parentRef"]["name"] == "first"
        nxt = str(ipaddress.ip_address(v6) + 2)  # what worker 0 picks next in its share
        await ipaddresses(b).create(ip_address_for(nxt, {"metadata": {"name": "holder", "namespace": NS}}))
        second = await services(a).create(svc("second", **dual))
        primary, secondary = second["spec"]["clusterIPs"]
        assert second["spec"]["clusterIP"] == primary and ipaddress.ip_address(primary).version == 4
        assert ipaddress.ip_address(secondary).version == 6 and secondary not in (v6, nxt)
        assert (await ipaddresses(a).get(secondary))["spec"]["parentRef"]["name"] == "second"
    finally:
        ips.set_extra_ranges({})


def _answered_late(monkeypatch, workers, method: str, name: str) -> tuple[asyncio.Event, asyncio.Event]:
    """Service `name`'s `method` (create or update) is made at once, both caches take its event, and
    its answer comes once `answer` is set, `writing` set meanwhile: (writing, answer)."""
    store, writing, answer = workers[0].store, asyncio.Event(), asyncio.Event()
    write = getattr(store, method)

    async def late_answer(key, *args):
        kv = await write(key, *args)
        if key.endswith(f"/services/default/{name}"):
            for w in workers:
                await w.cache.wait_for(kv.mod_revision)
            writing.set()
            await answer.wait()
        return kv

    monkeypatch.setattr(store, method, late_answer)
    return writing, answer


async def test_a_request_cancelled_once_its_write_is_made_and_watched_keeps_its_values_allocated(workers, monkeypatch):
    """The Service's create, then its update, made and taken by both watch caches before the request ends
    (the store's answer late): the values the stored Service holds stay this process's allocations
    (no later event gives them back), and the values the update gave up are free."""
    a, _ = workers
    strategy = a.index.get("", "v1", "services").strategy
    await _cancelled_in_flight(services(a).create(svc("w", clusterIP="10.96.9.21", ports=[{"port": 80, "nodePort": 30981}])),
                               *_answered_late(monkeypatch, workers, "create", "w"))
    uid = (await services(a).get("w", NS))["metadata"]["uid"]
    assert (strategy.ips.owner("10.96.9.21"), strategy.node_ports.owner(30981)) == (uid, uid)
    await _cancelled_in_flight(services(a).patch("w", {"spec": {"ports": [{"port": 80, "nodePort": 30982}]}}, namespace=NS),
                               *_answered_late(monkeypatch, workers, "update", "w"))
    assert (await services(a).get("w", NS))["spec"]["ports"][0]["nodePort"] == 30982
    assert (strategy.node_ports.owner(30982), strategy.node_ports.owner(30981)) == (uid, None)
    assert await _records(a) == ([a.index.get("networking.k8s.io", "v1", "ipaddresses").key(None, "10.96.9.21")],
                                 [f"{NODE_PORTS}30982"])
