"""Network namespaces for the process runtime.

Everything lives outside the host's namespace: a "cluster" namespace holds
the bridge every node plugs into (its address is the nodes' default
gateway), each node is a namespace with its node IP on that bridge and a
route to every other node's podCIDR, and each pod is a namespace whose
`eth0` is one end of a veth pair; the other end sits in the node namespace.
Pods are routed, not bridged (a /32 route per pod and proxy ARP on the node
side, as Calico does), so every pod packet crosses the node's IP stack and
kube-proxy's nftables rules, hairpin traffic included.

The host itself is outside every namespace, and the API server may listen on
loopback only: the cluster namespace holds the address the server advertises
(the `kubernetes` Service's endpoint, which kube-proxy sends the ClusterIP
to), and the server listens there too (listen_in_netns: a socket keeps the
namespace it was made in), so an in-cluster client verifies the server and
authenticates itself as it would in a real cluster, and the server sees the
address a connection comes from (a pod's, or its node's where kube-proxy
masquerades), as kube-apiserver does. The server dials pods from that
namespace as well (dialer).

All names share one prefix per cluster, so removing a run's leftovers after
a crash is one pass over `ip netns list`.
"""

from __future__ import annotations

import ctypes
import hashlib
import ipaddress
import os
import signal
import socket
import subprocess
import threading

PREFIX = "nkr-"
BRIDGE = "nkbr0"
GATEWAY = "172.18.0.1/16"
POD_GATEWAY = "169.254.1.1"
#: the links between the host and a node routed from it (route_from_host): shared address space
HOST_LINKS = "100.64.0.0/10"
_CLONE_NEWNET = 0x40000000


class NetnsError(RuntimeError):
    """An `ip` command failed."""


def ip(*args: str, netns: str | None = None, check: bool = True) -> str:
    argv = ["ip", *(["-n", netns] if netns else []), *args]
    p = subprocess.run(argv, capture_output=True, text=True, check=False)
    if check and p.returncode != 0:
        raise NetnsError(f"{' '.join(argv)}: {p.stderr.strip()}")
    return p.stdout


def sysctl(netns: str, key: str, value: str) -> None:
    subprocess.run(["ip", "netns", "exec", netns, "sysctl", "-qw", f"{key}={value}"], check=True,
                   capture_output=True)


def cluster_tag(data_dir: str) -> str:
    """A short tag naming one cluster's namespaces: the same data dir, the same names."""
    return hashlib.sha256(os.path.abspath(data_dir).encode()).hexdigest()[:6]


def list_netns() -> list[str]:
    return [line.split()[0] for line in ip("netns", "list").splitlines() if line.strip()]


def kill_netns(name: str) -> None:
    """SIGKILL every process in the namespace, then delete it."""
    pids = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True, check=False).stdout
    for pid in pids.split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
    ip("netns", "del", name, check=False)


def open_in_netns(netns: str, family: int = socket.AF_INET, kind: int = socket.SOCK_STREAM,
                  proto: int = 0) -> socket.socket:
    """A socket that belongs to `netns`: the calling thread enters the
    namespace for the `socket()` call only (setns is per thread), and the
    socket keeps its namespace wherever it is used afterwards."""
    libc = ctypes.CDLL(None, use_errno=True)
    own = os.open(f"/proc/self/task/{threading.get_native_id()}/ns/net", os.O_RDONLY)
    target = os.open(f"/var/run/netns/{netns}", os.O_RDONLY)
    try:
        if libc.setns(target, _CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns {netns}")
        try:
            return socket.socket(family, kind, proto)
        finally:
            if libc.setns(own, _CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns back to the agent's namespace")
    finally:
        os.close(own)
        os.close(target)


def listen_in_netns(netns: str, address: str, port: int, kind: int = socket.SOCK_STREAM) -> socket.socket:
    """A socket listening at `address:port` in `netns` (of `kind`: a datagram one is bound). SO_REUSEPORT:
    every API server worker binds it, and the kernel spreads connections over them."""
    sock = open_in_netns(netns, socket.AF_INET, kind)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((address, port))
        if kind == socket.SOCK_STREAM:
            sock.listen(1024)
    except OSError:
        sock.close()
        raise
    return sock


def reachable_from_pods(address: str) -> bool:
    """Whether pods reach a server at `address` through the cluster namespace: an
    IPv4 address, not loopback (a pod's loopback is its own)."""
    try:
        ip_address = ipaddress.ip_address(address)
    except ValueError:
        return False
    return ip_address.version == 4 and not ip_address.is_loopback


def dialer(netns: str, source: str = ""):
    """A socket factory (aiohttp's TCPConnector `socket_factory`) whose
    connections leave from `netns`: the API server reaches pod IPs from the
    cluster namespace, which routes every podCIDR to its node. `source`: the
    address they come from (the advertised one, which a pod sees as the API
    server's, as it would a kube-apiserver's host address); else the kernel's pick."""
    def factory(addr_info) -> socket.socket:
        sock = open_in_netns(netns, addr_info[0], addr_info[1])
        if source:
            try:
                sock.bind((source, 0))
            except OSError:
                sock.close()
                raise
        return sock
    return factory


def host_veth(uid: str) -> str:
    """The node-side end of a pod's veth pair: every packet to or from the pod
    crosses it, so per-pod rules in the node namespace match on this name."""
    return "v" + uid.replace("-", "")[:12]


class ClusterNetwork:
    """The namespaces of one cluster: create, add pods, remove."""

    def __init__(self, tag: str):
        self.tag = tag
        self.prefix = f"{PREFIX}{tag}-"
        self.cluster_ns = self.prefix + "c"
        self.nodes: dict[str, tuple[str, str, str]] = {}  # node -> (netns, node ip, pod cidr)

    @property
    def gateway(self) -> str:
        """The bridge's address in the cluster namespace, every node's default gateway: where a
        server of the cluster's own (its DNS server) listens for every node and pod."""
        return GATEWAY.split("/")[0]

    def node_ns(self, index: int) -> str:
        return f"{self.prefix}n{index}"

    def pod_ns(self, uid: str) -> str:
        return f"{self.prefix}p{uid.replace('-', '')[:12]}"

    def cleanup(self) -> list[str]:
        """Remove every namespace (with its processes, veths and nft tables) this cluster's tag names."""
        gone = [n for n in list_netns() if n.startswith(self.prefix)]
        for n in sorted(gone, key=lambda n: n == self.cluster_ns):
            kill_netns(n)
        return gone

    def create(self, nodes: list[tuple[str, int, str, str]]) -> None:
        """Build the cluster: `nodes` are (name, index, node ip, pod cidr)."""
        self.cleanup()
        c = self.cluster_ns
        ip("netns", "add", c)
        ip("link", "add", BRIDGE, "type", "bridge", netns=c)
        ip("addr", "add", GATEWAY, "dev", BRIDGE, netns=c)
        ip("link", "set", BRIDGE, "up", netns=c)
        ip("link", "set", "lo", "up", netns=c)
        prefix_len = GATEWAY.split("/")[1]
        for name, index, node_ip, cidr in nodes:
            ns = self.node_ns(index)
            ip("netns", "add", ns)
            ip("link", "add", f"n{index}", "type", "veth", "peer", "name", "eth0", "netns", ns, netns=c)
            ip("link", "set", f"n{index}", "master", BRIDGE, "up", netns=c)
            ip("link", "set", "lo", "up", netns=ns)
            ip("addr", "add", f"{node_ip}/{prefix_len}", "dev", "eth0", netns=ns)
            ip("link", "set", "eth0", "up", netns=ns)
            ip("route", "add", "default", "via", GATEWAY.split("/")[0], netns=ns)
            for key in ("net.ipv4.ip_forward", "net.ipv4.conf.all.rp_filter", "net.ipv4.conf.default.rp_filter"):
                sysctl(ns, key, "1" if key.endswith("forward") else "0")
            self.nodes[name] = (ns, node_ip, cidr)
        for name, (ns, node_ip, cidr) in self.nodes.items():
            ip("route", "add", cidr, "via", node_ip, netns=c)  # replies from the API server to pods
            for other, (_, other_ip, other_cidr) in self.nodes.items():
                if other != name:
                    ip("route", "add", other_cidr, "via", other_ip, netns=ns)

    def route_from_host(self, node: str, index: int) -> None:
        """Route `node`'s podCIDR from the host's own namespace, as a real node's pod network is
        routed to it (a joined node's: the API server on this host dials its pods' IPs): a veth
        from the host into the node namespace, on a /30 of HOST_LINKS picked by the node's index,
        gone (and its route with it) with the namespace."""
        ns, _, cidr = self.nodes[node]
        links = ipaddress.IPv4Network(HOST_LINKS)
        base = int(links.network_address) + (index % (links.num_addresses // 4)) * 4
        host_end, node_end = ipaddress.IPv4Address(base + 1), ipaddress.IPv4Address(base + 2)
        link = self.prefix + "h"
        ip("link", "del", link, check=False)
        ip("link", "add", link, "type", "veth", "peer", "name", "host0", "netns", ns)
        ip("addr", "add", f"{host_end}/30", "dev", link)
        ip("link", "set", link, "up")
        ip("addr", "add", f"{node_end}/30", "dev", "host0", netns=ns)
        ip("link", "set", "host0", "up", netns=ns)
        ip("route", "replace", cidr, "via", str(node_end))

    def listen(self, address: str, port: int) -> socket.socket:
        """A socket listening at `address:port` for every node and pod (an IPv4 address
        outside the cluster's: the nodes route it to the cluster namespace, which holds it)."""
        ip("addr", "add", f"{address}/32", "dev", "lo", netns=self.cluster_ns)
        return listen_in_netns(self.cluster_ns, address, port)

    def add_pod(self, node: str, uid: str, pod_ip: str) -> str:
        """A pod namespace wired to its node; returns its name. Idempotent."""
        node_ns = self.nodes[node][0]
        ns = self.pod_ns(uid)
        host_if = host_veth(uid)
        ip("netns", "del", ns, check=False)
        ip("link", "del", host_if, netns=node_ns, check=False)
        ip("netns", "add", ns)
        ip("link", "add", host_if, "type", "veth", "peer", "name", "eth0", "netns", ns, netns=node_ns)
        sysctl(node_ns, f"net.ipv4.conf.{host_if}.proxy_arp", "1")
        ip("link", "set", host_if, "up", netns=node_ns)
        ip("route", "add", f"{ipaddress.IPv4Address(pod_ip)}/32", "dev", host_if, netns=node_ns)
        ip("link", "set", "lo", "up", netns=ns)
        ip("addr", "add", f"{pod_ip}/32", "dev", "eth0", netns=ns)
        ip("link", "set", "eth0", "up", netns=ns)
        ip("route", "add", POD_GATEWAY, "dev", "eth0", "scope", "link", netns=ns)
        ip("route", "add", "default", "via", POD_GATEWAY, "dev", "eth0", netns=ns)
        return ns

    def remove_pod(self, node: str, uid: str) -> None:
        """Kill what still runs in the pod's namespace and delete it (its veth goes with it)."""
        kill_netns(self.pod_ns(uid))
        node_ns = self.nodes.get(node, ("",))[0]
        if node_ns:
            ip("link", "del", host_veth(uid), netns=node_ns, check=False)

    def close(self) -> None:
        self.cleanup()
        self.nodes.clear()
