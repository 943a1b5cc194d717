"""kube-proxy for each node of a process-runtime cluster: one Proxier per
node, its `ip` and `ip6` tables written inside the node's network namespace
(removing the namespace on shutdown removes both), and the proxy-mode
warnings (modes.py) recorded as Warning Events on every Node.

Health and metrics are where a user of a real cluster looks for them:
each node's proxier serves `/healthz` and `/livez` on 0.0.0.0:10256 and
`/metrics` on 127.0.0.1:10249 inside that node's namespace (upstream's
default addresses, one kube-proxy per node, so names never collide), e.g.
`ip netns exec NODE-NS curl NODE-IP:10256/healthz` or from any pod, and
each LoadBalancer Service with `externalTrafficPolicy: Local` on
[::]:`healthCheckNodePort` (IPv4 too) there (200 with local endpoints, else 503). From the
host, `metrics` (a `NodeLabelledMetrics`) adds every proxier's kubeproxy_*
families to the API server's `/metrics`, one family per name with a `node`
label.

NodePorts answer on each node's IP only (nodePortAddresses `primary`, upstream's nftables-mode
default), not on the node's other addresses (its pods' gateway among them).
"""

from __future__ import annotations

import errno
import logging
import socket
from collections.abc import Mapping, Sequence
from dataclasses import replace

from ..client.ratelimit import limited
from ..machinery.user import User
from ..clock import REAL, Clock
from ..node.runtime.netns import open_in_netns
from .aggregate import NodeLabelledMetrics
from .config import ProxyConfig
from .events import ACTION_START
from .nftables.layout import Config
from .nodeport_addresses import PRIMARY, of_family, resolve
from .proxier import DUAL_STACK, Proxier
from .server import Servers, health_app, metrics_app, split_address

log = logging.getLogger(__name__)

PROXY_USER = User("system:kube-proxy", ("system:node-proxier", "system:authenticated"))
MODE_EVENT_REASON = "ProxyModeWarning"
#: the API server's default service CIDR (registry/core_services.py): unallocated ClusterIPs in it are dropped
SERVICE_CIDR = "10.96.0.0/12"
HEALTHZ_ADDRESS = "0.0.0.0:10256"
METRICS_ADDRESS = "127.0.0.1:10249"


def proxy_configs(pod_cidr: str = "") -> tuple[Config, Config]:
    """The `ip` and `ip6` tables' settings for this API server: it allocates
    ClusterIPs from one IPv4 range and has none for IPv6, so the ip6 table
    keeps its base chains and maps with no Services and drops no range.
    `pod_cidr`: the node's podCIDR, which tells its pods' traffic from the rest
    (upstream's --detect-local-mode NodeCIDR): ClusterIP traffic from outside it
    is masqueraded, a pod's keeps its address, and only this node's pods take a
    NodePort with externalTrafficPolicy Local to any endpoint. The network has
    no CNI masquerading pods' traffic to node addresses, so a pod elsewhere
    reaching this node's NodePort must take a local endpoint, or the answer
    would skip this node's conntrack (upstream's ClusterCIDR mode sends it to
    any). Empty: no local detector, only hairpin traffic is masqueraded."""
    return Config(service_cidrs=(SERVICE_CIDR,), cluster_cidr=pod_cidr), Config(family="ip6")


def listen_in_netns(netns: str | None, address: str) -> socket.socket:
    """A listening-ready TCP socket bound to `address` inside `netns` (None: the current namespace)."""
    sock = open_in_netns(netns) if netns else socket.socket()
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(split_address(address))
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


def listen_any_in_netns(netns: str | None, port: int) -> socket.socket:
    """A listening-ready TCP socket on `port` of every address of both families inside `netns`, as
    Go's net.Listen("tcp", "0.0.0.0:port") binds one: an IPv6 socket on "::" that takes IPv4 too
    (IPV6_V6ONLY off); on IPv4 alone where the namespace has no IPv6."""
    try:
        sock = open_in_netns(netns, socket.AF_INET6) if netns else socket.socket(socket.AF_INET6)
    except OSError:
        return listen_in_netns(netns, f"0.0.0.0:{port}")
    try:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("::", port))
        sock.setblocking(False)
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRNOTAVAIL:  # IPv6 switched off in the namespace
            return listen_in_netns(netns, f"0.0.0.0:{port}")
        raise
    return sock


def health_check_listener(netns: str | None):
    """Binds a Service's health check port on every address of the node, both families, as
    upstream's default (empty) nodePortAddresses does (its service health server listens on
    0.0.0.0, which Go binds dual-stack)."""
    return lambda port: listen_any_in_netns(netns, port)


def primary_nodeports(configs: Sequence[Config], node_ip: str) -> tuple[Config, ...]:
    """The tables' settings with nodePortAddresses `primary`, the nftables mode's default: NodePorts
    answer on the node's IP in its family's table, on every local address in the other's (and in
    both when the node's IP is unknown)."""
    cidrs = resolve((PRIMARY,), [node_ip] if node_ip else [])
    return tuple(replace(c, nodeport_cidrs=of_family(c.family, cidrs)) for c in configs)


class NodeProxies:
    def __init__(self, connect, nodes: list[tuple[str, str, str]], warnings: list[str], clock: Clock = REAL, *,
                 configs: Sequence[Config] | Mapping[str, Sequence[Config]] = DUAL_STACK, min_sync_period: float = 1.0,
                 mode: str = "nftables"):
        """`connect(user, field_manager)` gives the client (the loopback client in `up`);
        `nodes`: (node name, node IP, network namespace) of each node; `configs`: every node's
        tables' settings, or each node's by name (proxy_configs of its podCIDR)."""
        self.client = connect(PROXY_USER, "kube-proxy")
        self.clock = clock
        self.warnings = warnings
        self.mode = mode
        self.netns = {name: netns for name, _, netns in nodes}
        # each node's kube-proxy a clientset of its own, at clientConnection's default limit (5/s, bursts of 10)
        self.proxiers = [Proxier(limited(self.client, ProxyConfig.qps, ProxyConfig.burst, clock), name, node_ip,
                                 netns=netns, clock=clock,
                                 configs=primary_nodeports(configs[name] if isinstance(configs, Mapping) else configs,
                                                           node_ip),
                                 min_sync_period=min_sync_period, health_check_listen=health_check_listener(netns))
                         for name, node_ip, netns in nodes]
        self.metrics = NodeLabelledMetrics({p.node_name: p.registry for p in self.proxiers})
        self.servers = Servers()

    async def start(self) -> None:
        for p in self.proxiers:
            await p.start()
            netns = self.netns[p.node_name]
            await self.servers.serve(health_app(p.health), listen_in_netns(netns, HEALTHZ_ADDRESS))
            await self.servers.serve(metrics_app(p.registry, self.mode), listen_in_netns(netns, METRICS_ADDRESS))
            p.node_event("Normal", "Starting", ACTION_START, "")  # upstream's birthCry
            for w in self.warnings:
                p.node_event("Warning", MODE_EVENT_REASON, ACTION_START, w)
        log.info("kube-proxy (%s) running for %d nodes; healthz on %s and metrics on %s in each node's namespace",
                 self.mode, len(self.proxiers), HEALTHZ_ADDRESS, METRICS_ADDRESS)

    async def stop(self) -> None:
        await self.servers.stop()
        for p in self.proxiers:
            await p.stop()
