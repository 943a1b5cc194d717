"""Container probes (exec, httpGet, tcpSocket) for processes in network
namespaces. Network probes connect from the node's namespace to the pod IP,
as a kubelet does; an exec probe runs its command in the container's
context through the same launcher as the container."""

from __future__ import annotations

import asyncio
import socket

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


async def tcp_probe(netns: str, host: str, port: int) -> bool:
    try:
        sock = await _connect(netns, host, port)
    except OSError:
        return False
    sock.close()
    return True


async def http_probe(netns: str, host: str, port: int, path: str, headers: list[dict], scheme: str) -> bool:
    if scheme.upper() == "HTTPS":
        return False  # no TLS client in probes: treated as a failing probe
    try:
        sock = await _connect(netns, host, port)
    except OSError:
        return False
    loop = asyncio.get_running_loop()
    try:
        lines = [f"GET {path or '/'} HTTP/1.1", f"Host: {host}:{port}", "User-Agent: kube-probe/1.37",
                 "Accept: */*", "Connection: close"]
        lines += [f"{h['name']}: {h['value']}" for h in headers]
        await loop.sock_sendall(sock, ("\r\n".join(lines) + "\r\n\r\n").encode())
        head = b""
        while b"\r\n" not in head:
            chunk = await loop.sock_recv(sock, 4096)
            if not chunk:
                break
            head += chunk
        parts = head.split(b"\r\n", 1)[0].split()
        return len(parts) >= 2 and parts[1].isdigit() and int(parts[1]) in HTTP_OK
    except OSError:
        return False
    finally:
        sock.close()


async def run_probe(probe: dict, container: dict, node_ns: str, pod_ip: str, exec_probe) -> bool:
    """One attempt of `probe`, bounded by its timeoutSeconds (default 1);
    `exec_probe(argv, timeout)` runs an exec probe's command and returns its exit code."""
    timeout = float(probe.get("timeoutSeconds") or 1)
    try:
        if "exec" in probe:
            return await exec_probe((probe["exec"] or {}).get("command") or [], timeout) == 0
        if "httpGet" in probe:
            h = probe["httpGet"]
            check = http_probe(node_ns, h.get("host") or pod_ip, _port(container, h["port"]), h.get("path", "/"),
                               h.get("httpHeaders") or [], h.get("scheme", "HTTP"))
        elif "tcpSocket" in probe:
            t = probe["tcpSocket"]
            check = tcp_probe(node_ns, t.get("host") or pod_ip, _port(container, t["port"]))
        else:
            return False
        return await asyncio.wait_for(check, timeout)
    except (TimeoutError, ValueError):
        return False
