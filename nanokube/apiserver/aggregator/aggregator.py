"""The aggregator: serves the group/versions of remote APIServices by
proxying, keeps every APIService's `Available` condition (local ones always,
remote ones by probing `/apis/<group>/<version>` through their Service, as
kube-aggregator's availability controllers do) and feeds the remote groups
into `/apis` discovery."""

from __future__ import annotations

import asyncio

import aiohttp
import orjson
from aiohttp import web

from ...client.informer import Informer
from ...controllers.base import Controller
from ...machinery.conditions import find_condition, is_condition_true
from ...machinery import errors
from ...machinery.errors import APIError
from ...machinery.hostport import join_host_port
from ...machinery.user import User
from ..auth.authorizer import USER
from ..rest import version_priority
from ..streaming.proxy import is_upgrade
from .proxy import (ExpectForwarded, ExtensionServer, InterimRelayed, ResolveError, forward, forward_upgrade,
                    go_dial_error, identity_headers, proxy_error, resolve_endpoint, tls_context)

GROUP = "apiregistration.k8s.io"
PROBE_USER = User("system:kube-aggregator", ("system:masters",))
#: how often a remote APIService is probed again (upstream's availability resync)
RECHECK_AVAILABLE, RECHECK_UNAVAILABLE = 30.0, 5.0


def _spec(o: dict) -> dict:
    return o.get("spec") or {}


def _available(o: dict) -> bool:
    return is_condition_true((o.get("status") or {}).get("conditions"), "Available")


class Aggregator(Controller):
    name = "apiservice-availability"

    def __init__(self, client, front_proxy_cert: tuple[str, str], on_discovery_change, **kw):
        super().__init__(client, **kw)
        self.apiservices = client.resource(GROUP, "v1", "apiservices")
        self.as_inf = Informer(self.apiservices, clock=self.clock)
        self.svc_inf = Informer(client.resource("", "v1", "services"), clock=self.clock)
        self.eps_inf = Informer(client.resource("discovery.k8s.io", "v1", "endpointslices"), clock=self.clock)
        self.cert = front_proxy_cert
        self.on_discovery_change = on_discovery_change
        #: (group, version) -> remote APIService
        self.remote: dict[tuple[str, str], dict] = {}
        #: the group/versions whose APIService was deleted (none serves them until one is made again)
        self.withdrawn: set[tuple[str, str]] = set()
        #: (group, version) -> the APIResourceList the last successful probe returned
        self.resources: dict[tuple[str, str], dict] = {}
        #: (group, version) -> its entry in the extension server's own /openapi/v3 index
        self.openapi: dict[tuple[str, str], dict] = {}
        self.session: aiohttp.ClientSession | None = None
        #: how the session's connections are opened (dial_services_from), which the upgrade path dials with too
        self._socket_factory = None
        #: APIService name -> (resourceVersion, its TLS context)
        self._tls: dict[str, tuple[str, object]] = {}
        self._probe_tls = None
        self.as_inf.add_handlers(on_add=self._observe, on_update=lambda o, n: self._observe(n), on_delete=self._forget)
        for inf in (self.svc_inf, self.eps_inf):
            inf.add_handlers(on_add=self._service_changed, on_update=lambda o, n: self._service_changed(n),
                             on_delete=self._service_changed)

    def informers(self):
        return [self.as_inf, self.svc_inf, self.eps_inf]

    async def start(self) -> None:
        self.session = self._new_session()
        await super().start()

    @staticmethod
    def _new_session(socket_factory=None) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(connector=aiohttp.TCPConnector(socket_factory=socket_factory),
                                     auto_decompress=False, timeout=aiohttp.ClientTimeout(sock_connect=5),
                                     request_class=ExpectForwarded, response_class=InterimRelayed)

    async def dial_services_from(self, socket_factory) -> None:
        """Open connections to APIServices' endpoints with `socket_factory` (see
        netns.dialer), then probe every remote APIService again."""
        self._socket_factory = socket_factory
        old, self.session = self.session, self._new_session(socket_factory)
        if old is not None:
            await old.close()
        for a in self.remote.values():
            self.queue.add(a["metadata"]["name"])

    async def stop(self) -> None:
        await super().stop()
        if self.session is not None:
            await self.session.close()

    # --- events ------------------------------------------------------------------

    def _observe(self, obj: dict) -> None:
        spec = _spec(obj)
        gv = (spec.get("group", ""), spec.get("version", ""))
        self.withdrawn.discard(gv)
        if spec.get("service"):
            self.remote[gv] = obj
        elif self.remote.pop(gv, None) is not None:
            self.resources.pop(gv, None)
            self.openapi.pop(gv, None)
        self.queue.add(obj["metadata"]["name"])
        self.on_discovery_change()

    def _forget(self, obj: dict) -> None:
        self._tls.pop(obj["metadata"]["name"], None)
        spec = _spec(obj)
        gv = (spec.get("group", ""), spec.get("version", ""))
        self.withdrawn.add(gv)
        if self.remote.get(gv, {}).get("metadata", {}).get("name") == obj["metadata"]["name"]:
            del self.remote[gv]
            self.resources.pop(gv, None)
            self.openapi.pop(gv, None)
        self.on_discovery_change()

    def _service_changed(self, obj: dict) -> None:
        md = obj["metadata"]
        name = (md.get("labels") or {}).get("kubernetes.io/service-name", md["name"])
        for a in self.remote.values():
            svc = _spec(a)["service"]
            if svc.get("namespace") == md.get("namespace") and svc.get("name") == name:
                self.queue.add(a["metadata"]["name"])

    def _context(self, apiservice: dict):
        md = apiservice["metadata"]
        cached = self._tls.get(md["name"])
        if cached is None or cached[0] != md.get("resourceVersion"):
            cached = self._tls[md["name"]] = (md.get("resourceVersion"), tls_context(_spec(apiservice), *self.cert))
        return cached[1]

    def _probe_context(self):
        """The availability check's TLS: the front-proxy client certificate, the server's not verified
        (remote_available_controller.go: a best-effort GET; the proxy verifies with the caBundle)."""
        if self._probe_tls is None:
            self._probe_tls = tls_context({"insecureSkipTLSVerify": True}, *self.cert)
        return self._probe_tls

    # --- availability ------------------------------------------------------------

    def _get(self, apiservice: dict, host: str, port: int, path: str):
        """A GET of `path` from the APIService's endpoint as the aggregator itself (the
        session's request context manager)."""
        svc = _spec(apiservice)["service"]
        headers = [("X-Remote-User", PROBE_USER.name)] + [("X-Remote-Group", g) for g in PROBE_USER.groups]
        return self.session.get(f"https://{join_host_port(host, port)}{path}", headers=headers,
                                ssl=self._probe_context(), server_hostname=f"{svc['name']}.{svc['namespace']}.svc",
                                timeout=aiohttp.ClientTimeout(total=5))

    async def _openapi_entry(self, apiservice: dict) -> dict | None:
        """The APIService's group-version in its server's /openapi/v3 index, the URL (and so
        its `?hash=`) as that server names it, as kube-aggregator's OpenAPI v3 aggregator
        downloads each APIService's discovery; None when the server publishes none."""
        spec = _spec(apiservice)
        svc = spec["service"]
        try:
            host, port = await resolve_endpoint(self.client, svc["namespace"], svc["name"], svc.get("port", 443))
            async with self._get(apiservice, host, port, "/openapi/v3") as r:
                if r.status != 200:
                    return None
                index = orjson.loads(await r.read())
        except (ResolveError, aiohttp.ClientError, OSError, asyncio.TimeoutError, ValueError):
            return None
        entry = ((index.get("paths") if isinstance(index, dict) else None) or {}).get(
            f"apis/{spec['group']}/{spec['version']}")
        return entry if isinstance(entry, dict) and isinstance(entry.get("serverRelativeURL"), str) else None

    async def _probe(self, apiservice: dict) -> tuple[str, str, str, dict | None]:
        """(status, reason, message, APIResourceList) of a remote APIService."""
        spec = _spec(apiservice)
        svc = spec["service"]
        try:
            host, port = await resolve_endpoint(self.client, svc["namespace"], svc["name"], svc.get("port", 443))
        except ResolveError as e:
            return "False", e.reason, str(e), None
        path = f"/apis/{spec['group']}/{spec['version']}"
        url = f"https://{join_host_port(host, port)}{path}"
        try:
            async with self._get(apiservice, host, port, path) as r:
                body = await r.read()
                if not 200 <= r.status < 300:
                    return "False", "FailedDiscoveryCheck", f"bad status from {url}: {r.status}", None
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError, ValueError) as e:
            # http.Client.Do's url.Error around the transport's; its 5 s Timeout as the client words it
            why = ("context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
                   if isinstance(e, asyncio.TimeoutError) else go_dial_error(join_host_port(host, port), e))
            return "False", "FailedDiscoveryCheck", f'failing or missing response from {url}: Get "{url}": {why}', None
        try:
            doc = orjson.loads(body)
        except orjson.JSONDecodeError:
            doc = None
        return "True", "Passed", "all checks passed", doc if isinstance(doc, dict) else None

    async def sync(self, name: str) -> None:
        obj = self.as_inf.get(name)
        if obj is None:
            return
        spec = _spec(obj)
        gv = (spec.get("group", ""), spec.get("version", ""))
        if spec.get("service"):
            status, reason, message, doc = await self._probe(obj)
            if doc is not None:
                self.resources[gv] = doc
            if status == "True" and (entry := await self._openapi_entry(obj)) is not None:
                self.openapi[gv] = entry
            else:
                self.openapi.pop(gv, None)
            self.queue.add_after(name, RECHECK_AVAILABLE if status == "True" else RECHECK_UNAVAILABLE)
        else:
            status, reason, message = "True", "Local", "Local APIServices are always available"
        conditions = (obj.get("status") or {}).get("conditions") or []
        old = find_condition(conditions, "Available")
        if old is not None and (old.get("status"), old.get("reason"), old.get("message")) == (status, reason, message):
            return
        cond = {"type": "Available", "status": status,
                "lastTransitionTime": old["lastTransitionTime"] if old and old.get("status") == status else self.clock.rfc3339(),
                "reason": reason, "message": message}
        body = {**obj, "status": {"conditions": [c for c in conditions if c.get("type") != "Available"] + [cond]}}
        try:
            await self.apiservices.update(body, subresource="status")
        except APIError as e:
            if e.code != 404:
                raise
        self.on_discovery_change()

    # --- serving -----------------------------------------------------------------

    def serves(self, group: str, version: str | None) -> bool:
        if version is None:
            return any(g == group for g, _ in self.remote)
        return (group, version) in self.remote

    def group_document(self, group: str) -> dict:
        """The APIGroup of a remote group, versions by versionPriority, then in Kubernetes version
        order (the aggregator's ByVersionPriority: GA before beta before alpha, not by name)."""
        services = sorted((a for (g, _), a in self.remote.items() if g == group),
                          key=lambda a: (-_spec(a).get("versionPriority", 0), version_priority(_spec(a)["version"])))
        versions = [{"groupVersion": f"{group}/{_spec(a)['version']}", "version": _spec(a)["version"]} for a in services]
        return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": versions, "preferredVersion": versions[0]}

    def discovery_groups(self) -> list[tuple[dict, dict]]:
        """(APIGroup, APIResourceList of the preferred version) per remote group."""
        out = []
        for group in sorted({g for g, _ in self.remote}):
            doc = self.group_document(group)
            version = doc["preferredVersion"]["version"]
            rl = self.resources.get((group, version)) or {"kind": "APIResourceList", "apiVersion": "v1",
                                                         "groupVersion": f"{group}/{version}", "resources": []}
            out.append((doc, rl))
        return out

    def openapi_paths(self) -> dict[str, dict]:
        """`/openapi/v3` index entries of the available remote group/versions, as their servers'
        own indexes name them; their documents are the extension servers' own (`serve` proxies
        them, the server answering a stale `?hash=`)."""
        out = {}
        for gv, a in self.remote.items():
            if gv in self.openapi and _available(self.as_inf.get(a["metadata"]["name"]) or a):
                out[f"apis/{gv[0]}/{gv[1]}"] = self.openapi[gv]
        return out

    async def get(self, path: str, query, user: User) -> dict:
        """A loopback client's GET of a remote APIService's path, asked of its server as `serve` proxies
        one (the user's identity, the APIService's TLS): the document, or the APIError client-go makes
        of the answer, the proxy's 503s included."""
        parts = path.split("/", 4)
        group, version = parts[2], parts[3] if len(parts) > 3 and parts[3] else None
        if version is None:
            return self.group_document(group)
        apiservice = self.remote.get((group, version))
        unavailable = errors.response_error(503, b"service unavailable\n")
        if apiservice is None or not _available(self.as_inf.get(apiservice["metadata"]["name"]) or apiservice):
            raise unavailable
        svc = _spec(apiservice)["service"]
        try:
            host, port = await resolve_endpoint(self.client, svc["namespace"], svc["name"], svc.get("port", 443))
        except ResolveError:
            raise unavailable from None
        headers = [*identity_headers(user), ("Accept", "application/json"), ("Accept-Encoding", "identity")]
        try:
            async with self.session.get(f"https://{join_host_port(host, port)}{path}", params=dict(query),
                                        headers=headers, ssl=self._context(apiservice),
                                        server_hostname=f"{svc['name']}.{svc['namespace']}.svc") as r:
                status, body = r.status, await r.read()
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as e:
            raise errors.response_error(503, f"{go_dial_error(join_host_port(host, port), e)}\n".encode()) from None
        if status >= 400:
            raise errors.response_error(status, body)
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            raise errors.response_error(500, body) from None

    async def serve(self, request: web.Request, group: str, version: str | None) -> web.StreamResponse:
        if version is None:
            return web.json_response(self.group_document(group))
        apiservice = self.remote.get((group, version))
        if apiservice is None or not _available(self.as_inf.get(apiservice["metadata"]["name"]) or apiservice):
            return proxy_error("service unavailable")
        user = request.get(USER)
        if user is None:
            return proxy_error("missing user", 500)
        spec = _spec(apiservice)
        svc = spec["service"]
        try:
            host, port = await resolve_endpoint(self.client, svc["namespace"], svc["name"], svc.get("port", 443))
        except ResolveError:
            return proxy_error("service unavailable")
        server_name = f"{svc['name']}.{svc['namespace']}.svc"
        if is_upgrade(request):
            return await forward_upgrade(request, ExtensionServer(host, port, self._context(apiservice), server_name,
                                                                  self._socket_factory), user)
        return await forward(self.session, request, f"https://{join_host_port(host, port)}", server_name,
                             self._context(apiservice), user)
