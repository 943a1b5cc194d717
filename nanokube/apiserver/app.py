"""The API server process: TLS listener, authentication, health, metrics,
OpenAPI and the resource routes, over one store and its watch cache."""

from __future__ import annotations

import asyncio
import email.utils
import logging
import socket
import ssl
import zlib
from typing import Any

import orjson
from aiohttp import web
from multidict import CIMultiDict

from .loopback import LocalClient
from ..clock import REAL, Clock
from ..metrics import openapi as metrics_openapi
from ..pki.ca import ClusterPKI, ensure_front_proxy, ensure_kubelet_client
from ..registry.base import Resource, Strategy, all_resources
from ..store.instrumented import InstrumentedStore
from ..store.interface import Store
from ..machinery import errors
from ..machinery.hostport import join_host_port
from .admission import AUDIT_ANNOTATIONS as ADMISSION_AUDIT
from .admission import Admission
from .audit import ANNOTATIONS as AUDIT_ANNOTATIONS
from .audit import REQUESTER as AUDIT_REQUESTER
from .audit import WRITE_VERBS, AuditLog
from .audit import AuditedRequest, audit_id
from .audit import authenticated as audit_authenticated
from .audit import unauthenticated as audit_unauthenticated
from .audit_file import LogOptions
from .auth import RBACAuthorizer, bootstrap_policy, forbidden, namespace_policy
from .apf import long_running
from .auth.authentication_config import ALLOW_ALL as ANONYMOUS_ALLOWED
from .auth.authorizer import USER, Decision, decide, request_attributes
from .auth.impersonation import asks as asks_impersonation, impersonate
from .auth.requestheader import RequestHeader
from .auth.reviews import Reviews
from .auth.node import ChainAuthorizer, NodeAuthorizer, cache_reader
from .auth.rbac import CachePolicySource, reconcile_binding, reconcile_role
from .auth.serviceaccount import LAST_USED_LABEL, ServiceAccountTokens, load_or_create_key
from . import componentstatus, controlplane, discovery, expect, healthz, serving, timeout, warning
from .cache import WatchCache
from .eventttl import DEFAULT_TTL, EventTTL
from .handlers import APIHandlers, accepts_gzip, as_negotiated, compressed, gzipped, sized
from .serving_tls import ServingTLS, signed_by, verified_chain
from .http_errors import StatusAppRunner, http_exceptions, internal_error, status_response
from .inline import own_context
from .loophold import LoopHolds, answered
from ..machinery.responses import error_response, json_response
from ..machinery.user import SPACED_BEARER_WARNING, bearer_token, spaced_bearer, user_from_cert
from ..machinery.version import INFO
from .. import debugflags, zpages
from ..ui import serving as console
from .metrics import APIMetrics
from .options import MIN_REQUEST_TIMEOUT, request_deadline
from .rest import SYSTEM, GenericREST, ResourceIndex, User, WriteOptions
from .kubernetes_service import advertise_address
from .systemnamespaces import SYSTEM_NAMESPACES

log = logging.getLogger(__name__)

_VERSION_BODY = orjson.dumps(INFO, option=orjson.OPT_INDENT_2)
#: gziphandler's DefaultMinSize: a smaller /openapi/v2 answer is sent as it is
GZIP_MIN_SIZE = 1400

#: who a request without credentials is, where --anonymous-auth or the authentication config lets one
#: through: RBAC decides what it may read past PUBLIC_PATHS (the console's page)
ANONYMOUS = User("system:anonymous", ("system:unauthenticated",))
PUBLIC_PATHS = {"/healthz", "/livez", "/readyz", "/version", "/version/"}
#: how another of `up`'s workers names the user it relays (workers.NodeRelay): kubeadm's flags
_RELAYED_HEADERS = RequestHeader()
OPENID_CONFIGURATION_PATH = "/.well-known/openid-configuration"
#: kube-apiserver's --etcd-count-metric-poll-period default: how often the stored objects are counted
COUNT_POLL_PERIOD = 60.0
#: the metrics APIs' kinds as resources, for the OpenAPI documents only (no storage: metrics/api.py serves them)
_METRICS_RESOURCES = [Resource(group, plural, kind, [version], namespaced=namespaced, verbs=verbs)
                      for group, version, plural, kind, namespaced, verbs in metrics_openapi.KINDS]
JWKS_PATH = "/openid/v1/jwks"
#: (group, resource) kept in the store though kube-apiserver stores none (its ComponentStatus REST probes on each
#: read): no storage or watch cache series name it, nor a stored-objects count
_UNSTORED = frozenset({("", componentstatus.KEY)})


def _passes() -> None:
    """A check that holds while the server answers at all (its log is in the process)."""


class _StoreProbe:
    """The etcd and etcd-readiness checks: a read of the store within --etcd-healthcheck-timeout's
    2 s, as upstream's etcd3 check reads a key; an etcd that stopped answering fails both (`/readyz`
    and `/livez` 500, `[-]etcd failed: reason withheld`, the error logged). A store in this process
    (SQLite, memory) answers at once."""

    TIMEOUT = 2.0

    def __init__(self, store: Store) -> None:
        self.store, self.reason = store, None

    async def refresh(self) -> None:
        try:
            await asyncio.wait_for(self.store.current_revision(), self.TIMEOUT)
            self.reason = None
        except Exception as e:  # whatever keeps the store from answering makes it unhealthy
            self.reason = f"error getting data from etcd: {str(e) or type(e).__name__}"

    def run(self) -> str | None:
        return self.reason


def _warn_when_sent(request: web.Request, texts: list[str]) -> None:
    """Authentication's warnings (a legacy token's) on the request's response as its headers are
    written, ahead of the handler's own, as upstream's recorder writes them before the handler adds
    any: a watch or other stream, which starts answering before its handler returns, included; not
    a protocol switch (exec, attach, port-forward), whose 101 upstream relays from the kubelet."""
    then = request._prepare_hook  # (the audit's, for a long-running request)

    async def hook(response: web.StreamResponse) -> None:
        if response.status != 101:
            later = response.headers.popall("Warning", [])
            for text in texts:
                response.headers.add("Warning", warning.header(text))
            for value in later:
                response.headers.add("Warning", value)
            warning.limit(response.headers)
        await then(response)
    object.__setattr__(request, "_prepare_hook", hook)  # (see AuditLog._around)


def _etagged(request: web.Request, body: bytes, tag: str, headers: dict[str, str]) -> web.Response:
    """A JSON document under its quoted ETag, or 304 to a client that holds it
    (If-None-Match), as http.ServeContent answers for kube-openapi."""
    headers["ETag"] = f'"{tag}"'
    held = {t.strip().removeprefix("W/") for t in request.headers.get("If-None-Match", "").split(",")}
    if headers["ETag"] in held or "*" in held:
        return web.Response(status=304, headers=headers)
    return web.Response(body=body, content_type="application/json", headers=headers)


class APIServer:
    def __init__(self, store: Store, pki: ClusterPKI | None, host: str = "127.0.0.1", port: int = 6443,
                 clock: Clock = REAL, compaction_interval: float = 300.0, audit_log_path: str = "",
                 event_ttl: float = DEFAULT_TTL, workers: int = 1, worker: int = 0, advertise: str | None = None,
                 jwks_uri: str = "", min_request_timeout: float = MIN_REQUEST_TIMEOUT, audit_policy=None,
                 audit_webhook=None, audit_log_options: LogOptions = LogOptions(), runtime_config=None):
        """`event_ttl`: seconds an Event lives after its last write (kube-apiserver's --event-ttl).
        `advertise`: the address the `kubernetes` Service's endpoints name (--advertise-address);
        by default the listen address, or the host's for a wildcard one, none for loopback.
        `jwks_uri`: the discovery document's jwks_uri (--service-account-jwks-uri); by default
        https:// the advertised address (the listen one when none) and port, then the key set's path.
        `min_request_timeout`: kube-apiserver's --min-request-timeout, in seconds: a watch without
        timeoutSeconds is served a random time from this to twice this.
        `runtime_config`: the runtime_config.ResourceConfig of --runtime-config; None serves every version.
        `workers` > 1: this is worker `worker` of that many processes serving one port and one
        store (see workers.py); worker 0 alone bootstraps and runs the loops that write."""
        self.metrics = APIMetrics(clock)
        #: how long requests held the event loop (the longest step of any, see loophold.py)
        self.loop_holds = LoopHolds()
        #: the health checks /healthz, /livez and /readyz ran, served at /metrics/slis
        self.slis = healthz.HealthSLIs()
        self.store = InstrumentedStore(store, self.metrics, _UNSTORED)
        self.clock = clock
        self.pki = pki
        self.host, self.port = host, port
        self.advertise = advertise if advertise is not None else advertise_address(host)
        self.jwks_uri = jwks_uri
        resources = all_resources()
        self.index = ResourceIndex(runtime_config.served(resources) if runtime_config else resources)
        self.cache = WatchCache(self.store, clock=clock)
        built_in = frozenset(r.key_prefix() for r in resources)
        self.cache.unstructured = lambda prefix: prefix not in built_in  # custom resources' (apiextensions)
        self.metrics.watch_cache(self.cache.stats, lambda: self.cache.rev, _UNSTORED)
        self.event_ttl = EventTTL(self.store, self.cache, clock, event_ttl, self.metrics.registry)
        self.rest = GenericREST(self.store, self.cache, self.index, clock)
        self.rest.admission = Admission(self.rest)
        self.handlers = APIHandlers(self.rest, self.index, clock, self.metrics, None)
        self.handlers.external_address = self.external_address
        if pki is not None:
            self.handlers.kubelets.use(*ensure_kubelet_client(pki.dir, pki.ca))
        self.handlers.on_built_in_change = self._forget_openapi
        self.handlers.min_request_timeout = min_request_timeout
        #: every request's but the long-running ones' (WithRequestDeadline)
        self.deadlines = timeout.Deadlines(clock)
        self.rbac = RBACAuthorizer(CachePolicySource(self.index, self.cache))
        self.authorizer = ChainAuthorizer(NodeAuthorizer(*cache_reader(self.index, self.cache)), self.rbac)
        self.rest.admission.authorizer = self.authorizer
        self.tokens = ServiceAccountTokens(load_or_create_key(pki.dir), self._lookup, clock,
                                           legacy_used=self._legacy_token_used) if pki else None
        #: (namespace, secret) -> the day its legacy token's use was last labelled, or is being
        self._legacy_days: dict[tuple[str, str], str] = {}
        self.handlers.streams.authorize = self.decide
        self.handlers.reviews = self.rest.reviews = Reviews(self.decide, self.rbac.rules_for,
                                                            self._token_review if self.tokens else None)
        self.handlers.reviews.unlisted = self.authorizer.unlisted
        self.handlers.sub.tokens = self.tokens
        #: who may go without credentials, and where (--anonymous-auth, the authentication config's `anonymous`)
        self.anonymous = ANONYMOUS_ALLOWED
        #: the JWT issuers of --authentication-config (auth_options.apply), tried after ServiceAccount tokens
        self.authentication = None
        #: --authorization-config's authorizers (use_authorizer), and what decides requests by them
        self.authorization = None
        self.authorize_async = None
        #: in-process clients (node agents projecting serviceAccountToken volumes) reach the issuer through rest
        self.rest.tokens = self.tokens
        if self.tokens is None:  # no issuer, no token a pod could mount: ServiceAccount admission is off
            self.rest.admission.disable("ServiceAccount")
        self.compaction_interval = compaction_interval
        self.workers, self.worker = workers, worker
        self.cache.lazy = workers > 1
        #: worker 0's private port for the others' relayed requests (workers.NodeRelay)
        self.relay_port = 0
        self._runner: web.AppRunner | None = None
        #: the sockets `start` binds first (one per address the listen host names), until sites serve on them
        self._listeners: list[socket.socket] = []
        self._app: web.Application | None = None
        #: the groups under /apis/ that routes of the application serve (the metrics APIs)
        self._routed_groups: frozenset[str] = frozenset()
        self._tasks: list[asyncio.Task] = []
        self._openapi: dict[str, Any] = {}
        self._loops: list = []
        #: the socket factory Services' endpoints are dialled with (dial_services_from); None: the host's
        self._service_dialer = None
        #: API Priority and Fairness (apf.py), after authentication
        self.flow_control = None
        #: Prometheus registries of in-process components (scheduler...) served on /metrics too
        self.component_metrics: list = [self.rest.admission.webhooks.metrics.registry,
                                        self.rest.admission.pod_security.metrics.registry,
                                        *([self.tokens.metrics.registry] if self.tokens else [])]
        self.ready = False
        #: set once stop() begins: readyz's `shutdown` check fails from then on, as genericapiserver's
        self.shutting_down = False
        #: the command line's flags, which /flagz shows (none served without them)
        self.flags: dict[str, str] | None = None
        self.audit_log_path = audit_log_path
        #: encryption at rest (encryption.controller.Encryption, over the store it was handed): its KMS
        #: providers' checks join /healthz and /readyz, not /livez, as kube-apiserver's; None without
        self.encryption = None
        #: --audit-policy-file's audit_policy.Policy; None: writes audited at Metadata
        self.audit_policy = audit_policy
        #: --audit-webhook-config-file's audit_webhook.WebhookBackend, which gets every event too
        self.audit_webhook = audit_webhook
        #: the --audit-log-* flags: format, mode, rotation
        self.audit_log_options = audit_log_options
        self.audit: AuditLog | None = None
        #: what a connection's client certificate says (the request-header flags it vouches by as a front
        #: proxy, its user), by the certificate dict its TLS transport hands every request of the connection
        #: (held, so the id stays unique)
        self._certs: dict[int, tuple[dict, RequestHeader | None, User | None]] = {}
        #: the serving certificates and client CAs (pki_options: the operator's files; else `up`'s own, on start)
        self.tls: ServingTLS | None = None
        self._own_tls: ServingTLS | None = None
        #: --requestheader-*: which front-proxy certificates vouch for users, in which headers
        self.requestheader = RequestHeader()

    def use_authorizer(self, authorizer) -> None:
        """Decide by `authorizer` (--authorization-config's controller) from now on: requests by its
        authorize_async, reviews, impersonation, streams and admission's RBAC checks by `decide`
        (its authorize_async too); before the server starts."""
        self.authorization = self.authorizer = self.rest.admission.authorizer = authorizer
        self.handlers.reviews.rules_for, self.handlers.reviews.unlisted = authorizer.rules_for, authorizer.unlisted
        self.authorize_async = authorizer.authorize_async

    async def decide(self, user: User, a) -> Decision:
        """The server's authorizer on `user` doing `a` (`authorizer.decide`: a webhook's round trip
        off the event loop)."""
        return await decide(self.authorizer, user, a)

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"

    # --- lifecycle --------------------------------------------------------

    async def start(self) -> None:
        # the port first, as kube-apiserver opens its listener before it builds the rest: port 0
        # becomes the kernel's pick, which everything that names the port (the kubernetes Service,
        # the other workers, the kubeconfig) reads from then on; it listens once it serves, at the end
        self._listeners = await self._bind()
        await self.store.start()
        await self.cache.start()
        if self.worker == 0:  # one deleter of expired Events: worker 0's cache sees every worker's writes
            self.event_ttl.start()
        for res in self.index.resources:
            if type(res.strategy).restore is not Strategy.restore:  # only allocators keep state to rebuild
                res.strategy.restore([e.obj for _, e in self.cache.list(res.key_prefix())], replace=True)
        if self.audit_log_path:  # before anything writes: the server's own writes are audited too
            self.audit = self.rest.audit = AuditLog(self.audit_log_path, self.clock, self.audit_policy,
                                                    self.audit_webhook, self.audit_log_options, shared=self.workers > 1)
            self.component_metrics.append(self.audit.metrics.registry)
        if self.worker == 0:
            await self._bootstrap()
            await controlplane.bootstrap(self)
        middlewares = [self._authn]  # which hands authenticated requests to API Priority and Fairness
        self._loops = await controlplane.start_loops(self, writer=self.worker == 0)
        if self._service_dialer is not None and self.handlers.aggregator is not None:  # set before start
            await self.handlers.aggregator.dial_services_from(self._service_dialer)
        if self.audit:
            middlewares.insert(0, self.audit.middleware)
        middlewares.insert(1 if self.audit_log_path else 0, http_exceptions)
        app = web.Application(middlewares=middlewares, client_max_size=4 * 1024 * 1024)
        probe = _StoreProbe(self.store)
        live = [healthz.PING, healthz.Check("log", _passes), healthz.Check("etcd", probe.run, probe.refresh)]
        ready = [*live, healthz.Check("etcd-readiness", probe.run, probe.refresh),
                 healthz.Check("informer-sync", lambda: None if self.ready else "not ready"),
                 healthz.Check("shutdown", lambda: "process is shutting down" if self.shutting_down else None)]
        kms = self.encryption.checks() if self.encryption else []
        self._health_checks = {"/healthz": [*live, *kms], "/livez": live, "/readyz": [*ready, *kms]}
        for path, checks in self._health_checks.items():
            healthz.install(app, path, lambda checks=checks: checks, self.slis, monitor=self._health_answered)
        self.slis.install(app)
        app.router.add_get("/", self._root_paths)
        app.router.add_get("/version", self._version)
        app.router.add_get("/version/", self._version)
        for path, handler in self._issuer_discovery().items():
            app.router.add_get(path, handler)
            app.router.add_get(path + "/", handler)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_delete("/metrics", self._reset_metrics)
        app.router.add_get("/openapi/v2", self._openapi_v2)
        app.router.add_get("/openapi/v3", self._openapi_v3_index)
        app.router.add_get("/openapi/v3/{path:.*}", self._openapi_v3)
        self.handlers.metrics_api.add_routes(app)
        metrics_openapi.define()
        zpages.install(app, "kube-apiserver", self.flags, now=self.clock.now)
        debugflags.install(app)
        console.install(app)
        app.router.add_route("*", r"/{tail:[\s\S]*}", self.handlers.dispatch)  # names may hold any character
        self._app = app
        self._routed_groups = frozenset(r.canonical.split("/")[2] for r in app.router.resources()
                                        if r.canonical.startswith("/apis/"))
        self._runner = StatusAppRunner(app, self._held, AuditedRequest, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        ssl_ctx = self._ssl()
        listeners, self._listeners = self._listeners, []  # the sites' now, closed with them
        for sock in listeners:
            await serving.Site(self._runner, sock, ssl_context=ssl_ctx, backlog=1024).start()
        if self.workers > 1:  # a loopback port: worker 0's takes the others' relays to node agents; each one's, the scrape of its /metrics
            relay = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self.own_tls().context())
            await relay.start()
            self.relay_port = relay._server.sockets[0].getsockname()[1]
        for controller in (self.authentication, self.authorization, self.encryption):
            if controller is not None:
                controller.start()
        if self.compaction_interval > 0:  # 0 turns it off, as kube-apiserver's
            self._tasks.append(asyncio.create_task(self._compactor()))
        self._tasks.append(asyncio.create_task(self._count_objects()))
        self.ready = True

    async def listen_on(self, sock: socket.socket) -> None:
        """Called once started. Serve on `sock` too, a listening socket made elsewhere: under the
        process runtime one at the advertised address in the cluster network namespace, where pods
        reach the server, which then sees their addresses (audit sourceIPs) as kube-apiserver does."""
        await serving.Site(self._runner, sock, ssl_context=self._ssl(), backlog=1024).start()

    async def dial_services_from(self, socket_factory) -> None:
        """Open connections to the endpoints that webhooks' Services (admission and CRD conversion)
        and APIServices resolve to with `socket_factory` (netns.dialer): under the process runtime
        those are pod IPs, which only the cluster network namespace routes. Called before start (a
        worker: no request it serves dials from the host) or once started (`up`, before any pod)."""
        self._service_dialer = socket_factory
        self.rest.admission.client.dial_services_from(socket_factory)
        if self.handlers.aggregator is not None:
            await self.handlers.aggregator.dial_services_from(socket_factory)

    async def stop(self) -> None:
        self.shutting_down = True
        self.ready = False
        for loop in self._loops:
            await loop.stop()
        for t in self._tasks:
            t.cancel()
        for controller in (self.authentication, self.authorization, self.encryption):
            if controller is not None:
                await controller.stop()
        await self.event_ttl.stop()
        await self.cache.stop()
        await self.handlers.streams.close()
        await self.rest.admission.client.close()
        if self._runner:
            await self._runner.cleanup()
        for sock in self._listeners:  # bound, never served
            sock.close()
        self._listeners = []
        if self.audit:
            await self.audit.aclose()
        await self.store.close()

    async def _bind(self) -> list[socket.socket]:
        """Sockets bound to every address the listen host names (not listening yet: while bound, the
        kernel picks their port for no other socket); `port` is the one the first got, and the others
        bind that one. With several workers each binds the port with SO_REUSEPORT, and the kernel
        spreads connections over them."""
        infos = await asyncio.get_running_loop().getaddrinfo(self.host or None, self.port, type=socket.SOCK_STREAM,
                                                             flags=socket.AI_PASSIVE)  # '': every interface
        socks: list[socket.socket] = []
        try:
            for family, kind, proto, _, addr in dict.fromkeys(infos):
                sock = socket.socket(family, kind, proto)
                socks.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if self.workers > 1:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind((addr[0], self.port, *addr[2:]))
                self.port = sock.getsockname()[1]
        except BaseException:
            for sock in socks:
                sock.close()
            raise
        return socks

    def serving_tls(self) -> ServingTLS:
        """The serving certificates and client CAs: the operator's (pki_options), else `up`'s own."""
        if self.tls is None:
            self.tls = self.own_tls()
        return self.tls

    def own_tls(self) -> ServingTLS:
        """`up`'s own serving certificate, its CA for users and its front-proxy CA, made on first use:
        what the relay port serves and trusts whatever the operator's files (the workers relay to
        each other with DIR/pki's front-proxy-client)."""
        if self._own_tls is None:
            self._own_tls = ServingTLS((self.pki.server.cert_pem + self.pki.ca.cert_pem, self.pki.server.key_pem),
                                       self.pki.ca.cert_pem, ensure_front_proxy(self.pki.dir)[0].cert_pem)
        return self._own_tls

    def _ssl(self) -> ssl.SSLContext | None:
        return self.serving_tls().context() if self.pki is not None else None

    async def _bootstrap(self) -> None:
        """Objects every cluster has: the system namespaces, priority classes
        and the default RBAC policy."""
        for ns in SYSTEM_NAMESPACES:
            await self.ensure("", "v1", "namespaces", None, {"metadata": {"name": ns}})
        for name, value, desc in (
            ("system-node-critical", 2000001000, "Used for system critical pods that must not be moved from their current node."),
            ("system-cluster-critical", 2000000000, "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary."),
        ):
            await self.ensure("scheduling.k8s.io", "v1", "priorityclasses", None,
                              {"metadata": {"name": name}, "value": value, "description": desc})
        cluster_roles, cluster_bindings = bootstrap_policy()
        roles, bindings = namespace_policy()
        for plural, objs in (("clusterroles", cluster_roles), ("clusterrolebindings", cluster_bindings),
                             ("roles", roles), ("rolebindings", bindings)):
            for obj in objs:
                await self.ensure_rbac(plural, obj)

    async def ensure_rbac(self, plural: str, wanted: dict) -> None:
        """Create a default role or binding, or reconcile the one there as kube-apiserver's
        rbac/bootstrap-roles post-start hook does (rbac.reconcile_role / reconcile_binding)."""
        res = self.index.get("rbac.authorization.k8s.io", "v1", plural)
        ns, name = wanted["metadata"].get("namespace"), wanted["metadata"]["name"]
        entry = self.cache.get(res.key(ns, name))
        if entry is None:
            return await self.ensure("rbac.authorization.k8s.io", "v1", plural, ns, wanted)
        opts = WriteOptions(field_manager="kube-apiserver", user=SYSTEM)
        if plural.endswith("bindings"):
            body, recreate = reconcile_binding(entry.obj, wanted)
        else:
            body, recreate = reconcile_role(entry.obj, wanted), False
        if body is None:
            return
        body = {**body, "apiVersion": "rbac.authorization.k8s.io/v1", "kind": res.kind}
        try:
            if recreate:
                await self.rest.delete(res, "v1", ns, name, None, opts)
                body["metadata"] = {k: v for k, v in body["metadata"].items()
                                    if k in ("name", "namespace", "labels", "annotations")}
                await self.rest.create(res, "v1", ns, body, opts)
            else:
                await self.rest.update(res, "v1", ns, name, body, opts)
        except errors.APIError as e:  # another API server on the store reconciled it meanwhile
            if e.code not in (404, 409):
                raise

    async def ensure(self, group: str, version: str, plural: str, namespace: str | None, obj: dict) -> None:
        res = self.index.get(group, version, plural)
        if res is None or self.cache.get(res.key(namespace, obj["metadata"]["name"])) is not None:
            return
        try:
            await self.rest.create(res, version, namespace, obj, WriteOptions(field_manager="kube-apiserver", user=SYSTEM))
        except errors.APIError as e:
            if e.code != 409:
                raise

    async def _compactor(self) -> None:
        """kube-apiserver's compactor (--etcd-compaction-interval): each interval, the store forgets
        its history up to the revision the previous round saw (none in the first), so a continue
        token or an Exact list reaches one to two intervals back before it is 410 Expired."""
        turn = rev = 0
        while True:
            await self.clock.sleep(self.compaction_interval)
            try:
                turn, rev, compacted = await self.store.compaction_round(turn, rev)
            except Exception as e:
                log.error("store compaction failed: %s", e)
                continue
            if compacted:
                self.cache.compact(compacted)

    def _health_answered(self, path: str, resp: web.Response, seconds: float) -> None:
        """/healthz, /livez or /readyz in the request metrics, as upstream's InstrumentHandlerFunc
        counts them: verb GET, the path as the subresource, every other label empty."""
        m = self.metrics
        m.request_count("GET", "", "", "", "", path, "", "", str(resp.status)).inc()
        m.request_latency("GET", "", "", "", "", path, "", "").observe(seconds)
        m.request_sli("GET", "", "", "", path, "", "").observe(seconds)
        m.response_size("GET", "", "", "", path, "", "").observe(resp.content_length or 0)

    async def _count_objects(self) -> None:
        """apiserver_storage_objects and apiserver_resource_objects: each resource's stored objects,
        counted every COUNT_POLL_PERIOD as kube-apiserver polls its storage's counts. Not those kept
        here that kube-apiserver stores none of (`_UNSTORED`)."""
        while True:
            await self.clock.sleep(COUNT_POLL_PERIOD)
            for prefix in self.cache.prefixes():
                resource, _, group = (key := prefix.split("/")[2]).partition(".")
                if (group, resource) not in _UNSTORED:
                    self.metrics.stored(key, self.cache.count(prefix))

    # --- middleware and plain endpoints ---------------------------------

    @own_context
    def _held(self, request: web.Request):
        """`_serve`, its longest hold of the loop recorded."""
        return self.loop_holds.serve(request, self._serve)

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        """Every request. An API path that no route of the application claims (all of them but
        the metrics APIs' groups that no remote APIService serves) goes through audit, the HTTP exceptions' Status, authentication,
        APF and `APIHandlers.dispatch` here, as the application's middlewares and its catch-all
        route would take it, without the router's walk over every route, a match info and a
        coroutine per middleware (about 10% of a GET's instructions and 4% of a create's); any
        other request, and one with an expectation other than 100-continue (its 417), goes
        through the application. A 100 Continue is sent when the body is first read (expect.py)."""
        if self.workers > 1:  # another worker may have written what this request reads or updates
            await self.cache.sync()
        path = request.rel_url.path_safe
        routed = not (path.startswith("/api/") or path.startswith("/apis/") and (path.split("/", 3)[2]
                      not in self._routed_groups or self.handlers.aggregates(path))
                      or path in ("/api", "/apis")) or not expect.accepted(request)
        audit_id(request, routed=routed)
        attrs = request_attributes(request)
        if long_running(attrs):
            return await self._handled(request, attrs, routed)
        try:  # WithRequestDeadline's, before authentication, on every path
            seconds = request_deadline(request.query)
        except errors.APIError as e:
            if self.audit is not None:
                await self.audit.refused(request, attrs, e)
            return expect.answered(request, await as_negotiated(request, error_response(e)))
        response = await self.deadlines.within(request, seconds, self._written(request, attrs, routed))
        if timeout.TIMED_OUT in request:  # the timeout filter's postTimeoutFn
            self.metrics.terminated(request, attrs, 504)
        return response

    async def _written(self, request: web.Request, attrs, routed: bool) -> web.StreamResponse:
        """`_handled`'s response, sent: under the request's deadline, as upstream's handler writes its
        body under the timeout filter, so an answer its client does not read ends with the connection
        cut at the deadline instead of held as long as the client keeps it open (aiohttp's own write,
        after the handler, then finds it sent)."""
        return await answered(request, lambda r: self._handled(r, attrs, routed))

    async def _handled(self, request: web.Request, attrs, routed: bool) -> web.StreamResponse:
        """`_serve`'s request past its deadline's filter: `routed`, through the application."""
        if routed:
            response = await self._app._handle(request)
            if request.rel_url.path_safe.startswith("/apis/"):  # the metrics APIs': their servers' SerializeObject gzips
                response = await compressed(request, response)
            return sized(request, response)
        audit = self.audit
        if audit is not None:
            if attrs.verb in WRITE_VERBS or audit.policy is not None:
                response = await audit.serve(request, attrs, self._authn, self.handlers.dispatch)
                return expect.answered(request, await as_negotiated(request, response))
        try:
            response = await self._authn(request, self.handlers.dispatch)
        except web.HTTPException as e:
            response = status_response(e)
        return expect.answered(request, await as_negotiated(request, response))

    @web.middleware
    async def _authn(self, request: web.Request, handler) -> web.StreamResponse:
        headers = request.headers
        cert = None
        if self.pki is None:
            user = User("system:admin", ("system:masters", "system:authenticated"))
        else:
            transport = request.transport
            cert = transport.get_extra_info("peercert") if transport else None
            vouching, user = self._cert_identity(cert, transport)
            if vouching is not None:  # (upstream's union tries the request header first, then the certificate's own user)
                user = vouching.user(headers) or user
        token = bearer_token(headers.get("Authorization", ""))
        annotations: dict[str, str] = {}  # the audit annotations authentication leaves first
        warned: list[str] = []
        if user is None and token is not None:
            user = await self.authenticate_token(token, annotations, warned)
        request[AUDIT_ANNOTATIONS] = annotations
        if user is None:
            # a bearer token that fails fails the chain on every path (union.NewFailOnError), as does a
            # client certificate no CA makes a user of (a front proxy's naming none, or of a name not
            # allowed); another scheme authenticates nobody, so the request is anonymous's
            if token is not None or cert:
                return await self._unauthorized(request)
            if spaced_bearer(headers.get("Authorization", "")):
                _warn_when_sent(request, [SPACED_BEARER_WARNING])
            if not self.anonymous.allows(request.path):  # --anonymous-auth=false, or a path its conditions leave out
                return await self._unauthorized(request)
            if request.path in PUBLIC_PATHS:  # system:public-info-viewer's, answered without RBAC's walk
                if self.audit_policy is not None and (refused := await audit_authenticated(request)) is not None:
                    return refused
                return await handler(request)
            # anything else (the console's page, which a browser loads before it has a token, or what an
            # admin bound to system:anonymous or system:unauthenticated): RBAC decides, and APF and the
            # audit see system:anonymous, as upstream does for any request without credentials
            user = ANONYMOUS
        request[AUDIT_REQUESTER] = user  # the audit's user, whoever it impersonates
        if warned:  # on whatever answers it, streams included, as upstream's recorder sets the header
            _warn_when_sent(request, warned)
        # audited from here (RequestReceived), as upstream's audit filter follows authentication
        if self.audit_policy is not None and (refused := await audit_authenticated(request)) is not None:
            return refused
        if asks_impersonation(headers):  # (most requests carry none: no coroutine for them)
            try:
                user = await impersonate(headers, user, self.decide)
            except errors.APIError as e:
                return error_response(e)
        attrs = request_attributes(request)
        decide = self.authorize_async
        decision = self.authorizer.authorize(user.name, user.groups, attrs) if decide is None else await decide(user, attrs)
        request[USER] = user
        if decision.error and not decision.allowed:  # (WithAuthorization: an authorizer's error is a 500)
            annotations["authorization.k8s.io/reason"] = "internal error"
            ADMISSION_AUDIT.set(annotations)
            return internal_error(request, decision.error)
        annotations["authorization.k8s.io/decision"] = "allow" if decision.allowed else "forbid"
        if decision.reason:
            annotations["authorization.k8s.io/reason"] = decision.reason
        ADMISSION_AUDIT.set(annotations)
        if not decision.allowed:
            return error_response(forbidden(user.name, attrs, decision.reason))
        if self.flow_control is not None:
            return await self.flow_control.serve(request, user, attrs, handler)
        return await handler(request)

    async def _unauthorized(self, request: web.Request) -> web.Response:
        """The 401 of a request no authenticator (anonymous's included) took, audited as upstream's
        failed authentication is (ResponseStarted only, when the log is on)."""
        if self.audit is not None:
            await audit_unauthenticated(request)
        return json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                              "message": "Unauthorized", "reason": "Unauthorized", "code": 401}, 401)

    def _cert_identity(self, cert: dict | None, transport) -> tuple[RequestHeader | None, User | None]:
        """(for a request-header CA's certificate of an allowed name, the request-header flags the
        user is named by; the user it is as a client CA's certificate), worked out once per
        connection from which CAs anchor its certificate. A connection to the relay port (another
        worker's, as the front proxy) is judged by `up`'s own CAs and kubeadm's header names."""
        if not cert:
            return None, None
        known = self._certs.get(id(cert))
        if known is None or known[0] is not cert:
            if len(self._certs) >= 4096:
                self._certs.clear()
            relayed = self.workers > 1 and transport is not None and \
                transport.get_extra_info("sockname")[1] == self.relay_port
            tls, flags = (self.own_tls(), _RELAYED_HEADERS) if relayed else (self.serving_tls(), self.requestheader)
            proxy, client = signed_by(tls, verified_chain(transport))
            known = self._certs[id(cert)] = (cert, flags if proxy and flags.allows(cert) else None,
                                             user_from_cert(cert) if client else None)
        return known[1], known[2]

    async def authenticate_token(self, token: str, audit: dict[str, str] | None = None,
                                 warnings: list[str] | None = None) -> User | None:
        """Bearer tokens are ServiceAccount tokens this server issued (a legacy one's use leaves its
        audit annotations in `audit` and its Warning in `warnings`), or those of the authentication
        config's JWT issuers."""
        user = self.tokens.authenticate(token, None, audit, warnings) if self.tokens else None
        if user is None and self.authentication is not None:
            user = await self.authentication.authenticate(token)
        return user

    async def _token_review(self, token: str, audiences: list[str] | None) -> tuple[User | None, list[str], str]:
        """A TokenReview's (user, audiences, error): ServiceAccount tokens', else the authentication
        config's JWT issuers', which upstream wraps as audience-agnostic: they stand for the
        server's own audiences, so a review for none of those fails."""
        found = self.tokens.review(token, audiences, ADMISSION_AUDIT.get())
        if found[0] is not None or self.authentication is None:
            return found
        user = await self.authentication.authenticate(token)
        wanted = [a for a in audiences or self.tokens.audiences if a in self.tokens.audiences]
        if user is None or not wanted:
            return found
        return user, wanted, ""

    def _legacy_token_used(self, namespace: str, name: str, day: str) -> None:
        """Label a legacy token's Secret with the day (UTC) of its use, as kube-apiserver's legacy
        validator does (kubernetes.io/legacy-token-last-used): once a day, in the background."""
        if self._legacy_days.get((namespace, name)) == day:
            return
        self._legacy_days[(namespace, name)] = day
        patch = {"metadata": {"labels": {LAST_USED_LABEL: day}}}
        secrets = LocalClient(self.rest, SYSTEM, "kube-apiserver").resource("", "v1", "secrets")
        task = asyncio.get_running_loop().create_task(secrets.patch(name, patch, namespace=namespace))
        task.add_done_callback(lambda t: t.cancelled() or t.exception() is None or log.warning(
            "labelling secret %s/%s as used: %s", namespace, name, t.exception()))

    def _lookup(self, plural: str, namespace: str, name: str) -> dict | None:
        """A core/v1 object from the watch cache, for the token verifier."""
        entry = self.cache.get(self.index.get("", "v1", plural).key(namespace, name))
        return entry.obj if entry else None

    async def _root_paths(self, request: web.Request) -> web.Response:
        """routes.Index: the paths the server lists (its endpoints, each health check's, every group
        and group/version it serves), sorted, as WriteRawJSON writes them."""
        h = self.handlers
        groups = discovery.with_extra_groups(discovery.api_group_list(self.index), h.extra_groups + h.aggregated_groups)
        paths = {"/api", "/api/v1", "/apis", "/apis/", "/metrics", "/metrics/slis", "/openapi/v2", "/openapi/v3",
                 "/openapi/v3/", "/statusz", "/ui/", "/version", *self._issuer_discovery(), *(["/flagz"] if self.flags else [])}
        for g in groups["groups"]:
            paths.add(f"/apis/{g['name']}")
            paths.update(f"/apis/{v['groupVersion']}" for v in g["versions"])
        for path, checks in self._health_checks.items():
            paths.add(path)
            paths.update(f"{path}/{c.name}" for c in checks)
        return web.Response(body=orjson.dumps({"paths": sorted(paths)}, option=orjson.OPT_INDENT_2),
                            content_type="application/json")

    def _issuer_discovery(self) -> dict:
        """ServiceAccountIssuerDiscovery's paths and handlers (none without a token issuer): the
        OIDC discovery document and the key set, which names the address the server advertises."""
        if self.tokens is None:
            return {}
        tokens, cache = self.tokens, {"Cache-Control": "public, max-age=3600"}

        async def configuration(request: web.Request) -> web.Response:
            return web.Response(body=orjson.dumps(tokens.openid_configuration(self._jwks_uri())),
                                headers={"Content-Type": "application/json", **cache})

        async def jwks(request: web.Request) -> web.Response:
            return web.Response(body=orjson.dumps(tokens.jwks()),
                                headers={"Content-Type": "application/jwk-set+json", **cache})

        return {OPENID_CONFIGURATION_PATH: configuration, JWKS_PATH: jwks}

    def _jwks_uri(self) -> str:
        """NewOpenIDMetadataProvider's jwks_uri: --service-account-jwks-uri, else https:// the
        external address (the advertised one, with the secure port) and the key set's path."""
        if self.jwks_uri:
            return self.jwks_uri
        return f"https://{self.external_address()}{JWKS_PATH}"

    def external_address(self) -> str:
        """genericapiserver's ExternalAddress: the advertised address (the listen one when none) and the
        secure port, which /api's serverAddressByClientCIDRs and the key set's URL name."""
        return join_host_port(self.advertise or self.host, self.port)

    async def _version(self, request: web.Request) -> web.Response:
        """Indented, as WriteRawJSON writes a non-API object (json.MarshalIndent, two spaces)."""
        return web.Response(body=_VERSION_BODY, content_type="application/json")

    def metrics_text(self) -> bytes:
        """/metrics' exposition: the server's families and its components'."""
        return self.metrics.render(*self.component_metrics)

    async def _metrics(self, request: web.Request) -> web.Response:
        return await healthz.exposition_of(request, self.metrics_text())

    async def _reset_metrics(self, request: web.Request) -> web.Response:
        self.metrics.reset()
        return web.Response(body=b"metrics reset\n", headers={"Content-Type": "text/plain; charset=utf-8",
                                                               **healthz.TEXT})

    def resources_changed(self) -> None:
        """The served resources changed (CRDs): discovery and OpenAPI are built anew."""
        from . import openapi

        self.handlers.forget_discovery()
        openapi.forget_documents()
        self._forget_openapi()

    def _forget_openapi(self) -> None:
        """The documents' resources changed (a CRD's, the metrics groups the built-in adapter serves)."""
        self._openapi = {}  # (not cleared: a document still being made for the old resources lands in the old one)

    def _openapi_resources(self) -> list[Resource]:
        """What the OpenAPI documents describe: the served resources and the metrics APIs' kinds
        answered in-process, whose documents kube-aggregator would merge from metrics-server and an adapter."""
        return [*self.index.resources, *(r for r in _METRICS_RESOURCES if self.handlers.built_in(r.group, r.versions[0]))]

    def _openapi_bytes(self, key: str, build, cache: dict | None = None) -> Any:
        """The document `key`, made by `build` once per set of resources: kept in `cache`, the
        resources' cache when the request began (default: now), so that what a request made from
        the resources before a change (its gzip made after it) is never served after it."""
        cache = self._openapi if cache is None else cache
        b = cache.get(key)
        if b is None:
            b = cache[key] = build()
        return b

    async def _openapi_v2(self, request: web.Request) -> web.Response:
        """Swagger 2.0 as JSON, or as gnostic protobuf for kubectl's client-side
        validation of `kind: List` files; one ETag for both, as upstream."""
        from . import openapi, openapi_proto

        media = openapi_proto.negotiate(request.headers.get("Accept", ""))
        if media is None:
            return web.Response(status=406, headers=CIMultiDict((("Vary", "Accept-Encoding"), ("Vary", "Accept"))))

        cache = self._openapi

        def build() -> tuple[bytes, bytes]:
            doc = self._openapi_bytes("v2", lambda: openapi.build_v2(self._openapi_resources()), cache)
            tag = self._openapi_bytes("v2.etag", lambda: openapi_proto.etag(doc).encode(), cache)
            if media == openapi_proto.MEDIA_PB:
                doc = self._openapi_bytes("v2.pb", lambda: openapi_proto.encode_document(doc), cache)
            return doc, tag

        body, tag = await asyncio.get_running_loop().run_in_executor(None, build)
        # kube-openapi serves it through NYTimes gziphandler: Vary: Accept-Encoding on every answer, and
        # a body of GZIP_MIN_SIZE bytes or more gzipped (at its default level) for a client accepting gzip
        headers = CIMultiDict((("Vary", "Accept-Encoding"), ("Vary", "Accept"), ("ETag", tag.decode())))
        if tag.decode() in (t.strip() for t in request.headers.get("If-None-Match", "").split(",")):
            return web.Response(status=304, headers=headers)
        if accepts_gzip(request) and len(body) >= GZIP_MIN_SIZE:
            key = "v2.pb.gz" if media == openapi_proto.MEDIA_PB else "v2.gz"
            body = await asyncio.get_running_loop().run_in_executor(
                None, self._openapi_bytes, key, lambda: gzipped(body, zlib.Z_DEFAULT_COMPRESSION), cache)
            headers["Content-Encoding"] = "gzip"
        return web.Response(body=body, content_type=media, headers=headers)

    async def _openapi_v3_index(self, request: web.Request) -> web.Response:
        from . import openapi

        # (in a worker, as the documents: the index hashes every group-version's, a CRD's many versions each)
        body = await asyncio.get_running_loop().run_in_executor(
            None, self._openapi_bytes, "v3", lambda: openapi.build_v3_index(self._openapi_resources()))
        aggregator = self.handlers.aggregator
        if aggregator is not None and aggregator.remote:  # extension servers' documents
            # a group/version a remote APIService serves is its server's (a metrics group's built-in adapter's goes)
            paths = {p: e for p, e in orjson.loads(body)["paths"].items()
                     if not (p.startswith("apis/") and self.handlers.aggregates("/" + p))}
            body = orjson.dumps({"paths": {**paths, **aggregator.openapi_paths()}})
        return _etagged(request, body, openapi.content_hash(body), {})

    async def _openapi_v3(self, request: web.Request) -> web.Response:
        from . import openapi

        path = request.match_info["path"].strip("/")
        parts = path.split("/")
        if parts[0] == "api" and len(parts) == 2:
            group, version = "", parts[1]
        elif parts[0] == "apis" and len(parts) == 3:
            group, version = parts[1], parts[2]
            if self.handlers.aggregator is not None and self.handlers.aggregator.serves(group, version):
                return await self.handlers.aggregator.serve(request, group, version)
        else:
            return error_response(errors.APIError(404, "NotFound", "the server could not find the requested resource"))
        if version not in self.index.group_versions().get(group, []) and \
                (group, version) not in metrics_openapi.GROUP_VERSIONS:
            return error_response(errors.APIError(404, "NotFound", "the server could not find the requested resource"))
        entry = await asyncio.get_running_loop().run_in_executor(
            None, self._openapi_bytes, f"v3/{path}", lambda: openapi.v3_document(self._openapi_resources(), group, version))
        if entry is None:
            return error_response(errors.APIError(404, "NotFound", "the server could not find the requested resource"))
        body, tag = entry
        # kube-openapi's handler3: the index names each document with `?hash=` its
        # content hash; a stale hash is redirected to the current one, and only a
        # current one may be cached for good (a plain GET revalidates by ETag)
        headers = {"Vary": "Accept"}
        if (want := request.query.get("hash")) is not None and want != "":
            if want != tag:
                return web.Response(status=301, headers={**headers, "Location": f"/openapi/v3/{path}?hash={tag}"})
            headers["Cache-Control"] = "public, immutable"
            headers["Expires"] = email.utils.formatdate(self.clock.now() + 365 * 86400, usegmt=True)
        return _etagged(request, body, tag, headers)

    def stats(self) -> dict[str, Any]:
        return {"revision": self.cache.rev, "watchers": self.cache.watcher_count,
                "longest_loop_hold": self.loop_holds.longest, "longest_loop_hold_request": self.loop_holds.longest_request}
