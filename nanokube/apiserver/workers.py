"""Several API server processes on one port and one store (`nanokube up --api-workers N`).

One Python process serves requests on one core. Worker 0 is the whole `up` (the API server,
its bootstrap and writing loops, the scheduler, controllers and node agents); workers 1..N-1
are API servers alone, started here once worker 0 listens: the same data dir, store, PKI,
authentication and authorization, audit log (each line one O_APPEND write) and port, which
every worker binds with SO_REUSEPORT, so the kernel spreads connections over them. Each
serves any request and watch from a watch cache of its own. Which of the API server's own
loops run in every worker, and which in worker 0 alone, says controlplane.start_loops.

The store keeps the workers consistent: resourceVersions come from one sequence and every
worker's watch cache takes every write in that order (SQLite's shared mode, see
store/sqlite.py; each etcd client watches etcd), and a worker catches up with the store
before it serves a request (APIServer._serve), so a client that wrote through one worker
reads its write through any other. The memory store lives in one process and is refused.
Service values are arbitrated by the store too (reservations.py), and a scrape of /metrics
reports all workers' counts (worker_metrics.py). Under the process runtime every worker also
listens for pods at the advertised address in the cluster network namespace, and dials the
pods behind webhooks' and APIServices' Services from there (--dial-netns), as worker 0 does.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import json
import logging
import os
import signal
import ssl
import sys

from aiohttp import hdrs, web

from .. import gcsettle
from ..machinery import logs
from . import expect
from .aggregator.proxy import identity_headers
from .aggregator.requestheader import own_front_proxy_files
from .auth.authorizer import USER
from .cache import DELETED, CacheEvent
from .options import MIN_REQUEST_TIMEOUT
from .reservations import Reservations
from .worker_metrics import WorkerMetrics
from ..machinery.httpstream.transports import RawUpgrade, splice

log = logging.getLogger(__name__)

#: a worker's first line, with its private port: `ready PORT`
_READY = b"ready "
#: PR_SET_PDEATHSIG: a worker ends with worker 0, however worker 0 ended
_PR_SET_PDEATHSIG = 1


def share_service_allocations(server) -> None:
    """Called before `server.start()` when other processes allocate from the same store: this
    server's other workers, or other API servers on the same etcd (`up` calls it there whatever the
    worker count). ClusterIPs and node ports are allocated in each API server process
    (registry/core_services.py, before the Service is stored), so each takes what the others
    allocated from its watch cache, as the Services arrive, and releases what their deletes and
    updates freed; and each worker picks new values dynamically from a share of the ranges of its
    own (every N-th value), so that two workers creating Services at the same moment rarely pick
    one value (API servers on one etcd each pick from the whole range, and give up a value another
    recorded first). Every value is also recorded in the store before the Service is written
    (reservations.py), so of two clients asking for one address or port through two processes at
    the same moment exactly one gets it, as from one kube-apiserver, or several on one etcd."""
    res = server.index.get("", "v1", "services")
    strategy, prefix = res.strategy, res.key_prefix()
    strategy.reservations = Reservations(server.rest, strategy)
    strategy.ips.share(server.workers, server.worker)
    strategy.node_ports.share(server.workers, server.worker)

    def follow(ev: CacheEvent) -> None:
        if not ev.key.startswith(prefix):
            return
        if ev.prev is not None:
            strategy.release(ev.prev.obj)
        if ev.type != DELETED:
            strategy.restore([ev.entry.obj])

    server.cache.on_event.append(follow)


#: the pods subresources node agents serve, which run in worker 0 alone
_RELAYED = frozenset(("exec", "attach", "portforward", "log"))
#: request headers that say who the client is: the relay says it instead, as a front proxy
_IDENTITY = ("authorization", "x-remote-", "impersonate-")


def _proxied(p: list[str]) -> bool:
    """A pods/proxy or services/proxy (reaching a pod through its node agent) or nodes/proxy path."""
    if len(p) < 6 or p[1] != "api":
        return False
    if p[3] == "namespaces":
        return len(p) >= 8 and p[5] in ("pods", "services") and p[7] == "proxy"
    return p[3] == "nodes" and p[5] == "proxy"


class NodeRelay:
    """The node agents run in worker 0 only, so the other workers relay a pod's exec, attach,
    portforward, log and proxy requests (services' and nodes' proxy too) there, as kube-apiserver
    relays them to the kubelet: over TLS
    to worker 0's private port, as the front proxy (its client certificate and the
    authenticated user in X-Remote-* headers; worker 0 authorizes and admits the request as its
    own), then byte for byte both ways, so SPDY and WebSocket upgrades and streamed logs pass
    unchanged."""

    def __init__(self, pki, port: int) -> None:
        self.port = port
        self.ctx = ssl.create_default_context(cadata=pki.ca.cert_pem.decode())
        self.ctx.load_cert_chain(*own_front_proxy_files(pki.dir))

    def wrap(self, dispatch):
        """`dispatch`, except for the requests relayed."""
        async def dispatch_or_relay(request: web.Request) -> web.StreamResponse:
            p = request.rel_url.path.split("/")  # /api/v1/namespaces/NS/pods/NAME/SUB
            if len(p) == 8 and p[1] == "api" and p[3] == "namespaces" and p[5] == "pods" and p[7] in _RELAYED:
                return await self.relay(request)
            if _proxied(p):
                return await self.relay(request)
            return await dispatch(request)

        return dispatch_or_relay

    async def relay(self, request: web.Request) -> web.StreamResponse:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port, ssl=self.ctx)
        try:
            await expect.continued(request)
            body = await request.read() if request.body_exists else b""
            upgrade = hdrs.UPGRADE in request.headers
            head = [f"{request.method} {request.rel_url.raw_path_qs} HTTP/1.1"]
            head += [f"{k}: {v}" for k, v in request.headers.items() if not k.lower().startswith(_IDENTITY)
                     and k.lower() not in ("content-length", "transfer-encoding", "expect") and (upgrade or k.lower() != "connection")]
            head += [f"{k}: {v}" for k, v in identity_headers(request[USER])]
            head += [f"Content-Length: {len(body)}"] if body else []
            head += [] if upgrade else ["Connection: close"]
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
            status, *lines = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            _, code, reason = (status.split(" ", 2) + [""])[:3]
            resp = RawUpgrade(status=int(code), reason=reason or None)
            for line in lines:
                if line:
                    k, v = line.split(":", 1)
                    resp.headers.add(k, v.strip())
            return await splice(request, resp, reader, writer)
        finally:
            writer.close()


class Workers:
    """Workers 1..N-1 as child processes of worker 0; one that ends (a crash, `kill -9`) is
    started again, its clients meanwhile reconnecting to the others."""

    def __init__(self, count: int, data_dir: str, store: str, address: str, port: int, relay_port: int,
                 audit_log_path: str, ports: dict[int, int] | None = None, flags: dict[str, str] | None = None,
                 disabled_admission: list[str] | tuple[str, ...] = (), advertise: str = "", jwks_uri: str = "",
                 dial_netns: str = "", min_request_timeout: int = MIN_REQUEST_TIMEOUT,
                 audit_policy_file: str = "", audit_webhook: list[str] | tuple[str, ...] = (), feature_gates: str = "",
                 runtime_config: str = "", admission_config_file: str = "") -> None:
        """`ports`: filled with each worker's private port as it starts (WorkerMetrics.ports). `flags`:
        `up`'s, which every worker's /flagz shows as worker 0's does. `disabled_admission`: up's
        --disable-admission-plugins, which every worker admits by. `advertise`, `jwks_uri`: worker 0's
        advertised address and --service-account-jwks-uri, so every worker's discovery document is its.
        `dial_netns`: under the process runtime, the cluster network namespace, from which every worker
        dials webhooks' and APIServices' Services as worker 0 does (APIServer.dial_services_from), and
        where each listens with it at the advertised address for pods. `min_request_timeout`: up's
        --min-request-timeout, by which every worker times its watches. `audit_policy_file`: up's
        --audit-policy-file (already validated), by which every worker audits, and its audit webhook flags.
        `feature_gates`, `runtime_config`, `admission_config_file`: up's flags (already validated), which
        every worker serves by."""
        self.count = count
        self.ports = {} if ports is None else ports
        self.argv = ["--workers", str(count), "--data-dir", data_dir, "--store", store, "--address", address,
                     "--port", str(port), "--relay-port", str(relay_port), "--audit-log-path", audit_log_path,
                     *(["--flagz", json.dumps(flags)] if flags is not None else []),
                     *(["--disable-admission-plugins", ",".join(disabled_admission)] if disabled_admission else []),
                     "--advertise-address", advertise, "--service-account-jwks-uri", jwks_uri,
                     *(["--dial-netns", dial_netns] if dial_netns else []),
                     "--min-request-timeout", str(min_request_timeout),
                     *(["--audit-policy-file", audit_policy_file] if audit_policy_file else []), *audit_webhook,
                     "--feature-gates", feature_gates, "--runtime-config", runtime_config,
                     *(["--admission-control-config-file", admission_config_file] if admission_config_file else [])]
        self.procs: dict[int, asyncio.subprocess.Process] = {}
        self._keepers: list[asyncio.Task] = []

    async def start(self, timeout: float = 60.0) -> None:
        """Starts the workers and waits until each listens; RuntimeError if one does not."""
        for i in range(1, self.count):
            await self._spawn(i)
        for i, p in self.procs.items():
            if not await self._ready(i, p, timeout):
                await self.stop()
                raise RuntimeError(f"API server worker {i} did not start")
        self._keepers = [asyncio.create_task(self._keep(i)) for i in self.procs]

    async def _spawn(self, i: int) -> asyncio.subprocess.Process:
        p = self.procs[i] = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "nanokube.apiserver.workers", "--worker", str(i), "--ppid", str(os.getpid()),
            *self.argv, stdout=asyncio.subprocess.PIPE)
        return p

    async def _ready(self, i: int, p: asyncio.subprocess.Process, timeout: float) -> bool:
        self.ports.pop(i, None)
        try:
            line = await asyncio.wait_for(p.stdout.readline(), timeout)
        except TimeoutError:
            return False
        if not line.startswith(_READY):
            return False
        self.ports[i] = int(line[len(_READY):])
        return True

    async def _keep(self, i: int) -> None:
        while True:
            code = await self.procs[i].wait()
            log.warning("API server worker %d ended (exit status %s); starting it again", i, code)
            await asyncio.sleep(1.0)  # one that cannot start fails once a second, not in a tight loop
            if not await self._ready(i, await self._spawn(i), 60.0):
                log.error("API server worker %d did not start again", i)

    async def stop(self, timeout: float = 10.0) -> None:
        for t in self._keepers:
            t.cancel()
        await asyncio.gather(*self._keepers, return_exceptions=True)
        for p in self.procs.values():
            if p.returncode is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            try:
                await asyncio.wait_for(p.wait(), timeout)
            except TimeoutError:
                p.kill()
                await p.wait()
        self.procs = {}


async def _serve(args: argparse.Namespace) -> int:
    gcsettle.defer()  # the collector policy of worker 0's `up`: settled below once this worker serves
    from ..pki.ca import ensure_pki
    from ..store.backends import open_store
    from .app import APIServer
    from . import audit_options, auth_options, kubelet_options, pki_options
    from .audit_policy import load as load_audit_policy
    from .encryption import options as encryption_options
    from ..machinery import featuregates, goduration
    from ..registry.base import all_resources
    from .runtime_config import from_flag

    featuregates.set_flag(args.feature_gates)
    pki = ensure_pki(args.data_dir)
    store = open_store(args.store, args.data_dir, shared=True)
    encryption = encryption_options.load(args)  # (up's flags, already validated)
    if encryption is not None:
        store = encryption.wrap(store)
    server = APIServer(store, pki, host=args.address,
                       port=args.port, audit_log_path=args.audit_log_path,
                       workers=args.workers, worker=args.worker, advertise=args.advertise_address,
                       jwks_uri=args.service_account_jwks_uri, min_request_timeout=args.min_request_timeout,
                       compaction_interval=goduration.parse(args.etcd_compaction_interval),
                       runtime_config=from_flag(args.runtime_config, all_resources()) if args.runtime_config else None,
                       audit_policy=load_audit_policy(args.audit_policy_file) if args.audit_policy_file else None,
                       # (up's audit flags, already validated; none to read where there is no audit)
                       **({"audit_webhook": audit_options.webhook(args), "audit_log_options": audit_options.log_options(args)}
                          if args.audit_log_path or args.audit_webhook_config_file else {}))
    server.flags = json.loads(args.flagz) if args.flagz else None
    if encryption is not None:
        encryption_options.install(server, encryption)
    auth_options.apply(server, auth_options.load(args))  # (up's flags, already validated)
    kubelet_options.apply(server, kubelet_options.load(args))  # (up's flags, already validated)
    given = pki_options.load(args)  # (up's certificate and key flags, already validated: each worker reads the files)
    pki_options.apply(server, given, pki_options.tls(given, pki))
    server.rest.admission.disable(*[n for n in args.disable_admission_plugins.split(",") if n])
    if args.admission_control_config_file:
        from .admission.config_file import plugin_configs

        server.rest.admission.configure(plugin_configs(args.admission_control_config_file))
    relay = NodeRelay(pki, args.relay_port)
    server.handlers.dispatch = relay.wrap(server.handlers.dispatch)
    tracing = None
    if args.tracing_config_file:  # (up's, already validated)
        from . import tracing as apiserver_tracing

        tracing = apiserver_tracing.start(server, apiserver_tracing.load(args.tracing_config_file), args.store)
    share_service_allocations(server)
    WorkerMetrics(server, pki, relay)
    pods = source = None
    if args.dial_netns:  # before it serves: a webhook call answered at once dials from the namespace too
        from ..node.runtime.netns import dialer, reachable_from_pods

        source = args.advertise_address if reachable_from_pods(args.advertise_address) else ""
        await server.dial_services_from(dialer(args.dial_netns, source))
    await server.start()
    if source:
        pods = asyncio.create_task(_listen_for_pods(server, args.dial_netns, source))
    gcsettle.settle()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    sys.stdout.buffer.write(b"%s%d\n" % (_READY, server.relay_port))
    sys.stdout.flush()
    await stop.wait()
    if pods is not None:
        pods.cancel()
    await server.stop()
    if tracing is not None:
        tracing.shutdown()
    return 0


async def _listen_for_pods(server, netns: str, address: str) -> None:
    """Listen with worker 0 at the advertised address in the cluster network namespace, where
    pods reach the API server, once `up`'s runtime has made it (after the workers start; a worker
    started again finds it there)."""
    from ..node.runtime.netns import listen_in_netns

    while True:
        try:
            sock = listen_in_netns(netns, address, server.port)
        except OSError:  # no namespace yet, or not its address (EADDRNOTAVAIL)
            await asyncio.sleep(0.25)
            continue
        await server.listen_on(sock)
        return


def parser() -> argparse.ArgumentParser:
    """The worker's command line: the flags of `up` that worker 0 passes on, and the worker's own."""
    from . import audit_options, auth_options, kubelet_options, pki_options
    from .encryption.options import add_flags as encryption_flags

    p = argparse.ArgumentParser(prog="nanokube.apiserver.workers", description="one more API server worker of `up`")
    p.add_argument("--worker", type=int, required=True)
    p.add_argument("--workers", type=int, required=True)
    p.add_argument("--ppid", type=int, required=True)
    for flag in ("--data-dir", "--store", "--address", "--audit-log-path"):
        p.add_argument(flag, required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--relay-port", type=int, required=True)
    p.add_argument("--flagz", default=None, help="what /flagz shows: `up`'s flags, as JSON")
    p.add_argument("--disable-admission-plugins", default="", help="up's, comma-separated")
    p.add_argument("--advertise-address", default="", help="worker 0's advertised address")
    p.add_argument("--service-account-jwks-uri", default="", help="up's")
    p.add_argument("--min-request-timeout", type=int, default=MIN_REQUEST_TIMEOUT, help="up's")
    p.add_argument("--etcd-compaction-interval", default="5m", help="up's (already validated)")
    p.add_argument("--audit-policy-file", default="", help="up's")
    p.add_argument("--feature-gates", default="", help="up's")
    p.add_argument("--runtime-config", default="", help="up's")
    p.add_argument("--admission-control-config-file", default="", help="up's")
    p.add_argument("--tracing-config-file", default="", help="up's")
    audit_options.add_flags(p)  # up's
    auth_options.add_flags(p)  # up's
    kubelet_options.add_flags(p)  # up's
    pki_options.add_flags(p)  # up's
    encryption_flags(p)  # up's
    logs.add_arguments(p)  # up's
    p.add_argument("--dial-netns", default="", help="the cluster network namespace: pods are dialled from it, and served in it")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    prctl = getattr(ctypes.CDLL(None), "prctl", None)  # Linux
    if prctl is not None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != args.ppid:  # worker 0 ended before the signal was set
        return 1
    logs.configure(args)  # up's logging flags: klog's header names the worker's process id
    import uvloop

    return uvloop.run(_serve(args))


if __name__ == "__main__":
    sys.exit(main())
