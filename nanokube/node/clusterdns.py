"""The cluster's DNS server, as kubeadm's CoreDNS addon gives a cluster one: the `kube-dns` Service
in kube-system at the tenth address of the Service range (dns.DNS_SERVER, kubeadm's manifest),
and a server on UDP and TCP port 53 answering as CoreDNS's kubernetes plugin does (dns.answer)
from its own informers on Services and EndpointSlices (simulated_cluster.WatchedCluster):
it acts only through the API, as CoreDNS does. The wire format is dnslib's.

Under `nanokube up --runtime process` the server listens in the cluster network namespace at its
bridge's address (netns.ClusterNetwork.gateway), every node's default gateway, as the API server
listens at its advertised address there. An EndpointSlice of the Service's, this server's own (the
EndpointSlice controller keeps only those it manages), names that address, so kube-proxy's rules
carry a pod's queries to it as they carry them to CoreDNS's pods. Names outside the cluster it
forwards to the host's resolvers (dns_forward), as kubeadm's CoreDNS forwards them to the node's
(`forward . /etc/resolv.conf`): a UDP query each in a task of its own, as the upstream may take
seconds; the cluster's names are answered at once, as they come. The simulated runtime works its
pods' answers out itself (simulated_net, with the same dns module): there the Service is made the
same, and has no endpoint, as nothing listens.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import socket

from dnslib import AAAA, CNAME, EDNS0, NS, OPCODE, PTR, QTYPE, RCODE, RR, SOA, SRV, TXT, A, DNSError, DNSHeader, \
    DNSRecord

from ..clock import REAL, Clock
from ..machinery.errors import APIError
from ..machinery.user import User
from . import dns
from .dns_forward import EDNS_SIZE, Forwarder, upstreams
from .runtime.netns import ip, listen_in_netns
from .simulated_cluster import WatchedCluster

log = logging.getLogger(__name__)

#: the identity the server acts as: kubeadm's CoreDNS runs as kube-system's `coredns` ServiceAccount
DNS_USER = User("system:serviceaccount:kube-system:coredns",
                ("system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"))
NAME, NAMESPACE = "kube-dns", "kube-system"
PORT = 53
#: the EndpointSlice naming this server, and the manager its label names
SLICE_NAME, MANAGED_BY = "kube-dns-nanokube", "clusterdns.nanokube.io"
MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by"
#: the largest UDP answer to a query without EDNS0 (RFC 1035); a larger one is truncated (TC), and
#: the resolver asks again over TCP
UDP_LIMIT = 512
#: CoreDNS's server timeouts over TCP (the defaults its `timeouts` plugin changes): a connection's
#: first query must have come whole READ_TIMEOUT after it opened, each later one IDLE_TIMEOUT after
#: the answer before, and an answer must be taken within WRITE_TIMEOUT, else the connection is
#: closed (a pod's idle or stalled connections are not kept, each a descriptor and a task here, for
#: as long as the pod holds them)
READ_TIMEOUT, WRITE_TIMEOUT, IDLE_TIMEOUT = 3.0, 5.0, 10.0


def service() -> dict:
    """kubeadm's kube-dns Service: the DNS ports, UDP and TCP, and CoreDNS's metrics port."""
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": NAME, "namespace": NAMESPACE,
                         "labels": {"k8s-app": "kube-dns", "kubernetes.io/cluster-service": "true",
                                    "kubernetes.io/name": "CoreDNS"},
                         "annotations": {"prometheus.io/port": "9153", "prometheus.io/scrape": "true"}},
            "spec": {"clusterIP": dns.DNS_SERVER, "selector": {"k8s-app": "kube-dns"},
                     "ports": [{"name": "dns", "port": PORT, "protocol": "UDP", "targetPort": PORT},
                               {"name": "dns-tcp", "port": PORT, "protocol": "TCP", "targetPort": PORT},
                               {"name": "metrics", "port": 9153, "protocol": "TCP", "targetPort": 9153}]}}


def endpoint_slice(address: str) -> dict:
    """The Service's EndpointSlice naming the server at `address` (its DNS ports; it serves no metrics)."""
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": SLICE_NAME, "namespace": NAMESPACE,
                         "labels": {dns.SERVICE_NAME: NAME, MANAGED_BY_LABEL: MANAGED_BY}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
            "ports": [{"name": "dns", "port": PORT, "protocol": "UDP"},
                      {"name": "dns-tcp", "port": PORT, "protocol": "TCP"}]}


def query(data: bytes) -> DNSRecord | None:
    """The DNS query `data` holds (None for what is no DNS message, or an answer)."""
    try:
        request = DNSRecord.parse(data)
    except DNSError:
        return None
    return None if request.header.qr else request


def respond(cluster: dns.Cluster, data: bytes, udp: bool = False) -> bytes | None:
    """The answer to the DNS message `data` (None for one that is not a DNS query) from the
    cluster. `udp`: cut to what the asker takes over UDP (512 bytes, or its EDNS0 size), the TC
    bit set where cut."""
    request = query(data)
    return None if request is None else reply(cluster, request, udp)


def reply(cluster: dns.Cluster, request: DNSRecord, udp: bool = False) -> bytes:
    """The answer to a query from the cluster (`respond`)."""
    reply = request.reply(ra=0, aa=1)
    edns = next((r for r in request.ar if r.rtype == QTYPE.OPT), None)
    if edns is not None:
        reply.add_ar(EDNS0(udp_len=EDNS_SIZE))
    if request.header.opcode != OPCODE.QUERY or len(request.questions) != 1:
        reply.header.rcode = RCODE.NOTIMP if request.header.opcode != OPCODE.QUERY else RCODE.FORMERR
        return reply.pack()
    question = request.q
    name, qtype = str(question.qname).lower().rstrip("."), QTYPE.get(question.qtype, "")
    got = dns.answer(cluster, name, qtype)
    reply.header.rcode = getattr(RCODE, got.rcode)
    reply.header.aa = int(got.authoritative)
    for r in got.records:
        reply.add_answer(_rr(r))
    if name == dns.ZONE and qtype in ("SOA", "NS"):
        reply.add_answer(_soa() if qtype == "SOA" else RR(f"{dns.ZONE}.", QTYPE.NS, rdata=NS(f"ns.dns.{dns.ZONE}."),
                                                           ttl=dns.TTL))
    elif got.authoritative and not got.records:  # NXDOMAIN or no data: the zone's SOA, for negative caching
        reply.add_auth(_soa())
    for r in got.additional:
        reply.add_ar(_rr(r))
    return _fit(reply, request, udp)


def forwarded(cluster: dns.Cluster, request: DNSRecord) -> bool:
    """Whether kubeadm's Corefile forwards the query: one question, of a name outside the zone or
    a reverse name the cluster has none for (the kubernetes plugin's `fallthrough in-addr.arpa
    ip6.arpa`)."""
    if request.header.opcode != OPCODE.QUERY or len(request.questions) != 1:
        return False
    name = str(request.q.qname).lower().rstrip(".")
    if name.endswith(".in-addr.arpa"):
        return not dns.reverse(cluster, dns.reversed_address(name))
    return not dns.in_zone(name)


async def forward(forwarder: Forwarder, request: DNSRecord, udp: bool = False) -> bytes:
    """The upstream's answer to a forwarded query (`forwarded`), cut as `respond`'s."""
    return _fit(await forwarder.forward(request, tcp=not udp), request, udp)


def _fit(reply: DNSRecord, request: DNSRecord, udp: bool) -> bytes:
    """The answer packed; over UDP, past the asker's size, only its header and question, with TC."""
    packed = reply.pack()
    edns = next((r for r in request.ar if r.rtype == QTYPE.OPT), None)
    limit = max(UDP_LIMIT, edns.rclass) if edns is not None else UDP_LIMIT
    if udp and len(packed) > limit:
        cut = DNSRecord(DNSHeader(id=reply.header.id, bitmap=reply.header.bitmap, tc=1), q=request.q)
        packed = cut.pack()
    return packed


def _soa() -> RR:
    """The zone's SOA, as CoreDNS's kubernetes plugin gives it (its negative answers' TTL the records')."""
    return RR(f"{dns.ZONE}.", QTYPE.SOA, ttl=dns.TTL, rdata=SOA(
        f"ns.dns.{dns.ZONE}.", f"hostmaster.{dns.ZONE}.", (1, 7200, 1800, 86400, dns.TTL)))


def _rr(r: dns.Record) -> RR:
    if r.type == "SRV":
        rdata = SRV(0, r.weight, r.port, f"{r.data}.")
    elif r.type == "TXT":
        rdata = TXT(r.data)
    else:
        rdata = {"A": A, "AAAA": AAAA, "CNAME": CNAME, "PTR": PTR}[r.type](
            r.data if r.type in ("A", "AAAA") else f"{r.data}.")
    return RR(f"{r.name}.", getattr(QTYPE, r.type), rdata=rdata, ttl=dns.TTL)


class _Datagrams(asyncio.DatagramProtocol):
    def __init__(self, server: ClusterDNS, cluster: bool):
        self.server, self.cluster = server, cluster
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport

    def datagram_received(self, data: bytes, addr) -> None:
        if (request := query(data)) is None:
            return
        server = self.server
        if not server.forwards(request, self.cluster):
            self.transport.sendto(reply(server.cluster, request, udp=True), addr)
            return
        task = asyncio.ensure_future(forward(server.forwarder, request, udp=True))
        server.forwarding.add(task)
        task.add_done_callback(lambda t: self._sent(t, addr))

    def _sent(self, task: asyncio.Task, addr) -> None:
        self.server.forwarding.discard(task)
        if not task.cancelled() and not self.transport.is_closing():
            self.transport.sendto(task.result(), addr)


class ClusterDNS:
    """The kube-dns Service, and where `netns` is given, the server in it at `address`, which
    forwards names outside the cluster (dns_forward) to `forwarder`, by default the host's
    resolv.conf's nameservers; and at `node_address` (where given), a server that forwards every
    name there, the cluster's too: the node's resolvers, as the process runtime's pods reach them
    (dns.NODE_RESOLVER)."""

    def __init__(self, client, clock: Clock = REAL, netns: str = "", address: str = "",
                 forwarder: Forwarder | None = None, node_address: str = ""):
        self.client = client
        self.netns, self.address, self.node_address = netns, address, node_address
        self.cluster = WatchedCluster(client, clock, watch_pods=False)
        self.forwarder = forwarder
        if forwarder is None and netns:
            self.forwarder = Forwarder(upstreams(), clock)
        #: the UDP queries being forwarded (each a task until the upstream answers)
        self.forwarding: set[asyncio.Task] = set()
        self._udp: list[asyncio.DatagramTransport] = []
        self._tcp: list[asyncio.Server] = []
        self._streams: set[asyncio.StreamWriter] = set()

    async def _exists(self, services) -> bool:
        try:
            await services.get(NAME, NAMESPACE)
        except APIError:
            return False
        return True

    async def start(self) -> None:
        """Make the Service (kubeadm's addon step: one a user made or changed is left as it is);
        where it serves, listen in its namespace and publish the address."""
        services = self.client.resource("", "v1", "services")
        try:
            await services.create(service())
        except APIError as e:
            # a Service already there: 409, or 422 where allocating its ClusterIP comes first and finds the
            # address taken, by that Service (a restart, a second API server; kubeadm ignores that too)
            if e.code != 409 and not (e.code == 422 and await self._exists(services)):
                log.warning("the %s Service was not made: %s", NAME, e.message)
        if not self.netns:
            return
        await self.serve(listen_in_netns(self.netns, self.address, PORT, socket.SOCK_DGRAM),
                         listen_in_netns(self.netns, self.address, PORT))
        if self.node_address:
            ip("addr", "add", f"{self.node_address}/32", "dev", "lo", netns=self.netns)
            await self.serve(listen_in_netns(self.netns, self.node_address, PORT, socket.SOCK_DGRAM),
                             listen_in_netns(self.netns, self.node_address, PORT), cluster=False)
        await self.client.resource("discovery.k8s.io", "v1", "endpointslices").patch(
            SLICE_NAME, endpoint_slice(self.address), "application/apply-patch+yaml", namespace=NAMESPACE,
            field_manager=MANAGED_BY, force=True)

    async def serve(self, udp: socket.socket, tcp: socket.socket, cluster: bool = True) -> None:
        """Answer queries on a bound UDP socket and a listening TCP one, once the informers have
        listed the cluster (or SYNC_WAIT is up: then from what they have, as it comes). Not
        `cluster`: forward every query (to `forwarder`, which must be given)."""
        if not await self.cluster.ready():
            log.warning("cluster DNS: Services, EndpointSlices and Pods not listed yet; answering from what is")
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_datagram_endpoint(lambda: _Datagrams(self, cluster), sock=udp)
        self._udp.append(transport)
        self._tcp.append(await asyncio.start_server(functools.partial(self._stream, cluster=cluster), sock=tcp))

    def forwards(self, request: DNSRecord, cluster: bool = True) -> bool:
        """Whether the query goes to the upstream resolvers: one `forwarded` (at the node's
        address, any single question)."""
        if not cluster:
            return request.header.opcode == OPCODE.QUERY and len(request.questions) == 1
        return self.forwarder is not None and forwarded(self.cluster, request)

    async def stop(self) -> None:
        for transport in self._udp:
            transport.close()
        for task in list(self.forwarding):
            task.cancel()
        for server in self._tcp:
            server.close()
        for writer in list(self._streams):
            writer.transport.abort()
        for server in self._tcp:
            await server.wait_closed()
        await self.cluster.close()

    async def _stream(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, cluster: bool) -> None:
        """DNS over TCP: each message after its two-byte length, as many as the asker sends (RFC 7766),
        each within READ_TIMEOUT (the first) or IDLE_TIMEOUT (the later ones), each answer taken within
        WRITE_TIMEOUT."""
        self._streams.add(writer)
        timeout = READ_TIMEOUT
        try:
            while True:
                async with asyncio.timeout(timeout):
                    size = int.from_bytes(await reader.readexactly(2), "big")
                    message = await reader.readexactly(size)
                if (request := query(message)) is None:
                    break
                answer = await forward(self.forwarder, request) if self.forwards(request, cluster) \
                    else reply(self.cluster, request)
                writer.write(len(answer).to_bytes(2, "big") + answer)
                async with asyncio.timeout(WRITE_TIMEOUT):
                    await writer.drain()
                timeout = IDLE_TIMEOUT
        except TimeoutError:
            writer.transport.abort()  # (closed at once: an answer it never took would hold the close)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self._streams.discard(writer)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
