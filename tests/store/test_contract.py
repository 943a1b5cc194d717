"""The behaviour every Store backend must share (memory, SQLite, etcd)."""

from __future__ import annotations

import asyncio
import socket

import aiohttp
import pytest
from aiohttp import web

from nanokube.store.interface import DELETE, KV, PUT, Compacted, KeyExists, KeyNotFound, RevisionMismatch, Unavailable


async def test_create_then_get(store, prefix):
    before = await store.current_revision()
    kv = await store.create(prefix + "a", b"one")
    assert kv.key == prefix + "a" and kv.value == b"one"
    assert kv.create_revision == kv.mod_revision > before
    assert await store.get(prefix + "a") == kv
    assert await store.get(prefix + "missing") is None


async def test_create_existing_raises_key_exists(store, prefix):
    await store.create(prefix + "a", b"one")
    with pytest.raises(KeyExists) as err:
        await store.create(prefix + "a", b"two")
    assert err.value.key == prefix + "a"
    assert (await store.get(prefix + "a")).value == b"one"


async def test_a_refused_create_leaves_the_writes_beside_it(store, prefix):
    """Writes issued in one loop turn may share a transaction (SQLite's group commit): one
    refused create must not take the others with it, nor leave a revision behind."""
    first = await store.create(prefix + "a", b"one")
    b, refused, c = await asyncio.gather(store.create(prefix + "b", b"b"), store.create(prefix + "a", b"again"),
                                         store.create(prefix + "c", b"c"), return_exceptions=True)
    assert isinstance(refused, KeyExists)
    assert (await store.get(prefix + "a")).value == b"one"
    assert await store.get(prefix + "b") == b and await store.get(prefix + "c") == c
    assert sorted((b.mod_revision, c.mod_revision)) == [first.mod_revision + 1, first.mod_revision + 2]


async def test_update_compare_and_swap(store, prefix):
    first = await store.create(prefix + "a", b"one")
    second = await store.update(prefix + "a", b"two", first.mod_revision)
    assert second.value == b"two"
    assert second.create_revision == first.create_revision
    assert second.mod_revision > first.mod_revision
    assert await store.get(prefix + "a") == second


async def test_update_stale_revision_carries_current(store, prefix):
    first = await store.create(prefix + "a", b"one")
    second = await store.update(prefix + "a", b"two", first.mod_revision)
    with pytest.raises(RevisionMismatch) as err:
        await store.update(prefix + "a", b"three", first.mod_revision)
    assert err.value.current == second
    assert await store.get(prefix + "a") == second


async def test_an_update_handed_the_kv_it_replaces_publishes_it_as_prev(store, prefix):
    """`prev` (the caller's copy of the key at the expected revision, as the watch cache holds it)
    is the event's previous KV; a `prev` at another revision or of another key is ignored and the
    event still carries the real previous KV."""
    start = await store.current_revision()
    first = await store.create(prefix + "a", b"one")
    other = await store.create(prefix + "b", b"b")
    second = await store.update(prefix + "a", b"two", first.mod_revision, first)
    third = await store.update(prefix + "a", b"three", second.mod_revision, first)
    fourth = await store.update(prefix + "a", b"four", third.mod_revision,
                                KV(prefix + "b", b"b", other.create_revision, third.mod_revision))
    assert (second.value, second.create_revision) == (b"two", first.create_revision)
    assert [kv.create_revision for kv in (third, fourth)] == [first.create_revision] * 2
    assert await store.get(prefix + "a") == fourth
    watch = store.watch(start)
    try:
        events = [await anext(watch) for _ in range(5)]
    finally:
        await watch.aclose()
    assert [(e.kv, e.prev) for e in events[2:]] == [(second, first), (third, second), (fourth, third)]


async def test_an_update_handed_a_stale_kv_is_a_conflict_and_writes_nothing(store, prefix):
    """A `prev` at the expected revision when the key has moved on since (a watch cache behind the
    store): RevisionMismatch carrying the key's current KV, as without it, and no write."""
    first = await store.create(prefix + "a", b"one")
    second = await store.update(prefix + "a", b"two", first.mod_revision)
    with pytest.raises(RevisionMismatch) as err:
        await store.update(prefix + "a", b"three", first.mod_revision, first)
    assert err.value.current == second
    gone = await store.delete(prefix + "a")
    assert gone.value == b"two"
    with pytest.raises(KeyNotFound):
        await store.update(prefix + "a", b"four", second.mod_revision, second)
    assert await store.get(prefix + "a") is None
    assert await store.current_revision() == gone.mod_revision


async def test_an_update_handed_the_kv_of_a_key_deleted_and_made_again_is_a_conflict(store, prefix):
    """The key deleted and created again between the caller's read and its write (a watch cache
    behind both): the `prev` it hands is of the old incarnation, so the write is refused with the
    new one's KV, which it leaves as it is, and publishes nothing."""
    first = await store.create(prefix + "a", b"old")
    await store.delete(prefix + "a")
    again = await store.create(prefix + "a", b"new")
    with pytest.raises(RevisionMismatch) as err:
        await store.update(prefix + "a", b"lost", first.mod_revision, first)
    assert err.value.current == again and again.create_revision > first.create_revision
    assert await store.get(prefix + "a") == again
    assert await store.current_revision() == again.mod_revision


async def test_a_delete_handed_the_kv_it_removes_publishes_it_as_prev(store, prefix):
    """`delete`'s `prev` as `update`'s: at the expected revision (or, unconditional, the key's
    current one) it is the deleted value and the event's prev; one of another key, or behind an
    unconditional delete's key (moved on, or deleted and made again), is ignored, and the deleted
    value and the event's prev are what the store held."""
    start = await store.current_revision()
    a1 = await store.create(prefix + "a", b"a1")
    a2 = await store.update(prefix + "a", b"a2", a1.mod_revision, a1)
    b1 = await store.create(prefix + "b", b"b1")
    c1 = await store.create(prefix + "c", b"c1")
    c2 = await store.update(prefix + "c", b"c2", c1.mod_revision)
    d1 = await store.create(prefix + "d", b"d1")
    await store.delete(prefix + "d")
    d2 = await store.create(prefix + "d", b"d2")
    e1 = await store.create(prefix + "e", b"e1")
    gone = [await store.delete(prefix + "a", a2.mod_revision, a2),
            await store.delete(prefix + "b", None, b1),
            await store.delete(prefix + "c", None, c1),
            await store.delete(prefix + "d", None, d1),
            await store.delete(prefix + "e", e1.mod_revision, KV(prefix + "a", b"a2", a1.create_revision, e1.mod_revision))]
    held = [a2, b1, c2, d2, e1]
    assert [(g.key, g.value, g.create_revision) for g in gone] == [(h.key, h.value, h.create_revision) for h in held]
    assert [g.mod_revision for g in gone] == list(range(e1.mod_revision + 1, e1.mod_revision + 6))
    assert await store.list(prefix) == ([], gone[-1].mod_revision)
    watch = store.watch(start)
    try:
        events = [await anext(watch) for _ in range(14)]
    finally:
        await watch.aclose()
    assert [(e.type, e.kv, e.prev) for e in events[9:]] == [(DELETE, g, h) for g, h in zip(gone, held)]


async def test_a_delete_handed_a_stale_kv_is_a_conflict_and_deletes_nothing(store, prefix):
    """A conditional delete handed the KV it expects when the key moved on since, or was deleted
    and made again: RevisionMismatch with the key's current KV, as without it, and no write; the
    key gone: KeyNotFound."""
    first = await store.create(prefix + "a", b"one")
    second = await store.update(prefix + "a", b"two", first.mod_revision)
    with pytest.raises(RevisionMismatch) as err:
        await store.delete(prefix + "a", first.mod_revision, first)
    assert err.value.current == second and await store.get(prefix + "a") == second
    await store.delete(prefix + "a", second.mod_revision, second)
    with pytest.raises(KeyNotFound):
        await store.delete(prefix + "a", second.mod_revision, second)
    with pytest.raises(KeyNotFound):
        await store.delete(prefix + "a", None, second)
    again = await store.create(prefix + "a", b"new")
    with pytest.raises(RevisionMismatch) as err:
        await store.delete(prefix + "a", second.mod_revision, second)
    assert err.value.current == again and await store.get(prefix + "a") == again
    assert await store.current_revision() == again.mod_revision


async def test_update_missing_raises_key_not_found(store, prefix):
    with pytest.raises(KeyNotFound):
        await store.update(prefix + "nope", b"x", 0)
    with pytest.raises(KeyNotFound):
        await store.update(prefix + "nope", b"x", 1)
    assert await store.get(prefix + "nope") is None


async def test_delete_returns_last_value_at_deletion_revision(store, prefix):
    kv = await store.create(prefix + "a", b"one")
    gone = await store.delete(prefix + "a")
    assert gone.key == prefix + "a" and gone.value == b"one"
    assert gone.create_revision == kv.create_revision
    assert gone.mod_revision > kv.mod_revision
    assert gone.mod_revision == await store.current_revision()
    assert await store.get(prefix + "a") is None
    with pytest.raises(KeyNotFound):
        await store.delete(prefix + "a")


async def test_conditional_delete(store, prefix):
    first = await store.create(prefix + "a", b"one")
    second = await store.update(prefix + "a", b"two", first.mod_revision)
    with pytest.raises(RevisionMismatch) as err:
        await store.delete(prefix + "a", first.mod_revision)
    assert err.value.current == second
    gone = await store.delete(prefix + "a", second.mod_revision)
    assert gone.value == b"two"
    assert await store.get(prefix + "a") is None


async def test_revisions_are_global_and_monotonic(store, prefix):
    revs = [(await store.create(prefix + k, b"v")).mod_revision for k in ("b", "a", "c")]
    a = await store.get(prefix + "a")
    revs.append((await store.update(prefix + "a", b"w", a.mod_revision)).mod_revision)
    revs.append((await store.delete(prefix + "b")).mod_revision)
    revs.append((await store.create(prefix + "b", b"again")).mod_revision)
    assert revs == sorted(set(revs))
    assert await store.current_revision() == revs[-1]
    assert (await store.get(prefix + "b")).create_revision == revs[-1]


async def test_list_by_prefix_sorted(store, prefix):
    for name in ("ns/c", "ns/a", "ns/b", "ns0", "nsx/a", "other"):
        await store.create(prefix + name, name.encode())
    await store.delete(prefix + "ns/b")
    kvs, rev = await store.list(prefix + "ns/")
    assert [kv.key for kv in kvs] == [prefix + "ns/a", prefix + "ns/c"]
    assert [kv.value for kv in kvs] == [b"ns/a", b"ns/c"]
    assert rev == await store.current_revision()
    everything, _ = await store.list(prefix)
    assert [kv.key for kv in everything] == [prefix + n for n in ("ns/a", "ns/c", "ns0", "nsx/a", "other")]


async def test_watch_replays_backlog_then_live_events(store, prefix):
    start = await store.current_revision()
    a1 = await store.create(prefix + "a", b"a1")
    a2 = await store.update(prefix + "a", b"a2", a1.mod_revision)
    b1 = await store.create(prefix + "b", b"b1")
    a_gone = await store.delete(prefix + "a")
    watch = store.watch(start)
    try:
        backlog = [await anext(watch) for _ in range(4)]
        assert [(e.type, e.kv, e.prev) for e in backlog] == [
            (PUT, a1, None),
            (PUT, a2, a1),
            (PUT, b1, None),
            (DELETE, a_gone, a2),
        ]
        assert [e.revision for e in backlog] == [a1.mod_revision, a2.mod_revision, b1.mod_revision, a_gone.mod_revision]
        b2 = await store.update(prefix + "b", b"b2", b1.mod_revision)
        c1 = await store.create(prefix + "c", b"c1")
        live = [await anext(watch), await anext(watch)]
        assert [(e.type, e.kv, e.prev) for e in live] == [(PUT, b2, b1), (PUT, c1, None)]
    finally:
        await watch.aclose()


async def test_watch_from_now_sees_only_later_events(store, prefix):
    await store.create(prefix + "old", b"x")
    watch = store.watch(await store.current_revision())
    try:
        new = await store.create(prefix + "new", b"y")
        event = await anext(watch)
        assert (event.type, event.kv) == (PUT, new)
    finally:
        await watch.aclose()


async def test_watch_ends_when_store_closes(store, prefix):
    first = await store.create(prefix + "a", b"x")
    watch = store.watch(first.mod_revision - 1)
    assert (await anext(watch)).kv == first
    await store.close()
    with pytest.raises(StopAsyncIteration):
        await anext(watch)


async def test_watch_from_compacted_revision_raises(backend, store, prefix):
    a1 = await store.create(prefix + "a", b"1")
    a2 = await store.update(prefix + "a", b"2", a1.mod_revision)
    a3 = await store.update(prefix + "a", b"3", a2.mod_revision)
    await store.compact(a2.mod_revision)
    assert store.compacted_revision >= a2.mod_revision
    assert await store.get(prefix + "a") == a3
    with pytest.raises(Compacted) as err:
        await anext(store.watch(a1.mod_revision))
    assert err.value.compacted >= a2.mod_revision
    watch = store.watch(a2.mod_revision)
    try:
        event = await anext(watch)
        assert (event.kv, event.prev) == (a3, a2)
    finally:
        await watch.aclose()
    if backend.durable:
        reopened = await backend.reopen(store)
        with pytest.raises(Compacted):
            await anext(reopened.watch(a1.mod_revision - 1))


async def test_compaction_rounds_compact_where_the_round_before_stood(backend, store, prefix):
    """kube-apiserver's compactor: a round compacts at the revision the round before returned (the
    first at none). On etcd the rounds are counted by compact_rev_key's version, so a second server
    whose count is behind compacts nothing and learns the count and the revision compacted."""
    turn, _, _ = await store.compaction_round(-1, 0)  # etcd's count so far (the server is the session's)
    a1 = await store.create(prefix + "a", b"1")
    a2 = await store.update(prefix + "a", b"2", a1.mod_revision)
    turn, seen, compacted = await store.compaction_round(turn, 0)
    assert compacted == 0 and seen >= a2.mod_revision
    watch = store.watch(a1.mod_revision)
    try:
        assert (await anext(watch)).kv == a2  # nothing compacted yet
    finally:
        await watch.aclose()
    await store.update(prefix + "a", b"3", a2.mod_revision)
    turn, _, compacted = await store.compaction_round(turn, seen)
    assert compacted == seen and store.compacted_revision >= seen
    with pytest.raises(Compacted):
        await anext(store.watch(a1.mod_revision))
    if backend.name == "etcd":
        other = await backend.open()
        assert (await other.compaction_round(0, 0))[::2] == (turn, seen)
        assert other.compacted_revision == seen


async def test_revisions_continue_after_reopen(backend, store, prefix):
    if not backend.durable:
        pytest.skip("the memory store keeps nothing across reopen")
    kept = await store.create(prefix + "kept", b"k")
    await store.create(prefix + "gone", b"g")
    last = (await store.delete(prefix + "gone")).mod_revision
    store = await backend.reopen(store)
    assert await store.current_revision() == last
    assert await store.get(prefix + "kept") == kept
    assert await store.get(prefix + "gone") is None
    assert (await store.create(prefix + "next", b"n")).mod_revision == last + 1


async def test_etcd_fails_over_to_next_endpoint(etcd_server, prefix):
    from nanokube.store.etcd import EtcdStore

    dead = f"127.0.0.1:{_unused_port()}"
    store = EtcdStore([dead, etcd_server.endpoint])
    await store.start()
    try:
        kv = await store.create(prefix + "a", b"x")
        assert await store.get(prefix + "a") == kv
        watch = store.watch(kv.mod_revision - 1)
        assert (await anext(watch)).kv == kv
        await watch.aclose()
    finally:
        await store.close()


async def test_etcd_without_any_endpoint_is_unavailable():
    from nanokube.store.etcd import EtcdStore

    store = EtcdStore([f"127.0.0.1:{_unused_port()}", f"127.0.0.1:{_unused_port()}"])
    try:
        with pytest.raises(Unavailable):
            await store.start()
    finally:
        await store.close()


async def test_etcd_watch_resumes_on_next_endpoint_when_stream_breaks(etcd_server, prefix):
    from nanokube.store.etcd import EtcdStore

    proxy = _TcpProxy(etcd_server.client_port)
    await proxy.start()
    watcher = EtcdStore([f"127.0.0.1:{proxy.port}", etcd_server.endpoint])
    writer = EtcdStore([etcd_server.endpoint])
    await watcher.start()
    await writer.start()
    try:
        first = await writer.create(prefix + "a", b"1")
        watch = watcher.watch(first.mod_revision - 1)
        assert (await anext(watch)).kv == first
        await proxy.cut()
        second = await writer.update(prefix + "a", b"2", first.mod_revision)
        third = await writer.create(prefix + "b", b"3")
        resumed = [await anext(watch), await anext(watch)]
        assert [(e.kv, e.prev) for e in resumed] == [(second, first), (third, None)]
        await watch.aclose()
    finally:
        await watcher.close()
        await writer.close()
        await proxy.cut()


async def test_etcd_falls_back_to_v3beta_gateway(etcd_server, prefix):
    """etcd 3.3 (Ubuntu 22.04's package) serves the gateway under /v3beta only."""
    from nanokube.store.etcd import EtcdStore

    seen: list[str] = []

    async def forward(request: web.Request) -> web.Response:
        seen.append(request.path)
        url = f"http://{etcd_server.endpoint}/v3/{request.match_info['rest']}"
        async with aiohttp.ClientSession() as session, session.post(url, data=await request.read()) as resp:
            return web.Response(status=resp.status, body=await resp.read(), content_type="application/json")

    app = web.Application()
    app.router.add_post("/v3beta/{rest:.*}", forward)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    store = EtcdStore([f"127.0.0.1:{port}"])
    try:
        await store.start()
        kv = await store.create(prefix + "a", b"x")
        assert await store.get(prefix + "a") == kv
        assert seen and all(path.startswith("/v3beta/") for path in seen)
    finally:
        await store.close()
        await runner.cleanup()


class _TcpProxy:
    """Forwards loopback TCP to a port until `cut`, which drops every
    connection and stops accepting new ones."""

    def __init__(self, target_port: int):
        self.target_port = target_port
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        self._writers += [writer, up_writer]
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def cut(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for writer in self._writers:
            writer.transport.abort()
        self._writers.clear()


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
