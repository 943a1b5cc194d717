"""An in-process API server (memory store, watch cache, generic REST and
admission without the ServiceAccount plugin, no sockets) shared by the core and controller unit tests."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from dataclasses import dataclass

from nanokube.apiserver.admission import Admission
from nanokube.apiserver.audit import AuditLog
from nanokube.apiserver.cache import WatchCache
from nanokube.apiserver.rest import GenericREST, ResourceIndex
from nanokube.apiserver.loopback import LocalClient
from nanokube.clock import Clock
from nanokube.machinery.errors import APIError
from nanokube.registry.base import all_resources
from nanokube.store.memory import MemoryStore


@dataclass
class Stack:
    store: MemoryStore
    cache: WatchCache
    rest: GenericREST
    client: LocalClient

    async def close(self) -> None:
        await self.rest.admission.client.close()  # the webhook client's session, opened by a webhook call
        await self.cache.stop()
        await self.store.close()


async def make_stack(window: int = 50_000, store=None) -> Stack:
    """The stack on `store` (a fresh MemoryStore by default)."""
    store = store or MemoryStore()
    cache = WatchCache(store, window=window)
    rest = GenericREST(store, cache, ResourceIndex(all_resources()), Clock())
    rest.admission = Admission(rest)
    # no serviceaccount controller makes namespaces' accounts here, nor does a node lifecycle
    # controller take a new node's not-ready taint off: upstream's integration tests run
    # kube-apiserver with --disable-admission-plugins=ServiceAccount,TaintNodesByCondition for the same reason
    rest.admission.disable("ServiceAccount", "TaintNodesByCondition")
    await store.start()
    await cache.start()
    client = LocalClient(rest)
    await client.resource("", "v1", "namespaces").create({"metadata": {"name": "default"}})
    return Stack(store, cache, rest, client)


#: how long `eventually` and `settled` poll before giving up: far beyond what any condition needs on an idle
#: machine, so a loaded one (CI's two workers on two cores) only makes a passing test slower, never failing
DEADLINE = 30.0


def tries(timeout: float = DEADLINE):
    """The tries of a polling loop bounded by time, not by their count: 0, 1, 2, ... until `timeout`
    seconds have passed (at least one), for a `for` loop that breaks or returns when its condition holds."""
    end = time.monotonic() + timeout
    for n in itertools.count():
        yield n
        if time.monotonic() > end:
            return


async def eventually(check, timeout: float = DEADLINE):
    """Poll `check` (an async callable returning a truthy value when done) until it holds or
    `timeout` seconds passed, yielding to the loop in between; returns its value as soon as it holds."""
    end = time.monotonic() + timeout
    while True:
        if got := await check():
            return got
        if time.monotonic() > end:
            raise AssertionError(f"condition never held in {timeout:g} s")
        await asyncio.sleep(0.01)


async def becomes(get, want, timeout: float = DEADLINE):
    """Wait until `await get()` equals `want` and return it, or fail after `timeout` seconds showing the
    last value: for what a component writes after what a test waited for, as the Events its recorder
    queues and writes from its own task, possibly after the status of the sync that reported them."""
    end = time.monotonic() + timeout
    while True:
        got = await get()
        if got == want:
            return got
        if time.monotonic() > end:
            raise AssertionError(f"{got!r} never became {want!r} in {timeout:g} s")
        await asyncio.sleep(0.01)


async def turns_during(awaitable, on_tick=None) -> tuple[int, object]:
    """How many turns of the loop a task beside `awaitable` got while it ran, and its result: a
    pass over many objects in a controller sharing the API server's loop must let it run.
    `on_tick()`, where given, runs at each of those turns (a write racing the pass)."""
    ticks = 0

    async def beside():
        nonlocal ticks
        while True:
            await asyncio.sleep(0)
            ticks += 1
            if on_tick is not None:
                on_tick()
    task = asyncio.create_task(beside())
    await asyncio.sleep(0)  # the task waits for its first turn
    ticks = 0
    try:
        result = await awaitable
        return ticks, result
    finally:
        task.cancel()


async def settled(clock, check, timeout: float = DEADLINE):
    """`eventually` for a controller on a VirtualClock: each try first lets the work already due at
    the current virtual instant run (`advance(0)`), never moving time on."""
    end = time.monotonic() + timeout
    while True:
        await clock.advance(0)
        if got := await check():
            return got
        if time.monotonic() > end:
            raise AssertionError(f"condition never held in {timeout:g} s")
        await asyncio.sleep(0.005)


async def ticking(clock, check, step: float = 1.0, attempts: int = 400):
    """`eventually` for a controller on a VirtualClock whose syncs wait on purpose (the Job controller
    batches its pods' events for a second): between tries virtual time moves on by `step`, so what
    falls due runs, in moments of real time."""
    for _ in range(attempts):
        await clock.advance(0)
        if got := await check():
            return got
        await clock.advance(step)
    raise AssertionError("condition never held")


async def pod_quota(client, pods: int, namespace: str = "default") -> None:
    """A ResourceQuota `pods` allowing `pods` pods, its status.hard written here as the resource-quota
    controller (not running) would: the quota admission charges each create against it."""
    rqs = client.resource("", "v1", "resourcequotas")
    try:
        q = await rqs.get("pods", namespace)
    except APIError as e:
        if e.code != 404:
            raise
        q = await rqs.create({"metadata": {"name": "pods", "namespace": namespace}, "spec": {"hard": {"pods": str(pods)}}})
    used = ((q.get("status") or {}).get("used") or {}).get("pods", "0")
    await rqs.update({**q, "status": {"hard": {"pods": str(pods)}, "used": {"pods": used}}}, subresource="status")


async def event_counts(client, kind: str, namespace: str = "default") -> dict[str, int]:
    """How often each reason was reported on objects of `kind`: Events' counts summed by reason."""
    items, _ = await client.resource("", "v1", "events").list(namespace)
    out: dict[str, int] = {}
    for e in items:
        if e["involvedObject"]["kind"] == kind:
            out[e["reason"]] = out.get(e["reason"], 0) + e.get("count", 1)
    return out


@contextlib.contextmanager
def audited(client, path):
    """The in-process server's writes audited (Metadata level) to the file `path` while the block runs."""
    client.rest.audit = audit = AuditLog(str(path))
    try:
        yield
    finally:
        audit.close()
        client.rest.audit = None


def conflicts(path) -> dict[tuple[str, str, str], int]:
    """The audit log `path`'s 409 answers by user agent, resource and subresource: optimistic-concurrency
    conflicts, each a write wasted and its sync retried."""
    out: dict[tuple[str, str, str], int] = {}
    for line in path.read_text().splitlines():
        e = json.loads(line)
        if e["responseStatus"]["code"] == 409:
            k = (e["userAgent"], e["objectRef"]["resource"], e["objectRef"].get("subresource", ""))
            out[k] = out.get(k, 0) + 1
    return out



async def serve_widgets(server, group: str) -> None:
    """Widgets (kind Widget, namespaced, any fields) of `group` served by `server` (an APIServer), the
    CRD created through the server's own client: no request of a client under test is counted."""
    await LocalClient(server.rest).resource("apiextensions.k8s.io", "v1", "customresourcedefinitions").create({
        "metadata": {"name": f"widgets.{group}"}, "spec": {
            "group": group, "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}})

    async def served():
        return server.rest.index.by_kind(group, "Widget") is not None
    assert await eventually(served)


@contextlib.asynccontextmanager
async def over_http(controller_kind):
    """An APIServer (memory store, no ServiceAccount admission), an HTTPClient that read its discovery
    at start, and a `controller_kind` over that client, started: (server, client); all stopped after."""
    from nanokube.apiserver.app import APIServer
    from nanokube.client.http import HTTPClient
    from nanokube.client.kubeconfig import Credentials

    server = APIServer(MemoryStore(), None, port=0)
    server.rest.admission.disable("ServiceAccount", "TaintNodesByCondition")
    await server.start()
    client = HTTPClient(Credentials(f"http://127.0.0.1:{server.port}", None), "test")
    await client.start()
    ctrl = controller_kind(client)
    await ctrl.start()
    try:
        yield server, client
    finally:
        await ctrl.stop()
        await client.close()
        await server.stop()
