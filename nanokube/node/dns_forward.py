"""Names outside the cluster: what kubeadm's Corefile does with them, `forward . /etc/resolv.conf`
(`max_concurrent 1000`) behind `cache 30`, as the cluster DNS server (clusterdns) does it.

The upstreams are the nameservers of the node's /etc/resolv.conf, read once at start as CoreDNS
reads the node's; the server runs in the host's namespace (only its listening sockets are made in
the cluster one), so the sockets made here reach the host's resolvers, loopback ones included.
As the forward plugin:

- a query goes to an upstream over the transport it came by (UDP, or TCP), and the upstream's
  answer goes back as it is (its rcode, records, a truncated one's TC bit: the asker then asks
  over TCP), with the asker's id;
- a network error or no answer in TRY_TIMEOUT tries the next upstream (the order random, those
  that failed MAX_FAILS times in a row last, as forward's health checks would have marked them);
  none in TIMEOUT, or none at all, is SERVFAIL;
- more than MAX_CONCURRENT queries at once: the rest are REFUSED at once (forward's max_concurrent).

And as `cache 30`: a NOERROR or NXDOMAIN answer is kept for its least TTL (an SOA's minimum for a
negative one), between MIN_TTL and CACHE_TTL seconds, and every record answered carries what is
left of that, a first answer too; at most CACHE_SIZE answers, the least recently used given up
first. Not done: active health checks (a failed upstream is tried again at its turn), caching
SERVFAIL, prefetch, the `loop` plugin (the host's resolvers cannot reach the cluster's server).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
from collections import OrderedDict
from collections.abc import Sequence

from dnslib import EDNS0, QTYPE, RCODE, DNSError, DNSRecord

from ..clock import REAL, Clock
from . import dns

PORT = 53
#: the forward plugin's deadline for one query, and for one upstream's answer
TIMEOUT, TRY_TIMEOUT = 5.0, 2.0
MAX_CONCURRENT = 1000
#: failures in a row that mark an upstream down (forward's max_fails)
MAX_FAILS = 2
#: the most upstreams forward takes
MAX_UPSTREAMS = 15
#: `cache 30`: the longest an answer is kept; the shortest (the cache plugin's minttl and
#: denial minttl); how many answers (its default capacity)
CACHE_TTL, MIN_TTL, CACHE_SIZE = 30, 5, 9984
#: the UDP size the server's EDNS0 offers (clusterdns's, the DNS flag day's 1232)
EDNS_SIZE = 1232


def upstreams(resolv_conf: str = dns.RESOLV_CONF) -> list[tuple[str, int]]:
    """The nameservers of a resolv.conf (none where it cannot be read)."""
    try:
        with open(resolv_conf) as f:
            nameservers = dns.parse_resolv_conf(f.read())[0]
    except OSError:
        return []
    return [(ns, PORT) for ns in nameservers[:MAX_UPSTREAMS]]


class Cache:
    """Answers by question, each until its TTL is up (`cache 30`)."""

    def __init__(self, clock: Clock = REAL, size: int = CACHE_SIZE):
        self.clock, self.size = clock, size
        self._answers: OrderedDict[tuple, tuple[float, int, DNSRecord]] = OrderedDict()

    def get(self, request: DNSRecord) -> DNSRecord | None:
        """The answer kept for the request's question, with its id and what is left of its TTL."""
        key = _key(request)
        if (kept := self._answers.get(key)) is None:
            return None
        stored, ttl, reply = kept
        left = int(stored + ttl - self.clock.monotonic())
        if left <= 0:
            del self._answers[key]
            return None
        self._answers.move_to_end(key)
        return _with_ttl(reply, request, left)

    def put(self, request: DNSRecord, reply: DNSRecord) -> DNSRecord:
        """Keep a NOERROR or NXDOMAIN answer that is whole; returns it as the asker gets it (its TTLs
        capped)."""
        if reply.header.rcode not in (RCODE.NOERROR, RCODE.NXDOMAIN) or reply.header.tc:
            return reply
        ttl = _ttl(reply)
        self._answers[_key(request)] = (self.clock.monotonic(), ttl, reply)
        self._answers.move_to_end(_key(request))
        while len(self._answers) > self.size:
            self._answers.popitem(last=False)
        return _with_ttl(reply, request, ttl)


def _key(request: DNSRecord) -> tuple:
    q = request.q
    return str(q.qname).lower(), q.qtype, q.qclass


def _ttl(reply: DNSRecord) -> int:
    """How long to keep an answer: its records' least TTL (for a negative one, its SOA's, at most
    the SOA's minimum), within MIN_TTL and CACHE_TTL."""
    if reply.header.rcode == RCODE.NXDOMAIN or not reply.rr:
        soa = [min(r.ttl, r.rdata.times[4]) for r in reply.auth if r.rtype == QTYPE.SOA]
        least = min(soa, default=MIN_TTL)
    else:
        least = min(r.ttl for r in (*reply.rr, *reply.auth, *reply.ar) if r.rtype != QTYPE.OPT)
    return max(MIN_TTL, min(CACHE_TTL, least))


def _with_ttl(reply: DNSRecord, request: DNSRecord, ttl: int) -> DNSRecord:
    """The answer as `request` gets it: its id, every record's TTL `ttl`, and EDNS0 (the
    server's) only where it asked with it, whichever query the answer was kept for."""
    out = DNSRecord.parse(reply.pack())
    out.header.id = request.header.id
    out.ar = [r for r in out.ar if r.rtype != QTYPE.OPT]
    for r in (*out.rr, *out.auth, *out.ar):
        r.ttl = ttl
    if any(r.rtype == QTYPE.OPT for r in request.ar):
        out.add_ar(EDNS0(udp_len=EDNS_SIZE))
    return out


class Forwarder:
    """`forward . <upstreams>` behind `cache 30`."""

    def __init__(self, servers: Sequence[tuple[str, int]], clock: Clock = REAL):
        self.servers = list(servers)
        self.cache = Cache(clock)
        self._fails = dict.fromkeys(self.servers, 0)
        self._in_flight = 0

    async def forward(self, request: DNSRecord, tcp: bool = False) -> DNSRecord:
        """The answer to `request`: the cache's, else an upstream's; SERVFAIL where none answers
        in time, REFUSED past MAX_CONCURRENT."""
        if (kept := self.cache.get(request)) is not None:
            return kept
        if self._in_flight >= MAX_CONCURRENT:
            return _failed(request, RCODE.REFUSED)
        self._in_flight += 1
        try:
            async with asyncio.timeout(TIMEOUT):
                for server in self._order():
                    if (reply := await self._exchange(server, request, tcp)) is not None:
                        return self.cache.put(request, reply)
        except TimeoutError:
            pass
        finally:
            self._in_flight -= 1
        return _failed(request, RCODE.SERVFAIL)

    def _order(self) -> list[tuple[str, int]]:
        """The upstreams to try in turn: at random, those marked down last."""
        servers = random.sample(self.servers, len(self.servers))
        return sorted(servers, key=lambda s: self._fails[s] >= MAX_FAILS)

    async def _exchange(self, server: tuple[str, int], request: DNSRecord, tcp: bool) -> DNSRecord | None:
        """The upstream's answer to the request's question (asked under an id of its own), None on
        a network error, no answer in TRY_TIMEOUT, or one that does not answer it."""
        query = DNSRecord.parse(request.pack())
        query.header.id = random.randrange(1 << 16)
        try:
            async with asyncio.timeout(TRY_TIMEOUT):
                data = await (_tcp if tcp else _udp)(server, query)
            reply = DNSRecord.parse(data)
        except (OSError, TimeoutError, DNSError, asyncio.IncompleteReadError):
            self._fails[server] += 1
            return None
        self._fails[server] = 0
        if reply.header.id != query.header.id or reply.questions != query.questions:
            return None
        reply.header.id = request.header.id
        return reply


def _failed(request: DNSRecord, rcode: int) -> DNSRecord:
    reply = request.reply(ra=1, aa=0)
    reply.header.rcode = rcode
    return reply


def _family(host: str) -> int:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


async def _udp(server: tuple[str, int], query: DNSRecord) -> bytes:
    """The first datagram from the upstream answering the query's id (others, late answers to
    earlier queries, are passed over)."""
    loop = asyncio.get_running_loop()
    with socket.socket(_family(server[0]), socket.SOCK_DGRAM) as sock:
        sock.setblocking(False)
        await loop.sock_connect(sock, server)
        await loop.sock_sendall(sock, query.pack())
        while True:
            data = await loop.sock_recv(sock, 65535)
            if data[:2] == query.header.id.to_bytes(2, "big"):
                return data


async def _tcp(server: tuple[str, int], query: DNSRecord) -> bytes:
    reader, writer = await asyncio.open_connection(*server)
    try:
        packed = query.pack()
        writer.write(len(packed).to_bytes(2, "big") + packed)
        size = int.from_bytes(await reader.readexactly(2), "big")
        return await reader.readexactly(size)
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
