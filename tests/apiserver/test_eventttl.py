"""Events expire --event-ttl after their last write (eventttl.py), on the server's clock: an
in-process API server on virtual time, its store kept across a restart."""

from __future__ import annotations

import asyncio

import pytest

from nanokube.apiserver.app import APIServer
from nanokube.apiserver.cache import ADDED, CacheEvent
from nanokube.apiserver.eventttl import parse_ttl
from nanokube.apiserver.loopback import LocalClient
from nanokube.apiserver.rest import WriteOptions
from nanokube.clock import VirtualClock
from nanokube.store.interface import Unavailable
from nanokube.store.memory import MemoryStore
from nanokube.store.sqlite import SQLiteStore

T0 = 1_800_000_000.0


async def start(store, clock, ttl: float) -> tuple[APIServer, LocalClient]:
    """The server's store, cache and event TTL, as the simulator starts them (no listener)."""
    s = APIServer(store, None, port=0, clock=clock, event_ttl=ttl)
    await s.store.start()
    await s.cache.start()
    s.event_ttl.start()
    client = LocalClient(s.rest)
    if s.cache.get("/registry/namespaces/default") is None:
        await client.resource("", "v1", "namespaces").create({"metadata": {"name": "default"}})
    return s, client


async def stop(s: APIServer) -> None:
    await s.event_ttl.stop()
    await s.cache.stop()


def event(name: str, clock) -> dict:
    return {"metadata": {"name": name, "namespace": "default"}, "type": "Warning", "reason": "FailedScheduling",
            "message": "0/3 nodes are available", "count": 1, "firstTimestamp": clock.rfc3339(),
            "lastTimestamp": clock.rfc3339(), "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"}}


async def names(events) -> list[str]:
    items, _ = await events.list("default")
    return [o["metadata"]["name"] for o in items]


async def next_event(stream):
    """The next watch event; the bound only stops a broken test from hanging."""
    return await asyncio.wait_for(stream.__anext__(), 5)


@pytest.mark.parametrize("text, seconds", [("1h", 3600), ("90s", 90), ("5m", 300), ("1h30m", 5400), ("1.5s", 1.5),
                                           (".5m", 30), ("2s500ms", 2.5)])
def test_event_ttl_takes_go_durations(text, seconds):
    assert parse_ttl(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text, message", [
    ("90", 'invalid argument "90" for "--event-ttl" flag: time: missing unit in duration "90"'),
    ("1d", 'invalid argument "1d" for "--event-ttl" flag: time: unknown unit "d" in duration "1d"'),
    ("0", "--event-ttl must be greater than 0"),
    ("-1s", "--event-ttl must be greater than 0"),
])
def test_event_ttl_refuses_what_kube_apiserver_refuses(text, message):
    with pytest.raises(ValueError) as e:
        parse_ttl(text)
    assert str(e.value) == message


async def test_an_event_is_deleted_once_its_ttl_passes_and_watchers_see_it_deleted():
    clock = VirtualClock(start=T0)
    s, client = await start(MemoryStore(), clock, 100)
    events = client.resource("", "v1", "events")
    try:
        created = await events.create(event("e1", clock))
        _, rv = await events.list("default")
        stream = await events.watch("default", created["metadata"]["resourceVersion"])
        await clock.advance(99)  # the lease: ttl + 5% reuse = 105 s
        assert await names(events) == ["e1"]
        await clock.advance(7)
        assert await names(events) == []
        typ, obj = await next_event(stream)
        await stream.aclose()
        assert (typ, obj["metadata"]["name"]) == ("DELETED", "e1")
        assert int(obj["metadata"]["resourceVersion"]) > int(rv)
        assert await s.store.get("/registry/events/default/e1") is None
    finally:
        await stop(s)


async def test_an_updated_event_lives_on_from_its_last_write():
    clock = VirtualClock(start=T0)
    s, client = await start(MemoryStore(), clock, 100)
    events = client.resource("", "v1", "events")
    try:
        await events.create(event("e1", clock))
        await events.create(event("e2", clock))
        await clock.advance(60)
        await events.patch("e1", {"count": 2, "lastTimestamp": clock.rfc3339()}, namespace="default")
        await clock.advance(50)  # the first lease is past; e1 moved to a later one with its update
        assert await names(events) == ["e1"]
        await clock.advance(60)
        assert await names(events) == []
    finally:
        await stop(s)


async def test_a_lease_every_event_left_wakes_no_timer_and_the_next_expires_at_its_ttl():
    """A lease whose Events were all written again since deletes nothing when it expires: the
    server's timer sleeps through it (no virtual-clock wake-up) to the next lease's expiry."""
    clock = VirtualClock(start=T0)
    s, client = await start(MemoryStore(), clock, 100)
    events = client.resource("", "v1", "events")
    try:
        await events.create(event("e1", clock))  # the first lease: 105 s
        await clock.advance(10)
        await events.create(event("e2", clock))  # past the 5 s reuse: a second lease, at 115 s
        await clock.advance(10)
        await events.patch("e2", {"count": 2, "lastTimestamp": clock.rfc3339()}, namespace="default")  # a third, at 125 s
        await clock.advance(86)
        assert await names(events) == ["e2"]
        woken = clock.wakeups
        await clock.advance(18)  # 124 s: past the second lease's expiry
        assert clock.wakeups == woken and await names(events) == ["e2"]
        await clock.advance(2)  # 126 s: 100 s after e2's last write and the reuse
        assert clock.wakeups == woken + 1 and await names(events) == []
    finally:
        await stop(s)


async def test_an_events_k8s_io_event_expires_too_and_the_lease_is_reused_for_close_expiries():
    clock = VirtualClock(start=T0)
    s, client = await start(MemoryStore(), clock, 3600)
    core = client.resource("", "v1", "events")
    v1 = client.resource("events.k8s.io", "v1", "events")
    try:
        await core.create(event("a", clock))
        await clock.advance(30)
        await v1.create({"metadata": {"name": "b", "namespace": "default"}, "eventTime": clock.rfc3339_micro(),
                         "type": "Normal", "reason": "Started", "action": "Start", "reportingController": "x.io/c",
                         "reportingInstance": "i", "regarding": {"kind": "Pod", "name": "p", "namespace": "default"}})
        await clock.advance(3600 + 60 - 30 - 1)  # both on the first lease: 3660 s from a's create
        assert await names(core) == ["a", "b"]
        await clock.advance(2)
        assert await names(core) == []
        assert b"etcd_lease_object_counts_count 1\n" in s.metrics.render()  # one grant (upstream observes at each)
    finally:
        await stop(s)


async def test_after_a_restart_events_past_their_ttl_go_at_once_and_the_others_at_theirs():
    store = MemoryStore()
    clock = VirtualClock(start=T0)
    s, client = await start(store, clock, 100)
    events = client.resource("", "v1", "events")
    await events.create(event("old", clock))
    await events.create(event("rewritten", clock))
    await clock.advance(50)
    await events.create(event("young", clock))
    await stop(s)

    clock = VirtualClock(start=T0 + 120)  # the server was down for 70 s
    s, client = await start(store, clock, 100)
    events = client.resource("", "v1", "events")
    try:
        # written as the restart reads the store: through the REST stack itself, which answers without
        # suspending, so it commits before the TTL's restore has had a turn (a client's request yields first)
        await s.rest.patch(events.res, "v1", "default", "rewritten", "application/merge-patch+json",
                           b'{"count": 2}', WriteOptions())
        await clock.advance(0)
        assert await names(events) == ["rewritten", "young"]
        await clock.advance(29)
        assert await names(events) == ["rewritten", "young"]
        await clock.advance(2)  # 100 s after its create
        assert await names(events) == ["rewritten"]
        await clock.advance(100)
        assert await names(events) == []
    finally:
        await stop(s)


async def test_other_resources_never_expire():
    clock = VirtualClock(start=T0)
    s, client = await start(MemoryStore(), clock, 10)
    cms = client.resource("", "v1", "configmaps")
    try:
        await cms.create({"metadata": {"name": "c", "namespace": "default"}})
        await clock.advance(1000)
        assert [o["metadata"]["name"] for o in (await cms.list("default"))[0]] == ["c"]
    finally:
        await stop(s)


async def test_events_whose_writes_a_relist_of_the_cache_stood_for_expire_from_then():
    clock = VirtualClock(start=T0)
    s, client = await start(MemoryStore(), clock, 100)
    events = client.resource("", "v1", "events")
    try:
        await events.create(event("rewritten", clock))
        s.cache.on_event.remove(s.event_ttl._observe)  # the writes of a gap the cache relists after
        await clock.advance(60)
        await events.create(event("new", clock))
        await events.patch("rewritten", {"count": 2}, namespace="default")
        s.cache.on_event.append(s.event_ttl._observe)
        await s.cache._relist()
        await clock.advance(99)
        assert await names(events) == ["new", "rewritten"]
        await clock.advance(7)  # 105 s after the relist
        assert await names(events) == []
    finally:
        await stop(s)


class FailingOnce(MemoryStore):
    """A store whose first delete fails, as an etcd that is briefly unreachable."""

    failed = False

    async def delete(self, key, expected_mod_revision=None, prev=None):
        if not self.failed:
            self.failed = True
            raise Unavailable("no endpoint answered")
        return await super().delete(key, expected_mod_revision, prev)


async def test_a_delete_the_store_fails_is_tried_again():
    clock = VirtualClock(start=T0)
    store = FailingOnce()
    s, client = await start(store, clock, 100)
    events = client.resource("", "v1", "events")
    try:
        await events.create(event("e1", clock))
        await clock.advance(105.5)  # past the lease's 105 s: its delete failed
        assert store.failed and await names(events) == ["e1"]
        await clock.advance(1)
        assert await names(events) == []
    finally:
        await stop(s)


async def test_an_expired_event_is_deleted_with_the_caches_kv_and_no_row_read(tmp_path):
    """Over SQLite the expiry hands the store the watch cache's KV of the revision the Event was
    attached at (Store.delete's prev), whether the entry still holds the stored bytes or was served
    whole since: the DELETE runs alone, no SELECT first, and watchers still get the last object."""
    clock = VirtualClock(start=T0)
    store = SQLiteStore(str(tmp_path / "db.sqlite"))
    s, client = await start(store, clock, 100)
    events = client.resource("", "v1", "events")
    statements: list[str] = []
    try:
        await events.create(event("e1", clock))
        await events.create(event("e2", clock))
        await events.get("e2", "default")  # served whole: the entry's raw takes the bytes' place
        stream = await events.watch("default", (await events.list("default"))[1])
        store._db.set_trace_callback(statements.append)
        await clock.advance(106)
        store._db.set_trace_callback(None)
        assert await names(events) == []
        deleted = [await next_event(stream), await next_event(stream)]
        await stream.aclose()
        assert [(typ, obj["metadata"]["name"], obj["message"]) for typ, obj in deleted] == [
            ("DELETED", "e1", "0/3 nodes are available"), ("DELETED", "e2", "0/3 nodes are available")]
        assert [q.split()[0] for q in statements if not q.startswith(("BEGIN", "COMMIT", "UPDATE meta"))] == [
            "DELETE", "DELETE"]
    finally:
        await stop(s)
        await store.close()


async def test_events_written_at_one_instant_share_a_lease_up_to_a_thousand():
    clock = VirtualClock(start=T0)
    s, client = await start(MemoryStore(), clock, 3600)
    try:
        for i in range(1001):
            s.event_ttl._observe(CacheEvent(ADDED, f"/registry/events/default/e{i}", None, None, i + 100))
        assert [len(lease.keys) for _, _, lease in sorted(s.event_ttl._leases)] == [1000, 1]
        metrics = s.metrics.render().decode()
        # each grant observes the attachments since the one before, its own included: 1, then 1001
        assert 'etcd_lease_object_counts_bucket{le="10"} 1\n' in metrics
        assert 'etcd_lease_object_counts_bucket{le="1000"} 1\n' in metrics
        assert 'etcd_lease_object_counts_bucket{le="2500"} 2\n' in metrics
    finally:
        await stop(s)


async def test_a_ttl_under_a_second_attaches_no_lease_as_upstream():
    """kube-apiserver hands the registry `uint64(ttl.Seconds())`: 500ms is 0, and etcd gets no lease."""
    clock = VirtualClock(start=T0)
    s, client = await start(MemoryStore(), clock, parse_ttl("500ms"))
    events = client.resource("", "v1", "events")
    try:
        await events.create(event("e1", clock))
        await clock.advance(1000)
        assert await names(events) == ["e1"]
    finally:
        await stop(s)
