"""Stale UDP conntrack entries, deleted after the syncs that changed a UDP Service (upstream's
pkg/proxy/conntrack CleanStaleEntries, which reconciles after every sync).

A UDP flow has no end: the kernel translates a client's datagrams to the endpoint its first one
went to for as long as they keep coming (each refreshes the entry), so a client that keeps
one socket, as a DNS resolver does, keeps talking to an endpoint long gone. So, as upstream, an
entry whose original destination is a UDP Service's ClusterIP, external or LoadBalancer IP and
port, or any address at its NodePort, and whose reply does not come from one of the Service's
serving endpoints is deleted (serving: ready, or serving while terminating, whatever the traffic
policies and topology say, so that a change to those leaves running flows alone, as TCP's).
A Service without a serving endpoint is left alone: its traffic is refused anyway.

One deliberate difference: upstream compares the reply's source address only, so a flow still
translated to a serving endpoint's old port (its targetPort changed, the pod kept its IP) stays as
long as the client keeps sending into a closed port; here the reply's address and port must both be
a serving endpoint's, which deletes that flow too and leaves every flow upstream keeps that is
translated where the endpoint now serves.

The entries are dumped and deleted over ctnetlink (NETLINK_NETFILTER) on a socket opened in the
node's namespace, with no `conntrack` binary.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
import struct
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from ..node.runtime.netns import open_in_netns
from .nftables.layout import ServicePort

NETLINK_NETFILTER = 12
_GET, _DELETE = (1 << 8) | 1, (1 << 8) | 2  # NFNL_SUBSYS_CTNETLINK << 8 | IPCTNL_MSG_CT_*
_REQUEST, _ACK, _DUMP = 0x1, 0x4, 0x300
_ERROR, _DONE = 2, 3
_NESTED = 0x8000
_TUPLE_ORIG, _TUPLE_REPLY, _TUPLE_IP, _TUPLE_PROTO = 1, 2, 1, 2
_PROTO_NUM, _PROTO_SRC_PORT, _PROTO_DST_PORT = 1, 2, 3
_UDP = socket.IPPROTO_UDP
_FAMILIES = {"ip": (socket.AF_INET, 1, 2), "ip6": (socket.AF_INET6, 3, 4)}  # AF, CTA_IP_*_SRC, CTA_IP_*_DST


class Flow(NamedTuple):
    """A UDP conntrack entry: its original tuple and where its replies come from."""

    src: str
    dst: str
    sport: int
    dport: int
    reply_src: str
    reply_sport: int


def stale(flows: Iterable[Flow], ports: Iterable[ServicePort]) -> list[Flow]:
    """The `flows` to a UDP Service port's front ends whose replies come from none of its serving
    endpoints; Services without a serving endpoint are left out."""
    by_ip: dict[tuple[str, int], set[tuple[str, int]]] = {}
    by_node_port: dict[int, set[tuple[str, int]]] = {}
    for sp in ports:
        if sp.protocol != "udp":
            continue
        serving = {(_canonical(e.ip), e.port) for e in sp.endpoints if e.ready or e.serving_terminating}
        if not serving:
            continue
        for ip in (sp.cluster_ip, *sp.lb_ips, *sp.external_ips):
            by_ip[(_canonical(ip), sp.port)] = serving
        if sp.node_port:
            by_node_port[sp.node_port] = serving
    out = []
    for f in flows:
        reply = (f.reply_src, f.reply_sport)
        for endpoints in (by_ip.get((f.dst, f.dport)), by_node_port.get(f.dport)):
            if endpoints is not None and reply not in endpoints:
                out.append(f)
                break
    return out


def _canonical(ip: str) -> str:
    return str(ipaddress.ip_address(ip))


class Conntrack:
    """The conntrack table of one network namespace (None: this process's)."""

    def __init__(self, netns: str | None = None):
        self.netns = netns

    def reconcile(self, family: str, ports: Iterable[ServicePort]) -> int:
        """Delete the stale UDP entries of nftables `family` ("ip" or "ip6"); how many went."""
        with self._socket() as s:
            doomed = stale(self._dump(s, family), ports)
            return sum(self._delete(s, family, f) for f in doomed)

    def flows(self, family: str) -> list[Flow]:
        """The UDP entries of `family`."""
        with self._socket() as s:
            return list(self._dump(s, family))

    def _socket(self) -> socket.socket:
        if self.netns:
            s = open_in_netns(self.netns, socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        else:
            s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        s.bind((0, 0))
        return s

    def _dump(self, s: socket.socket, family: str) -> Iterator[Flow]:
        af, src, dst = _FAMILIES[family]
        s.send(_message(_GET, _REQUEST | _DUMP, af, b""))
        while True:
            data = s.recv(1 << 20)
            for typ, payload in _messages(data):
                if typ == _DONE:
                    return
                if typ == _ERROR:
                    code = -struct.unpack_from("=i", payload)[0]
                    raise OSError(code, f"conntrack dump: {errno.errorcode.get(code, code)}")
                flow = _flow(_attrs(payload[4:]), src, dst)
                if flow is not None:
                    yield flow

    def _delete(self, s: socket.socket, family: str, f: Flow) -> int:
        """1 when the entry went, 0 when it had gone already (it expired, or a client closed it)."""
        af, src, dst = _FAMILIES[family]
        ip = _attr(_TUPLE_IP | _NESTED, _attr(src, socket.inet_pton(af, f.src)) + _attr(dst, socket.inet_pton(af, f.dst)))
        proto = _attr(_TUPLE_PROTO | _NESTED, _attr(_PROTO_NUM, bytes([_UDP])) + _attr(
            _PROTO_SRC_PORT, struct.pack("!H", f.sport)) + _attr(_PROTO_DST_PORT, struct.pack("!H", f.dport)))
        s.send(_message(_DELETE, _REQUEST | _ACK, af, _attr(_TUPLE_ORIG | _NESTED, ip + proto)))
        for typ, payload in _messages(s.recv(65536)):
            if typ == _ERROR:
                code = -struct.unpack_from("=i", payload)[0]
                if code == 0:
                    return 1
                if code == errno.ENOENT:
                    return 0
                raise OSError(code, f"conntrack delete: {errno.errorcode.get(code, code)}")
        return 0


def _message(typ: int, flags: int, af: int, attrs: bytes) -> bytes:
    body = struct.pack("=BBH", af, 0, 0) + attrs  # nfgenmsg: family, NFNETLINK_V0, res_id
    return struct.pack("=IHHII", 16 + len(body), typ, flags, 0, 0) + body


def _attr(typ: int, value: bytes) -> bytes:
    raw = struct.pack("=HH", 4 + len(value), typ) + value
    return raw + b"\0" * (-len(raw) % 4)


def _messages(data: bytes) -> Iterator[tuple[int, bytes]]:
    off = 0
    while off + 16 <= len(data):
        length, typ = struct.unpack_from("=IH", data, off)
        yield typ, data[off + 16:off + length]
        off += (length + 3) & ~3


def _attrs(data: bytes) -> dict[int, bytes]:
    out, off = {}, 0
    while off + 4 <= len(data):
        length, typ = struct.unpack_from("=HH", data, off)
        out[typ & 0x3FFF] = data[off + 4:off + length]
        off += (length + 3) & ~3
    return out


def _flow(attrs: dict[int, bytes], src: int, dst: int) -> Flow | None:
    orig, reply = _attrs(attrs.get(_TUPLE_ORIG, b"")), _attrs(attrs.get(_TUPLE_REPLY, b""))
    o_ip, o_proto = _attrs(orig.get(_TUPLE_IP, b"")), _attrs(orig.get(_TUPLE_PROTO, b""))
    r_ip, r_proto = _attrs(reply.get(_TUPLE_IP, b"")), _attrs(reply.get(_TUPLE_PROTO, b""))
    if o_proto.get(_PROTO_NUM) != bytes([_UDP]) or src not in o_ip or src not in r_ip:
        return None

    def port(p: dict[int, bytes], key: int) -> int:
        return struct.unpack("!H", p[key])[0]

    def addr(raw: bytes) -> str:
        return str(ipaddress.ip_address(raw))
    return Flow(addr(o_ip[src]), addr(o_ip[dst]), port(o_proto, _PROTO_SRC_PORT), port(o_proto, _PROTO_DST_PORT),
                addr(r_ip[src]), port(r_proto, _PROTO_SRC_PORT))
