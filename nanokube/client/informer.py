"""Informers: list then watch one resource into a local cache, calling
handlers on changes. A watch the server ends (its timeout) is reopened from the last resourceVersion
seen, a bookmark's included; only an expired one (410) or an error relists, as client-go's reflector.
Over a client that streams lists (`watch_list`, as client-go's WatchListClient, on since 1.35) the
store is filled by a watch with sendInitialEvents, up to its initial-events-end bookmark, and that
watch goes on; it starts from "" (a consistent read), later from the last resourceVersion seen,
and from "" again once that is refused as expired or too large; a stream the server will not
serve falls back to a list. The lists ask for what the reflector's relistResourceVersion does:
"0" first (any version the server's cache holds), then the last resourceVersion seen (a list at
least that fresh), and "" (a quorum read) only after a list at that version was refused as
expired or too large; they come in pages as the reflector's pager asks for them (`_list`).
Each watch asks for its own timeout, and a relist waits out a backoff, as the reflector's do.
The objects are shared by every handler and reader (copy before changing); the cache mutation
detector (mutation.py) checks that."""

from __future__ import annotations

import asyncio
import logging
import random
import sys
from collections.abc import Callable

import aiohttp

from ..clock import REAL, Clock
from ..machinery.errors import APIError
from . import mutation
from .http import EXPECTED
from .pager import PAGE_SIZE, list_pages

log = logging.getLogger(__name__)

#: the reflector's minWatchTimeout: each watch asks for a random timeoutSeconds in [5, 10) minutes,
#: so the watches clients opened together do not all end, and come back, together
MIN_WATCH_TIMEOUT = 300.0
#: the reflector's backoff between ListAndWatch runs (wait.NewExponentialBackoffManager(800ms, 30s,
#: 2min, 2.0, 1.0)): 0.8 s doubling to 30 s, each wait up to twice its step (jitter 1.0), back to
#: 0.8 s once two minutes passed since the last wait began (a healthy watch in between)
BACKOFF_INITIAL, BACKOFF_CAP, BACKOFF_RESET, BACKOFF_FACTOR, BACKOFF_JITTER = 0.8, 30.0, 120.0, 2.0, 1.0
#: the annotation of the bookmark that ends a streaming list's initial events
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


class Backoff:
    """client-go's exponentialBackoffManagerImpl on an injected clock: `next()` is the wait before
    the next try. Its steps stop growing at the cap; past BACKOFF_RESET since the last wait began,
    they start over."""

    def __init__(self, clock: Clock, draw: Callable[[], float] = random.random):
        self.clock, self.draw = clock, draw
        self.step = BACKOFF_INITIAL
        self.capped = False
        self.last: float | None = None

    def next(self) -> float:
        now = self.clock.monotonic()
        if self.last is not None and now - self.last > BACKOFF_RESET:
            self.step, self.capped = BACKOFF_INITIAL, False
        self.last = now
        delay = self.step
        if not self.capped:
            self.step *= BACKOFF_FACTOR
            if self.step > BACKOFF_CAP:  # wait.Backoff.Step: the cap ends the steps
                self.step, self.capped = BACKOFF_CAP, True
        return delay + self.draw() * BACKOFF_JITTER * delay


def key_of(obj: dict) -> str:
    """namespace/name, interned: the in-process informers of one resource (a dozen for pods)
    share one key string per object instead of holding a copy each."""
    md = obj["metadata"]
    return sys.intern(f"{md['namespace']}/{md['name']}") if md.get("namespace") else md["name"]


class Informer:
    def __init__(self, rc, namespace: str | None = None, label_selector: str = "", field_selector: str = "",
                 clock: Clock = REAL, draw: Callable[[], float] = random.random):
        """`clock` times the backoff before a list or watch is tried again, so in virtual time the
        retry waits for simulated time, not the wall; `draw` (uniform in [0, 1)) picks each watch's
        timeout and each backoff's jitter."""
        self.rc = rc
        self.clock = clock
        self.draw = draw
        self.backoff = Backoff(clock, draw)
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.store: dict[str, dict] = {}
        self._by_ns: dict[str, dict[str, None]] = {}
        self._indexers: dict[str, _Index] = {}
        self.synced = asyncio.Event()
        self.last_sync_rv = ""
        self._rv_unavailable = False
        #: a list at "0" came in pages: the server pages every list (the reflector's paginatedResult)
        self._paginated = False
        self._on_add: list[Callable[[dict], None]] = []
        self._on_update: list[Callable[[dict, dict], None]] = []
        self._on_delete: list[Callable[[dict], None]] = []

    def add_handlers(self, on_add=None, on_update=None, on_delete=None) -> None:
        """A handler added to a synced (shared) informer first sees what it holds as adds,
        as client-go's does, so every handler sees each object's add once."""
        if on_add:
            self._on_add.append(on_add)
            if self.synced.is_set():
                for o in list(self.store.values()):
                    on_add(o)
        if on_update:
            self._on_update.append(on_update)
        if on_delete:
            self._on_delete.append(on_delete)

    def list(self) -> list[dict]:
        return list(self.store.values())

    def list_namespace(self, namespace: str) -> list[dict]:
        """One namespace's objects, in list()'s order (cache.NamespaceIndex, as upstream's
        `Pods(ns).List`): a controller's sync reads its namespace without walking the cluster's pods."""
        keys = self._by_ns.get(namespace)
        return [self.store[k] for k in keys] if keys else []

    def add_index(self, name: str, value_of: Callable[[dict], str | tuple[str, ...] | None]) -> None:
        """A custom index (client-go's AddIndexers; None leaves an object out, a tuple of distinct
        values files it under each, as an IndexFunc's list), kept on every event, so a handler reads
        the few objects it needs (the pods on one node) instead of walking the store. Controllers
        sharing the informer share an index by its name."""
        if name not in self._indexers:
            self._indexers[name] = _Index(value_of, self.store)

    def by_index(self, name: str, value: str) -> list[dict]:
        """The objects whose `name` index value is `value`, in the order they took it."""
        keys = self._indexers[name].keys.get(value)
        return [self.store[k] for k in keys] if keys else []

    def get(self, key: str) -> dict | None:
        return self.store.get(key)

    def _index(self, store: dict[str, dict]) -> None:
        """Rebuild the indexes from a fresh list; their order within a value is the store's."""
        by_ns: dict[str, dict[str, None]] = {}
        for k, o in store.items():
            by_ns.setdefault(o["metadata"].get("namespace") or "", {})[k] = None
        self._by_ns = by_ns
        for name, ix in self._indexers.items():
            self._indexers[name] = _Index(ix.value_of, store)

    async def run(self) -> None:
        """The reflector's Run: ListAndWatch, and after each time it ends the backoff's wait
        (`Backoff`) before the next list. ListAndWatch lists once, then watches from the last
        resourceVersion seen, each watch with a timeoutSeconds of its own in [5, 10) minutes, for as
        long as the server keeps ending watches normally. It ends after a 410 (the version left the
        server's window), an error, or a watch that ended within a second with nothing in it
        (client-go's "very short watch"); a watch the server refuses with a 429, or a connection it
        refuses, is tried again from the same resourceVersion after a backoff's wait, without a list.
        A server's refusal or a connection's failure (a list refused while the server is down, a
        stream cut) is one warning line, as the reflector's; anything else, a bug, keeps its traceback."""
        origin = f"the informer for {self.rc.res.plural}"
        while True:
            try:
                await self._list_and_watch(origin)
            except asyncio.CancelledError:
                raise
            except APIError as e:
                if e.code != 410:
                    log.warning("informer for %s: %s", self.rc.res.plural, e.message)
            except EXPECTED as e:
                # a server that is down or went away mid-stream: one line, as the reflector's
                # "failed to list" warning; the backoff's retry is the whole remedy
                log.warning("informer for %s: list and watch failed, backing off: %s", self.rc.res.plural,
                            str(e) or type(e).__name__)
            except Exception:
                log.exception("informer for %s failed", self.rc.res.plural)
            await self.clock.sleep(self.backoff.next())

    async def _list_and_watch(self, origin: str) -> None:
        d = mutation.DETECTOR
        stream = await self._watch_list(d, origin) if getattr(self.rc, "watch_list", False) else None
        if stream is None:
            items, rv = await self._list()
            self._replace({key_of(o): o for o in items}, d, origin)
            self.last_sync_rv = rv
        while True:
            if stream is None:
                try:
                    stream = await self._watch(self.last_sync_rv)
                except Exception as e:
                    if not _retriable(e):
                        raise
                    log.warning("informer for %s: watch failed, backing off: %s", self.rc.res.plural, e)
                    await self.clock.sleep(self.backoff.next())
                    continue
            opened, events = self.clock.monotonic(), 0
            try:
                async for typ, obj in stream:
                    events += 1
                    if d is not None:
                        d.keep(obj, origin)
                    self._handle(typ, obj)
                    self.last_sync_rv = obj["metadata"].get("resourceVersion") or self.last_sync_rv
            except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError) as e:
                # the connection ended mid-stream (the server was killed, or restarts): client-go's
                # stream watcher ends such a watch as if closed, and the reflector watches again
                log.debug("informer for %s: watch cut: %s", self.rc.res.plural, e)
            finally:
                await stream.aclose()
            stream = None
            if not events and self.clock.monotonic() - opened < 1:
                log.warning("informer for %s: very short watch with no events", self.rc.res.plural)
                return

    def _watch(self, rv: str, send_initial_events: bool = False):
        """A watch from `rv` with a timeoutSeconds of its own in [5, 10) minutes."""
        timeout = int(MIN_WATCH_TIMEOUT * (self.draw() + 1.0))
        if send_initial_events:
            return self.rc.watch(self.namespace, rv, self.label_selector, self.field_selector,
                                 timeout_seconds=timeout, send_initial_events=True)
        return self.rc.watch(self.namespace, rv, self.label_selector, self.field_selector, timeout_seconds=timeout)

    async def _watch_list(self, d, origin: str):
        """The reflector's watchList: the objects streamed as ADDED events into a store of their own
        until the initial-events-end bookmark, which replaces the informer's store with them (the
        handlers hearing what changed) and gives the resourceVersion synced to; returns the stream,
        still open. A version refused as expired or too large is asked for again as "" at once, a
        429 or refused connection after the backoff; any other failure returns None, for a list
        ("making progress is better than deadlocking")."""
        while True:
            try:
                stream = await self._watch("" if self._rv_unavailable else self.last_sync_rv, True)
            except Exception as e:
                if _retriable(e):
                    await self.clock.sleep(self.backoff.next())
                elif isinstance(e, APIError) and _unavailable(e):
                    self._rv_unavailable = True
                else:
                    log.warning("informer for %s: streaming list failed, listing instead: %s", self.rc.res.plural, e)
                    return None
                continue
            initial: dict[str, dict] = {}
            try:
                async for typ, obj in stream:
                    if typ != "BOOKMARK":
                        if typ == "DELETED":
                            initial.pop(key_of(obj), None)
                        else:
                            initial[key_of(obj)] = obj
                    elif (obj["metadata"].get("annotations") or {}).get(INITIAL_EVENTS_END) == "true":
                        self._rv_unavailable = False
                        self._replace(initial, d, origin)
                        self.last_sync_rv = obj["metadata"]["resourceVersion"]
                        return stream
                error = APIError(500, "InternalError", "the stream ended before its initial events did")
            except APIError as e:
                error = e
            except BaseException:
                await stream.aclose()
                raise
            await stream.aclose()
            if _unavailable(error):
                self._rv_unavailable = True
                continue
            log.warning("informer for %s: streaming list failed, listing instead: %s", self.rc.res.plural,
                        error.message)
            return None

    def _relist_rv(self) -> str:
        """The reflector's relistResourceVersion."""
        if self._rv_unavailable:
            return ""
        return self.last_sync_rv or "0"

    async def _list(self) -> tuple[list[dict], str]:
        """List at `_relist_rv`, in pages as the reflector's pager asks for them (pager.py): 500
        items a page for a list at "0" or "" (a quorum read), one request without a limit for a list
        at a version seen (which the watch cache serves whole), and pages again at any version once
        a list at "0" came in pages (a server without a watch cache). A version the server no longer
        holds (410) or does not hold yet (a 504 Too large resource version: a store restored from a
        backup) is tried again at once as a quorum read, with the same page size, so the informer
        makes progress, as the reflector's list does. The list's resourceVersion is its first page's
        (every page is read at it), which the watch then starts from."""
        rv = self._relist_rv()
        page_size = 0 if rv not in ("", "0") and not self._paginated else PAGE_SIZE
        try:
            items, synced, paginated = await list_pages(self.rc, self.namespace, self.label_selector,
                                                        self.field_selector, rv, page_size)
        except APIError as e:
            if not _unavailable(e):
                raise
            self._rv_unavailable = True
            items, synced, paginated = await list_pages(self.rc, self.namespace, self.label_selector,
                                                        self.field_selector, self._relist_rv(), page_size)
        if rv == "0" and paginated:
            self._paginated = True
        self._rv_unavailable = False
        return items, synced

    def _replace(self, fresh: dict[str, dict], d, origin: str) -> None:
        """A list's items, by key, become the store; the handlers hear what changed since the last one
        (a streaming list's are keyed as they come, so not twice)."""
        if d is not None:
            d.keep_all(fresh.values(), origin)
        old = self.store
        self.store = fresh
        self._index(fresh)
        for k, o in fresh.items():
            if k in old:
                if old[k]["metadata"].get("resourceVersion") != o["metadata"].get("resourceVersion"):
                    self._notify_update(old[k], o)
            else:
                self._notify(self._on_add, o)
        for k, o in old.items():
            if k not in fresh:
                self._notify(self._on_delete, o)
        self.synced.set()

    def _handle(self, typ: str, obj: dict) -> None:
        if typ == "BOOKMARK":
            return
        k = key_of(obj)
        if typ == "DELETED":
            old = self.store.pop(k, None)
            if old is not None:
                ns = old["metadata"].get("namespace") or ""
                keys = self._by_ns[ns]
                del keys[k]
                if not keys:
                    del self._by_ns[ns]
                for ix in self._indexers.values():
                    ix.set(k, None)
            self._notify(self._on_delete, old or obj)
            return
        old = self.store.get(k)
        self.store[k] = obj
        if old is None:
            ns = obj["metadata"].get("namespace") or ""
            if (keys := self._by_ns.get(ns)) is None:
                keys = self._by_ns[ns] = {}
            keys[k] = None
            for ix in self._indexers.values():
                ix.set(k, ix.value_of(obj))
            self._notify(self._on_add, obj)
        else:
            if self._indexers:  # most events change no index value: one call and a lookup each
                for ix in self._indexers.values():
                    if (v := ix.value_of(obj)) != ix.values.get(k):
                        ix.set(k, v)
            self._notify_update(old, obj)

    def _notify(self, handlers: list[Callable], obj: dict) -> None:
        """Each add or delete handler on its own, as client-go's listeners: one that raises is
        logged, and the others (every controller of a manager shares this informer) still see the
        event. Two functions, not one taking *args: calling through *args cost each handler
        ~0.3 us more (timeit, six handlers: 5.5 -> 3.6 us per event), and a pod event has a
        dozen handlers in the controller manager."""
        for h in handlers:
            try:
                h(obj)
            except Exception:
                log.exception("informer for %s: an event handler failed", self.rc.res.plural)

    def _notify_update(self, old: dict, new: dict) -> None:
        """`_notify` for the update handlers."""
        for h in self._on_update:
            try:
                h(old, new)
            except Exception:
                log.exception("informer for %s: an event handler failed", self.rc.res.plural)


def _retriable(e: Exception) -> bool:
    """isWatchErrorRetriable: a 429, or a connection the server refused (it is restarting)."""
    if isinstance(e, APIError):
        return e.code == 429
    return isinstance(getattr(e, "os_error", e), ConnectionRefusedError)


def _unavailable(e: APIError) -> bool:
    """isExpiredError or isTooLargeResourceVersionError: the list's resourceVersion is out of reach."""
    if e.code == 410:
        return True
    causes = (e.details or {}).get("causes") or []
    return e.code == 504 and any(c.get("reason") == "ResourceVersionTooLarge" for c in causes)


class _Index:
    """One custom index: the keys of each value and each indexed key's value, so an update calls
    `value_of` on the new object only."""

    __slots__ = ("value_of", "keys", "values")

    def __init__(self, value_of: Callable[[dict], str | tuple[str, ...] | None], store: dict[str, dict]):
        self.value_of = value_of
        self.keys: dict[str, dict[str, None]] = {}
        self.values: dict[str, str | tuple[str, ...]] = {}
        for k, o in store.items():
            self.set(k, value_of(o))

    def set(self, k: str, value: str | tuple[str, ...] | None) -> None:
        """Index key `k` under `value`, or each value of a tuple (None: under none)."""
        was = self.values.pop(k, None)
        if was is not None:
            for v in (was,) if type(was) is str else was:
                keys = self.keys[v]
                del keys[k]
                if not keys:
                    del self.keys[v]
        if value is not None:
            self.values[k] = value
            for v in (value,) if type(value) is str else value:
                self.keys.setdefault(v, {})[k] = None


#: the API groups client-go's typed informers serve (informers.SharedInformerFactory's ForResource):
#: kube-controller-manager's informers of any other group's resources (custom resources, CRDs and
#: APIServices themselves) are metadata informers (ObjectOrMetadataInformerFactory)
TYPED_GROUPS = frozenset({
    "", "admissionregistration.k8s.io", "internal.apiserver.k8s.io", "apps", "autoscaling", "batch",
    "certificates.k8s.io", "coordination.k8s.io", "discovery.k8s.io", "events.k8s.io", "extensions",
    "flowcontrol.apiserver.k8s.io", "networking.k8s.io", "node.k8s.io", "policy", "rbac.authorization.k8s.io",
    "resource.k8s.io", "scheduling.k8s.io", "storage.k8s.io", "storagemigration.k8s.io"})


class InformerFactory:
    """client-go's SharedInformerFactory: one informer, so one list and one watch, per resource,
    namespace and selectors, however many controllers ask for it, each adding its handlers. Every
    pod watcher costs each pod event its queue, wake-up and store (~38 k instructions) before
    any handler runs; kube-controller-manager's controllers share one."""

    def __init__(self, clock: Clock = REAL, client=None, metadata_client=None):
        """With `client`, informers list and watch through it (kube-controller-manager's informers have
        a client of their own, '.../shared-informers'), else through the first asker's resource client;
        with `metadata_client`, those of resources outside `TYPED_GROUPS` through that one instead
        (its metadata informers' clientset, '.../metadata-informers', with a rate limit of its own:
        the garbage collector's and quota's monitors of custom resources do not spend the typed ones')."""
        self.clock = clock
        self.client = client
        self.metadata_client = metadata_client
        self._informers: dict[tuple, Informer] = {}
        self._tasks: dict[Informer, asyncio.Task] = {}

    def informer(self, rc, namespace: str | None = None, label_selector: str = "",
                 field_selector: str = "") -> Informer:
        key = (rc.res.group, rc.version, rc.res.plural, namespace, label_selector, field_selector)
        inf = self._informers.get(key)
        if inf is None:
            client = self.client
            if self.metadata_client is not None and rc.res.group not in TYPED_GROUPS:
                client = self.metadata_client
            if client is not None:
                rc = client.resource(rc.res.group, rc.version, rc.res.plural)
            inf = self._informers[key] = Informer(rc, namespace, label_selector, field_selector, self.clock)
        return inf

    def start(self, informers) -> None:
        """Run each informer once; one already running is left alone."""
        for inf in informers:
            if inf not in self._tasks:
                self._tasks[inf] = asyncio.create_task(inf.run())

    async def stop(self) -> None:
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
