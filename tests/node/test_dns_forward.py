"""Names outside the cluster (dns_forward): the cluster DNS server forwards them to its upstream
resolvers as kubeadm's CoreDNS does (`forward . /etc/resolv.conf`, `cache 30`), here to a fake
upstream on local sockets that answers from a table, and keeps the cluster's own names to itself."""

from __future__ import annotations

import asyncio
import contextlib
import socket

import pytest
from dnslib import EDNS0, QTYPE, RCODE, RR, SOA, A, DNSRecord

from nanokube.clock import Clock
from nanokube.node import dns, dns_forward
from nanokube.node.clusterdns import ClusterDNS
from nanokube.node.dns_forward import Forwarder
from tests.controllers import make_stack
from tests.node import listening

SOA_RR = RR("example.", QTYPE.SOA, ttl=600, rdata=SOA("ns.example.", "root.example.", (1, 2, 3, 4, 20)))


class Upstream:
    """A resolver on 127.0.0.1 (UDP and TCP, one port): `pypi.org` has an A record of TTL 300,
    `many.example` 60 of them (cut over UDP, with TC), `silent.example` gets no answer, any other
    name NXDOMAIN with the SOA (its minimum 20 seconds). `asked`: the names asked, in order."""

    def __init__(self):
        self.asked: list[str] = []
        self.port = 0

    def answer(self, data: bytes, udp: bool = False) -> bytes | None:
        request = DNSRecord.parse(data)
        name = str(request.q.qname).rstrip(".")
        self.asked.append(name)
        reply = request.reply()
        if any(r.rtype == QTYPE.OPT for r in request.ar):
            reply.add_ar(EDNS0(udp_len=4096))
        if name == "silent.example":
            return None
        if name == "pypi.org":
            reply.add_answer(RR("pypi.org.", rdata=A("151.101.0.223"), ttl=300))
        elif name == "many.example":
            for i in range(60):
                reply.add_answer(RR("many.example.", rdata=A(f"192.0.2.{i}"), ttl=300))
        else:
            reply.header.rcode = RCODE.NXDOMAIN
            reply.add_auth(SOA_RR)
        if udp and len(reply.pack()) > 512:  # (no EDNS0 asked for here)
            reply = request.reply()
            reply.header.tc = 1
        return reply.pack()


@contextlib.asynccontextmanager
async def _upstream():
    upstream = Upstream()
    loop = asyncio.get_running_loop()

    class Datagrams(asyncio.DatagramProtocol):
        def connection_made(self, transport):
            self.transport = transport

        def datagram_received(self, data, addr):
            if (reply := upstream.answer(data, udp=True)) is not None:
                self.transport.sendto(reply, addr)

    async def stream(reader, writer):
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                size = int.from_bytes(await reader.readexactly(2), "big")
                if (reply := upstream.answer(await reader.readexactly(size))) is not None:
                    writer.write(len(reply).to_bytes(2, "big") + reply)
        writer.close()

    tcp = await asyncio.start_server(stream, "127.0.0.1", 0)
    upstream.port = tcp.sockets[0].getsockname()[1]
    udp, _ = await loop.create_datagram_endpoint(Datagrams, local_addr=("127.0.0.1", upstream.port))
    try:
        yield upstream
    finally:
        udp.close()
        tcp.close()
        await tcp.wait_closed()


class _Clock(Clock):
    def __init__(self):
        self.t = 0.0

    def monotonic(self) -> float:
        return self.t


def _dead_port() -> int:
    """A local UDP port nobody listens on (its queries are refused by the kernel)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _ask(port: int, name: str, qtype: str = "A", tcp: bool = False) -> DNSRecord:
    q = DNSRecord.question(name, qtype)
    return DNSRecord.parse(await asyncio.to_thread(q.send, "127.0.0.1", port, tcp=tcp, timeout=10))


async def test_the_server_forwards_names_outside_the_cluster_and_answers_its_own():
    """Through the server, over UDP and TCP: the upstream's records (TTLs capped at cache 30),
    its NXDOMAIN, a truncated answer over UDP that TCP takes whole, a reverse name the cluster
    has none for; the cluster's own names, a missing one too, never reach it."""
    stack = await make_stack()
    udp, tcp = listening()
    port_udp, port_tcp = udp.getsockname()[1], tcp.getsockname()[1]
    async with _upstream() as upstream:
        server = ClusterDNS(stack.client, forwarder=Forwarder([("127.0.0.1", upstream.port)]))
        try:
            await server.serve(udp, tcp)
            got = await _ask(port_udp, "pypi.org")
            assert (got.header.rcode, got.header.ra, [(str(r.rdata), r.ttl) for r in got.rr]) == (
                RCODE.NOERROR, 1, [("151.101.0.223", 30)])
            missing = await _ask(port_tcp, "nope.example", tcp=True)
            assert missing.header.rcode == RCODE.NXDOMAIN and [QTYPE[r.rtype] for r in missing.auth] == ["SOA"]
            cut = await _ask(port_udp, "many.example")
            assert cut.header.tc == 1 and cut.rr == []
            assert len((await _ask(port_tcp, "many.example", tcp=True)).rr) == 60
            ptr = await _ask(port_udp, "8.8.8.8.in-addr.arpa", "PTR")
            assert ptr.header.rcode == RCODE.NXDOMAIN
            before = list(upstream.asked)
            assert (await _ask(port_udp, "nope.default.svc.cluster.local")).header.rcode == RCODE.NXDOMAIN
            assert (await _ask(port_udp, "kubernetes.default.svc.cluster.local")).header.rcode == RCODE.NXDOMAIN
            assert upstream.asked == before  # the cluster's zone is answered by the server alone
            assert before == ["pypi.org", "nope.example", "many.example", "many.example", "8.8.8.8.in-addr.arpa"]
        finally:
            await server.stop()
            await stack.close()


async def test_answers_are_cached_for_their_ttl_within_cache_30():
    clock = _Clock()
    async with _upstream() as upstream:
        forwarder = Forwarder([("127.0.0.1", upstream.port)], clock)
        first = await forwarder.forward(DNSRecord.question("pypi.org"))
        clock.t = 12
        q = DNSRecord.question("pypi.org")
        kept = await forwarder.forward(q)
        assert (kept.header.id, kept.rr[0].ttl, first.rr[0].ttl) == (q.header.id, 18, 30)
        with_edns = DNSRecord.question("pypi.org")
        with_edns.add_ar(EDNS0(udp_len=4096))
        assert [QTYPE[r.rtype] for r in (await forwarder.forward(with_edns)).ar] == ["OPT"]
        with_edns = DNSRecord.question("nope.example")
        with_edns.add_ar(EDNS0(udp_len=4096))
        assert [QTYPE[r.rtype] for r in (await forwarder.forward(with_edns)).ar] == ["OPT"]  # the upstream's
        denied = await forwarder.forward(DNSRecord.question("nope.example"))
        assert denied.auth[0].ttl == 20 and denied.ar == []  # the SOA's minimum; EDNS0 only to a query with it
        clock.t = 33
        assert (await forwarder.forward(DNSRecord.question("nope.example"))).header.rcode == RCODE.NXDOMAIN
        await forwarder.forward(DNSRecord.question("pypi.org"))  # 33 s on: asked again
        assert upstream.asked == ["pypi.org", "nope.example", "nope.example", "pypi.org"]


async def test_the_cache_keeps_the_most_recently_used_answers():
    async with _upstream() as upstream:
        forwarder = Forwarder([("127.0.0.1", upstream.port)])
        forwarder.cache = dns_forward.Cache(size=2)
        for name in ("a.example", "b.example", "a.example", "c.example", "a.example", "b.example"):
            await forwarder.forward(DNSRecord.question(name))
        assert upstream.asked == ["a.example", "b.example", "c.example", "b.example"]


async def test_an_upstream_that_does_not_answer_is_passed_over_and_none_answering_is_servfail(monkeypatch):
    monkeypatch.setattr(dns_forward, "TRY_TIMEOUT", 0.2)
    monkeypatch.setattr(dns_forward, "TIMEOUT", 1.0)
    async with _upstream() as upstream:
        both = Forwarder([("127.0.0.1", _dead_port()), ("127.0.0.1", upstream.port)])
        for _ in range(3):  # whichever it tries first
            assert [str(r.rdata) for r in (await both.forward(DNSRecord.question("pypi.org"))).rr] == ["151.101.0.223"]
            both.cache = dns_forward.Cache()
        silent = await Forwarder([("127.0.0.1", upstream.port)]).forward(DNSRecord.question("silent.example"))
        assert (silent.header.rcode, silent.rr) == (RCODE.SERVFAIL, [])
    none = await Forwarder([]).forward(DNSRecord.question("pypi.org"))
    assert none.header.rcode == RCODE.SERVFAIL


async def test_queries_past_max_concurrent_are_refused(monkeypatch):
    monkeypatch.setattr(dns_forward, "MAX_CONCURRENT", 1)
    monkeypatch.setattr(dns_forward, "TRY_TIMEOUT", 0.5)
    async with _upstream() as upstream:
        forwarder = Forwarder([("127.0.0.1", upstream.port)])
        waiting = asyncio.ensure_future(forwarder.forward(DNSRecord.question("silent.example")))
        await asyncio.sleep(0.05)
        refused = await forwarder.forward(DNSRecord.question("pypi.org"))
        assert refused.header.rcode == RCODE.REFUSED
        assert (await waiting).header.rcode == RCODE.SERVFAIL
        assert (await forwarder.forward(DNSRecord.question("pypi.org"))).header.rcode == RCODE.NOERROR


@pytest.mark.parametrize("text, expected", [
    ("nameserver 10.0.0.2\nsearch corp\nnameserver 127.0.0.53 # local\n", [("10.0.0.2", 53), ("127.0.0.53", 53)]),
    ("", [])])
def test_the_upstreams_are_the_host_resolv_confs_nameservers(tmp_path, text, expected):
    path = tmp_path / "resolv.conf"
    path.write_text(text)
    assert dns_forward.upstreams(str(path)) == expected
    assert dns_forward.upstreams(str(tmp_path / "none")) == []


async def test_at_the_nodes_address_every_name_is_forwarded_the_clusters_too():
    """The node's resolvers as the process runtime's pods reach them (dnsPolicy Default): a server
    that forwards every query; such a pod's resolv.conf is the host's with that address for its
    nameservers."""
    stack = await make_stack()
    udp, tcp = listening()
    async with _upstream() as upstream:
        server = ClusterDNS(stack.client, forwarder=Forwarder([("127.0.0.1", upstream.port)]))
        try:
            await server.serve(udp, tcp, cluster=False)
            name = "kube-dns.kube-system.svc.cluster.local"
            assert (await _ask(udp.getsockname()[1], name)).header.rcode == RCODE.NXDOMAIN
            got = await _ask(tcp.getsockname()[1], "pypi.org", tcp=True)
            assert [str(r.rdata) for r in got.rr] == ["151.101.0.223"]
            assert upstream.asked == [name, "pypi.org"]
        finally:
            await server.stop()
            await stack.close()
    host = "nameserver 10.0.0.2\nsearch corp.example\nnameserver 10.0.0.3\noptions edns0\n"
    pod = {"metadata": {"namespace": "default"}, "spec": {"dnsPolicy": "Default"}}
    assert dns.resolv_conf(pod, host=dns.with_nameservers(host, [dns.NODE_RESOLVER])) == (
        "search corp.example\nnameserver 169.254.20.10\noptions edns0\n")
