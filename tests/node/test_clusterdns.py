"""The cluster's DNS server (clusterdns): kubeadm's kube-dns Service, and dns's answers on the wire,
over UDP and TCP, from the server's own informers on an in-process API server."""

from __future__ import annotations

import asyncio
import contextlib
import socket

import pytest
from dnslib import EDNS0, QTYPE, RCODE, DNSRecord

from nanokube.node import clusterdns, dns
from nanokube.node.clusterdns import ClusterDNS, respond
from tests.controllers import eventually, make_stack
from tests.node import listening

ZONE = "cluster.local"


def _headless(name: str, *ips: str) -> tuple[dict, dict]:
    svc = {"metadata": {"name": name, "namespace": "default"},
           "spec": {"clusterIP": "None", "ports": [{"name": "http", "port": 80}]}}
    es = {"metadata": {"name": f"{name}-x", "namespace": "default", "labels": {dns.SERVICE_NAME: name}},
          "addressType": "IPv4", "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
          "endpoints": [{"addresses": [ip], "conditions": {"ready": True}} for ip in ips]}
    return svc, es


def _ask(cluster, name: str, qtype: str = "A", udp: bool = False, edns: int = 0) -> DNSRecord:
    q = DNSRecord.question(name, qtype)
    if edns:
        q.add_ar(EDNS0(udp_len=edns))
    return DNSRecord.parse(respond(cluster, q.pack(), udp=udp))


@pytest.fixture
def cluster():
    web = {"metadata": {"name": "web", "namespace": "default"},
           "spec": {"clusterIP": "10.96.0.50", "clusterIPs": ["10.96.0.50"], "ports": [{"name": "http", "port": 80}]}}
    many, many_slice = _headless("many", *(f"10.244.0.{i}" for i in range(1, 61)))
    return dns.Listed([web, many], [many_slice], [])


def test_an_answer_is_authoritative_and_a_negative_one_carries_the_zones_soa(cluster):
    got = _ask(cluster, f"web.default.svc.{ZONE}")
    assert (got.header.rcode, got.header.aa, got.header.ra, [str(r.rdata) for r in got.rr]) == (
        RCODE.NOERROR, 1, 0, ["10.96.0.50"])
    assert got.rr[0].ttl == dns.TTL
    missing = _ask(cluster, f"nope.default.svc.{ZONE}")
    assert missing.header.rcode == RCODE.NXDOMAIN and [QTYPE[r.rtype] for r in missing.auth] == ["SOA"]
    nodata = _ask(cluster, f"web.default.svc.{ZONE}", "AAAA")
    assert (nodata.header.rcode, nodata.rr, len(nodata.auth)) == (RCODE.NOERROR, [], 1)
    outside = _ask(cluster, "example.com")
    assert (outside.header.rcode, outside.header.aa, outside.auth) == (RCODE.SERVFAIL, 0, [])


def test_srv_and_ptr_on_the_wire(cluster):
    srv = _ask(cluster, f"_http._tcp.web.default.svc.{ZONE}", "SRV")
    assert str(srv.rr[0].rdata) == f"0 100 80 web.default.svc.{ZONE}."
    assert [str(r.rdata) for r in srv.ar] == ["10.96.0.50"]  # the target's address, additional
    ptr = _ask(cluster, "50.0.96.10.in-addr.arpa", "PTR")
    assert [str(r.rdata) for r in ptr.rr] == [f"web.default.svc.{ZONE}."]


def test_an_answer_too_large_for_udp_is_truncated_unless_edns0_makes_room(cluster):
    name = f"many.default.svc.{ZONE}"
    cut = _ask(cluster, name, udp=True)  # 60 addresses: over 512 bytes
    assert cut.header.tc == 1 and cut.rr == [] and str(cut.q.qname) == name + "."
    assert len(_ask(cluster, name, udp=True, edns=4096).rr) == 60
    assert len(_ask(cluster, name).rr) == 60  # TCP takes it whole


def test_what_is_no_query_is_not_answered_or_not_implemented(cluster):
    assert respond(cluster, b"\x00\x01garbage") is None
    notify = DNSRecord.question(f"web.default.svc.{ZONE}")
    notify.header.opcode = 4
    assert DNSRecord.parse(respond(cluster, notify.pack())).header.rcode == RCODE.NOTIMP
    assert respond(cluster, DNSRecord.question("x").reply().pack()) is None  # an answer


async def _query(name: str, port: int, tcp: bool = False, qtype: str = "A") -> DNSRecord:
    q = DNSRecord.question(name, qtype)
    return DNSRecord.parse(await asyncio.to_thread(q.send, "127.0.0.1", port, tcp=tcp, timeout=10))


async def test_the_server_makes_kube_dns_and_answers_over_udp_and_tcp_what_its_informers_see(caplog):
    stack = await make_stack()
    await stack.client.resource("", "v1", "namespaces").create({"metadata": {"name": "kube-system"}})
    server = ClusterDNS(stack.client)
    try:
        await server.start()
        svc = await stack.client.resource("", "v1", "services").get("kube-dns", "kube-system")
        assert svc["spec"]["clusterIP"] == dns.DNS_SERVER == "10.96.0.10"  # the tenth address, as kubeadm's
        assert [(p["name"], p["port"], p["protocol"]) for p in svc["spec"]["ports"]] == [
            ("dns", 53, "UDP"), ("dns-tcp", 53, "TCP"), ("metrics", 9153, "TCP")]
        caplog.clear()
        await server.start()  # a second start (a restarted `up`, a second API server) leaves it be, quietly
        assert [r.getMessage() for r in caplog.records if r.name == clusterdns.__name__] == []
        udp, tcp = listening()
        port_udp, port_tcp = udp.getsockname()[1], tcp.getsockname()[1]
        await server.serve(udp, tcp)
        got = await _query(f"kube-dns.kube-system.svc.{ZONE}", port_udp)
        assert [str(r.rdata) for r in got.rr] == ["10.96.0.10"]
        await stack.client.resource("", "v1", "services").create(
            {"metadata": {"name": "later", "namespace": "default"}, "spec": {"ports": [{"port": 80}]}})

        async def later() -> DNSRecord | None:
            got = await _query(f"later.default.svc.{ZONE}", port_tcp, tcp=True)
            return got if got.header.rcode == RCODE.NOERROR else None
        assert len((await eventually(later)).rr) == 1  # a Service made since, as its informer has it
        assert (await _query(f"nope.default.svc.{ZONE}", port_tcp, tcp=True)).header.rcode == RCODE.NXDOMAIN
    finally:
        await server.stop()
        await stack.close()



@contextlib.asynccontextmanager
async def _tcp_server(send_buffer: int = 0):
    """A server on an in-process API server; its TCP port (`send_buffer`: its connections' send
    buffer, small so that answers nobody reads back up to the server soon)."""
    stack = await make_stack()
    server = ClusterDNS(stack.client)
    udp, tcp = listening()
    if send_buffer:
        tcp.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
    try:
        await server.serve(udp, tcp)
        yield tcp.getsockname()[1]
    finally:
        await server.stop()
        await stack.close()


def _framed(name: str) -> bytes:
    query = DNSRecord.question(name).pack()
    return len(query).to_bytes(2, "big") + query


async def _closed(reader: asyncio.StreamReader) -> bytes:
    """What the server sends until it closes the connection (the test fails if it keeps it)."""
    try:
        return await asyncio.wait_for(reader.read(), 20)
    except ConnectionResetError:
        return b""


async def test_a_tcp_connection_that_sends_no_query_in_time_is_closed(monkeypatch):
    """As CoreDNS's server: the first query must come within its read timeout, a later one within
    its idle timeout (shortened here), else the connection is closed; one that asks in time is answered."""
    monkeypatch.setattr(clusterdns, "READ_TIMEOUT", 0.3)
    monkeypatch.setattr(clusterdns, "IDLE_TIMEOUT", 0.6)
    async with _tcp_server() as port:
        silent_reader, silent = await asyncio.open_connection("127.0.0.1", port)
        partial_reader, partial = await asyncio.open_connection("127.0.0.1", port)
        partial.write(_framed(f"kubernetes.default.svc.{ZONE}")[:5])  # a query that never ends
        asked_reader, asked = await asyncio.open_connection("127.0.0.1", port)
        asked.write(_framed(f"nope.default.svc.{ZONE}"))
        assert await _closed(silent_reader) == b"" and await _closed(partial_reader) == b""
        answered = await _closed(asked_reader)  # its answer, then nothing more asked: closed
        assert DNSRecord.parse(answered[2:]).header.rcode == RCODE.NXDOMAIN
        for writer in (silent, partial, asked):
            writer.close()


async def test_a_tcp_connection_that_takes_no_answers_is_dropped(monkeypatch):
    """A client that asks and never reads the answers: once they back up to the server, it waits
    its write timeout (shortened here) and drops the connection, rather than hold them for ever."""
    monkeypatch.setattr(clusterdns, "WRITE_TIMEOUT", 0.3)
    async with _tcp_server(send_buffer=4096) as port:
        client = socket.socket()
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        client.connect(("127.0.0.1", port))
        client.setblocking(False)
        reader, writer = await asyncio.open_connection(sock=client, limit=1024)  # (reads ahead 2 KiB at most)
        writer.write(_framed(f"kubernetes.default.svc.{ZONE}") * 3000)  # ~250 kB of answers

        async def dropped() -> bool:
            try:
                writer.write(_framed(f"kubernetes.default.svc.{ZONE}"))
                await asyncio.wait_for(writer.drain(), 1)
            except ConnectionError:
                return True
            except TimeoutError:  # (the server reads no more queries while its answers wait)
                return False
            return writer.transport.is_closing()
        assert await eventually(dropped)
        writer.close()
