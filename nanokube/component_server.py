"""The secure port of a standalone control-plane component (kube-scheduler on
10259, kube-controller-manager on 10257): HTTPS with the given serving
certificate or a self-signed one made at start, health endpoints, `/metrics`,
`/configz`, the z-pages and `/debug/flags/v`. Requests are authenticated and
authorized by delegation to the API server, as upstream's
DelegatingAuthenticationOptions and DelegatingAuthorizationOptions do: a bearer
token is checked with a TokenReview (no token: system:anonymous), and a path
outside the always-allowed ones needs a SubjectAccessReview that allows it (the
system:masters group always may)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import ssl
import sys
import tempfile
import time
from collections.abc import Callable

from aiohttp import ClientError, web
from prometheus_client import CollectorRegistry

from .apiserver.auth.authorizer import Attributes, attributes_for, forbidden
from .client import metrics as client_metrics
from .metrics.build_info import BUILD_INFO
from .metrics.process import PROCESS
from .apiserver.healthz import TEXT, Checks, HealthSLIs, exposition, install
from .machinery import errors, featuregates, goserver, tlsport
from .machinery.responses import error_response
from .machinery.user import User, bearer_token
from .pki.ca import issue, new_ca
from . import debugflags, zpages

log = logging.getLogger("nanokube.component-server")

ALWAYS_ALLOW_PATHS = "/healthz,/readyz,/livez"
ALWAYS_ALLOW_GROUPS = ("system:masters",)
_ANONYMOUS = User("system:anonymous", ("system:unauthenticated",))
_UNAUTHORIZED = errors.APIError(401, "Unauthorized", "Unauthorized")


def add_arguments(parser, port: int) -> None:
    """The secure serving and delegated authorization flags upstream's components share."""
    g = parser.add_argument_group("secure serving")
    g.add_argument("--bind-address", default="0.0.0.0", metavar="IP",
                   help="the address the secure port listens on (default 0.0.0.0: every interface)")
    g.add_argument("--secure-port", type=int, default=port, metavar="PORT",
                   help=f"the HTTPS port for health checks and metrics (default {port}; 0 serves no HTTPS at all)")
    g.add_argument("--tls-cert-file", default="", metavar="FILE",
                   help="serving certificate (with intermediates after it); without one a self-signed "
                        "certificate for localhost and 127.0.0.1 is made at start")
    g.add_argument("--tls-private-key-file", default="", metavar="FILE", help="the serving certificate's key")
    g.add_argument("--authorization-always-allow-paths", default=ALWAYS_ALLOW_PATHS, metavar="PATHS",
                   help=f"paths anyone may reach, '*' ending a prefix (default {ALWAYS_ALLOW_PATHS})")
    parser.add_argument("--feature-gates", default="", metavar="Name=true,...",
                        help="feature gates to set, as Name=bool pairs: on top of nanokube's defaults (`nanokube up` "
                             "prints them), an unknown or locked gate refused")
    zpages.register(parser)


def validate(args) -> None:
    """ValueError for flags the component would refuse at start; the --feature-gates set."""
    if not 0 <= args.secure_port <= 65535:
        raise ValueError(f"--secure-port {args.secure_port} must be between 0 and 65535, inclusive. "
                         "0 for turning off secure port")
    if bool(args.tls_cert_file) != bool(args.tls_private_key_file):
        raise ValueError("--tls-cert-file and --tls-private-key-file go together")
    for text in featuregates.set_flag(args.feature_gates):
        log.warning("%s", text)


class ServeError(Exception):
    """The secure port could not be opened (in use, no such address)."""


class DelegatedAuth:
    """Who a request is (TokenReview) and whether it may (SubjectAccessReview),
    asked of the API server through `client` (an HTTPClient)."""

    def __init__(self, client, always_allow_paths: str = ALWAYS_ALLOW_PATHS) -> None:
        self.client = client
        paths = [p.strip() for p in always_allow_paths.split(",") if p.strip()]
        self.exact = {p for p in paths if not p.endswith("*")}
        self.prefixes = tuple(p[:-1] for p in paths if p.endswith("*"))

    async def user(self, request: web.Request) -> User | None:
        """The requester, system:anonymous without a token; None for a token the API server does not know."""
        token = bearer_token(request.headers.get("Authorization", ""))
        if token is None:
            return _ANONYMOUS
        # a byte that is not UTF-8 (aiohttp keeps it as a lone surrogate, which no encoder writes) is
        # U+FFFD, as Go's JSON encoder writes it into the review
        token = token.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
        try:
            got = await self.client.request("POST", "/apis/authentication.k8s.io/v1/tokenreviews", review)
        except (errors.APIError, ClientError) as e:
            log.warning("TokenReview failed: %s", e)
            return None
        status = got.get("status") or {}
        if not status.get("authenticated"):
            return None
        u = status.get("user") or {}
        return User(u.get("username", ""), tuple(u.get("groups") or ()), u.get("uid", ""), u.get("extra") or {})

    def always_allowed(self, path: str) -> bool:
        return path in self.exact or path.startswith(self.prefixes)

    async def decide(self, user: User, a: Attributes) -> tuple[bool, str]:
        if self.always_allowed(a.path) or any(g in ALWAYS_ALLOW_GROUPS for g in user.groups):
            return True, ""
        return await self.review(user, {"nonResourceAttributes": {"path": a.path, "verb": a.verb}})

    async def review(self, user: User, attributes: dict) -> tuple[bool, str]:
        """(allowed, reason) of a SubjectAccessReview of `user` doing what `attributes` (its spec's
        nonResourceAttributes or resourceAttributes) says; not allowed when the review fails."""
        spec: dict = {"user": user.name, "groups": list(user.groups), **attributes}
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = user.extra
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        try:
            got = await self.client.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
        except (errors.APIError, ClientError) as e:
            log.warning("SubjectAccessReview failed: %s", e)
            return False, ""
        status = got.get("status") or {}
        return bool(status.get("allowed")), status.get("reason", "")

    @web.middleware
    async def middleware(self, request: web.Request, handler) -> web.StreamResponse:
        """Authentication, then authorization; every answer is marked uncacheable (WithCacheControl)."""
        response = await self._guarded(request, handler)
        response.headers.setdefault("Cache-Control", "no-cache, private")
        return response

    async def _guarded(self, request: web.Request, handler) -> web.StreamResponse:
        user = await self.user(request)
        if user is None:
            return self.refusal(None, None, "")
        a = attributes_for(request.method, request.path, request.query)
        allowed, reason = await self.decide(user, a)
        if not allowed:
            return self.refusal(user, a, reason)
        return await handler(request)

    def refusal(self, user: User | None, a: Attributes | None, reason: str) -> web.Response:
        """The answer to a request with no user (401) or one the authorizer refused (403):
        component-base's Status (the kubelet answers in its own words)."""
        return error_response(_UNAUTHORIZED if user is None else forbidden(user.name, a, reason))


def app(auth: DelegatedAuth, registry, configz: dict | None, healthz: Checks, livez: Checks | None = None,
        readyz: Checks | None = None, *, reset: Callable[[], None] | None = None,
        resources: Callable[[], CollectorRegistry | None] | None = None,
        component: str = "", flags: dict[str, str] | None = None, profiling: bool = True) -> web.Application:
    """The component's endpoints. kube-controller-manager's shape is `livez`/`readyz` None:
    neither is served, and its /healthz (a MutableHealthzHandler) has no per-check paths.
    `configz` is what /configz serves (configz's registered configurations by name; None: the
    caller's routes serve it, the kubelet's from its server). With `reset`,
    DELETE /metrics runs it (component-base's HandlerWithReset, kube-scheduler's /metrics), without
    it any method is a GET (promhttp, kube-controller-manager's); with
    `resources`, /metrics/resources serves the registry it gives, an empty answer when it gives
    None (kube-scheduler's, for the leader only). With `component`, the z-pages last: /flagz
    (`flags`, when given) and /statusz; then, with `profiling` (the configuration's enableProfiling),
    /debug/flags/v, which sets the log verbosity."""
    a = web.Application(middlewares=[auth.middleware])
    slis = HealthSLIs()
    install(a, "/healthz", healthz, slis, each=livez is not None)
    if livez is not None:
        install(a, "/livez", livez, slis)
    if readyz is not None:
        install(a, "/readyz", readyz, slis)

    async def metrics(request: web.Request) -> web.Response:
        if request.method == "DELETE" and reset is not None:
            reset()
            client_metrics.reset()
            return web.Response(text="metrics reset\n", headers=TEXT)
        return exposition(request, registry, client_metrics.REGISTRY, featuregates.GATES, PROCESS, BUILD_INFO)

    async def metrics_resources(request: web.Request) -> web.Response:
        served = resources()
        if served is None:
            return web.Response()
        if request.method == "DELETE":  # HandlerWithReset over a registry whose one collector has nothing to reset
            return web.Response(text="metrics reset\n", headers=TEXT)
        return exposition(request, served)

    body = json.dumps(configz, separators=(",", ":")).encode()

    async def configz_handler(request: web.Request) -> web.Response:
        return web.Response(body=body, headers={"Content-Type": "application/json", **TEXT})

    a.router.add_get("/metrics", metrics)
    # without `reset`, legacyregistry.Handler (kube-controller-manager's), which answers any method alike
    a.router.add_route("DELETE" if reset is not None else "*", "/metrics", metrics)
    if resources is not None:
        a.router.add_get("/metrics/resources", metrics_resources)
        a.router.add_delete("/metrics/resources", metrics_resources)
    slis.install(a)
    if configz is not None:
        a.router.add_route("*", "/configz", configz_handler)  # configz's handler ignores the method
    if component:
        zpages.install(a, component, flags)
        if profiling:
            debugflags.install(a)  # after statusz's snapshot: unlisted
    return a


def _self_signed(directory: str) -> tuple[str, str]:
    """MaybeDefaultWithSelfSignedCerts: a throwaway CA and a localhost/127.0.0.1 certificate it signs."""
    stamp = int(time.time())
    ca = new_ca(f"localhost-ca@{stamp}")
    pair = issue(ca, f"localhost@{stamp}", dns_names=("localhost",), ips=("127.0.0.1",), server=True)
    cert, key = os.path.join(directory, "tls.crt"), os.path.join(directory, "tls.key")
    with open(cert, "wb") as f:
        f.write(pair.cert_pem + ca.cert_pem)
    with open(key, "wb") as f:
        f.write(pair.key_pem)
    return cert, key


def tls_context(cert_file: str, key_file: str, client_ca: bytes = b"", self_signed: bool = True) -> ssl.SSLContext:
    """The serving certificate's context; with `client_ca`, a client certificate it signed is
    asked for and verified (--client-ca-file), a request without one left to other credentials.
    Not `self_signed`: without a certificate file it serves none until `serve_certificate` loads
    one; until then a handshake is refused with an internal_error alert, as a Go server whose
    GetCertificate has nothing to give answers (the kubelet before its serving certificate is issued)."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    if client_ca:
        ctx.load_verify_locations(cadata=client_ca.decode())
        ctx.verify_mode = ssl.CERT_OPTIONAL
    if cert_file:
        ctx.load_cert_chain(cert_file, key_file)
        return ctx
    if not self_signed:
        ctx.sslobject_class, ctx.sni_callback = _Refusing, _no_certificate_yet
        return ctx
    with tempfile.TemporaryDirectory() as d:
        ctx.load_cert_chain(*_self_signed(d))
    return ctx


class _Refusing(ssl.SSLObject):
    """A server connection whose handshake may be refused with an alert (`refused`). asyncio aborts
    a failed handshake before sending what OpenSSL wrote, the alert included: the failure reads here
    first as a wait for the peer, on which asyncio sends the alert, and is given again at once, on
    which asyncio closes the connection, as a Go server does after its alert (not held open until
    the peer hangs up, or asyncio's 60 s handshake timeout). No public API says which connection an
    SSLObject is: its caller, asyncio's SSLProtocol, is asked to run the handshake again through its
    public BufferedProtocol method, fed nothing; test_component_server fails if asyncio calls otherwise."""

    refused = False
    failure: ssl.SSLError | None = None

    def do_handshake(self) -> None:
        if self.failure is not None:
            raise self.failure
        try:
            super().do_handshake()
        except ssl.SSLError as e:
            if not self.refused:
                raise
            self.failure = e
            protocol = sys._getframe(1).f_locals.get("self")
            if isinstance(protocol, asyncio.BufferedProtocol):
                asyncio.get_running_loop().call_soon(protocol.buffer_updated, 0)
            raise ssl.SSLWantReadError() from None


def _no_certificate_yet(conn: _Refusing, *_) -> int:
    conn.refused = True
    return ssl.ALERT_DESCRIPTION_INTERNAL_ERROR


def serve_certificate(ctx: ssl.SSLContext, pem_path: str) -> None:
    """Serve the certificate (and key) at `pem_path` on `ctx` from the next handshake on."""
    ctx.load_cert_chain(pem_path)
    ctx.sni_callback = None


class _Site(web.TCPSite):
    """A TCPSite whose plain HTTP requests are answered as Go's server answers them (machinery/tlsport.py)."""

    async def start(self) -> None:
        await web.BaseSite.start(self)  # (TCPSite.start's create_server is asyncio's)
        self._server = await tlsport.create_server(self._runner.server, self._ssl_context, host=self._host,
                                                   port=self._port, backlog=self._backlog)


async def serve(args, application: web.Application, name: str, client_ca: bytes = b"",
                tls: ssl.SSLContext | None = None) -> web.AppRunner | None:
    """Listen on --bind-address:--secure-port over HTTPS (the flags' certificate, or `tls`); port 0
    serves nothing, as upstream."""
    if args.secure_port == 0:
        return None
    runner = goserver.bounded_runner(application)
    await runner.setup()
    site = _Site(runner, args.bind_address, args.secure_port,
                 ssl_context=tls or tls_context(args.tls_cert_file, args.tls_private_key_file, client_ca))
    try:
        await site.start()
    except OSError as e:
        await runner.cleanup()
        where = f"{args.bind_address}:{args.secure_port}"
        why = os.strerror(e.errno).lower() if e.errno else str(e)
        raise ServeError(f"failed to create listener: failed to listen on {where}: listen tcp {where}: bind: {why}") from e
    log.info("%s serving securely on %s:%d", name, args.bind_address, args.secure_port)
    return runner
