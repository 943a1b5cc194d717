"""Container probes (exec, httpGet, tcpSocket) for processes in network
namespaces. Network probes connect from the node's namespace to the pod IP,
as a kubelet does; an exec probe runs its command in the container's
context through the same launcher as the container. Each attempt returns whether it passed
and, for a failure, the output upstream's probers give (the kubelet's Unhealthy message):
the command's output, `HTTP probe failed with statuscode: N`, or Go's error (a dial's; an HTTPS
request a plain HTTP server answered: SCHEME_MISMATCH)."""

from __future__ import annotations

import asyncio
import functools
import os
import socket
import ssl

from ..hooks import SCHEME_MISMATCH
from .netns import open_in_netns

HTTP_OK = range(200, 400)


async def _connect(netns: str, host: str, port: int) -> socket.socket:
    sock = await asyncio.to_thread(open_in_netns, netns)
    sock.setblocking(False)
    try:
        await asyncio.get_running_loop().sock_connect(sock, (host, port))
    except BaseException:
        sock.close()
        raise
    return sock


def _port(container: dict, port) -> int:
    """A probe port is a number or the name of one of the container's ports."""
    if isinstance(port, int) or str(port).isdigit():
        return int(port)
    for p in container.get("ports") or []:
        if p.get("name") == port:
            return int(p["containerPort"])
    raise ValueError(f"port {port!r} is not a named port of container {container['name']}")


def _dial_error(host: str, port: int, e: OSError) -> str:
    """A failed connect as Go's net.Dial words it: dial tcp 10.244.0.5:8080: connect: connection refused."""
    why = os.strerror(e.errno) if e.errno else (e.strerror or str(e) or type(e).__name__)
    return f"dial tcp {host}:{port}: connect: {why[:1].lower()}{why[1:]}"


async def tcp_probe(netns: str, host: str, port: int) -> tuple[bool, str]:
    try:
        sock = await _connect(netns, host, port)
    except OSError as e:
        return False, _dial_error(host, port, e)
    sock.close()
    return True, ""


@functools.cache
def _insecure_tls() -> ssl.SSLContext:
    """The TLS client of HTTPS probes and hooks: it checks neither the chain nor the name (the
    prober's and the lifecycle handler's transports set InsecureSkipVerify)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


class SchemeMismatch(Exception):
    """An HTTPS request's server answered in plain HTTP."""


class NotTLS(Exception):
    """An HTTPS request's server answered with what is no TLS record, or nothing: Go's words."""


async def _exchange(sock: socket.socket, request: bytes, tls_host: str | None) -> bytes:
    """Send `request` on `sock` (in TLS for server name `tls_host`) and read the answer's first line.
    TLS runs over memory BIOs so that the server's first bytes are seen: Go's client reads a record
    header of 5 and names an answer that starts `HTTP/` (a plain HTTP server's 400 to its hello)
    SCHEME_MISMATCH (net/http's ErrSchemeMismatch), raised as SchemeMismatch; another that is
    no TLS record (neither handshake nor alert), or none at all, fails as crypto/tls words it."""
    loop = asyncio.get_running_loop()
    if tls_host is None:
        await loop.sock_sendall(sock, request)
        line = b""
        while b"\n" not in line and (data := await loop.sock_recv(sock, 4096)):
            line += data
        return line.partition(b"\n")[0]
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = _insecure_tls().wrap_bio(incoming, outgoing, server_hostname=tls_host)
    head = bytearray()

    async def run(op):
        while True:
            try:
                result, more = op(), False
            except ssl.SSLWantReadError:
                result, more = None, True
            if out := outgoing.read():
                await loop.sock_sendall(sock, out)
            if not more:
                return result
            data = await loop.sock_recv(sock, 65536)
            head.extend(data[:5 - len(head)])
            if data:
                incoming.write(data)
            else:
                incoming.write_eof()
    try:
        await run(tls.do_handshake)
    except ssl.SSLError:
        if head == b"HTTP/":
            raise SchemeMismatch from None
        if not head:
            raise NotTLS("EOF") from None
        if head[0] not in (21, 22):  # alert, handshake: a first record's type (readRecordOrCCS)
            raise NotTLS("tls: first record does not look like a TLS handshake") from None
        raise
    await run(lambda: tls.write(request))
    line = b""
    while b"\n" not in line:
        try:
            data = await run(lambda: tls.read(4096))
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
            break
        if not data:
            break
        line += data
    return line.partition(b"\n")[0]


async def http_get(netns: str, host: str, port: int, path: str, headers: list[dict], scheme: str,
                   agent: str = "kube-probe/1.37") -> tuple[int | None, str]:
    """One GET from `netns`, as the prober's and the lifecycle hooks' requests are made (HTTPS
    without verifying the server): the answer's status code, or None and why there was none (Go's
    words)."""
    url = f"{scheme.lower()}://{host}:{port}{path or '/'}"
    try:
        sock = await _connect(netns, host, port)
    except OSError as e:
        return None, f'Get "{url}": {_dial_error(host, port, e)}'
    lines = [f"GET {path or '/'} HTTP/1.1", f"Host: {host}:{port}", f"User-Agent: {agent}",
             "Accept: */*", "Connection: close"]
    lines += [f"{h['name']}: {h['value']}" for h in headers]
    try:
        parts = (await _exchange(sock, ("\r\n".join(lines) + "\r\n\r\n").encode(),
                                 host if scheme.upper() == "HTTPS" else None)).split()
        if not (len(parts) >= 2 and parts[1].isdigit()):
            return None, f'Get "{url}": malformed HTTP response'
        return int(parts[1]), ""
    except SchemeMismatch:
        return None, f'Get "{url}": {SCHEME_MISMATCH}'
    except NotTLS as e:
        return None, f'Get "{url}": {e}'
    except ssl.SSLError as e:
        return None, f'Get "{url}": {e.reason or e}'
    except OSError as e:
        return None, f'Get "{url}": {os.strerror(e.errno) if e.errno else e}'
    finally:
        sock.close()


async def http_probe(netns: str, host: str, port: int, path: str, headers: list[dict],
                     scheme: str) -> tuple[bool, str]:
    status, error = await http_get(netns, host, port, path, headers, scheme)
    if status is None:
        return False, error
    if status not in HTTP_OK:
        return False, f"HTTP probe failed with statuscode: {status}"
    return True, ""


async def run_probe(probe: dict, container: dict, node_ns: str, pod_ip: str, exec_probe) -> tuple[bool, str]:
    """One attempt of `probe`, bounded by its timeoutSeconds (default 1): whether it passed, and
    its output; `exec_probe(argv, timeout)` runs an exec probe's command and returns its exit code
    and output."""
    timeout = float(probe.get("timeoutSeconds") or 1)
    try:
        if "exec" in probe:
            code, output = await exec_probe((probe["exec"] or {}).get("command") or [], timeout)
            return code == 0, output
        if "httpGet" in probe:
            h = probe["httpGet"]
            host, port = h.get("host") or pod_ip, _port(container, h["port"])
            check = http_probe(node_ns, host, port, h.get("path", "/"), h.get("httpHeaders") or [],
                               h.get("scheme", "HTTP"))
            late = f'Get "{h.get("scheme", "HTTP").lower()}://{host}:{port}{h.get("path") or "/"}": context ' \
                   "deadline exceeded (Client.Timeout exceeded while awaiting headers)"
        elif "tcpSocket" in probe:
            t = probe["tcpSocket"]
            host, port = t.get("host") or pod_ip, _port(container, t["port"])
            check = tcp_probe(node_ns, host, port)
            late = f"dial tcp {host}:{port}: i/o timeout"
        else:
            return False, "missing probe handler"
        try:
            return await asyncio.wait_for(check, timeout)
        except TimeoutError:
            return False, late
    except ValueError as e:
        return False, str(e)
