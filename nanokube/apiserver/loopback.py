"""The loopback client: the client interface over the server's own REST stack, without sockets.

It is part of the server (upstream's loopback client config), handed to the components that
`nanokube up` runs in-process; they see only the client interface, the same one `client/http.py`
offers over HTTPS. Objects returned are shared with the server's cache and must be treated as
immutable (copy before changing); the cache mutation detector (client/mutation.py) checks that.

Each request first yields to the event loop once, where a request over the network waits for its
answer: the REST stack answers an in-process request without suspending (the watch cache follows the
store's commits), so without it a component writing in a loop (a controller's creates, the
scheduler's binds) would hold the loop until it is done, while over HTTP every other task runs
between its requests.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from ..client import mutation
from ..machinery import errors
from ..machinery.user import CONTROLLER_USER, User
from . import options
from .rest import GenericREST, Result, WriteOptions
from .subresources import Subresources

def connector(rest: GenericREST) -> Callable[[User, str], LocalClient]:
    """How a component connects in-process: a client for an identity and a field manager."""
    return lambda user, field_manager: LocalClient(rest, user, field_manager)


class LocalClient:
    def __init__(self, rest: GenericREST, user: User = CONTROLLER_USER, field_manager: str = "kube-controller-manager"):
        self.rest = rest
        self.user = user
        self.field_manager = field_manager
        #: what the audit log records as the user agent of this client's writes
        self.user_agent = field_manager
        #: the POST subresources, through the code the HTTP handler serves them with
        self.subresources = Subresources(rest)

    def named(self, name: str) -> LocalClient:
        """This client for one part of a component, as `HTTPClient.named`: its writes are audited
        with the user agent '<user agent>/<name>'."""
        child = LocalClient(self.rest, self.user, self.field_manager)
        child.user_agent = f"{self.user_agent}/{name}"
        return child

    def resource(self, group: str, version: str, plural: str) -> ResourceClient:
        res = self.rest.index.get(group, version, plural)
        if res is None:
            raise LookupError(f"no resource {plural} in {group or 'core'}/{version}")
        return ResourceClient(self, res, version)

    async def get_raw(self, path: str, params: dict[str, str] | None = None) -> dict:
        """A GET of a path the REST stack does not serve (the metrics APIs, an aggregated APIService's), as
        the server answers it over HTTP (`HTTPClient.get_raw`): its document, or the APIError a client makes
        of its failure. No yield first: the answer suspends on its own (the built-in adapter's reads go through
        this client, the aggregator's to the network), so a metric costs the loop turns it always did."""
        if self.rest.raw_get is None:
            raise errors.route_not_found()
        return await self.rest.raw_get(path, params or {}, self.user)

    @property
    def index(self):
        """Resource look-ups by GVR and by kind (`ResourceIndex`; HTTPClient's comes from discovery)."""
        return self.rest.index

    def resources(self):
        return self.rest.index.resources

    async def discover(self) -> None:
        """Nothing to read: the index is the server's own, always current (`HTTPClient.discover`)."""

    def reset_mapping_every(self, period: float) -> None:
        """Nothing goes stale (`HTTPClient.reset_mapping_every`)."""

    async def rediscover_if_stale(self) -> bool:
        """Never stale: nothing read (`HTTPClient.rediscover_if_stale`)."""
        return False

    async def mapping(self, group: str, kind: str):
        """The resource serving `kind` in `group`, None if none does (`HTTPClient.mapping`)."""
        return self.rest.index.by_kind(group, kind)


class ResourceClient:
    def __init__(self, client: LocalClient, res, version: str):
        self.c = client
        self.res = res
        self.version = version

    def _origin(self, verb: str, depth: int = 3) -> str:
        """Where the mutation detector says an object came from: the call, and the code that made it
        (`depth` frames up: the caller of the method that calls this)."""
        return f"{verb} {self.res.plural} by {self.c.field_manager} at {mutation.caller(depth)}"

    def _handed_out(self, obj: dict, verb: str) -> dict:
        """`obj`, which the mutation detector (when on) remembers as handed out by `verb`."""
        d = mutation.DETECTOR
        if d is not None:
            d.keep(obj, self._origin(verb, 4))
        return obj

    def _opts(self, **kw) -> WriteOptions:
        return WriteOptions(field_manager=self.c.field_manager, user=self.c.user, **kw)

    async def _audited(self, verb: str, namespace: str | None, name: str, call: Awaitable, subresource: str = "",
                       code: int = 200, sent: Any = None, stored: bool = False) -> Any:
        """Run a write, logged to the audit log (when the server keeps one) as a write over HTTP is;
        `sent`: its body (the object, the patch's bytes), which an audit policy may log. `stored`: the
        call answers with the object as stored (WriteOptions.response), which the Metadata line reads
        the metadata of, and which is converted to the request's version for a policy, which may log it."""
        audit = self.c.rest.audit
        if audit is None:
            return await call
        received = audit.now()
        c = self.c
        try:
            out = await call
        except errors.APIError as e:
            audit.loopback(verb, c.user, self.res, self.version, namespace, name, subresource, e.code, e.status(),
                           received, c.user_agent, sent)
            raise
        if isinstance(out, Result):
            code, body = out.code, out.obj
            if stored and audit.policy is not None:
                body = c.rest._external(self.res, body, self.version)
        else:
            body = out
        audit.loopback(verb, c.user, self.res, self.version, namespace, name, subresource, code,
                       body if isinstance(body, dict) else {}, received, c.user_agent, sent)
        return out

    async def get(self, name: str, namespace: str | None = None) -> dict:
        await asyncio.sleep(0)
        return self._handed_out(await self.c.rest.get(self.res, self.version, namespace, name), "get")

    async def list(self, namespace: str | None = None, label_selector: str = "", field_selector: str = "",
                   resource_version: str = "") -> tuple[list[dict], str]:
        items, meta = await self.list_page(namespace, label_selector, field_selector, resource_version)
        return items, meta["resourceVersion"]

    async def list_page(self, namespace: str | None = None, label_selector: str = "", field_selector: str = "",
                        resource_version: str = "", limit: int = 0, continue_: str = "") -> tuple[list[dict], dict]:
        """One page of a list and its metadata, as the HTTP client's `list_page`."""
        await asyncio.sleep(0)
        items, meta = await self.c.rest.list(self.res, self.version, namespace, label_selector=label_selector,
                                             field_selector=field_selector, limit=limit, continue_=continue_,
                                             resource_version=resource_version)
        d = mutation.DETECTOR
        if d is not None:
            d.keep_all(items, self._origin("list"))
        return items, meta

    #: informers sync by a streaming list, as over HTTP (client-go's WatchListClient, on since 1.35): a
    #: watch, which no client bucket limits, where a LIST would wait on the shared informers' bucket
    watch_list = True

    async def watch(self, namespace: str | None = None, resource_version: str = "", label_selector: str = "",
                    field_selector: str = "", timeout_seconds: int | None = None, send_initial_events: bool = False):
        """`timeout_seconds` is taken as the HTTP client's is, and ignored: an in-process watch is no
        request for the server to time out, and runs until closed (ending every informer's watch each
        5 to 10 minutes would wake an idle simulated day thousands of times). `send_initial_events`:
        a streaming list, as the HTTP client's (`_streamed`): its initial-events-end bookmark, but no
        periodic ones after it (each would wake a simulated run once a minute a watch), so the same
        watch goes on as a plain one."""
        await asyncio.sleep(0)
        if send_initial_events:
            stream = await self._watch(namespace, resource_version, label_selector, field_selector,
                                       send_initial_events=True, allow_bookmarks=True, periodic_bookmarks=False,
                                       resource_version_match=options.NOT_OLDER_THAN)
        else:
            stream = await self._watch(namespace, resource_version, label_selector, field_selector)
        d = mutation.DETECTOR
        if d is None:
            return stream
        return mutation.KeptStream(stream, d, self._origin("watch"))

    def _watch(self, namespace: str | None, resource_version: str, label_selector: str, field_selector: str, **kw):
        return self.c.rest.watch(self.res, self.version, namespace, resource_version=resource_version,
                                 label_selector=label_selector, field_selector=field_selector, **kw)

    async def create(self, obj: dict, namespace: str | None = None, response: bool = True) -> dict | None:
        """`response` False: the caller drops the created object (an Event recorder), so the server
        leaves it unconverted to this version, and None is returned (over HTTP the answer comes anyway)."""
        await asyncio.sleep(0)
        ns = namespace or (obj.get("metadata") or {}).get("namespace")
        if self.res.verbs == ("create",) and self.c.rest.reviews is not None:  # answered, never stored
            return await self.c.rest.reviews(self.res, orjson.loads(orjson.dumps(obj)), self.c.user, ns)
        d = mutation.DETECTOR
        if d is not None:
            d.check_write(obj)
        # the copy's JSON goes along as an HTTP request's body does: the server judges the object's
        # size by it (rest._large) instead of encoding the object once more
        raw = orjson.dumps(obj)
        out = await self._audited("create", ns, "", self.c.rest.create(
            self.res, self.version, ns, orjson.loads(raw), self._opts(response=response, body=raw)), sent=obj,
            stored=not response)
        return self._handed_out(out.obj, "create") if response else None

    def _route(self, subresource: str) -> None:
        """A subresource the resource lacks is a path no route serves: 404, as over HTTP."""
        if subresource and subresource not in self.res.subresources:
            raise errors.route_not_found()

    async def update(self, obj: dict, subresource: str = "") -> dict:
        await asyncio.sleep(0)
        self._route(subresource)
        md = obj["metadata"]
        d = mutation.DETECTOR
        if d is not None:
            d.check_write(obj)
        body = orjson.loads(orjson.dumps(obj))
        return self._handed_out((await self._audited("update", md.get("namespace"), md["name"], self.c.rest.update(
            self.res, self.version, md.get("namespace"), md["name"], body, self._opts(), subresource=subresource),
            subresource, sent=obj)).obj, "update")

    async def patch(self, name: str, patch: Any, patch_type: str = "application/merge-patch+json",
                    namespace: str | None = None, subresource: str = "", field_manager: str = "", force: bool = False) -> dict:
        await asyncio.sleep(0)
        self._route(subresource)
        opts = self._opts(force=force)
        if field_manager:
            opts.field_manager = field_manager
        raw = patch if isinstance(patch, bytes) else orjson.dumps(patch)
        return self._handed_out((await self._audited("patch", namespace, name, self.c.rest.patch(
            self.res, self.version, namespace, name, patch_type, raw, opts, subresource=subresource), subresource,
            sent=raw)).obj, "patch")

    async def delete(self, name: str, namespace: str | None = None, propagation_policy: str | None = None,
                     grace_period_seconds: int | None = None, preconditions: dict | None = None) -> dict:
        await asyncio.sleep(0)
        options: dict[str, Any] = {}
        if propagation_policy:
            options["propagationPolicy"] = propagation_policy
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if preconditions:
            options["preconditions"] = preconditions
        return self._handed_out((await self._audited("delete", namespace, name, self.c.rest.delete(
            self.res, self.version, namespace, name, options, self._opts()))).obj, "delete")

    async def delete_collection(self, namespace: str | None = None, label_selector: str = "",
                                field_selector: str = "") -> list[dict]:
        await asyncio.sleep(0)
        return await self._audited("deletecollection", namespace, "", self.c.rest.delete_collection(
            self.res, self.version, namespace, {}, self._opts(), label_selector=label_selector,
            field_selector=field_selector))

    async def get_scale(self, name: str, namespace: str | None = None) -> dict:
        """The autoscaling/v1 Scale of a resource with a scale subresource (workloads, CRDs)."""
        await asyncio.sleep(0)
        return await self.c.subresources.get_scale(self.res, namespace, name, version=self.version)

    async def update_scale(self, name: str, replicas: int, namespace: str | None = None) -> dict:
        await asyncio.sleep(0)
        return await self._audited("update", namespace, name, self.c.subresources.put_scale(
            self.res, self.version, namespace, name, {"spec": {"replicas": replicas}}, self._opts()), "scale")

    async def create_subresource(self, name: str, subresource: str, body: dict,
                                 namespace: str | None = None) -> dict:
        """POST to pods/binding, pods/eviction or serviceaccounts/token (a server without a token
        issuer serves no such subresource), as HTTPClient does over the wire."""
        await asyncio.sleep(0)
        self._route(subresource)
        if not self.res.group and self.res.plural == "serviceaccounts" and subresource == "token":
            tokens = self.c.rest.tokens
            if tokens is None:
                raise errors.route_not_found()

            async def issue() -> dict:
                return tokens.token_request(namespace, name, orjson.loads(orjson.dumps(body)))
            return await self._audited("create", namespace, name, issue(), subresource, code=201)
        if self.res.group or self.res.plural != "pods" or subresource not in ("binding", "eviction"):
            raise errors.method_not_allowed()
        sent, body = body, orjson.loads(orjson.dumps(body))
        if subresource == "binding":
            call = self.c.subresources.bind(self.res, namespace, name, body, self._opts())
        else:
            call = self.c.subresources.evict(namespace, name, body, self._opts())
        return await self._audited("create", namespace, name, call, subresource, code=201, sent=sent)
