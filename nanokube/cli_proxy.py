"""`nanokube proxy`: kube-proxy in its own process, over HTTPS with a
kubeconfig, for one node. Its nftables rules go into `--netns` (a node's
network namespace) or the namespace it runs in; its healthz and metrics
servers listen in the namespace it runs in, on upstream's default addresses.
As upstream's kube-proxy, it leaves its rules in place on exit (traffic
keeps flowing while it restarts); `--cleanup` removes them, and any an
iptables- or ipvs-mode kube-proxy left, and exits; starting, it removes those
(proxy/nftables/leftovers.py). Its
rules are the `ip` and `ip6` `kube-proxy` tables, one per IP family. Local
traffic is told from the rest as upstream's --detect-local-mode says
(proxy/detect_local.py); --masquerade-all masquerades every ClusterIP
connection.

The node's IPs come from its Node (the one --hostname-override names, else the host's name):
its InternalIP, else ExternalIP, of each family, waited for up to 30 s as kube-proxy waits, a
non-0.0.0.0 --bind-address winning for its family (proxy/node_ips.py); other IPs on the Node
later exit the proxy (1), to be restarted with them. NodePorts answer on the node's IP of each
family (nodePortAddresses `primary`, the nftables mode's default) or on the node's addresses in
--nodeport-addresses' CIDRs (proxy/nodeport_addresses.py).

`--config FILE` reads a KubeProxyConfiguration (kubeproxy.config.k8s.io/v1alpha1,
proxy/config.py) instead: as kube-proxy, the file is then the whole
configuration and the flags that map into it are ignored (a warning names
those given), except --hostname-override, which wins over the file's
hostnameOverride; the file's clientConnection.kubeconfig, when set, wins over
--kubeconfig. A change to the file exits the proxy (1), as kube-proxy's watch of
it does, for its supervisor to start it again with it. `--write-config-to FILE` writes the configuration the flags (or
--config) make, defaulted as v1alpha1, and exits."""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import logging
import os
import socket
import sys
from collections.abc import Sequence
from dataclasses import replace

from . import component_cli, zpages
from .client import kubeconfig
from .machinery import featuregates, goduration
from .clock import REAL
from .client.http import HTTPClient
from .client.informer import Informer
from .client.ratelimit import limited, rest_limit
from .proxy import config as proxy_config
from .proxy.detect_local import CLUSTER_CIDR, NODE_CIDR, DetectLocal
from .proxy import node_ips, nodeport_addresses
from .proxy.events import ACTION_START
from .proxy.modes import select_mode
from .proxy.nftables import leftovers
from .proxy.nftables.layout import TABLE, Config
from .proxy.nftables.nft import Nft, NftError
from .proxy.proxier import IP_FAMILIES, Proxier
from .proxy.runner import HEALTHZ_ADDRESS, METRICS_ADDRESS, MODE_EVENT_REASON, health_check_listener, proxy_configs
from .proxy.config import ConfigError, ProxyConfig
from .proxy.server import Servers, health_app, metrics_app, split_address

log = logging.getLogger("nanokube.proxy")

#: how long NodeCIDR mode waits for the Node's podCIDRs (upstream's timeoutForNodePodCIDR)
POD_CIDR_TIMEOUT = 300.0
#: how long the proxy waits for its Node to have addresses before going on without (upstream's node manager)
NODE_IPS_TIMEOUT = 30.0
#: how often --config's file is looked at (kube-proxy watches it with fsnotify)
CONFIG_POLL = 1.0
CONFIG_UPDATED = "content of the proxy server's configuration file was updated"


def address(text: str) -> str:
    if text:
        try:
            split_address(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    return text


def add_parser(sub) -> None:
    p = sub.add_parser("proxy", help="run kube-proxy (nftables) for one node against a running API server")
    kubeconfig.add_arguments(p)
    p.add_argument("--config", default=None, metavar="FILE",
                   help="a KubeProxyConfiguration (kubeproxy.config.k8s.io/v1alpha1); the flags marked so are "
                        "then ignored")
    p.add_argument("--write-config-to", default=None, metavar="FILE",
                   help="write the configuration (the flags' or --config's, defaulted) to this file and exit")
    p.add_argument("--hostname-override", default=None, metavar="NODE",
                   help="the Node this proxy serves (default: the host name); wins over the file's")
    ignored = " Ignored with --config."
    p.add_argument("--proxy-mode", default=None,
                   help="nftables (iptables and ipvs are refused; unset warns that the default is changing)." + ignored)
    p.add_argument("--netns", default=None, metavar="NAME",
                   help="program nftables in this network namespace (default: the current one)")
    p.add_argument("--bind-address", default=None, metavar="IP",
                   help="the node's primary IP, over its Node's address of that family, when not 0.0.0.0 "
                        "(default 0.0.0.0)." + ignored)
    p.add_argument("--healthz-bind-address", type=address, default=None, metavar="HOST:PORT",
                   help=f"/healthz and /livez (default {HEALTHZ_ADDRESS}; '' disables)." + ignored)
    p.add_argument("--metrics-bind-address", type=address, default=None, metavar="HOST:PORT",
                   help=f"/metrics (default {METRICS_ADDRESS}; '' disables)." + ignored)
    p.add_argument("--sync-period", type=goduration.flag_value, default=None, metavar="DURATION",
                   help="longest time between syncs; health fails after twice this (default 30s)." + ignored)
    p.add_argument("--min-sync-period", type=goduration.flag_value, default=None, metavar="DURATION",
                   help="shortest time between syncs, batching changes (default 1s)." + ignored)
    p.add_argument("--nodeport-addresses", default=None, metavar="CIDR[,CIDR...]|primary",
                   help="the node addresses NodePorts answer on: those in these CIDRs, or 'primary' (the default): "
                        "the node's IP of each family." + ignored)
    p.add_argument("--detect-local-mode", default=None, metavar="MODE",
                   help="how local (pod) traffic is told from the rest: ClusterCIDR (default), NodeCIDR (the "
                        "Node's podCIDRs), BridgeInterface or InterfaceNamePrefix." + ignored)
    p.add_argument("--cluster-cidr", default=None, metavar="CIDR[,CIDR]",
                   help="the pods' CIDR (or a dual-stack pair): local traffic with --detect-local-mode ClusterCIDR."
                        + ignored)
    p.add_argument("--pod-bridge-interface", default=None, metavar="NAME",
                   help="the pods' bridge: local traffic with --detect-local-mode BridgeInterface." + ignored)
    p.add_argument("--pod-interface-name-prefix", default=None, metavar="PREFIX",
                   help="the pods' interfaces' name prefix: local traffic with --detect-local-mode "
                        "InterfaceNamePrefix." + ignored)
    p.add_argument("--feature-gates", default=None, metavar="Name=true,...",
                   help="feature gates to set, as Name=bool pairs (featureGates), on top of nanokube's defaults."
                        + ignored)
    p.add_argument("--masquerade-all", action="store_const", const=True, default=None,
                   help="masquerade (SNAT) all traffic sent to Service ClusterIPs." + ignored)
    p.add_argument("--kube-api-qps", type=float, default=None, metavar="QPS",
                   help="requests a second to the API server, a token bucket's (watches are not limited; 0: "
                        "client-go's 5, negative: no limit; default 5)." + ignored)
    p.add_argument("--kube-api-burst", type=int, default=None, metavar="N",
                   help="the requests sent at once before --kube-api-qps holds (default 10)." + ignored)
    p.add_argument("--cleanup", action="store_true", help="remove kube-proxy's nftables tables (ip and ip6) and exit")
    zpages.register(p)


#: the flags that map into a KubeProxyConfiguration, by their argparse names: ignored with --config
CONFIG_FLAGS = ("proxy_mode", "bind_address", "healthz_bind_address", "metrics_bind_address", "sync_period",
                "min_sync_period", "nodeport_addresses", "detect_local_mode", "cluster_cidr", "pod_bridge_interface",
                "pod_interface_name_prefix", "masquerade_all", "kube_api_qps", "kube_api_burst", "feature_gates")


def _from_flags(args: argparse.Namespace) -> ProxyConfig:
    """The configuration the flags make, each unset one at its default."""
    def given(name: str, default):
        value = getattr(args, name)
        return default if value is None else value
    d = ProxyConfig()
    local = DetectLocal(given("detect_local_mode", "") or CLUSTER_CIDR,
                        tuple(args.cluster_cidr.split(",")) if args.cluster_cidr else (),
                        given("pod_bridge_interface", ""), given("pod_interface_name_prefix", ""))
    return ProxyConfig(mode=given("proxy_mode", ""), bind_address=given("bind_address", d.bind_address),
                       healthz_bind_address=given("healthz_bind_address", d.healthz_bind_address),
                       metrics_bind_address=given("metrics_bind_address", d.metrics_bind_address),
                       sync_period=goduration.parse(args.sync_period) if args.sync_period else d.sync_period,
                       min_sync_period=goduration.parse(args.min_sync_period) if args.min_sync_period
                       else d.min_sync_period,
                       masquerade_all=given("masquerade_all", False), detect_local=local,
                       nodeport_addresses=tuple(a.strip() for a in args.nodeport_addresses.split(",") if a.strip())
                       if args.nodeport_addresses else (),
                       qps=given("kube_api_qps", d.qps), burst=given("kube_api_burst", d.burst),
                       feature_gates=tuple(sorted(_gates(args.feature_gates).items())))


def _gates(value: str | None) -> dict[str, bool]:
    """--feature-gates as its flag parses it (names are judged once complete)."""
    try:
        return featuregates.parse(value or "")
    except ValueError as e:
        raise ValueError(f'invalid argument "{value}" for "--feature-gates" flag: {e}') from None


def configuration(args: argparse.Namespace) -> ProxyConfig:
    """kube-proxy's Complete and Validate: the file (--config) or the flags, then
    --hostname-override; ValueError in its words ('failed complete: ...', 'failed validate: ...',
    several errors read as utilerrors' aggregate, '[a, b]')."""
    if args.config:
        try:
            cfg = proxy_config.load(args.config)
        except ConfigError as e:
            raise ValueError(f"failed complete: {e}") from None
        if given := [f"--{name.replace('_', '-')}" for name in CONFIG_FLAGS if getattr(args, name) is not None]:
            log.warning("flags ignored as --config is given (the file's settings are used): %s", ", ".join(given))
    else:
        cfg = _from_flags(args)
    if args.hostname_override is not None:
        if not args.hostname_override.strip():
            raise ValueError("failed complete: empty hostname-override is invalid")
        cfg = replace(cfg, hostname_override=args.hostname_override.strip().lower())
    try:  # Complete's last step: the configuration's featureGates set on the process's gates
        for text in featuregates.GATES.set_from_map(dict(cfg.feature_gates)):
            log.warning("%s", text)
    except ValueError as e:
        raise ValueError(f"failed complete: {e}") from None
    errs = [str(e) for e in cfg.validate()]
    if errs:
        raise ValueError("failed validate: " + (errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]"))
    rest_limit(cfg.qps, cfg.burst)  # a qps without a burst: client-go's refusal, before connecting
    return cfg


def node_name(cfg: ProxyConfig) -> str:
    """nodeutil.GetHostname: the override, else the host's name, lowercased."""
    return (cfg.hostname_override or socket.gethostname()).strip().lower()


async def _node_seen(nodes: Informer, ready, timeout: float, stop: asyncio.Event) -> bool | None:
    """Whether the Node came to satisfy `ready` (and is not being deleted) within `timeout`; None
    when the proxy is stopped first."""
    seen = asyncio.Event()

    def check(obj: dict) -> None:
        if ready(obj) and not obj["metadata"].get("deletionTimestamp"):
            seen.set()
    nodes.add_handlers(check, lambda old, new: check(new))
    waits = [asyncio.create_task(seen.wait()), asyncio.create_task(stop.wait())]
    try:
        await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()
    return None if stop.is_set() else seen.is_set()


async def _node_ips(nodes: Informer, node: str, stop: asyncio.Event) -> list[str] | None:
    """The Node's host IPs (node_ips.host_ips), waited for up to NODE_IPS_TIMEOUT as upstream's
    node manager waits; none once that passed (kube-proxy goes on without); None when stopped."""
    seen = await _node_seen(nodes, lambda obj: bool(node_ips.host_ips(obj)), NODE_IPS_TIMEOUT, stop)
    if seen is None:
        return None
    if not seen:
        log.error("Timed out waiting for node to %s: node %s",
                  "be assigned IPs" if nodes.get(node) is not None else "exist", node)
        return []
    ips = node_ips.host_ips(nodes.get(node))
    log.info("Successfully retrieved NodeIPs: NodeIPs %s", ips)
    return ips


async def _pod_cidrs(nodes: Informer, node: str, timeout: float, stop: asyncio.Event) -> list[str] | None:
    """The Node's spec.podCIDRs once it has them (upstream's waitForPodCIDR, for NodeCIDR); None
    when the proxy is stopped first."""
    log.info("watching for node %s, awaiting podCIDR allocation", node)
    seen = await _node_seen(nodes, lambda obj: bool((obj.get("spec") or {}).get("podCIDRs")), timeout, stop)
    if seen is None:
        return None
    if not seen:
        raise TimeoutError(f"timeout waiting for PodCIDR allocation to configure detect-local-mode {NODE_CIDR}: "
                           "timed out waiting for the condition")
    return nodes.get(node)["spec"]["podCIDRs"]


def _restart_on_new_node_ips(nodes: Informer, ips: list[str], restart) -> None:
    """upstream's node manager: the rules were written for the IPs the Node had when the proxy
    started, so other ones exit it, to be restarted with them; so does the Node's deletion, in
    every mode (OnNodeDelete)."""
    def check(obj: dict) -> None:
        now = node_ips.host_ips(obj)
        if now != ips:
            log.info("NodeIPs changed for the node: node %s, newNodeIPs %s, oldNodeIPs %s", obj["metadata"]["name"],
                     now, ips)
            restart()

    def deleted(gone: dict) -> None:
        log.info("Node is being deleted: node %s", gone["metadata"]["name"])
        restart()
    nodes.add_handlers(check, lambda old, new: check(new), deleted)


def _restart_on_new_pod_cidrs(nodes: Informer, pod_cidrs: list[str], restart) -> None:
    """upstream's node manager with watchPodCIDRs: NodeCIDR mode's rules hold the podCIDRs the
    proxy started with, so other ones exit it, to be restarted with them. The API lets a Node's
    podCIDRs change only by its recreation, whose deletion exits first; this catches a watch that
    missed the deletion and relisted the new Node."""
    def check(obj: dict) -> None:
        now = (obj.get("spec") or {}).get("podCIDRs") or []
        if now != pod_cidrs:
            log.info("PodCIDRs changed for the node: node %s, newPodCIDRs %s, oldPodCIDRs %s", obj["metadata"]["name"],
                     now, pod_cidrs)
            restart()
    nodes.add_handlers(check, lambda old, new: check(new))


def _with_nodeports(cfg: ProxyConfig, configs: Sequence[Config], primary: str, ips: dict[str, str],
                    node: dict | None) -> list[Config]:
    """The tables' settings with nodePortAddresses resolved for the node's IPs (`primary` to
    them), complaining as upstream's checkBadConfig where a family's NodePorts stay open on every
    local address."""
    nodeports = nodeport_addresses.resolve(cfg.nodeport_addresses, node_ips.known(ips))
    pod_cidrs = ((node or {}).get("spec") or {}).get("podCIDRs") or []
    dual_stack = any(len({":" in c for c in cidrs}) == 2
                     for cidrs in (cfg.detect_local.cluster_cidrs, nodeports, pod_cidrs))
    if warning := nodeport_addresses.config_warning(nodeports, primary, dual_stack):
        log.error("Kube-proxy configuration may be incomplete or incorrect: %s", warning)
    return [replace(c, nodeport_cidrs=nodeport_addresses.of_family(c.family, nodeports)) for c in configs]


def _cleanup(netns: str | None) -> int:
    """Every mode's rules, as kube-proxy's --cleanup: our tables and what an iptables or ipvs mode left."""
    try:
        Nft(netns).apply("".join(f"add table {f} {TABLE}\ndelete table {f} {TABLE}\n" for f in IP_FAMILIES))
        chains = leftovers.remove(netns)
    except NftError as e:
        print(f"nanokube proxy: cleanup failed: {e}", file=sys.stderr)
        return 1
    log.info("removed tables %s%s", ", ".join(f"{f} {TABLE}" for f in IP_FAMILIES), f" in {netns}" if netns else "")
    if chains:
        log.info("removed %d chains of an iptables- or ipvs-mode kube-proxy", chains)
    return 0


async def _remove_other_modes(netns: str | None) -> None:
    """Switching to nftables: the iptables and ipvs modes' rules go first (upstream's platformCleanup),
    a failure logged and the proxy started all the same, as upstream."""
    try:
        chains = await asyncio.to_thread(leftovers.remove, netns)
    except NftError as e:
        log.error("Failed to clean up the rules of other proxy modes: %s", e)
        return
    if chains:
        log.info("removed %d chains an iptables- or ipvs-mode kube-proxy left", chains)


def _file_state(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


async def _watch_config(path: str, updated) -> None:
    """kube-proxy's watch of its --config file: a write to it (or a file renamed over it) ends the
    proxy with CONFIG_UPDATED; the file removed is let be."""
    was = _file_state(path)
    while True:
        await REAL.sleep(CONFIG_POLL)
        now = _file_state(path)
        if now is not None and now != was:
            log.error("Error running ProxyServer: %s", CONFIG_UPDATED)
            updated()
            return


async def _run(args: argparse.Namespace, cfg: ProxyConfig, mode: str, warnings: list[str]) -> int:
    node, local = node_name(cfg), cfg.detect_local
    http = HTTPClient.from_kubeconfig(cfg.kubeconfig or args.kubeconfig, args.context, field_manager="kube-proxy",
                                      user_agent="nanokube-proxy")
    await http.start()
    # kube-proxy's one clientset (its informers' lists and its events) behind clientConnection.qps/burst
    client = limited(http, *rest_limit(cfg.qps, cfg.burst), http.clock)
    nodes = Informer(client.resource("", "v1", "nodes"), field_selector=f"metadata.name={node}")
    servers = Servers()
    stop = component_cli.stop_on_signals()
    node_task = asyncio.create_task(nodes.run())
    proxier = None
    exit_code = 0

    def restart() -> None:
        nonlocal exit_code
        exit_code = 1
        stop.set()
    watch = asyncio.create_task(_watch_config(args.config, restart)) if args.config else None
    try:
        raw_ips = await _node_ips(nodes, node, stop)
        if raw_ips is None:
            return exit_code
        primary, ips = node_ips.detect(raw_ips, cfg.bind_address)
        if ipaddress.ip_address(ips[primary]).is_loopback:
            log.info("Can't determine this node's IP, assuming loopback; if this is incorrect, please set the "
                     "--bind-address flag")
        _restart_on_new_node_ips(nodes, raw_ips, restart)
        pod_cidrs: list[str] | None = []
        if local.mode == NODE_CIDR:
            pod_cidrs = await _pod_cidrs(nodes, node, POD_CIDR_TIMEOUT, stop)
            if pod_cidrs is None:
                return exit_code
            _restart_on_new_pod_cidrs(nodes, pod_cidrs, restart)
        configs = _with_nodeports(cfg, local.configs(proxy_configs(), pod_cidrs, cfg.masquerade_all), primary, ips,
                                  nodes.get(node))
        proxier = Proxier(client, node, node_ips.known(ips), netns=args.netns, configs=configs,
                          min_sync_period=cfg.min_sync_period, sync_period=cfg.sync_period,
                          health_check_listen=health_check_listener(args.netns))
        nodes.add_handlers(proxier.health.sync_node, lambda old, new: proxier.health.sync_node(new),
                           lambda gone: proxier.health.sync_node(None))
        await servers.serve(health_app(proxier.health), cfg.healthz_bind_address)
        metrics = metrics_app(proxier.registry, mode)
        zpages.install(metrics, "kube-proxy", zpages.flags(args))  # (kube-proxy's z-pages are on its metrics server)
        await servers.serve(metrics, cfg.metrics_bind_address)
        await _remove_other_modes(args.netns)
        await proxier.start()
        proxier.node_event("Normal", "Starting", ACTION_START, "")  # upstream's birthCry
        for w in warnings:
            proxier.node_event("Warning", MODE_EVENT_REASON, ACTION_START, w)
        log.info("kube-proxy (%s) for node %s running%s; healthz %s, metrics %s", mode, node,
                 f" in network namespace {args.netns}" if args.netns else "", cfg.healthz_bind_address or "off",
                 cfg.metrics_bind_address or "off")
        await stop.wait()
    finally:
        for t in (node_task, watch):
            if t is not None:
                t.cancel()
                await asyncio.gather(t, return_exceptions=True)
        await servers.stop()
        if proxier:
            await proxier.stop()
        await http.close()
    log.info("kube-proxy stopped; its nftables rules stay in place (--cleanup removes them)")
    return exit_code


def _write_config(cfg: ProxyConfig, path: str) -> int:
    try:
        with open(path, "w") as f:
            f.write(proxy_config.dump(cfg))
    except OSError as e:
        print(f"nanokube proxy: {e}", file=sys.stderr)
        return 1
    log.info("Wrote configuration file=%s", path)
    return 0


def run(args: argparse.Namespace) -> int:
    try:
        cfg = configuration(args)
        mode, warnings = select_mode(cfg.mode)
    except ValueError as e:  # ModeError included
        print(f"nanokube proxy: {e}", file=sys.stderr)
        return 2
    if mode == "nftables" and not cfg.nodeport_addresses:  # upstream's platformApplyDefaults
        cfg = replace(cfg, nodeport_addresses=(nodeport_addresses.PRIMARY,))
    if args.write_config_to:  # the mode as it runs: unset is nftables, nanokube's one
        return _write_config(replace(cfg, mode=mode), args.write_config_to)
    if args.cleanup:
        return _cleanup(args.netns)
    return component_cli.run("proxy", lambda: component_cli.run_loop(_run(args, cfg, mode, warnings)), unreachable="")
