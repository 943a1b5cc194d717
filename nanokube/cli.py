"""`nanokube` command line."""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib
import ipaddress
import logging
import os
import resource
import shutil
import socket
import sys
import urllib.parse

from . import gcsettle
from .machinery import logs

log = logging.getLogger("nanokube")

#: every subcommand but `up` (this module's): the module that adds its parser and runs it
COMMANDS = {"fault": "cli_fault", "metrics": "cli_metrics", "controller-manager": "cli_controller_manager",
            "proxy": "cli_proxy", "scheduler": "cli_scheduler", "simulate": "cli_simulate", "kubelet": "cli_kubelet"}
#: the commands whose own parser takes component-base's logging flags (machinery/logs.py); fault and
#: metrics, whose actions are parsers of their own, add them to each (`nanokube metrics get M -v 4`)
LOGGED = ("up", "controller-manager", "proxy", "scheduler", "simulate", "kubelet")


async def _up(args: argparse.Namespace) -> int:
    gcsettle.defer()  # until gcsettle.settle() below, once everything has started
    # what judges the flags first: a refused flag stops `up` before the components are imported, and
    # the checks that need a heavier module (the scheduler's plugins, the Prometheus client, the watch
    # cache) import it only where its flag is set, or come last
    from .machinery import goduration
    from .metrics.rules import RulesError
    from .node.cluster import ClusterFileError, default_cluster, load_cluster
    from .proxy.modes import ModeError, select_mode
    from .apiserver.audit_policy import PolicyError
    from .apiserver.audit_policy import load as load_audit_policy
    from .apiserver import audit_options

    from .machinery import featuregates

    try:
        gate_warnings = featuregates.set_flag(args.feature_gates)
        runtime_config = _runtime_config(args.runtime_config)
    except ValueError as e:
        print(f"nanokube: {e}", file=sys.stderr)
        return 2
    for text in gate_warnings:
        log.warning("%s", text)
    metrics_source = None  # the builtin provider
    if (args.metrics_provider, args.metrics_rules) != ("builtin", None):
        from .metrics.prometheus import load_source

        try:
            metrics_source = load_source(args.metrics_provider, args.metrics_rules)
        except RulesError as e:
            print(f"nanokube: {e}", file=sys.stderr)
            return 2
    try:
        signing_duration = goduration.parse(args.cluster_signing_duration, "--cluster-signing-duration")
    except ValueError as e:
        print(f"nanokube: {e}", file=sys.stderr)
        return 2
    try:
        audit_policy = load_audit_policy(args.audit_policy_file) if args.audit_policy_file else None
    except PolicyError as e:
        print(f"nanokube: --audit-policy-file: {e}", file=sys.stderr)
        return 2
    from .apiserver import auth_options, kubelet_options

    try:
        auth = auth_options.load(args)
        kubelet_client = kubelet_options.load(args)
    except ValueError as e:
        print(f"nanokube: {e}", file=sys.stderr)
        return 2
    try:
        audit_log = audit_options.log_options(args, enabled=args.audit_log_path != "")
        audit_webhook = audit_options.webhook(args)
    except audit_options.FlagError as e:
        print(f"nanokube: {e}", file=sys.stderr)
        return 2
    from .apiserver import pki_options
    from .controllers import csrsigning_options

    try:  # the operator's certificates and keys (kube-apiserver's and kube-controller-manager's flags)
        pki_opts = pki_options.load(args)
        signers = csrsigning_options.from_flags(args) if csrsigning_options.given(args) else None
    except ValueError as e:
        print(f"nanokube: {e}", file=sys.stderr)
        return 2
    sched_cfg = None
    if args.scheduler_config:
        from .scheduler.config import ConfigError
        from .scheduler.config import load as load_scheduler_config

        try:
            sched_cfg = load_scheduler_config(args.scheduler_config)
        except (ConfigError, OSError) as e:
            print(f"nanokube: --scheduler-config: {e}", file=sys.stderr)
            return 2
    try:
        cluster = load_cluster(args.cluster) if args.cluster else default_cluster()
        proxy_mode, mode_warnings = select_mode(args.proxy_mode) if args.runtime == "process" or args.proxy_mode \
            else ("", [])
    except (ClusterFileError, ModeError) as e:
        print(f"nanokube: {e}", file=sys.stderr)
        return 2
    if args.runtime == "process" and (problem := _process_runtime_problem(len(cluster.nodes()))):
        print(f"nanokube: --runtime process: {problem}", file=sys.stderr)
        return 2
    if args.api_workers < 1:
        print("nanokube: --api-workers must be at least 1", file=sys.stderr)
        return 2
    from .store.backends import check as check_store

    try:
        check_store(args.store, shared=args.api_workers > 1)
    except ValueError as e:
        print(f"nanokube: {e}", file=sys.stderr)
        return 2
    if args.min_request_timeout < 0:
        print("nanokube: --min-request-timeout can not be negative value", file=sys.stderr)
        return 2
    from .apiserver.eventttl import parse_ttl

    try:
        event_ttl = parse_ttl(args.event_ttl)
    except ValueError as e:
        print(f"nanokube: {e}", file=sys.stderr)
        return 2
    try:
        compaction_interval = goduration.parse(args.etcd_compaction_interval, "--etcd-compaction-interval")
    except ValueError as e:
        print(f"nanokube: {e}", file=sys.stderr)
        return 2
    if compaction_interval < 0:
        print("nanokube: --etcd-compaction-interval must not be negative", file=sys.stderr)
        return 2
    from .apiserver.encryption import options as encryption_options

    try:
        encryption = encryption_options.load(args)
    except ValueError as e:
        print(f"nanokube: {e}", file=sys.stderr)
        return 2
    from .apiserver.app import APIServer
    from .metrics.provider import MetricsProvider
    from .scheduler.config import SchedulerConfig
    from .apiserver.kubernetes_service import default_advertise_address
    from .cli_scheduler import ElectedScheduler
    from .component_cli import stop_on_signals
    from .client.leaderelection import LeaderElector, elector_for
    from .client.ratelimit import limited, rest_limit
    from .apiserver.loopback import connector
    from .controllers.manager import KCM_CLIENT_LIMIT, LEASE_NAME, ControllerManager
    from .machinery.user import CONTROLLER_USER, SCHEDULER_USER
    from .node.clusterdns import DNS_USER, ClusterDNS
    from .node.dns import DNS_SERVER, NODE_RESOLVER
    from .node.manager import KUBELET_CLIENT_LIMITS, NodeManager, kubelet_client_limits
    from .node.manager import options_from_env as node_options
    from .node.storage import PROVISIONER, PROVISIONER_USER, LocalPathProvisioner
    from .pki.ca import ensure_pki
    from .pki.kubeconfig import SUPER_ADMIN_CONF, write_kubeconfig
    from .pki.signer import SignerCA, ca_dir
    from .apiserver.audit_file import ensure_log_file
    from .scheduler.scheduler import Scheduler
    from .store.backends import open_store
    from .apiserver.admission import admission_flag_problem
    from .apiserver.admission.config_file import plugin_configs
    from . import clusterinfo
    from .zpages import flags
    try:  # the nodes' knobs from the environment and the client limits, judged before anything starts
        node_opts = node_options()
        kcm_limit = rest_limit(*_given(args, "controller_manager_kube_api_", KCM_CLIENT_LIMIT))
        kubelet_limits = kubelet_client_limits(*_given(args, "kubelet_kube_api_", KUBELET_CLIENT_LIMITS["api_limit"]),
                                               *_given(args, "kubelet_event_", KUBELET_CLIENT_LIMITS["event_limit"]),
                                               flag_prefix="--kubelet-")
    except ValueError as e:
        print(f"nanokube: {e}", file=sys.stderr)
        return 2
    MetricsProvider.default_source = metrics_source
    MetricsProvider.usage_sources = ()
    data_dir = os.path.abspath(args.data_dir)
    os.makedirs(data_dir, exist_ok=True)
    kubeconfig = os.path.abspath(args.kubeconfig or os.path.join(data_dir, "kubeconfig"))
    advertise = args.advertise_address or default_advertise_address(args.address) or ""
    pki = ensure_pki(data_dir, ips=_serving_ips(advertise, args.address))
    SignerCA(ca_dir(data_dir)).load()  # the pod-certificate signer's, in DIR/pki with the rest: see ca_dir
    try:
        serving_tls = pki_options.tls(pki_opts, pki)
        trust = pki_options.client_trust(pki_opts, pki, signers or {})
    except (OSError, ValueError) as e:
        print(f"nanokube: {e}", file=sys.stderr)
        return 2
    disabled = [n.strip() for n in args.disable_admission_plugins.split(",") if n.strip()]
    if problem := admission_flag_problem(disabled):
        print(f"nanokube: {problem}", file=sys.stderr)
        return 2
    try:
        admission_configs = plugin_configs(args.admission_control_config_file) if args.admission_control_config_file else {}
    except ValueError as e:
        print(f"nanokube: --admission-control-config-file: {e}", file=sys.stderr)
        return 2
    tracing = tracing_config = None
    if args.tracing_config_file:  # (the OpenTelemetry SDK imported only then)
        from .apiserver import tracing as apiserver_tracing

        try:
            tracing_config = apiserver_tracing.load(args.tracing_config_file)
        except ValueError as e:
            print(f"nanokube: {e}", file=sys.stderr)
            return 2
    audit = args.audit_log_path if args.audit_log_path is not None else os.path.join(data_dir, "audit.log")
    if audit:
        try:
            ensure_log_file(audit)
        except OSError as e:
            print(f"nanokube: {e.strerror}", file=sys.stderr)
            return 1
    try:
        store = open_store(args.store, data_dir, shared=args.api_workers > 1)
    except ValueError as e:
        print(f"nanokube: {e}", file=sys.stderr)
        return 2
    if encryption is not None:
        store = encryption.wrap(store)
    # once every flag is judged, so a refused one stops `up` with nothing but its own line
    log.info("feature gates beyond 1.37's defaults: %s; APIs: %s", featuregates.GATES.overridden() or "none",
             _served_apis(args.runtime_config))
    # --port 0: the server binds port 0 and reports the kernel's pick as server.port (no probe first,
    # which another process could take before the bind)
    server = APIServer(store, pki, host=args.address, port=args.port, audit_log_path=audit, event_ttl=event_ttl,
                       workers=args.api_workers, compaction_interval=compaction_interval,
                       advertise=advertise,
                       jwks_uri=args.service_account_jwks_uri or "", min_request_timeout=args.min_request_timeout,
                       audit_policy=audit_policy, audit_webhook=audit_webhook, audit_log_options=audit_log,
                       runtime_config=runtime_config)
    server.flags = flags(args)
    if encryption is not None:
        encryption_options.install(server, encryption)
    auth_options.apply(server, auth)
    kubelet_options.apply(server, kubelet_client)
    server.rest.admission.disable(*disabled)
    server.rest.admission.configure(admission_configs)
    if tracing_config is not None:
        tracing = apiserver_tracing.start(server, tracing_config, args.store)
    if args.api_workers > 1 or args.store.startswith("etcd://"):
        # other processes allocate ClusterIPs and node ports from the same store: this server's workers,
        # or other API servers on the same etcd (an HA control plane); the store arbitrates
        from .apiserver.workers import share_service_allocations

        share_service_allocations(server)
    pki_options.apply(server, pki_opts, serving_tls)
    if args.api_workers > 1:
        from .apiserver.worker_metrics import WorkerMetrics
        from .apiserver.workers import Workers

        scrape = WorkerMetrics(server, pki)
    try:
        await server.start()
    except OSError as e:
        print(f"nanokube: cannot listen on {args.address}:{args.port}: {e.strerror}", file=sys.stderr)
        await server.stop()  # the store it was given (the bind comes before anything starts)
        return 1
    workers = None
    if args.api_workers > 1:
        dial_netns = ""
        if args.runtime == "process":  # the runtime makes the namespace below; workers dial from it once pods run
            from .node.runtime.netns import ClusterNetwork, cluster_tag

            dial_netns = ClusterNetwork(cluster_tag(data_dir)).cluster_ns
        workers = Workers(args.api_workers, data_dir, args.store, args.address, server.port, server.relay_port, audit,
                          scrape.ports, server.flags, disabled, server.advertise, server.jwks_uri, dial_netns,
                          args.min_request_timeout, os.path.abspath(args.audit_policy_file) if args.audit_policy_file else "",
                          audit_options.worker_argv(args) + auth_options.worker_argv(args) + logs.worker_argv(args)
                          + kubelet_options.worker_argv(args) + pki_options.worker_argv(args)
                          + encryption_options.worker_argv(args)
                          + ["--etcd-compaction-interval", args.etcd_compaction_interval]
                          + (["--tracing-config-file", os.path.abspath(args.tracing_config_file)]
                             if args.tracing_config_file else []),
                          args.feature_gates, args.runtime_config,
                          os.path.abspath(args.admission_control_config_file) if args.admission_control_config_file else "")
        try:
            await workers.start()
        except RuntimeError as e:
            print(f"nanokube: {e}", file=sys.stderr)
            await server.stop()
            return 1
    connect = connector(server.rest)
    # (first: the binding that makes the admin kubeconfig's kubeadm:cluster-admins cluster-admin)
    await clusterinfo.publish(connect(clusterinfo.KUBEADM_USER, "kubeadm"),
                              connect(clusterinfo.KUBEADM_SUPER_ADMIN, "kubeadm"), server.url, trust)
    admin, super_admin = pki_options.admin_credentials(pki_opts, pki, serving_tls, signers or {})
    write_kubeconfig(os.path.join(data_dir, SUPER_ADMIN_CONF), server.url, pki, ca_pem=trust, admin=super_admin,
                     user="super-admin")
    write_kubeconfig(kubeconfig, server.url, pki, ca_pem=trust, admin=admin)
    try:
        # kube-controller-manager's --kube-api-qps/--kube-api-burst: each controller's client, the shared
        # informers' and the lease's a bucket of its own (by default 20/s after a burst of 30)
        controllers = ControllerManager.in_process(
            connect, server.clock, data_dir, controllers=args.controllers, load_balancer_pool=args.load_balancer_pool,
            signing_duration=signing_duration, client_limit=kcm_limit, signers=signers, root_ca=trust,
            service_account_key=pki_opts.signing_key,
            elector=LeaderElector(limited(connect(CONTROLLER_USER, "kube-controller-manager"), *kcm_limit,
                                          server.clock), LEASE_NAME, _identity(data_dir), clock=server.clock))
    except (ValueError, LookupError) as e:  # LookupError: --runtime-config left out what a controller reads
        print(f"nanokube: {e}" if isinstance(e, ValueError) else f"nanokube: --runtime-config: the controllers read "
              f"what it turns off ({e.args[0]}); --controllers can leave theirs out", file=sys.stderr)
        if workers is not None:
            await workers.stop()
        await server.stop()
        return 2
    server.component_metrics.append(controllers.metrics.registry)
    await controllers.start()
    runtime = proxies = netpol = None
    if args.runtime == "process":
        from .node.runtime.netns import cluster_tag
        from .node.runtime.process import ProcessRuntime

        runtime = ProcessRuntime(os.path.join(data_dir, "runtime"), cluster_tag(data_dir))
    nodes = NodeManager(connect, cluster, server.clock, pods_dir=os.path.join(data_dir, "pods"),
                        runtime=runtime, client_limits=kubelet_limits, pod_pids_limit=args.kubelet_pod_max_pids,
                        **node_opts)
    server.handlers.sub.log_readers.append(nodes.read_log)
    server.handlers.streams.node_servers.append(nodes.streaming_for)
    server.handlers.proxies.kubelets.append(nodes.kubelet_for)
    # the runtime's cgroup trees and network namespaces outlive the process: closed on every way out
    try:
        if runtime is not None:
            from .proxy.runner import NodeProxies, proxy_configs

            agents = list(nodes.agents.values())
            pods_listen = runtime.start([(a.name, a.spec.index, a.host_ip, a.pod_cidr) for a in agents],
                                        api=(server.advertise, server.port))
            if pods_listen is not None:
                await server.listen_on(pods_listen)
            MetricsProvider.usage_sources = (runtime.usage,)
            from .node.runtime.netns import dialer

            await server.dial_services_from(dialer(runtime.net.cluster_ns, server.advertise if pods_listen else ""))
            proxies = NodeProxies(connect, [(a.name, a.host_ip, runtime.net.node_ns(a.spec.index)) for a in agents],
                                  mode_warnings, server.clock, configs={a.name: proxy_configs(a.pod_cidr) for a in agents})
            server.component_metrics.append(proxies.metrics)
            from .netpol.enforcer import AGENT_USER, NetworkPolicyEnforcer

            netpol = NetworkPolicyEnforcer(connect(AGENT_USER, "network-policy-agent"),
                                           [(a.name, runtime.net.node_ns(a.spec.index)) for a in agents], server.clock)
            log.info("process runtime: %d node namespaces; kube-proxy mode %s", len(agents), proxy_mode)
            runtime.cluster_dns, runtime.node_dns = (DNS_SERVER,), (NODE_RESOLVER,)
        # kubeadm's DNS addon: the kube-dns Service, and for the process runtime's pods the server, in the
        # cluster namespace, which kube-proxy sends kube-dns's ClusterIP to (simulated pods are answered by their node)
        cluster_dns = ClusterDNS(connect(DNS_USER, "coredns"), server.clock,
                                 *((runtime.net.cluster_ns, runtime.net.gateway) if runtime is not None else ()),
                                 node_address=NODE_RESOLVER if runtime is not None else "")
        await cluster_dns.start()
        await nodes.start()
        if proxies is not None:
            await proxies.start()
            await netpol.start()
        provisioner = LocalPathProvisioner(connect(PROVISIONER_USER, PROVISIONER), os.path.join(data_dir, "volumes"),
                                           server.clock)
        await provisioner.start()
        sched = sched_cfg or SchedulerConfig([])
        # kube-scheduler's clientsets (its own, its events', its lease's), each with its own clientConnection limit
        sched_client, sched_events, sched_lease = (
            limited(connect(SCHEDULER_USER, "default-scheduler"), sched.qps, sched.burst, server.clock) for _ in range(3))
        scheduler = ElectedScheduler(
            lambda metrics: Scheduler(sched_client, clock=server.clock, config=sched_cfg, metrics=metrics,
                                      event_client=sched_events),
            elector_for(sched_lease, sched.leader_election, _identity(data_dir), server.clock))
        server.component_metrics.append(scheduler.metrics.registry)
        if args.scheduler == "in-process":
            await scheduler.start()
        gcsettle.settle()
        print(f"nanokube API server listening on {server.url} (store: {args.store}, data: {data_dir})", flush=True)
        print(f"nanokube console: {server.url}/ui/ (sign in with a token; README: Web console)", flush=True)
        print(f"export KUBECONFIG={kubeconfig}", flush=True)

        stop = stop_on_signals()
        await stop.wait()
        log.info("shutting down")
        await scheduler.stop()
        if proxies is not None:
            await netpol.stop()
            await proxies.stop()
        await provisioner.stop()
        await nodes.stop()
        await cluster_dns.stop()
        await controllers.stop()
        if workers is not None:
            await workers.stop()
        await server.stop()
        if tracing is not None:
            tracing.shutdown()  # the spans not exported yet
        print("nanokube stopped", flush=True)
        return 0
    finally:
        if runtime is not None:
            MetricsProvider.usage_sources = ()
            runtime.close()


def _runtime_config(value: str):
    """--runtime-config's resource config; None (every version served) without one."""
    if not value:
        return None
    from .apiserver import runtime_config
    from .machinery import featuregates
    from .registry.base import all_resources

    if conflict := runtime_config.apf_conflict(value):
        raise ValueError(conflict)
    try:
        config = runtime_config.from_flag(value, all_resources())
    except ValueError as e:
        raise ValueError(f"--runtime-config: {e}") from None
    if problem := runtime_config.unserved_needs(config, featuregates.enabled):
        raise ValueError(f"--runtime-config: {problem}")
    return config


def _served_apis(value: str) -> str:
    from .apiserver.runtime_config import NANOKUBE_DEFAULT

    return f"1.37's GA-only default, then nanokube's {NANOKUBE_DEFAULT}" + (f", then {value}" if value else "")


def _given(args: argparse.Namespace, prefix: str, default: tuple[float, int]) -> tuple[float, int]:
    """The qps and burst flags of `prefix` (None where not given: the component's `default`)."""
    qps, burst = getattr(args, prefix + "qps"), getattr(args, prefix + "burst")
    return (default[0] if qps is None else qps), (default[1] if burst is None else burst)


def _identity(data_dir: str) -> str:
    """The in-process controller manager's and scheduler's lease identity,
    stable per data dir so that a restarted `up` takes its own leases back at once."""
    return f"{socket.gethostname()}_up-{hashlib.sha256(data_dir.encode()).hexdigest()[:10]}"


#: kubeadm's --controllers for kube-controller-manager: the default ones and the bootstrap token controllers
KUBEADM_CONTROLLERS = "*,bootstrapsigner,tokencleaner"

#: every process-runtime node is a network namespace with its own kube-proxy: a test-bench size
PROCESS_RUNTIME_MAX_NODES = 64


def _process_runtime_problem(nodes: int) -> str:
    """Why this host cannot run the process runtime for `nodes` nodes ("" when it can)."""
    if nodes > PROCESS_RUNTIME_MAX_NODES:
        return f"the cluster has {nodes} nodes; the process runtime runs at most {PROCESS_RUNTIME_MAX_NODES}"
    if not sys.platform.startswith("linux"):
        return "needs Linux"
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    missing = [b for b in ("ip", "nft") if not shutil.which(b)]
    return f"missing {', '.join(missing)} on PATH" if missing else ""


def _serving_ips(advertise: str, address: str) -> tuple[str, ...]:
    """The addresses the serving certificate names beyond the loopback and Service ones: the advertised
    one, and a listen address that is an IP of its own (not a wildcard), which the kubeconfig `up`
    writes dials (a second API server on 127.0.0.2 advertising another address)."""
    try:
        listen = () if ipaddress.ip_address(address).is_unspecified else (address,)
    except ValueError:  # a host name: the kubeconfig names it, the certificate cannot as an IP
        listen = ()
    return tuple(dict.fromkeys(a for a in (advertise, *listen) if a))


def _ip_address(value: str) -> str:
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        raise argparse.ArgumentTypeError(f"failed to parse IP: {value!r}") from None


def _https_url(value: str) -> str:
    """--service-account-jwks-uri as kube-apiserver validates it: a URL of the https scheme."""
    try:
        scheme = urllib.parse.urlsplit(value).scheme
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"service-account-jwks-uri must be a valid URL: {e}") from None
    if scheme != "https":
        raise argparse.ArgumentTypeError(f"service-account-jwks-uri requires https scheme, parsed as: {value}")
    return value


def _add_up_parser(sub) -> None:
    from .apiserver.audit_options import add_flags as audit_flags
    from .apiserver.auth_options import add_flags as auth_flags
    from .apiserver.encryption.options import add_flags as encryption_flags
    from .apiserver.kubelet_options import add_flags as kubelet_flags
    from .controllers.lb_pool import DEFAULT_POOL

    up = sub.add_parser("up", help="run the control plane in the foreground until SIGINT/SIGTERM")
    up.add_argument("--data-dir", default="./.nanokube",
                    help="state, PKI and kubeconfig (default ./.nanokube); a second API server on the same etcd "
                         "joins with a copy of the first's DIR/pki (its CA, service-account and front-proxy keys, "
                         "as kubeadm copies /etc/kubernetes/pki), its own --address/--advertise-address and "
                         "--cluster node names")
    up.add_argument("--port", type=int, default=6443, help="HTTPS port (default 6443; 0 picks a free one)")
    up.add_argument("--address", default="127.0.0.1", help="listen address (default 127.0.0.1)")
    up.add_argument("--advertise-address", default=None, type=_ip_address, metavar="IP",
                    help="the address the kubernetes Service's endpoints name (default: the listen address, or "
                         "for a wildcard or loopback one the host's default-route address, as kube-apiserver)")
    up.add_argument("--service-account-jwks-uri", default=None, type=_https_url, metavar="URL",
                    help="the jwks_uri of /.well-known/openid-configuration (default: https://ADVERTISE-ADDRESS:PORT"
                         "/openid/v1/jwks, as kube-apiserver)")
    up.add_argument("--kubeconfig", default=None,
                    help="where to write the admin kubeconfig, its user kubernetes-admin in kubeadm:cluster-admins "
                         "(default DIR/kubeconfig; DIR/super-admin.conf's is in system:masters, as kubeadm's)")
    up.add_argument("--store", default="sqlite", help="sqlite (default), memory, or etcd://HOST:PORT[,HOST:PORT...]")
    up.add_argument("--cluster", default=None, metavar="FILE",
                    help="simulated nodes to run (YAML node pools; default: two 8-GPU nodes)")
    up.add_argument("--runtime", choices=("simulated", "process"), default="simulated",
                    help="simulated containers (default), or processes in network namespaces with kube-proxy "
                         "per node (Linux, root)")
    up.add_argument("--proxy-mode", default=None, help="kube-proxy mode: nftables (iptables and ipvs are refused; "
                                                       "unset warns that the default is changing)")
    up.add_argument("--audit-log-path", default=None, metavar="FILE",
                    help="audit log of every write, one audit.k8s.io/v1 Event per line (default DIR/audit.log; "
                         "'' disables)")
    up.add_argument("--event-ttl", default="1h", metavar="DURATION",
                    help="how long an Event lives after its last write (Go duration, e.g. 90s, 5m; default 1h)")
    up.add_argument("--etcd-compaction-interval", default="5m", metavar="DURATION",
                    help="how often the API server compacts the store's history; 0 never does (Go duration; "
                         "default 5m, as kube-apiserver). A continue token or a list at an exact resourceVersion "
                         "older than the compacted revision is 410 Expired")
    up.add_argument("--min-request-timeout", type=int, default=1800, metavar="SECONDS",
                    help="a watch without timeoutSeconds is served a random time from this to twice this many "
                         "seconds, so that watches opened together end apart (default 1800, as kube-apiserver)")
    up.add_argument("--tracing-config-file", default=None, metavar="FILE",
                    help="kube-apiserver's TracingConfiguration (apiserver.config.k8s.io/v1: endpoint, an OTLP gRPC "
                         "collector, default localhost:4317; samplingRatePerMillion, default 0): spans of API "
                         "requests; without it, none")
    encryption_flags(up)
    up.add_argument("--audit-policy-file", default=None, metavar="FILE",
                    help="audit.k8s.io/v1 Policy (YAML or JSON): which requests, reads included, the audit log "
                         "records, at which level and stages (default: writes at Metadata)")
    audit_flags(up)
    auth_flags(up)
    kubelet_flags(up)
    up.add_argument("--scheduler-config", default=None, metavar="FILE",
                    help="KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) for the scheduler")
    up.add_argument("--scheduler", choices=("in-process", "none"), default="in-process",
                    help="in-process (default; it holds the kube-system/kube-scheduler Lease while it schedules), or "
                         "none (for external `nanokube scheduler` processes)")
    up.add_argument("--controllers", default=KUBEADM_CONTROLLERS,
                    help=f"controllers to run in-process: '*' (those on by default), NAME, -NAME, comma-separated; '' "
                         f"runs none (for an external `nanokube controller-manager`); default {KUBEADM_CONTROLLERS!r}, "
                         f"as kubeadm runs kube-controller-manager")
    up.add_argument("--load-balancer-pool", default=DEFAULT_POOL, metavar="CIDR",
                    help=f"IPv4 addresses for type LoadBalancer Services (default {DEFAULT_POOL})")
    from .apiserver.pki_options import add_flags as pki_flags
    from .controllers.csrsigning_options import add_flags as signing_flags

    pki_flags(up)
    signing_flags(up)  # kube-controller-manager's; unset: the CSR signer signs with DIR/pki's CA
    up.add_argument("--controller-manager-kube-api-qps", type=float, default=None, metavar="QPS",
                    help="kube-controller-manager's --kube-api-qps: requests a second each controller's client may "
                         "send (a token bucket of its own; watches are not limited; 0: client-go's 5, negative: no "
                         "limit; default 20)")
    up.add_argument("--controller-manager-kube-api-burst", type=int, default=None, metavar="N",
                    help="kube-controller-manager's --kube-api-burst: the requests each such client may send at once "
                         "before the qps holds (default 30)")
    up.add_argument("--kubelet-kube-api-qps", type=int, default=None, metavar="QPS",
                    help="the kubelet's --kube-api-qps: requests a second each node's agent may send (>= 0; 0: "
                         "client-go's 5); its Events and its heartbeat (Lease, Node status) are limited apart "
                         "(default 50)")
    up.add_argument("--kubelet-kube-api-burst", type=int, default=None, metavar="N",
                    help="the kubelet's --kube-api-burst: the requests each node's agent may send at once before the "
                         "qps holds (>= 0; 0: client-go's 10; default 100)")
    up.add_argument("--kubelet-event-qps", type=int, default=None, metavar="QPS",
                    help="the kubelet's --event-qps: Event creations a second of each node's agent (>= 0; 0: "
                         "client-go's 5; default 50)")
    up.add_argument("--kubelet-event-burst", type=int, default=None, metavar="N",
                    help="the kubelet's --event-burst: the Events each node's agent may create at once before the "
                         "event qps holds (>= 0; 0: client-go's 10; default 100)")
    up.add_argument("--kubelet-pod-max-pids", type=int, default=-1, metavar="N",
                    help="the kubelet's --pod-max-pids (podPidsLimit): the most processes each pod of the process "
                         "runtime may have, its cgroup's pids.max (-1, the default, or 0: no limit of the pod's own)")
    up.add_argument("--metrics-provider", default="builtin", metavar="builtin|prometheus=URL",
                    help="where custom and external metrics come from: the built-in store (default) or a Prometheus "
                         "server, whose answers take precedence for the metrics its rules cover")
    up.add_argument("--metrics-rules", default=None, metavar="FILE",
                    help="prometheus-adapter style rules (rules, externalRules) mapping metrics to PromQL "
                         "(default: an external metric is the Prometheus series of the same name)")
    up.add_argument("--api-workers", type=int, default=1, metavar="N",
                    help="API server processes serving the port and the store (default 1; more need sqlite or etcd): "
                         "the first also runs everything else")
    up.add_argument("--disable-admission-plugins", default="", metavar="NAMES",
                    help="admission plugins to turn off, comma-separated, as kube-apiserver's flag; ServiceAccount "
                         "(without the serviceaccount controller, --controllers '', it refuses a pod until its "
                         "namespace's account exists), PodSecurity and TaintNodesByCondition (without the "
                         "node-lifecycle controller nothing takes its not-ready taint off a new node) are the "
                         "ones that can be")
    up.add_argument("--admission-control-config-file", default=None, metavar="FILE",
                    help="kube-apiserver's AdmissionConfiguration (apiserver.config.k8s.io/v1): PodSecurity's "
                         "PodSecurityConfiguration (defaults, exemptions) is the configuration nanokube reads")
    up.add_argument("--feature-gates", default="", metavar="Name=true,...",
                    help="feature gates to set, as Name=bool pairs, for every component: on top of 1.37's defaults "
                         "with the alpha gates of the features nanokube implements turned on (printed at start)")
    up.add_argument("--runtime-config", default="", metavar="KEY=bool,...",
                    help="kube-apiserver's --runtime-config (api/all, api/ga, api/beta, api/alpha, group/version, "
                         "group/version/resource): on top of nanokube's api/all=true, which serves every version "
                         "it implements")
    up.set_defaults(flag_parser=up)  # for /flagz (zpages.flags)


def _raise_open_files() -> None:
    """The soft limit on open files raised to the hard one, as Go's runtime raises it for every
    program (kube-apiserver's included): at a shell's usual 1024, 1,100 connections that sent nothing
    made the API server refuse every other client (accept failing with EMFILE, logged with a traceback
    each time: 20,000 in 15 s), where Go's would take them up to the hard limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def main(argv: list[str] | None = None) -> int:
    _raise_open_files()
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(prog="nanokube", description="Kubernetes 1.37's control plane for AI clusters.")
    names = ["up", *COMMANDS]
    # Only the named command's parser, so only its module is imported: each imports the components
    # its command runs (together ~1 CPU-s, paid by every command, and twice by `simulate`, which
    # re-executes itself); help, a missing or an unknown command build them all. The usage line
    # names every command either way.
    wanted = argv[0] if argv and argv[0] in names else None
    sub = p.add_subparsers(dest="command", required=True,
                           metavar="{" + ",".join(names) + "}" if wanted else None)
    if wanted in (None, "up"):
        _add_up_parser(sub)
    modules = {name: importlib.import_module(f".{module}", __package__)
               for name, module in COMMANDS.items() if wanted in (None, name)}
    for module in modules.values():
        module.add_parser(sub)
    for name in LOGGED:
        if name in sub.choices:
            logs.add_arguments(sub.choices[name])
    args = p.parse_args(argv)
    try:
        logs.validate(args)
    except ValueError as e:
        print(f"nanokube {args.command}: {e}", file=sys.stderr)
        return 2
    logs.configure(args)
    if args.command == "up":
        import uvloop

        # uvloop's event loop and TLS transport (libuv, Cython) instead of asyncio's selector loop and
        # pure-Python SSL protocol: every request of every client crosses them (issue 16)
        try:
            return uvloop.run(_up(args))
        finally:
            gcsettle.cancel()
    return modules[args.command].run(args)


if __name__ == "__main__":
    sys.exit(main())
