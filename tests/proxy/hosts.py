"""Namespaces that stand in for pods or outside hosts on the real kernel, each
behind a veth into a node namespace (routed the way the process runtime wires
pods), and the two-port echo server and balancing client the traffic tests
run inside them."""

from __future__ import annotations

import contextlib
import secrets
import subprocess
import sys

#: the node's end of every veth
NODE4, NODE6 = "10.244.1.254", "fd00:10:244:1::fe"

#: serves ports 8080 and 8081 on both families, answering "PORT PEER-ADDRESS"
ECHO_SERVER = r"""
import socket, sys, threading
proto = socket.SOCK_DGRAM if sys.argv[1] == "udp" else socket.SOCK_STREAM
def bind(family, host, port):
    s = socket.socket(family, proto)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if family == socket.AF_INET6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    s.bind((host, port))
    if proto == socket.SOCK_STREAM:
        s.listen()
    return s
def serve(s, port):
    if proto == socket.SOCK_DGRAM:
        while True:
            _, peer = s.recvfrom(100)
            s.sendto(f"{port} {peer[0]}".encode(), peer)
    while True:
        c, peer = s.accept()
        c.sendall(f"{port} {peer[0]}".encode())
        c.close()
threads = [threading.Thread(target=serve, args=(bind(f, h, port), port), daemon=True)
           for f, h in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")) for port in (8080, 8081)]
for t in threads:
    t.start()
print("ready", flush=True)
threads[0].join()
"""

#: connects 40 times to IP:PORT and prints each distinct answer once
BALANCE_CLIENT = r"""
import socket, sys
proto = socket.SOCK_DGRAM if sys.argv[1] == "udp" else socket.SOCK_STREAM
family = socket.AF_INET6 if ":" in sys.argv[2] else socket.AF_INET
seen = set()
for _ in range(40):
    c = socket.socket(family, proto)
    c.settimeout(3)
    c.connect((sys.argv[2], int(sys.argv[3])))
    if proto == socket.SOCK_DGRAM:
        c.send(b"x")
    seen.add(c.recv(100).decode())
    c.close()
print(" ".join(seen))
"""


#: connects once to each IP[:PORT] (port 80 unless given), printing OK and the answer or ERR and why
REACH_CLIENT = r"""
import socket, sys
for target in sys.argv[1:]:
    ip, _, port = target.partition(":")
    c = socket.socket()
    c.settimeout(1.5)
    try:
        c.connect((ip, int(port or 80)))
        print("OK", target, c.recv(100).decode().replace(" ", "/"), flush=True)
    except OSError as e:
        print("ERR", target, type(e).__name__, flush=True)
    c.close()
"""


def sh(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True)


@contextlib.contextmanager
def attached(node_ns: str, addresses: list[tuple[str, str | None]], prefix: str = "nk-pod"):
    """A namespace per (IPv4, IPv6 or None) address pair, routed through
    `node_ns`; yields each address -> its namespace, all removed afterwards."""
    names: dict[str, str] = {}
    node = ("ip", "netns", "exec", node_ns)
    dual = any(v6 for _, v6 in addresses)
    try:
        sh(*node, "sysctl", "-qw", "net.ipv4.ip_forward=1", *(["net.ipv6.conf.all.forwarding=1"] if dual else []))
        for v4, v6 in addresses:
            name, veth = f"{prefix}-{secrets.token_hex(4)}", f"nkv{secrets.token_hex(3)}"
            sh("ip", "netns", "add", name)
            names[v4] = name
            inside = ("ip", "netns", "exec", name)
            sh("ip", "link", "add", veth, "netns", node_ns, "type", "veth", "peer", "name", "eth0", "netns", name)
            sh(*node, "ip", "link", "set", veth, "up")
            sh(*inside, "ip", "link", "set", "lo", "up")
            sh(*inside, "ip", "link", "set", "eth0", "up")
            sh(*node, "ip", "addr", "add", f"{NODE4}/32", "dev", veth)
            sh(*node, "ip", "route", "add", f"{v4}/32", "dev", veth)
            sh(*inside, "ip", "addr", "add", f"{v4}/32", "dev", "eth0")
            sh(*inside, "ip", "route", "add", "default", "via", NODE4, "dev", "eth0", "onlink")
            if v6:
                names[v6] = name
                sh(*node, "ip", "-6", "addr", "add", f"{NODE6}/128", "dev", veth, "nodad")
                sh(*node, "ip", "-6", "route", "add", f"{v6}/128", "dev", veth)
                sh(*inside, "ip", "-6", "addr", "add", f"{v6}/128", "dev", "eth0", "nodad")
                sh(*inside, "ip", "-6", "route", "add", "default", "via", NODE6, "dev", "eth0", "onlink")
        yield names
    finally:
        for name in set(names.values()):
            subprocess.run(["ip", "netns", "del", name], check=False)


def uplink(node_ns: str) -> None:
    """A default route out of `node_ns` (into a veth whose peer stays down), as a node has, so
    packets no rule translated reach the forward hook instead of failing the route lookup."""
    node = ("ip", "netns", "exec", node_ns)
    sh(*node, "ip", "link", "add", "uplink", "type", "veth", "peer", "name", "uplink-peer")
    sh(*node, "ip", "link", "set", "uplink", "up")
    sh(*node, "ip", "route", "add", "default", "dev", "uplink")


def serve(ns: str, proto: str) -> subprocess.Popen:
    """The echo server in `ns`, once it listens; the caller kills it."""
    server = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", ECHO_SERVER, proto],
                              stdout=subprocess.PIPE, text=True)
    assert server.stdout.readline().strip() == "ready"
    return server


@contextlib.contextmanager
def serving(node_ns: str, addresses: list[str], proto: str):
    """Hosts at `addresses` behind `node_ns` (given an uplink), the first running the echo server over
    `proto`: yields `attached`'s names, the server killed afterwards."""
    uplink(node_ns)
    with attached(node_ns, [(a, None) for a in addresses], "nk-host") as names:
        server = serve(names[addresses[0]], proto)
        try:
            yield names
        finally:
            server.kill()
            server.wait()


def answers(ns: str, proto: str, ip: str, port: int) -> set[tuple[str, str]]:
    """(server port, peer address the server saw) of every distinct answer from `ns` to IP:PORT."""
    out = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", BALANCE_CLIENT, proto, ip, str(port)],
                         check=False, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    words = out.stdout.split()
    return {(words[i], words[i + 1]) for i in range(0, len(words), 2)}


def connect(ns: str, *targets: str) -> dict[str, list[str]]:
    """One TCP connection from `ns` to each IP[:PORT]: target -> ["OK", "PORT/PEER"] (what the
    echo server answered) or ["ERR", the exception's name]."""
    out = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", REACH_CLIENT, *targets],
                         check=False, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return {line.split()[1]: line.split()[0::2] for line in out.stdout.splitlines()}
