"""Packets through the `lb-N` layout on the real kernel: a node namespace
running the rules and a pod namespace behind a veth, as the process runtime
wires them. The pod serves two ports; it reaches them through a ClusterIP
from a second address (kept as the source) and from its own address
(hairpin: masqueraded to the node's address, else the reply would bypass
the DNAT)."""

import secrets
import subprocess
import sys

import pytest

from nanokube.proxy.nftables.layout import Config, Endpoint, ServicePort
from nanokube.proxy.nftables.sync import Syncer

POD, OTHER, NODE = "10.244.1.1", "10.244.1.2", "10.244.1.254"

SERVER = r"""
import socket, sys, threading
proto = socket.SOCK_DGRAM if sys.argv[1] == "udp" else socket.SOCK_STREAM
def bind(port):
    s = socket.socket(type=proto)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port))
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
threads = [threading.Thread(target=serve, args=(bind(port), port), daemon=True) for port in (8080, 8081)]
for t in threads:
    t.start()
print("ready", flush=True)
threads[0].join()
"""

CLIENT = r"""
import socket, sys
proto = socket.SOCK_DGRAM if sys.argv[1] == "udp" else socket.SOCK_STREAM
seen = set()
for _ in range(40):
    c = socket.socket(type=proto)
    c.settimeout(3)
    c.connect(("10.96.0.10", int(sys.argv[2])))
    if proto == socket.SOCK_DGRAM:
        c.send(b"x")
    seen.add(c.recv(100).decode())
    c.close()
print(" ".join(seen))
"""


def sh(*argv):
    subprocess.run(argv, check=True, capture_output=True)


@pytest.fixture
def pods(netns):
    """Pod namespaces with POD and OTHER, each routed through `netns` (the node)."""
    names = {}
    node = ("ip", "netns", "exec", netns)
    try:
        sh(*node, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        for ip in (POD, OTHER):
            name, veth = f"nk-pod-{secrets.token_hex(4)}", f"nkv{secrets.token_hex(3)}"
            sh("ip", "netns", "add", name)
            names[ip] = name
            sh("ip", "link", "add", veth, "netns", netns, "type", "veth", "peer", "name", "eth0", "netns", name)
            sh(*node, "ip", "link", "set", veth, "up")
            sh(*node, "ip", "addr", "add", f"{NODE}/32", "dev", veth)
            sh(*node, "ip", "route", "add", f"{ip}/32", "dev", veth)
            inside = ("ip", "netns", "exec", name)
            sh(*inside, "ip", "link", "set", "lo", "up")
            sh(*inside, "ip", "link", "set", "eth0", "up")
            sh(*inside, "ip", "addr", "add", f"{ip}/32", "dev", "eth0")
            sh(*inside, "ip", "route", "add", "default", "via", NODE, "dev", "eth0", "onlink")
        yield names
    finally:
        for name in names.values():
            subprocess.run(["ip", "netns", "del", name], check=False)


def answers(pod_ns, proto, port):
    out = subprocess.run(["ip", "netns", "exec", pod_ns, sys.executable, "-c", CLIENT, proto, str(port)],
                         check=False, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    words = out.stdout.split()  # "port peer" per distinct answer
    return {(words[i], words[i + 1]) for i in range(0, len(words), 2)}


@pytest.mark.parametrize("proto,port", [("tcp", 80), ("udp", 53)])
def test_lb_chain_balances_translates_ports_and_masquerades_hairpin(nft, pods, proto, port):
    server = subprocess.Popen(["ip", "netns", "exec", pods[POD], sys.executable, "-c", SERVER, proto],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout.readline().strip() == "ready"
        eps = (Endpoint(POD, 8080), Endpoint(POD, 8081))
        svc = ServicePort("default", "web", "p", proto, "10.96.0.10", port, endpoints=eps)
        assert Syncer(nft, Config(cluster_cidr="10.244.0.0/16")).sync({svc.key: svc}).ok
        assert answers(pods[OTHER], proto, port) == {("8080", OTHER), ("8081", OTHER)}  # both slots, source kept
        assert answers(pods[POD], proto, port) == {("8080", NODE), ("8081", NODE)}  # hairpin masqueraded
    finally:
        server.kill()
        server.wait()
