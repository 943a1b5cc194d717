"""`nanokube kubelet`: one simulated node in its own process, joining a running cluster over HTTPS
as a kubelet does: with `--kubeconfig` alone it acts as that kubeconfig's user; with
`--bootstrap-kubeconfig` (a bootstrap token's) and no valid `--kubeconfig` yet, it first has a
client certificate for system:node:<name> issued through a CertificateSigningRequest (TLS
bootstrapping, node/bootstrap.py), writes the kubeconfig and acts as the node from then on;
`--rotate-certificates` renews that certificate before it expires. The node is the agent `up`
runs for each of its simulated nodes, of the shape of a pool of `--cluster` (up's file; up's
default cluster without one): it registers its Node, renews its Lease, and runs the pods the
scheduler binds to it. Its pod network range follows from its address: --node-ip, else the lowest
no other node's takes, as the node IPAM controller hands out the next free one. Its port (--secure-port, reported as the
Node's kubelet endpoint, reached at its Hostname address, --hostname-override) serves the kubelet's
endpoints, the API server's pods/log, exec, attach, portforward and nodes/proxy among them, to
callers the API server vouches for (kubelet_auth.py), with a self-signed certificate, or with
`--rotate-server-certificates` (serverTLSBootstrap) one the cluster's kubelet-serving signer issued
once an admin approved its request. `--config` reads a KubeletConfiguration (node/kubelet_config.py):
its authentication (clientCAFile, token webhook, anonymous) and authorization mode guard that port,
its readOnlyPort and healthzPort serve over HTTP, maxPods is the node's pods capacity, each flag
given overriding its field as upstream's flag precedence does (and, as upstream's, saying that the
flag is deprecated in favour of the file); without --config the flags go over the command line's
legacy defaults, not v1beta1's: anonymous requests allowed, no token webhook, AlwaysAllow, the
read-only port 10255 open. /configz shows the merged configuration. registerNode false leaves the
Node to an admin (the kubelet waits for it); registerWithTaints taints the Node it registers;
staticPodPath's manifests run as static pods published as mirror pods (node/static_pods.py);
evictionHard's and evictionSoft's thresholds are the node's eviction manager's. SIGTERM or SIGINT stops it cleanly."""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import ipaddress
import logging
import os
import shutil
import socket
import sys
from functools import partial

from . import component_cli, component_server, zpages
from .apiserver.healthz import PING
from .client import kubeconfig
from .client.http import HTTPClient
from .machinery import goduration, goserver
from .machinery.hostport import join_host_port
from .machinery.version import user_agent

log = logging.getLogger("nanokube.kubelet")

#: the kubelet's --port, where it serves its endpoints
SECURE_PORT = 10250
#: containerd's default cdi_spec_dirs, which a joined node's runtime reads as containerd would
CONTAINERD_CDI_SPEC_DIRS = ("/etc/cdi", "/var/run/cdi")


def add_parser(sub) -> None:
    p = sub.add_parser("kubelet", help="run one simulated node against a running API server")
    p.add_argument("--kubeconfig", required=True, metavar="FILE",
                   help="the node's kubeconfig; with --bootstrap-kubeconfig, written there once a client certificate "
                        "is issued, unless it already holds a valid one")
    p.add_argument("--bootstrap-kubeconfig", default="", metavar="FILE",
                   help="a kubeconfig whose credentials (a bootstrap token) may ask for the node's client certificate")
    p.add_argument("--cert-dir", default="", metavar="DIR",
                   help="where the issued certificate and key go (default: pki beside --kubeconfig)")
    p.add_argument("--rotate-certificates", type=_go_bool, nargs="?", const=True, metavar="BOOL", action=_ConfigFlag,
                   help="ask for a new client certificate before the current one expires (off by default, as the "
                        "kubelet's; kubeadm turns it on)")
    p.add_argument("--rotate-server-certificates", type=_go_bool, nargs="?", const=True, metavar="BOOL",
                   action=_ConfigFlag,
                   help="serverTLSBootstrap: ask as the node for a serving certificate (signer kubernetes.io/kubelet-"
                        "serving, the node's addresses its names), which an admin approves (`kubectl certificate "
                        "approve`: kube-controller-manager does not); the port serves it once issued (its handshakes "
                        "fail with an internal_error alert until then; --tls-cert-file is not read) and it is renewed before it expires")
    p.add_argument("--node-name", default="", metavar="NAME", help="the node's name (default: the host's name)")
    p.add_argument("--hostname-override", default="", metavar="NAME",
                   help="the Hostname address the node reports, where the API server reaches its kubelet's port "
                        "(default: the host's name)")
    p.add_argument("--node-ip", default="", metavar="IP",
                   help="the node's InternalIP, one of the simulated nodes' range 172.18.0.2-172.19.0.1, which gives "
                        "its pod network range; refused where another Node reports it (default: the lowest free one, "
                        "or, where the node's credentials may not list Nodes, one of a hash of its name)")
    p.add_argument("--node-labels", default="", metavar="KEY=VALUE,...",
                   help="labels the node registers with, over its pool's; of the kubernetes.io and k8s.io namespaces "
                        "only the kubelet's own (kubelet.kubernetes.io/*, node.kubernetes.io/*, the well-known ones)")
    p.add_argument("--cluster", default=None, metavar="FILE",
                   help="`nanokube up`'s cluster file, whose pool gives the node its capacity, labels, taints and "
                        "devices (default: up's default cluster)")
    p.add_argument("--pool", default="", metavar="NAME", help="the pool of --cluster the node is one of (default: the first)")
    p.add_argument("--runtime", choices=("simulated", "process"), default="simulated",
                   help="what runs the node's containers: simulated (as up's default runtime) or process (real "
                        "processes in network namespaces of the node's own, as up's --runtime process; needs root and "
                        "ip), the node's pod network routed from this host")
    p.add_argument("--root-dir", default="", metavar="DIR",
                   help="where the kubelet keeps its state: the node's plugins_registry and plugins directories (DRA "
                        "drivers register there), its pods' directories, the DRA checkpoint, the process runtime's "
                        "(default: the process runtime's beside --kubeconfig, the rest in a temporary directory)")
    p.add_argument("--cdi-spec-dirs", default=",".join(CONTAINERD_CDI_SPEC_DIRS), metavar="DIR,...",
                   help="where the node's runtime reads the CDI specs DRA drivers write, in rising precedence, as "
                        "containerd's cdi_spec_dirs (default: its own, %(default)s); besides the node's own cdi "
                        "directory under --root-dir, which comes last")
    component_server.add_arguments(p, SECURE_PORT)
    c = p.add_argument_group("kubelet configuration (each flag given overrides --config's field; as upstream's, each "
                             "is deprecated in favour of the file, and says so when given)")
    c.add_argument("--config", default="", metavar="FILE",
                   help="a KubeletConfiguration (kubelet.config.k8s.io/v1beta1) file; its unset fields take "
                        "v1beta1's defaults (authorization Webhook, anonymous off, readOnlyPort 0), where a kubelet "
                        "without one starts from the command line's (AlwaysAllow, anonymous on, readOnlyPort 10255)")
    config_flag = partial(c.add_argument, action=_ConfigFlag)
    config_flag("--port", dest="secure_port", type=int, metavar="PORT", help="port: as --secure-port")
    config_flag("--address", dest="bind_address", metavar="IP", help="address: as --bind-address")
    config_flag("--read-only-port", type=int, metavar="PORT",
                help="readOnlyPort: a port serving the read-only endpoints (/healthz, /pods, /stats, /metrics, "
                     "/spec) over HTTP to anyone (default 10255 without --config, 0 with one; 0: none)")
    config_flag("--healthz-port", type=int, metavar="PORT",
                help="healthzPort: /healthz over HTTP at --healthz-bind-address (default 10248; 0: none)")
    config_flag("--healthz-bind-address", metavar="IP", help="healthzBindAddress (default 127.0.0.1)")
    config_flag("--max-pods", type=int, metavar="N",
                help="maxPods: the node's pods capacity (default: the file's, 110, or without --config the pool's)")
    config_flag("--anonymous-auth", type=_go_bool, nargs="?", const=True, metavar="BOOL",
                help="authentication.anonymous.enabled: a request without credentials is system:anonymous's "
                     "(default true without --config, false with one), else refused 401")
    config_flag("--authentication-token-webhook", type=_go_bool, nargs="?", const=True, metavar="BOOL",
                help="authentication.webhook.enabled: bearer tokens checked with a TokenReview (default false "
                     "without --config, true with one)")
    config_flag("--client-ca-file", metavar="FILE",
                help="authentication.x509.clientCAFile: the CA of the client certificates accepted (default "
                     "without --config: the kubeconfig's cluster CA)")
    config_flag("--authorization-mode", metavar="MODE",
                help="authorization.mode: Webhook (a SubjectAccessReview per request) or AlwaysAllow (default "
                     "AlwaysAllow without --config, Webhook with one)")
    config_flag("--cluster-dns", metavar="IP,...", help="clusterDNS: the DNS servers' IPs, comma-separated")
    config_flag("--cluster-domain", metavar="DOMAIN", help="clusterDomain")
    config_flag("--register-node", type=_go_bool, nargs="?", const=True, metavar="BOOL",
                help="registerNode: create the node's Node (default true); false: an admin creates it, and the "
                     "kubelet waits for it")
    config_flag("--register-with-taints", metavar="KEY=VALUE:EFFECT,...",
                help="registerWithTaints: taints the node registers with, over its pool's (none if it does not "
                     "register)")
    config_flag("--pod-manifest-path", dest="static_pod_path", metavar="PATH",
                help="staticPodPath: a directory of static pod manifests (or one manifest file) the kubelet runs, "
                     "each published as a mirror pod named <name>-<node>")
    config_flag("--file-check-frequency", type=goduration.flag_value, metavar="DURATION",
                help="fileCheckFrequency: how often the static pod manifests are read again (default 20s; a file "
                     "added, changed or removed is noticed within a second)")
    config_flag("--eviction-hard", metavar="SIGNAL<VALUE,...",
                help="evictionHard: the hard eviction thresholds (default memory.available<100Mi,nodefs.available<10%%,"
                     "nodefs.inodesFree<5%%,imagefs.available<15%%,imagefs.inodesFree<5%%), replacing them all; the "
                     "simulated node observes memory.available, nodefs.available and pid.available")
    config_flag("--eviction-soft", metavar="SIGNAL<VALUE,...",
                help="evictionSoft: soft eviction thresholds, each met for its grace period before a pod is evicted")
    config_flag("--eviction-soft-grace-period", metavar="SIGNAL=DURATION,...",
                help="evictionSoftGracePeriod: each soft threshold's grace period (required for each)")
    config_flag("--eviction-max-pod-grace-period", type=int, metavar="SECONDS",
                help="evictionMaxPodGracePeriod: the most grace a soft eviction gives a pod (0, the default: its own; "
                     "negative: 1 s)")
    p.set_defaults(secure_port=None, bind_address=None)


#: what upstream's kubelet says of each KubeletConfiguration flag given (pflag's deprecation notice)
DEPRECATED = ("This parameter should be set via the config file specified by the Kubelet's --config flag. See "
              "https://kubernetes.io/docs/tasks/administer-cluster/kubelet-config-file/ for more information.")


class _ConfigFlag(argparse.Action):
    """A flag of a KubeletConfiguration field: stored, and its deprecation printed as it is parsed."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(f"Flag {option_string} has been deprecated, {DEPRECATED}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def _go_bool(text: str) -> bool:
    """A boolean flag's value as strconv.ParseBool reads it (`--anonymous-auth=false`)."""
    from .machinery.featuregates import BOOLS

    if text not in BOOLS:
        raise argparse.ArgumentTypeError(f'strconv.ParseBool: parsing "{text}": invalid syntax')
    return BOOLS[text]


#: flag (its dest) -> the KubeletConfiguration field it overrides
_FIELDS = (
    ("bind_address", ("address",)),
    ("secure_port", ("port",)),
    ("read_only_port", ("readOnlyPort",)),
    ("healthz_port", ("healthzPort",)),
    ("healthz_bind_address", ("healthzBindAddress",)),
    ("max_pods", ("maxPods",)),
    ("rotate_certificates", ("rotateCertificates",)),
    ("rotate_server_certificates", ("serverTLSBootstrap",)),
    ("anonymous_auth", ("authentication", "anonymous", "enabled")),
    ("authentication_token_webhook", ("authentication", "webhook", "enabled")),
    ("client_ca_file", ("authentication", "x509", "clientCAFile")),
    ("authorization_mode", ("authorization", "mode")),
    ("cluster_dns", ("clusterDNS",)),
    ("cluster_domain", ("clusterDomain",)),
    ("register_node", ("registerNode",)),
    ("register_with_taints", ("registerWithTaints",)),
    ("static_pod_path", ("staticPodPath",)),
    ("file_check_frequency", ("fileCheckFrequency",)),
    ("eviction_hard", ("evictionHard",)),
    ("eviction_soft", ("evictionSoft",)),
    ("eviction_soft_grace_period", ("evictionSoftGracePeriod",)),
    ("eviction_max_pod_grace_period", ("evictionMaxPodGracePeriod",)),
)


#: flags whose field a configuration may leave unset: their Go zero value, which /flagz prints (false, 0, [])
_UNSET = {"rotate_certificates": False, "rotate_server_certificates": False, "cluster_dns": [],
          "eviction_max_pod_grace_period": 0}


def configure(args: argparse.Namespace) -> dict:
    """The kubelet's flag precedence: each flag given over --config's field, or without --config
    over the command line's defaults (kubelet_config.flag_defaults), set on `args`; featureGates
    merged gate by gate, the flag's winning. Returns the configuration /configz reports (without
    --config and --max-pods, its maxPods the node's pool's); kubelet_config.ConfigError for a file
    or configuration the kubelet refuses."""
    from .machinery import featuregates
    from .node import kubelet_config

    if args.feature_gates:  # (a flag of component_server's, featureGates' upstream)
        print(f"Flag --feature-gates has been deprecated, {DEPRECATED}", file=sys.stderr)
    cfg = kubelet_config.load(args.config) if args.config else kubelet_config.flag_defaults()
    pools_pods = not args.config and args.max_pods is None
    if args.cluster_dns is not None:
        args.cluster_dns = [ip for ip in args.cluster_dns.split(",") if ip]
    if args.register_with_taints is not None:
        args.register_with_taints = kubelet_config.taints(args.register_with_taints)
    for dest, flag, separator in (("eviction_hard", "--eviction-hard", "<"), ("eviction_soft", "--eviction-soft", "<"),
                                  ("eviction_soft_grace_period", "--eviction-soft-grace-period", "=")):
        if getattr(args, dest) is not None:
            setattr(args, dest, _map_flag(getattr(args, dest), flag, separator))
    for dest, path in _FIELDS:
        given = getattr(args, dest)
        section = cfg
        for key in path[:-1]:
            section = section.setdefault(key, {})
        if given is not None:
            section[path[-1]] = given
        setattr(args, dest, section.get(path[-1], _UNSET.get(dest)))
    # (upstream's run() parses evictionHard, then NewMainKubelet all thresholds: its errors say so)
    try:
        args.eviction_thresholds = kubelet_config.thresholds(args.eviction_hard)
    except kubelet_config.ConfigError as e:
        raise kubelet_config.ConfigError(f"failed to run Kubelet: {e}") from None
    try:
        args.eviction_soft_thresholds = kubelet_config.soft_thresholds(args.eviction_soft or {},
                                                                       args.eviction_soft_grace_period or {})
    except kubelet_config.ConfigError as e:
        raise kubelet_config.ConfigError(f"failed to run Kubelet: failed to create kubelet: {e}") from None
    try:
        flagged = featuregates.parse(args.feature_gates)
    except ValueError:  # (component_server.validate refuses it in the flag's words)
        return cfg
    cfg["featureGates"] = {**cfg["featureGates"], **flagged}
    args.feature_gates = ",".join(f"{k}={'true' if v else 'false'}" for k, v in cfg["featureGates"].items())
    kubelet_config.validate(cfg)
    if pools_pods:
        args.max_pods = None
    return {k: v for k, v in cfg.items() if k not in ("apiVersion", "kind") and (k != "maxPods" or not pools_pods)}


def _map_flag(text: str, flag: str, separator: str) -> dict[str, str]:
    """A map flag's `key<sep>value,...` (--eviction-hard's `memory.available<100Mi`), as pflag's reads it."""
    out = {}
    for pair in text.split(",") if text else ():
        key, sep, value = pair.partition(separator)
        if not sep:
            raise ValueError(f'invalid argument "{text}" for "{flag}" flag: malformed pair, expect string{separator}'
                             "string")
        out[key.strip()] = value.strip()
    return out


async def _client(creds: kubeconfig.Credentials) -> HTTPClient:
    client = HTTPClient(creds, field_manager="kubelet", user_agent=user_agent("kubelet"))
    await client.start()
    return client


async def _free_index(client: HTTPClient, name: str, wanted: int | None = None) -> int:
    """The node's cluster-wide index: `wanted` (--node-ip's) unless another Node reports that
    address (NodeIPTaken), else its own address's if its Node is registered, else the lowest no
    Node's InternalIP takes. A node's own credentials read no other Node (the Node authorizer's
    rule): such a node takes an index of its name's hash, past those `up`'s nodes number from 0,
    and says it may collide (nor can it check `wanted`)."""
    from .machinery.errors import APIError
    from .node.agent import node_ip

    first = int(ipaddress.IPv4Address(node_ip(0)))
    nodes = client.resource("", "v1", "nodes")
    try:
        if wanted is None and (own := _index_of(await nodes.get(name), first)) >= 0:
            return own
    except APIError as e:
        if e.code != 404:
            raise
    try:
        items = (await nodes.list())[0]
    except APIError as e:
        if e.code != 403:
            raise
        if wanted is not None:
            log.warning("May not list Nodes: cannot check that no other reports InternalIP %s", node_ip(wanted))
            return wanted
        hashed = _HASHED_FROM + int.from_bytes(hashlib.sha256(name.encode()).digest()[:4]) % (_NODES - _HASHED_FROM)
        log.warning("May not list Nodes: InternalIP %s is of a hash of the node's name and another's may be the "
                    "same; --node-ip picks one", node_ip(hashed))
        return hashed
    if wanted is not None:
        for node in items:
            if node["metadata"]["name"] != name and _index_of(node, first) == wanted:
                raise NodeIPTaken(f"--node-ip {node_ip(wanted)}: node {node['metadata']['name']} already reports "
                                  "that InternalIP")
        return wanted
    taken = {_index_of(node, first) for node in items}
    return next(i for i in range(len(taken) + 1) if i not in taken)


#: how many nodes' addresses there are (as many as the pod network's /24s: 10.0.0.0/8 holds 65536), and
#: where the indexes of nodes that may not list the others begin
_NODES, _HASHED_FROM = 65536, 4096


class NodeIPTaken(Exception):
    """--node-ip is another Node's InternalIP: the kubelet does not start."""


def _node_index(text: str) -> int | None:
    """--node-ip's index among the simulated nodes' addresses (None without it); ValueError for an
    address that is not one of them."""
    from .node.agent import node_ip

    if not text:
        return None
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        raise ValueError(f'--node-ip: could not parse "{text}"') from None
    index = int(ip) - int(ipaddress.IPv4Address(node_ip(0))) if ip.version == 4 else -1
    if not 0 <= index < _NODES:
        raise ValueError(f"--node-ip {text}: not a simulated node's address ({node_ip(0)}-"
                         f"{node_ip(_NODES - 1)})")
    return index


def _index_of(node: dict, first: int) -> int:
    """A registered node's index, from its InternalIP (-1 without one)."""
    for a in (node.get("status") or {}).get("addresses") or ():
        if a.get("type") == "InternalIP":
            return int(ipaddress.IPv4Address(a["address"])) - first
    return -1


async def _run(args: argparse.Namespace, cluster) -> int:
    from .clock import REAL
    from .node import bootstrap
    from .node.manager import NodeManager, options_from_env
    from .node.static_pods import StaticPods

    name = args.node_name
    if args.bootstrap_kubeconfig:
        await bootstrap.bootstrap(args.kubeconfig, args.bootstrap_kubeconfig, args.cert_dir, name, _client)
    client = await _client(kubeconfig.load(args.kubeconfig, env={}))
    stop = component_cli.stop_on_signals()
    nodes = runner = runtime = static = None
    plain: list = []
    rotations: list[asyncio.Task] = []
    try:
        joining = cluster.joining(name, await _free_index(client, name, args.node_index), args.pool, args.max_pods,
                                  args.labels)
        runtime = _runtime(args)
        nodes = NodeManager(lambda _user, _manager: client, joining, standalone=True, runtime=runtime,
                            node_dir=args.node_dir, cdi_spec_dirs=tuple(d for d in args.cdi_spec_dirs.split(",") if d),
                            **options_from_env())
        agent = nodes.agents[name]
        if runtime is not None:
            runtime.start([(name, agent.spec.index, agent.host_ip, agent.pod_cidr)])
            runtime.net.route_from_host(name, agent.spec.index)
            runtime.cluster_dns = tuple(args.cluster_dns or ())
        agent.hostname, agent.kubelet_port = args.hostname_override or socket.gethostname().lower(), args.secure_port
        agent.rotate_certificates = args.rotate_certificates and bool(args.bootstrap_kubeconfig)
        agent.server_tls_bootstrap = args.rotate_server_certificates
        agent.register_node = args.register_node
        agent.spec.taints.extend(args.register_with_taints or ())
        agent.eviction.hard = _thresholds(args.eviction_thresholds)
        agent.eviction.soft = _thresholds(args.eviction_soft_thresholds)
        agent.eviction.max_pod_grace_period = args.eviction_max_pod_grace_period or 0
        # its port serves from the start, as upstream's: also while it waits for an admin's Node
        kubelet = nodes.kubelet_for(name)
        kubelet.configured = args.configured
        client_ca = client.creds.ca if args.client_ca is None else args.client_ca
        serving = component_server.tls_context("", "", client_ca, self_signed=False) \
            if args.rotate_server_certificates else None
        runner = await component_server.serve(args, _endpoints(args, client, stop, kubelet), "kubelet",
                                              client_ca=client_ca, tls=serving)
        plain = await _plain_ports(args, kubelet)
        if not await _until_stopped(nodes.start(), stop):  # (registerNode false: until an admin creates the Node)
            return 0
        if args.static_pod_path:
            static = StaticPods(client, name, args.static_pod_path, goduration.parse(args.file_check_frequency),
                                REAL, nodes.pods, lambda: agent.node_uid, on_read=agent.static_pods_read)
            static.start()
        if args.rotate_certificates and args.bootstrap_kubeconfig:
            rotations.append(asyncio.create_task(bootstrap.rotate(client, name,
                                                                  os.path.join(args.cert_dir, bootstrap.CURRENT))))
        if serving is not None:
            rotations.append(asyncio.create_task(bootstrap.rotate_serving(client, name, agent.addresses, args.cert_dir,
                                                                          partial(component_server.serve_certificate,
                                                                                  serving))))
        log.info("node %s is running", name)
        await stop.wait()
    finally:
        for task in rotations:
            task.cancel()
        await asyncio.gather(*rotations, return_exceptions=True)
        for r in (runner, *plain):
            if r is not None:
                await r.cleanup()
        if static is not None:
            await static.stop()
        if nodes is not None:
            await nodes.stop()
        if runtime is not None:  # its cgroups and namespaces outlive the process
            runtime.close()
        await client.close()
    log.info("kubelet stopped")
    return 0


async def _until_stopped(work, stop: asyncio.Event) -> bool:
    """Await `work` unless `stop` is set first (then cancelled): whether it finished."""
    task, stopped = asyncio.ensure_future(work), asyncio.ensure_future(stop.wait())
    await asyncio.wait((task, stopped), return_when=asyncio.FIRST_COMPLETED)
    stopped.cancel()
    if not task.done():
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return False
    task.result()
    return True


def _thresholds(parsed: dict) -> tuple:
    """evictionHard's or evictionSoft's thresholds of the signals the node observes (all but
    allocatableMemory's and containerfs's), in the eviction manager's order: memory's first."""
    from .node.eviction import SIGNALS, Threshold

    return tuple(Threshold(signal, *parsed[signal]) for signal in SIGNALS if signal in parsed)


#: the read-only port's endpoints (InstallDefaultHandlers'), by path prefix
_READ_ONLY = ("/healthz", "/pods", "/stats", "/metrics", "/spec")


async def _plain_ports(args: argparse.Namespace, kubelet) -> list:
    """readOnlyPort (the kubelet's unauthenticated endpoints over HTTP; not opening it is fatal, as
    upstream's) and healthzPort (/healthz over HTTP; not opening it is logged, as upstream's)."""
    from aiohttp import web

    async def read_only(request: web.Request) -> web.StreamResponse:
        if not any(request.path == p or request.path.startswith(p + "/") for p in _READ_ONLY):
            return web.Response(status=404, text="404 page not found\n")
        return await kubelet.serve(request, request.path)

    async def healthz(request: web.Request) -> web.StreamResponse:
        return await kubelet.serve(request, request.path)

    runners = []
    for port, address, route, fatal in ((args.read_only_port, args.bind_address, ("/{path:.*}", read_only), True),
                                        (args.healthz_port, args.healthz_bind_address, ("/healthz", healthz), False)):
        if not port:
            continue
        app = web.Application()
        app.router.add_route("GET", *route)
        runner = goserver.bounded_runner(app)
        await runner.setup()
        try:
            await web.TCPSite(runner, address, port).start()
        except OSError as e:
            await runner.cleanup()
            why = f"listen tcp {join_host_port(address, port)}: bind: {os.strerror(e.errno).lower() if e.errno else e}"
            if fatal:
                raise component_server.ServeError(why) from e
            log.error("Failed to start healthz server: %s", why)
            continue
        runners.append(runner)
    return runners


def _process_runtime_problem() -> str:
    """Why this host cannot run the process runtime ("" when it can)."""
    if not sys.platform.startswith("linux"):
        return "needs Linux"
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    return "" if shutil.which("ip") else "missing ip on PATH"


def _runtime(args: argparse.Namespace):
    """The process runtime for --runtime process (its state and namespaces' names of --root-dir), else None."""
    if args.runtime != "process":
        return None
    from .node.runtime.netns import cluster_tag
    from .node.runtime.process import ProcessRuntime

    return ProcessRuntime(os.path.join(args.root_dir, "runtime"), cluster_tag(args.root_dir))


def _client_ca(args: argparse.Namespace) -> bytes | None:
    """authentication.x509.clientCAFile's certificates; None: the kubeconfig's CA (no --config)."""
    if not args.client_ca_file:
        return b"" if args.config else None
    try:
        with open(args.client_ca_file, "rb") as f:
            return f.read()
    except OSError as e:
        why = e.strerror.lower() if e.strerror else str(e)
        raise ValueError(f"unable to load client CA file {args.client_ca_file}: open {args.client_ca_file}: {why}") \
            from None


def _endpoints(args: argparse.Namespace, client: HTTPClient, stop: asyncio.Event, kubelet):
    """The kubelet's port: /healthz (and /metrics: the client's requests), then every other endpoint
    of the node's kubelet server (stats, /configz, logs, exec, attach, port-forward...), which the
    API server reaches at the Node's address with its kubelet client certificate."""
    from aiohttp import web
    from prometheus_client import CollectorRegistry

    from .apiserver.healthz import Check
    from .kubelet_auth import KubeletAuth

    checks = [PING, Check("shutdown", lambda: "process is shutting down" if stop.is_set() else None)]
    auth = KubeletAuth(client, args.node_name, args.authorization_always_allow_paths, anonymous=args.anonymous_auth,
                       token_webhook=args.authentication_token_webhook, mode=args.authorization_mode)
    app = component_server.app(auth, CollectorRegistry(), None, lambda: checks, component="kubelet",
                               flags=zpages.flags(args), profiling=False)

    async def kubelet_server(request: web.Request) -> web.StreamResponse:
        return await kubelet.serve(request, request.path)

    app.router.add_route("*", "/{path:.*}", kubelet_server)
    return app


def run(args: argparse.Namespace) -> int:
    from .node import kubelet_config
    from .node.cluster import ClusterFileError, default_cluster, load_cluster

    try:
        args.labels = kubelet_config.node_labels(args.node_labels)
        args.configured = configure(args)
        args.client_ca = _client_ca(args)
        args.node_index = _node_index(args.node_ip)
        component_server.validate(args)
        cluster = load_cluster(args.cluster) if args.cluster else default_cluster()
        cluster.joining(args.node_name, 0, args.pool)  # an unknown --pool is refused before bootstrapping
    except (ValueError, ClusterFileError) as e:
        print(f"nanokube kubelet: {e}", file=sys.stderr)
        return 2
    args.node_name = args.node_name or socket.gethostname().lower()
    args.cert_dir = args.cert_dir or os.path.join(os.path.dirname(os.path.abspath(args.kubeconfig)), "pki")
    # an explicit --root-dir holds the node's directories as upstream's does (<root>/plugins_registry, where a DRA
    # driver registers); without one they are temporary, as kubelets beside one kubeconfig must not share them
    args.node_dir = os.path.abspath(args.root_dir) if args.root_dir else ""
    args.root_dir = os.path.abspath(args.root_dir or os.path.dirname(os.path.abspath(args.kubeconfig)))
    if args.runtime == "process" and (problem := _process_runtime_problem()):
        print(f"nanokube kubelet: --runtime process: {problem}", file=sys.stderr)
        return 2
    from .node.bootstrap import BootstrapError

    return component_cli.run("kubelet", lambda: asyncio.run(_run(args, cluster)), (component_server.ServeError,
                                                                                  BootstrapError, NodeIPTaken))
