"""Many writers and watchers at once against a real `nanokube up` (issue 16).

20 clients create, patch and delete ConfigMaps and Pods in one namespace (300
acknowledged writes, or as many as 4 s allow) while 50 watchers (all objects, or one
label group) follow from one resourceVersion. Every watcher must see every
acknowledged write of its selection, each event once, in resourceVersion order. Then
the writers run again and the server is killed with `kill -9` in the middle: after a
restart every acknowledged write is there, at the resourceVersion it was acknowledged
with, and every acknowledged delete is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import ssl
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import orjson
import pytest

from benchmarks.api import tls_context

from .conftest import STORE, start_cluster

#: the outcome depends on the store: this module runs again on etcd
pytestmark = pytest.mark.store

NS = "stress"
WRITERS, WATCHERS = 20, 50
#: acknowledged writes the writers make while the watchers follow, in at most WRITE_S seconds: a fast
#: machine is done sooner, a loaded one writes fewer (it wrote 330 in 8 s at a load average of 13)
EVENTS, WRITE_S = 300, 4.0
#: NANOKUBE_STRESS_SECONDS: the writers run that long, however many they write (the issue's full run is 60 s)
FULL_S = float(os.environ.get("NANOKUBE_STRESS_SECONDS") or 0)
GROUP = "stress.nanokube.io/group"
KINDS = ("configmaps", "pods")


@dataclass
class Acked:
    """What the server acknowledged, per object: (kind, name) -> last resourceVersion, and deletes."""

    writes: dict[tuple[str, str], int] = field(default_factory=dict)
    #: every acknowledged (kind, name, resourceVersion) of a create or patch
    events: list[tuple[str, str, int]] = field(default_factory=list)
    deleted: dict[tuple[str, str], int] = field(default_factory=dict)
    group: dict[tuple[str, str], str] = field(default_factory=dict)
    #: objects with a request sent but not answered (at a kill, it may or may not have happened)
    in_flight: set[tuple[str, str]] = field(default_factory=set)


class Api:
    def __init__(self, session: aiohttp.ClientSession, url: str):
        self.session, self.url = session, url

    def path(self, kind: str, name: str = "") -> str:
        return f"{self.url}/api/v1/namespaces/{NS}/{kind}" + (f"/{name}" if name else "")

    async def call(self, method: str, url: str, body: dict | None = None, ctype: str = "application/json",
                   params: dict | None = None) -> dict:
        async with self.session.request(method, url, data=None if body is None else orjson.dumps(body),
                                        headers={"Content-Type": ctype}, params=params) as r:
            payload = await r.read()
            if r.status >= 300:
                raise AssertionError(f"{method} {url} -> {r.status}: {payload[:300]!r}")
            return orjson.loads(payload)


def _manifest(kind: str, name: str, group: str) -> dict:
    md = {"name": name, "labels": {GROUP: group}}
    if kind == "configmaps":
        return {"metadata": md, "data": {"v": "0"}}
    return {"metadata": md, "spec": {"containers": [{"name": "c", "image": "busybox"}], "terminationGracePeriodSeconds": 0}}


async def _writer(api: Api, w: int, done: Callable[[], bool], acked: Acked, prefix: str) -> None:
    """Creates objects, patches each twice, deletes every other one, until `done()`."""
    i = 0
    while not done():
        kind = KINDS[(w + i) % 2]
        name, group = f"{prefix}-{w}-{i}", "ab"[i % 2]
        key = (kind, name)
        acked.group[key] = group
        acked.in_flight.add(key)
        obj = await api.call("POST", api.path(kind), _manifest(kind, name, group))
        acked.writes[key] = int(obj["metadata"]["resourceVersion"])
        acked.events.append((kind, name, acked.writes[key]))
        for n in (1, 2):
            obj = await api.call("PATCH", api.path(kind, name), {"metadata": {"annotations": {"n": str(n)}}},
                                 "application/merge-patch+json")
            acked.writes[key] = int(obj["metadata"]["resourceVersion"])
            acked.events.append((kind, name, acked.writes[key]))
        if i % 2:
            await api.call("DELETE", api.path(kind, name), {"gracePeriodSeconds": 0})
            acked.deleted[key] = acked.writes.pop(key)
        acked.in_flight.discard(key)
        i += 1


@dataclass
class Watcher:
    kind: str
    selector: str
    seen: list[tuple[str, str, int]] = field(default_factory=list)  # (type, name, rv)

    def wants(self, key: tuple[str, str], acked: Acked) -> bool:
        return key[0] == self.kind and (not self.selector or self.selector == f"{GROUP}={acked.group[key]}")


async def _watch(api: Api, w: Watcher, rv: str, connected: asyncio.Event) -> None:
    params = {"watch": "1", "resourceVersion": rv, **({"labelSelector": w.selector} if w.selector else {})}
    timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
    async with api.session.get(api.path(w.kind), params=params, timeout=timeout) as r:
        assert r.status == 200, await r.read()
        connected.set()
        async for line in r.content:
            ev = orjson.loads(line)
            assert ev["type"] in ("ADDED", "MODIFIED", "DELETED"), ev
            md = ev["object"]["metadata"]
            w.seen.append((ev["type"], md["name"], int(md["resourceVersion"])))


async def _session(kubeconfig: str, key_dir: Path):
    ctx: ssl.SSLContext = tls_context(Path(kubeconfig), key_dir)
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx, limit=0))


async def _follow_phase(url: str, kubeconfig: str, key_dir: Path) -> None:
    async with await _session(kubeconfig, key_dir) as session:
        api = Api(session, url)
        await api.call("POST", f"{url}/api/v1/namespaces", {"metadata": {"name": NS}})
        rv = (await api.call("GET", api.path("configmaps"), params={"limit": "1"}))["metadata"]["resourceVersion"]
        selectors = ("", f"{GROUP}=a", f"{GROUP}=b")
        watchers = [Watcher(KINDS[i % 2], selectors[i % 3]) for i in range(WATCHERS)]
        connected = [asyncio.Event() for _ in watchers]
        tasks = [asyncio.create_task(_watch(api, w, rv, c)) for w, c in zip(watchers, connected)]
        try:
            await asyncio.wait_for(asyncio.gather(*(c.wait() for c in connected)), 60)
            acked = Acked()
            until = time.monotonic() + (FULL_S or WRITE_S)
            done = (lambda: time.monotonic() >= until) if FULL_S else \
                (lambda: time.monotonic() >= until or len(acked.events) >= EVENTS)
            await asyncio.gather(*(_writer(api, w, done, acked, "f") for w in range(WRITERS)))
            assert len(acked.events) > WRITERS * 3
            # every watcher catches up with the last acknowledged write of its selection
            deadline = time.monotonic() + 60
            for w in watchers:
                wanted = {(name, rev) for kind, name, rev in acked.events if w.wants((kind, name), acked)}
                gone = {name for key, _ in acked.deleted.items() if w.wants(key, acked) for name in [key[1]]}
                while True:
                    names_revs = {(name, rev) for _, name, rev in w.seen}
                    deletes = {name for typ, name, _ in w.seen if typ == "DELETED"}
                    if wanted <= names_revs and gone <= deletes:
                        break
                    for t in tasks:
                        if t.done():
                            t.result()
                    assert time.monotonic() < deadline, (
                        f"{w.kind} watcher {w.selector!r} missed {len(wanted - names_revs)} writes "
                        f"and {len(gone - deletes)} deletes")
                    await asyncio.sleep(0.1)
                revs = [rev for _, _, rev in w.seen]
                assert revs == sorted(set(revs)), f"{w.kind} watcher {w.selector!r}: events out of order or repeated"
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


def _children(pid: int) -> list[int]:
    return [int(c) for t in Path(f"/proc/{pid}/task").iterdir() for c in (t / "children").read_text().split()]


async def _kill_phase(c, kubeconfig: str, key_dir: Path) -> Acked:
    """Writers run until the server is killed mid-burst; returns what was acknowledged before."""
    acked = Acked()
    async with await _session(kubeconfig, key_dir) as session:
        api = Api(session, c.url)

        async def writer(w: int) -> None:
            with contextlib.suppress(aiohttp.ClientError, AssertionError, asyncio.TimeoutError, OSError):
                until = time.monotonic() + 120
                await _writer(api, w, lambda: time.monotonic() >= until, acked, "k")

        tasks = [asyncio.create_task(writer(w)) for w in range(WRITERS)]
        while len(acked.events) < 200 and not all(t.done() for t in tasks):
            await asyncio.sleep(0.05)
        for pid in [*_children(c.proc.pid), c.proc.pid]:  # the API server workers too: the whole group at once
            os.kill(pid, signal.SIGKILL)
        await asyncio.gather(*tasks)
    c.proc.wait()
    assert len(acked.events) >= 200
    return acked


@pytest.mark.skipif(STORE == "memory", reason="the memory store is not durable by design")
@pytest.mark.parametrize("workers", [1, 2], ids=["one-api-server", "two-api-workers"])
def test_writers_and_watchers_then_kill_9(store_url, workers):
    if workers > 1 and STORE != "sqlite":
        pytest.skip("several API server workers: run on SQLite, whose shared mode they need")
    extra = ("--api-workers", str(workers)) if workers > 1 else ()
    d = Path(tempfile.mkdtemp(prefix="nanokube-stress-"))
    c = start_cluster(d, store_url, extra)
    try:
        asyncio.run(_follow_phase(c.url, c.kubeconfig, d))
        acked = asyncio.run(_kill_phase(c, c.kubeconfig, d))
        c2 = start_cluster(d, store_url, extra)
        try:
            async def check() -> None:
                async with await _session(c2.kubeconfig, d) as session:
                    api = Api(session, c2.url)
                    for kind in KINDS:
                        items = (await api.call("GET", api.path(kind)))["items"]
                        have = {it["metadata"]["name"]: int(it["metadata"]["resourceVersion"]) for it in items}
                        for (k, name), rev in acked.writes.items():
                            if k != kind:
                                continue
                            if (k, name) in acked.in_flight:  # a patch or delete unanswered at the kill
                                assert name not in have or have[name] >= rev, name
                                continue
                            assert name in have, f"acknowledged {kind} {name} lost"
                            # a pod's own controllers write after the client (binding, status): never before it
                            assert have[name] == rev if kind == "configmaps" else have[name] >= rev, name
                        for (k, name) in acked.deleted:
                            if k == kind:
                                assert name not in have, f"acknowledged delete of {kind} {name} lost"

            asyncio.run(check())
        finally:
            c2.stop()
    finally:
        c.stop()
        shutil.rmtree(d, ignore_errors=True)
