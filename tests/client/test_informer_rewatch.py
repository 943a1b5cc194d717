"""An informer over HTTP when the server ends its watch (the timeoutSeconds the informer asked for,
5 to 10 minutes as client-go's reflector draws it, on the server's clock): like the reflector it
watches again from the last resourceVersion it saw, without a list in between and without replaying
adds; only a 410 (that version left the server's window) makes it sync again, after a backoff. It
syncs by a streaming list (sendInitialEvents, client-go's WatchListClient), or, where a client or
server has none, by a list."""

import asyncio
import contextlib
import logging
from types import SimpleNamespace

import pytest

from nanokube.apiserver.app import APIServer
from nanokube.client.http import HTTPClient
from nanokube.client.informer import Informer
from nanokube.clock import VirtualClock
from nanokube.machinery.errors import APIError
from nanokube.pki.ca import ensure_pki
from nanokube.pki.kubeconfig import write_kubeconfig
from nanokube.store.memory import MemoryStore
from tests.controllers import tries


@contextlib.asynccontextmanager
async def served(tmp_path, window: int = 50_000, history: int | None = None):
    """A server on a virtual clock whose watches without a timeoutSeconds would end after an hour or
    two, whose lists at a revision reach at most `window` events back, and whose watches resume from
    at most `history` events of their resource back (where given), and a client."""
    pki = ensure_pki(str(tmp_path))
    clock = VirtualClock()
    server = APIServer(MemoryStore(), pki, port=0, clock=clock, min_request_timeout=3600)
    server.cache.window = window
    if history is not None:
        server.cache.capacity_min = server.cache.capacity_max = history
    await server.start()
    kubeconfig = str(tmp_path / "kubeconfig")
    write_kubeconfig(kubeconfig, server.url, pki)
    client = HTTPClient.from_kubeconfig(kubeconfig, field_manager="tester")
    await client.start()
    try:
        yield client, clock
    finally:
        await client.close()
        await server.stop()


def cm(name):
    return {"metadata": {"name": name, "namespace": "default"}}


class Recorded:
    """An informer over the client whose list, streaming list ("stream") and watch requests are noted,
    in order, and whose handlers' calls are noted; `gate`, when set, holds back the watch requests
    (streams too) after the first. Its
    draws are all 0.5: each watch asks for a timeoutSeconds of 450, each backoff is 1.5 steps."""

    def __init__(self, client, clock):
        self.cms = client.resource("", "v1", "configmaps")
        self.inf = Informer(self.cms, namespace="default", clock=clock, draw=lambda: 0.5)
        self.calls: list[tuple[str, str]] = []
        self.timeouts: list[int | None] = []
        self.seen: list[tuple[str, str]] = []
        self.gate: asyncio.Event | None = None
        rc = self.inf.rc
        real_list, real_watch = rc.list_page, rc.watch

        async def listed(*a, **kw):
            items, meta = await real_list(*a, **kw)
            self.calls.append(("list", meta["resourceVersion"]))
            return items, meta

        async def watched(namespace, rv, *a, **kw):
            self.calls.append(("stream" if kw.get("send_initial_events") else "watch", rv))
            self.timeouts.append(kw.get("timeout_seconds"))
            if self.gate is not None and self.watches() > 1:
                await self.gate.wait()
            return await real_watch(namespace, rv, *a, **kw)
        rc.list_page, rc.watch = listed, watched
        self.inf.add_handlers(on_add=lambda o: self.seen.append(("add", o["metadata"]["name"])),
                              on_update=lambda _o, n: self.seen.append(("update", n["metadata"]["name"])),
                              on_delete=lambda o: self.seen.append(("delete", o["metadata"]["name"])))

    async def until(self, what, cond) -> None:
        for _ in tries():
            if cond():
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"{what}: calls {self.calls}, seen {self.seen}")

    @contextlib.asynccontextmanager
    async def running(self):
        task = asyncio.create_task(self.inf.run())
        try:
            await asyncio.wait_for(self.inf.synced.wait(), 10)
            yield
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def watches(self) -> int:
        return sum(1 for c in self.calls if c[0] != "list")


async def test_a_watch_the_server_ends_is_reopened_from_the_last_resource_version_without_a_list(tmp_path):
    async with served(tmp_path) as (client, clock):
        r = Recorded(client, clock)
        async with r.running():
            a = await r.cms.create(cm("a"))
            await r.until("a's add", lambda: r.seen == [("add", "a")])
            for _ in range(449):  # the informer's timeoutSeconds, not the server's hour
                await clock.advance(1)
            assert r.watches() == 1
            for _ in range(2):  # past the watch's end, with its bookmark 2 s before
                await clock.advance(1)
            await r.until("a second watch", lambda: r.watches() == 2)
            assert r.timeouts == [450, 450]
            await r.cms.create(cm("b"))
            await r.until("b's add", lambda: r.seen == [("add", "a"), ("add", "b")])
            assert r.calls[0] == ("stream", "")  # a consistent read to start
            assert [c[0] for c in r.calls] == ["stream", "watch"]
            # from the bookmark's resourceVersion (the revision when it was sent), not older than a's
            assert int(r.calls[1][1]) >= int(a["metadata"]["resourceVersion"])


async def test_a_watch_from_a_resource_version_out_of_the_server_s_window_syncs_again(tmp_path):
    async with served(tmp_path, history=2) as (client, clock):
        r = Recorded(client, clock)
        r.gate = asyncio.Event()
        async with r.running():
            await r.cms.create(cm("gone"))
            await r.until("gone's add", lambda: r.seen == [("add", "gone")])
            for _ in range(451):
                await clock.advance(1)
            await r.until("a second watch", lambda: r.watches() == 2)
            # while the informer is between watches: a delete and more writes than the history holds
            await r.cms.delete("gone", "default")
            for i in range(4):
                await r.cms.create(cm(f"b{i}"))
            r.gate.set()
            await r.until("the 410", lambda: clock.next_due() == clock.monotonic() + 1.2)
            assert r.calls[-1][0] == "watch", "the relist waits out the backoff (0.8 s, jittered by half)"
            await clock.advance(1.2)
            await r.until("the relist's news", lambda: len(r.seen) == 6)
            assert sorted(r.seen[1:]) == [("add", "b0"), ("add", "b1"), ("add", "b2"), ("add", "b3"),
                                          ("delete", "gone")]
            await r.until("a watch after the relist", lambda: r.watches() == 3)
            assert [c[0] for c in r.calls] == ["stream", "watch", "stream"]  # the stream goes on as the watch


async def test_after_a_410_the_stream_asks_for_the_last_version_seen_and_no_change_is_lost_or_doubled(tmp_path):
    """The reflector's rewatchResourceVersion: the first streaming list asks for "" (a consistent
    read), the one after the watch expired for the last resourceVersion the informer saw (at least
    that fresh). Between the watches an object is updated twice, one deleted, one created, past
    the resource's history in the watch cache: each handler hears each object once."""
    async with served(tmp_path, history=2) as (client, clock):
        r = Recorded(client, clock)
        r.gate = asyncio.Event()
        async with r.running():
            for name in ("kept", "changed", "gone"):
                await r.cms.create(cm(name))
            await r.until("the adds", lambda: len(r.seen) == 3)
            last = r.inf.last_sync_rv
            for _ in range(451):
                await clock.advance(1)
            await r.until("a second watch", lambda: r.watches() == 2)
            changed = await r.cms.get("changed", "default")
            for v in ("1", "2"):
                changed = await r.cms.update({**changed, "data": {"v": v}})
            await r.cms.delete("gone", "default")
            await r.cms.create(cm("new"))
            r.gate.set()
            await r.until("the 410's backoff", lambda: clock.next_due() == clock.monotonic() + 1.2)
            await clock.advance(1.2)
            await r.until("a watch after the relist", lambda: r.watches() == 3)
            streams = [rv for kind, rv in r.calls if kind == "stream"]
            assert streams[0] == "" and int(streams[1]) >= int(last), r.calls
            assert sorted(r.seen[3:]) == [("add", "new"), ("delete", "gone"), ("update", "changed")]
            assert r.inf.get("default/changed")["data"] == {"v": "2"}
            await r.cms.create(cm("after"))
            await r.until("the new watch's add", lambda: r.seen[-1] == ("add", "after"))
            items, _ = await r.cms.list("default")
            assert {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in items} == {
                o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in r.inf.list()}
            assert len(r.seen) == 7


class _Restored:
    """A client for a server whose store was restored from an older backup: a list at a
    resourceVersion other than "" is refused as too large (504, cause ResourceVersionTooLarge)
    or, with `code` 410, as expired; its one watch ends with a 410."""

    def __init__(self, code: int):
        self.res = SimpleNamespace(plural="configmaps")
        self.code = code
        self.asked: list[str] = []

    async def list(self, namespace, label_selector, field_selector, resource_version=""):
        self.asked.append(resource_version)
        if len(self.asked) > 1 and resource_version != "":
            if self.code == 410:
                raise APIError(410, "Expired", "too old resource version")
            raise APIError(504, "Timeout", "Timeout: Too large resource version",
                           {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}]})
        return [{"metadata": {"name": f"cm{len(self.asked)}", "namespace": "default", "resourceVersion": "7"}}], "7"

    async def watch(self, namespace, rv, label_selector, field_selector, timeout_seconds=None):
        async def stream():
            if len(self.asked) == 1:
                yield "ADDED", {"metadata": {"name": "w", "namespace": "default", "resourceVersion": "9"}}
                raise APIError(410, "Expired", "too old resource version")
            await asyncio.Event().wait()
            yield  # pragma: no cover
        return stream()


@pytest.mark.parametrize("code", [410, 504])
async def test_a_relist_refused_at_its_resource_version_is_tried_again_at_once_as_a_quorum_read(code):
    clock = VirtualClock()
    rc = _Restored(code)
    inf = Informer(rc, clock=clock, draw=lambda: 0.5)
    task = asyncio.create_task(inf.run())
    try:
        for _ in tries():
            if len(rc.asked) == 1 and clock.next_due() is not None:
                break
            await asyncio.sleep(0.01)
        await clock.advance(2)  # past the backoff (0.8 s, jittered by half) after the watch's 410
        for _ in tries():
            if len(rc.asked) == 3:
                break
            await asyncio.sleep(0.01)
        # no backoff between the refused list and the quorum read; the watch goes on from the latter
        assert rc.asked == ["0", "9", ""]
        assert [o["metadata"]["name"] for o in inf.list()] == ["cm3"]
        assert inf.last_sync_rv == "7"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def _cm(name: str, rv: str) -> dict:
    return {"metadata": {"name": name, "namespace": "default", "resourceVersion": rv}}


class _Streamer:
    """A client that streams lists: its first stream sends one object and its initial-events-end
    bookmark at 7, then a 410; a stream from a version other than "" is then refused (`refusal`,
    as a server restored from a backup or past its window), or every stream is when `refusal` is a
    400 (a server that will not stream), its lists answering instead."""

    watch_list = True

    def __init__(self, refusal: APIError):
        self.res = SimpleNamespace(plural="configmaps")
        self.refusal = refusal
        self.calls: list[tuple[str, str]] = []

    async def list(self, namespace, label_selector, field_selector, resource_version=""):
        self.calls.append(("list", resource_version))
        return [_cm("listed", "8")], "8"

    async def watch(self, namespace, rv, label_selector, field_selector, timeout_seconds=None, send_initial_events=False):
        self.calls.append(("stream" if send_initial_events else "watch", rv))
        first = len(self.calls) == 1
        if send_initial_events and (self.refusal.code == 400 or rv != "" and not first):
            raise self.refusal

        async def events():
            if first:
                yield "ADDED", _cm("first", "7")
                yield "BOOKMARK", {"metadata": {"resourceVersion": "7", "annotations": {"k8s.io/initial-events-end": "true"}}}
                raise APIError(410, "Expired", "too old resource version")
            if send_initial_events:
                yield "ADDED", _cm("again", "9")
                yield "BOOKMARK", {"metadata": {"resourceVersion": "9", "annotations": {"k8s.io/initial-events-end": "true"}}}
            await asyncio.Event().wait()
            yield  # pragma: no cover
        return events()


TOO_LARGE = APIError(504, "Timeout", "Timeout: Too large resource version",
                     {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}]})


@pytest.mark.parametrize("refusal, calls, names", [
    (APIError(410, "Expired", "too old resource version"), [("stream", ""), ("stream", "7"), ("stream", "")], ["again"]),
    (TOO_LARGE, [("stream", ""), ("stream", "7"), ("stream", "")], ["again"]),
    # a server that will not stream at all: each sync is a list, then a watch from the list's version
    (APIError(400, "BadRequest", "sendInitialEvents is forbidden"), [("stream", ""), ("list", "0"), ("watch", "8")],
     ["listed"]),
], ids=["expired", "too-large", "no-streaming"])
async def test_a_stream_refused_at_its_version_is_asked_for_again_as_a_consistent_read(refusal, calls, names):
    clock = VirtualClock()
    rc = _Streamer(refusal)
    inf = Informer(rc, clock=clock, draw=lambda: 0.5)
    task = asyncio.create_task(inf.run())
    try:
        for _ in tries():
            if rc.calls and clock.next_due() is not None or len(rc.calls) >= len(calls):
                break
            await asyncio.sleep(0.01)
        if refusal.code != 400:
            assert [o["metadata"]["name"] for o in inf.list()] == ["first"]
            await clock.advance(2)  # past the backoff after the watch's 410
        for _ in tries():
            if len(rc.calls) >= len(calls) and [o["metadata"]["name"] for o in inf.list()] == names:
                break
            await asyncio.sleep(0.01)
        # no backoff between the refused stream and the consistent one, which goes on as the watch
        assert rc.calls == calls
        assert [o["metadata"]["name"] for o in inf.list()] == names
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_watch_cut_mid_stream_is_reopened_from_the_last_resource_version_without_a_list(tmp_path, caplog):
    """The connection of a watch ends without its chunked stream's end (the server was killed; here
    the client closes every connection it has): as client-go's stream watcher ends such a watch
    quietly, the informer watches again from the last resourceVersion it saw, lists nothing and logs
    no error; what was written meanwhile comes then."""
    async with served(tmp_path) as (client, clock):
        r = Recorded(client, clock)
        async with r.running():
            a = await r.cms.create(cm("a"))
            await r.until("a's add", lambda: r.seen == [("add", "a")])
            await clock.advance(2)  # not a "very short watch"
            client.conns.close()
            await r.cms.create(cm("b"))
            await r.until("b's add", lambda: r.seen == [("add", "a"), ("add", "b")])
            assert [c[0] for c in r.calls] == ["stream", "watch"]
            assert r.calls[1][1] == a["metadata"]["resourceVersion"]
            assert not [rec for rec in caplog.records if rec.levelno >= 30]


def _informer_lines(caplog) -> list[logging.LogRecord]:
    return [rec for rec in caplog.records if rec.name == "nanokube.client.informer" and rec.levelno >= logging.WARNING]


async def test_a_list_refused_while_the_server_is_down_is_one_warning_line_and_is_tried_again(tmp_path, caplog):
    """As the reflector's "failed to list ...: connection refused": no traceback, no error, and the
    backoff's retry."""
    pki = ensure_pki(str(tmp_path))
    clock = VirtualClock()
    server = APIServer(MemoryStore(), pki, port=0, clock=clock)
    await server.start()
    write_kubeconfig(str(tmp_path / "kubeconfig"), server.url, pki)
    client = HTTPClient.from_kubeconfig(str(tmp_path / "kubeconfig"), field_manager="tester")
    await client.start()
    await server.stop()  # nothing answers on its port now
    cms = client.resource("", "v1", "configmaps")
    cms.watch_list = False  # a plain list, refused
    inf = Informer(cms, namespace="default", clock=clock, draw=lambda: 0.5)
    task = asyncio.create_task(inf.run())
    try:
        for want in (1, 2):
            for _ in tries():
                if len(_informer_lines(caplog)) == want and clock.next_due() is not None:
                    break
                await asyncio.sleep(0.01)
            lines = _informer_lines(caplog)
            assert len(lines) == want, lines
            assert all(rec.levelno == logging.WARNING and rec.exc_info is None for rec in lines)
            assert "list and watch failed" in lines[-1].getMessage()
            await clock.advance(clock.next_due() - clock.monotonic())  # the backoff's wait: a second try
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await client.close()


class _CutStreamer:
    """A client that streams lists: its first stream is cut (the server went away) after one of its
    initial events; the next one sends them all."""

    watch_list = True

    def __init__(self):
        self.res = SimpleNamespace(plural="configmaps")
        self.streams = 0

    async def watch(self, namespace, rv, label_selector, field_selector, timeout_seconds=None, send_initial_events=False):
        import aiohttp
        self.streams += 1
        first = self.streams == 1

        async def events():
            yield "ADDED", _cm("a", "7")
            if first:
                raise aiohttp.ClientPayloadError("Response payload is not completed")
            yield "BOOKMARK", {"metadata": {"resourceVersion": "7", "annotations": {"k8s.io/initial-events-end": "true"}}}
            await asyncio.Event().wait()
            yield  # pragma: no cover
        return events()


async def test_a_streaming_list_cut_in_its_initial_events_is_one_warning_line_and_is_tried_again(caplog):
    clock = VirtualClock()
    rc = _CutStreamer()
    inf = Informer(rc, clock=clock, draw=lambda: 0.5)
    task = asyncio.create_task(inf.run())
    try:
        for _ in tries():
            if clock.next_due() is not None:
                break
            await asyncio.sleep(0.01)
        lines = _informer_lines(caplog)
        assert [(rec.levelno, rec.exc_info) for rec in lines] == [(logging.WARNING, None)]
        assert "Response payload is not completed" in lines[0].getMessage()
        assert rc.streams == 1 and inf.list() == []  # nothing until the backoff's retry
        await clock.advance(2)  # past the backoff (0.8 s, jittered by half)
        await asyncio.wait_for(inf.synced.wait(), 10)
        assert rc.streams == 2 and [o["metadata"]["name"] for o in inf.list()] == ["a"]
        assert len(_informer_lines(caplog)) == 1
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
