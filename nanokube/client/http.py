"""A client over HTTPS with the same interface as `LocalClient`, so a
component (controller manager, scheduler, proxy) runs unchanged in its own
process against any API server it has a kubeconfig for.

Resources are resolved through discovery, read at `start()` and again only when asked
(`discover`, `mapping`): client-go's components poll no discovery of their own, and those
that look for new resources (the garbage collector's and quota's Sync, a RESTMapper reset)
own their periods. Errors come back as `APIError`s built from the server's `Status`.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import aiohttp
import orjson

from ..clock import REAL, Clock
from ..machinery.errors import APIError, response_error
from . import kubeconfig
from .kubeconfig import Credentials
from .metrics import LATENCY, REQUESTS
from .transport import Pool

JSON = "application/json"
#: what a discovery read asks for: the aggregated documents (apidiscovery.k8s.io/v2), all of /api
#: and all of /apis in two GETs, as client-go reads discovery since 1.30 (not one GET per group/version)
AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
#: what a call through the API meets without a bug in it: the server's refusals and a connection's
#: failures (a component logs these as warnings; anything else is a bug, logged with its traceback)
EXPECTED = (APIError, aiohttp.ClientError, asyncio.TimeoutError, OSError)

log = logging.getLogger(__name__)


@dataclass
class RemoteResource:
    """What discovery says about one resource: enough to build its URLs."""

    group: str
    plural: str
    kind: str
    namespaced: bool
    versions: list[str] = field(default_factory=list)
    subresources: set[str] = field(default_factory=set)
    verbs: tuple[str, ...] = ()
    #: discovery does not say which resources share storage (core and events.k8s.io events)
    storage_alias: None = None

    @property
    def storage_version(self) -> str:
        return self.versions[0]

    @property
    def group_resource(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def api_version(self, version: str) -> str:
        return f"{self.group}/{version}" if self.group else version


class RemoteIndex:
    """`ResourceIndex`'s look-ups, answered from discovery documents."""

    def __init__(self) -> None:
        self.resources: list[RemoteResource] = []
        self._by_gvr: dict[tuple[str, str, str], RemoteResource] = {}
        self._by_gk: dict[tuple[str, str], RemoteResource] = {}

    def add(self, group: dict) -> None:
        """One APIGroupDiscovery: its versions come preferred first, so a resource's first version
        is the one its group prefers. An adapter's wildcard entries (`pods/*` of the custom metrics
        API) name no resource of their own."""
        name = (group.get("metadata") or {}).get("name", "")
        for v in group.get("versions") or []:
            version = v["version"]
            for r in v.get("resources") or []:
                plural, kind = r["resource"], (r.get("responseKind") or {}).get("kind", "")
                if "/" in plural:
                    continue
                res = self._by_gk.get((name, kind))
                if res is None or res.plural != plural:
                    res = RemoteResource(name, plural, kind, r.get("scope") == "Namespaced",
                                         verbs=tuple(r.get("verbs") or ()))
                    self.resources.append(res)
                    self._by_gk.setdefault((name, kind), res)
                res.versions.append(version)
                res.subresources.update(s["subresource"] for s in r.get("subresources") or ())
                self._by_gvr[(name, version, plural)] = res

    def get(self, group: str, version: str, plural: str) -> RemoteResource | None:
        return self._by_gvr.get((group, version, plural))

    def by_kind(self, group: str, kind: str) -> RemoteResource | None:
        return self._by_gk.get((group, kind))


def _error(status: int, body: bytes) -> APIError:
    try:
        s = orjson.loads(body)
    except orjson.JSONDecodeError:
        s = None
    if isinstance(s, dict) and s.get("kind") == "Status":
        return APIError(s.get("code") or status, s.get("reason", ""), s.get("message", ""), s.get("details"))
    return APIError(status, "InternalError" if status >= 500 else "BadRequest", body.decode(errors="replace")[:500])


def _line(name: str, value: str) -> str:
    """A header line; a value with a line break in it is refused (it would end the header early),
    as aiohttp and Go's net/http refuse it."""
    if "\r" in value or "\n" in value:
        raise ValueError(f"a line break in the {name} header's value")
    return f"{name}: {value}\r\n"


class HTTPClient:
    def __init__(self, creds: Credentials, field_manager: str = "nanokube", user_agent: str = "nanokube",
                 clock: Clock = REAL):
        self.creds = creds
        self.clock = clock
        #: the `host` label of this client's request metrics (client-go's URL().Host)
        self.host = urlsplit(creds.server).netloc
        self.field_manager = field_manager
        self.user_agent = user_agent
        self._index = RemoteIndex()
        #: when discovery was last read, on the client's clock; None: never
        self._read_at: float | None = None
        #: how long a read stays fresh (`reset_mapping_every`); None: for good
        self._fresh_for: float | None = None
        #: the read of discovery in flight, which callers meanwhile wait for instead of reading again
        self._reading: asyncio.Future | None = None
        #: the connections: the unary requests' kept alive, each watch's its own
        self.conns = Pool(creds.server, creds.ssl)
        #: the header lines of each request (`_static_head`)
        self._head = self._static_head()
        #: the client that owns discovery (this one, unless `named` or `with_token` made it)
        self._root = self
        #: the client that owns the connections (this one, unless `named` made it)
        self._pool = self
        #: a token client's bearer tokens, fresh ones on each call (`with_token`)
        self._tokens: Callable[[], Awaitable[str]] | None = None
        #: the token clients made of this one, closed with it
        self._token_clients: list[HTTPClient] = []

    @classmethod
    def from_kubeconfig(cls, path: str | None = None, context: str | None = None, **kw) -> HTTPClient:
        """From `path`, else the files kubectl would read (`client/kubeconfig.py`)."""
        return cls(kubeconfig.load(path, context), **kw)

    @property
    def index(self) -> RemoteIndex:
        """What discovery said last (a named client reads its root's, which `discover` replaces)."""
        return self._root._index

    @index.setter
    def index(self, index: RemoteIndex) -> None:
        self._index = index

    def named(self, name: str) -> HTTPClient:
        """This client for one part of a component, as rest.AddUserAgent makes it (kube-controller-manager's
        client builder gives each controller one): its requests say '<user agent>/<name>'. It shares this
        client's connections and discovery, so it is neither started nor closed itself."""
        child = copy.copy(self)
        child.user_agent = f"{self.user_agent}/{name}"
        child._head = child._static_head()
        return child

    def with_token(self, name: str, tokens: Callable[[], Awaitable[str]]) -> HTTPClient:
        """`named(name)` authenticating only by the bearer tokens `tokens()` gives, as
        kube-controller-manager's service-account client builder makes a controller's client (no
        client certificate: rest.AnonymousClientConfig). It has connections of its own, opened on
        first use and closed with this client, and reads this client's discovery."""
        child = self.named(name)
        child.creds = dataclasses.replace(self.creds, ssl=self.creds.anonymous_ssl, token="")
        child._pool, child._tokens = child, tokens
        child.conns, child._head = Pool(child.creds.server, child.creds.ssl), child._static_head()
        self._root._token_clients.append(child)
        return child

    def _static_head(self) -> str:
        """The header lines every request of this client sends: its user agent, what it accepts, a
        kubeconfig's bearer token. No Accept-Encoding: the components ask for no gzip (rest.Config's
        DisableCompression, as the loopback client sets it): beside the server, compressing a large
        list costs both sides CPU and saves nothing."""
        head = _line("User-Agent", self.user_agent) + f"Accept: {JSON}\r\n"
        return head + (_line("Authorization", f"Bearer {self.creds.token}") if self.creds.token else "")

    async def _request_head(self) -> str:
        """`_head`, with a token client's fresh token."""
        if self._tokens is None:
            return self._head
        return self._head + _line("Authorization", f"Bearer {await self._tokens()}")

    async def _unary(self, method: str, path: str, params: dict | None = None, data: bytes | None = None,
                     content_type: str = JSON, accept: str = JSON) -> tuple[int, bytes]:
        """A request through this client's pool of unary connections: its answer's status and body."""
        head = await self._request_head()
        if accept != JSON:
            head = head.replace(f"Accept: {JSON}\r\n", f"Accept: {accept}\r\n")
        if data is not None:
            head += f"Content-Type: {content_type}\r\n"
        if params:
            path += ("&" if "?" in path else "?") + urlencode(params, quote_via=quote)
        return await self._pool.conns.request(method, path, head, data)

    async def start(self) -> None:
        """Read discovery; connections open as requests need them (transport.Pool: unary requests share
        at most MAX_CONNS, each watch holds one of its own for its life)."""
        await self.discover()

    async def discover(self) -> None:
        """Read discovery now, for this client and every client sharing it: at start, and for a
        controller that looks for new resources on its own schedule (the garbage collector's and
        quota's Sync, the namespace deleter) or a look-up that found nothing (`mapping`). Callers
        that come while a read is in flight wait for that one (client-go's cache holds a lock)."""
        root = self._root
        if root._reading is None:
            root._reading = asyncio.ensure_future(self._read_discovery())
            root._reading.add_done_callback(lambda _: setattr(root, "_reading", None))
        await asyncio.shield(root._reading)

    async def _read_discovery(self) -> None:
        index = RemoteIndex()
        for path in ("/api", "/apis"):
            start = self.clock.monotonic()
            status, raw = await self._unary("GET", path, accept=AGGREGATED)
            self.count("GET", str(status), start)
            if status >= 400:
                raise _error(status, raw)
            doc = orjson.loads(raw)
            if doc.get("kind") != "APIGroupDiscoveryList":
                raise APIError(406, "NotAcceptable", f"GET {path}: the server sent no aggregated discovery "
                                                     f"(kind {doc.get('kind')!r})")
            for group in doc.get("items") or []:
                index.add(group)
        self._root.index, self._root._read_at = index, self.clock.monotonic()

    def reset_mapping_every(self, period: float) -> None:
        """A read of discovery goes stale `period` seconds after it, as kube-controller-manager resets
        its RESTMapper every 30 s (`controllers/manager.py`): taken at the next miss instead of by a
        ticker, so an idle client is never woken for it."""
        self._root._fresh_for = period

    def _fresh(self) -> bool:
        root = self._root
        return root._read_at is not None and (root._fresh_for is None
                                              or self.clock.monotonic() - root._read_at < root._fresh_for)

    async def mapping(self, group: str, kind: str) -> RemoteResource | None:
        """The resource serving `kind` in `group` (a RESTMapping), None if discovery lists none.
        A kind not found in discovery that is no longer fresh (`reset_mapping_every`)
        has it read again first, as client-go's deferred RESTMapper resets on a no-match when its
        cache is not fresh: a custom resource whose CRD came later is found without polling."""
        res = self.index.by_kind(group, kind)
        if res is None and await self.rediscover_if_stale():
            res = self.index.by_kind(group, kind)
        return res

    async def rediscover_if_stale(self) -> bool:
        """After a look-up that found nothing: read discovery again where the last read is no
        longer fresh (`reset_mapping_every`), as the deferred RESTMapper does on a no-match; whether
        it read. A caller that looks resources up its own way (by group and resource) calls it."""
        if self._fresh():
            return False
        await self.discover()
        return True

    def reconnect(self) -> None:
        """Close every connection of this client, watches too (their informers watch again): those
        opened next present what its TLS context holds now, a rotated client certificate (the
        kubelet's certificate transport closes all its connections when its certificate changes)."""
        self._pool.conns.close()

    async def close(self) -> None:
        if self._reading is not None:
            self._reading.cancel()
        for child in self._token_clients:
            child.conns.close()
        self.conns.close()

    async def request(self, method: str, path: str, body: Any = None, params: dict | None = None,
                      content_type: str = JSON, answer: bool = True) -> Any:
        """The server's answer decoded; with `answer` False, None: the caller drops it (an error
        is decoded and raised all the same)."""
        data = body if isinstance(body, bytes) or body is None else orjson.dumps(body)
        start = self.clock.monotonic()
        try:
            status, raw = await self._unary(method, path, params, data, content_type)
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
            self.count(method, "<error>", start)
            raise
        self.count(method, str(status), start)
        if status >= 400:
            raise _error(status, raw)
        return orjson.loads(raw) if raw and answer else None

    def count(self, method: str, code: str, start: float | None = None) -> None:
        """client-go's request metrics: the result by code (`<error>` without an answer), and the latency
        since `start` (none for a watch, whose request lasts as long as its stream)."""
        REQUESTS.labels(code, method, self.host).inc()
        if start is not None:
            LATENCY.labels(method, self.host).observe(self.clock.monotonic() - start)

    async def get_raw(self, path: str, params: dict[str, str] | None = None) -> dict:
        """A GET of `path` (client-go's AbsPath: the metrics APIs, an aggregated APIService's paths): its
        document, or client-go's error for the answer (a Status's, else the generic one by its code)."""
        start = self.clock.monotonic()
        try:
            status, raw = await self._unary("GET", path, params)
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
            self.count("GET", "<error>", start)
            raise
        self.count("GET", str(status), start)
        if status >= 400:
            raise response_error(status, raw)
        return orjson.loads(raw)

    def resource(self, group: str, version: str, plural: str) -> HTTPResourceClient:
        res = self.index.get(group, version, plural)
        if res is None:
            raise LookupError(f"no resource {plural} in {group or 'core'}/{version}")
        return HTTPResourceClient(self, res, version)

    def resources(self) -> list[RemoteResource]:
        return self.index.resources


class HTTPResourceClient:
    def __init__(self, client: HTTPClient, res: RemoteResource, version: str):
        self.c = client
        self.res = res
        self.version = version

    def _path(self, namespace: str | None, name: str = "", subresource: str = "") -> str:
        base = f"/apis/{self.res.group}/{self.version}" if self.res.group else f"/api/{self.version}"
        if self.res.namespaced and namespace:
            base += f"/namespaces/{quote(namespace)}"
        base += f"/{self.res.plural}"
        if name:
            base += f"/{quote(name)}"
        if subresource:
            base += f"/{subresource}"
        return base

    async def get(self, name: str, namespace: str | None = None) -> dict:
        return await self.c.request("GET", self._path(namespace, name))

    async def list(self, namespace: str | None = None, label_selector: str = "",
                   field_selector: str = "", resource_version: str = "") -> tuple[list[dict], str]:
        """The items and the list's resourceVersion; `resource_version` as the API's ("": a quorum read)."""
        items, meta = await self.list_page(namespace, label_selector, field_selector, resource_version)
        return items, meta.get("resourceVersion", "")

    async def list_page(self, namespace: str | None = None, label_selector: str = "", field_selector: str = "",
                        resource_version: str = "", limit: int = 0, continue_: str = "") -> tuple[list[dict], dict]:
        """One page of a list (`limit` items at most, 0: all) and its metadata (resourceVersion,
        continue, remainingItemCount); `continue_` is the previous page's token."""
        params = {k: v for k, v in (("labelSelector", label_selector), ("fieldSelector", field_selector),
                                    ("resourceVersion", resource_version), ("limit", str(limit) if limit else ""),
                                    ("continue", continue_)) if v}
        out = await self.c.request("GET", self._path(namespace), params=params)
        kind = self.res.kind
        for item in out.get("items") or []:
            item.setdefault("kind", kind)
            item.setdefault("apiVersion", self.res.api_version(self.version))
        return out.get("items") or [], out.get("metadata") or {}

    #: informers sync by a streaming list (client-go's WatchListClient, on by default since 1.35)
    watch_list = True

    async def watch(self, namespace: str | None = None, resource_version: str = "", label_selector: str = "",
                    field_selector: str = "", timeout_seconds: int | None = None, send_initial_events: bool = False):
        """An async generator of (type, object); `aclose()` ends the stream. `timeout_seconds`: how
        long the server is asked to serve it (else its --min-request-timeout's draw).
        `send_initial_events`: a streaming list (the objects as ADDED events at least as new as
        `resource_version`, then a bookmark marking their end), as the reflector's watchList asks."""
        params = {"watch": "true", "allowWatchBookmarks": "true"}
        if send_initial_events:
            params |= {"sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan"}
        for k, v in (("resourceVersion", resource_version), ("labelSelector", label_selector),
                     ("fieldSelector", field_selector), ("timeoutSeconds", timeout_seconds and str(timeout_seconds))):
            if v:
                params[k] = v
        target = f"{self._path(namespace)}?{urlencode(params, quote_via=quote)}"
        try:
            status, stream = await self.c._pool.conns.watch(target, await self.c._request_head())
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
            self.c.count("GET", "<error>")
            raise
        self.c.count("GET", str(status))
        if status >= 400:
            raise _error(status, await stream.read())
        return stream

    async def create(self, obj: dict, namespace: str | None = None, response: bool = True) -> dict | None:
        """`response` False: the caller drops the created object (an Event recorder), so None, as the
        in-process client's (LocalClient); the server answers over HTTP anyway, left undecoded."""
        ns = namespace or (obj.get("metadata") or {}).get("namespace")
        return await self.c.request("POST", self._path(ns) + self._manager(), obj, answer=response)

    async def update(self, obj: dict, subresource: str = "") -> dict:
        md = obj["metadata"]
        return await self.c.request("PUT", self._path(md.get("namespace"), md["name"], subresource) + self._manager(),
                                    obj)

    async def patch(self, name: str, patch: Any, patch_type: str = "application/merge-patch+json",
                    namespace: str | None = None, subresource: str = "", field_manager: str = "",
                    force: bool = False) -> dict:
        query = self._manager(field_manager) + ("&force=true" if force else "")
        return await self.c.request("PATCH", self._path(namespace, name, subresource) + query, patch,
                                    content_type=patch_type)

    async def delete(self, name: str, namespace: str | None = None, propagation_policy: str | None = None,
                     grace_period_seconds: int | None = None, preconditions: dict | None = None) -> dict:
        return await self.c.request("DELETE", self._path(namespace, name),
                                    _delete_options(propagation_policy, grace_period_seconds, preconditions))

    async def delete_collection(self, namespace: str | None = None, label_selector: str = "",
                                field_selector: str = "") -> list[dict]:
        params = {k: v for k, v in (("labelSelector", label_selector), ("fieldSelector", field_selector)) if v} or None
        out = await self.c.request("DELETE", self._path(namespace), {"kind": "DeleteOptions", "apiVersion": "v1"},
                                   params)
        return out.get("items") or []

    async def get_scale(self, name: str, namespace: str | None = None) -> dict:
        """The autoscaling/v1 Scale of a resource with a scale subresource (workloads, CRDs)."""
        return await self.c.request("GET", self._path(namespace, name, "scale"))

    async def update_scale(self, name: str, replicas: int, namespace: str | None = None) -> dict:
        return await self.c.request("PATCH", self._path(namespace, name, "scale") + self._manager(),
                                    {"spec": {"replicas": replicas}}, content_type="application/merge-patch+json")

    async def create_subresource(self, name: str, subresource: str, body: dict,
                                 namespace: str | None = None) -> dict:
        """POST to a subresource (pods/binding, pods/eviction, serviceaccounts/token)."""
        return await self.c.request("POST", self._path(namespace, name, subresource), body)

    def _manager(self, override: str = "") -> str:
        """The write's query naming its field manager, in the path: aiohttp's `params` cost each
        write a yarl query merge (~5 us), the string once per manager (`_manager_query`)."""
        return _manager_query(override or self.c.field_manager)


@functools.lru_cache(maxsize=64)
def _manager_query(manager: str) -> str:
    return f"?fieldManager={quote(manager, safe='')}"


def _delete_options(policy: str | None, grace: int | None, preconditions: dict | None) -> dict:
    opts: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
    if policy:
        opts["propagationPolicy"] = policy
    if grace is not None:
        opts["gracePeriodSeconds"] = grace
    if preconditions:
        opts["preconditions"] = preconditions
    return opts

