import asyncio
import socket
import subprocess
import time

from nanokube.node.runtime.netns import ClusterNetwork, dialer, ip, list_netns, listen_in_netns, open_in_netns

NODES = [("a", 0, "172.18.0.2", "10.244.0.0/24"), ("b", 1, "172.18.0.3", "10.244.1.0/24")]


async def _echo_once(server_ns: str, client_ns: str, host: str) -> bytes:
    """A TCP round trip from a socket in `client_ns` to one in `server_ns`."""
    srv = open_in_netns(server_ns)
    srv.bind(("0.0.0.0", 7000))
    srv.listen()
    srv.setblocking(False)
    cli = open_in_netns(client_ns)
    cli.setblocking(False)
    loop = asyncio.get_running_loop()
    try:
        await loop.sock_connect(cli, (host, 7000))
        conn, _ = await loop.sock_accept(srv)
        await loop.sock_sendall(cli, b"ping")
        got = await loop.sock_recv(conn, 4)
        conn.close()
        return got
    finally:
        cli.close()
        srv.close()


async def test_pods_on_different_nodes_reach_each_other(network):
    network.create(NODES)
    pa = network.add_pod("a", "aaaa1111-0000", "10.244.0.5")
    pb = network.add_pod("b", "bbbb2222-0000", "10.244.1.7")
    assert await _echo_once(pb, pa, "10.244.1.7") == b"ping"
    assert await _echo_once(pa, network.node_ns(1), "10.244.0.5") == b"ping"
    assert "10.244.1.0/24 via 172.18.0.3" in ip("route", netns=network.node_ns(0))


async def test_removing_a_pod_removes_its_namespace_and_veth(network):
    network.create(NODES)
    network.add_pod("a", "aaaa1111-0000", "10.244.0.5")
    network.remove_pod("a", "aaaa1111-0000")
    assert network.pod_ns("aaaa1111-0000") not in list_netns()
    assert "vaaaa11110000" not in ip("link", netns=network.node_ns(0))


def test_a_new_run_removes_what_a_crashed_one_left(network):
    network.create(NODES)
    pod = network.add_pod("a", "aaaa1111-0000", "10.244.0.5")
    sleeper = subprocess.Popen(["ip", "netns", "exec", pod, "sleep", "300"])
    for _ in range(500):  # a crashed run's processes had long entered their namespaces
        if str(sleeper.pid) in ip("netns", "pids", pod).split():
            break
        time.sleep(0.01)
    again = ClusterNetwork(network.tag)  # what the next `nanokube up` on the same data dir builds
    gone = again.cleanup()
    assert set(gone) == {network.cluster_ns, network.node_ns(0), network.node_ns(1), pod}
    assert sleeper.wait(timeout=10) == -9
    assert not [n for n in list_netns() if n.startswith(network.prefix)]


def test_a_socket_listening_at_the_advertised_address_sees_the_pod_as_its_peer(network):
    """The API server listens at the address it advertises in the cluster namespace too: pods on
    every node reach it there, and it sees each pod's own address (audit sourceIPs)."""
    network.create(NODES)
    pods = {"10.244.0.5": network.add_pod("a", "aaaa1111-0000", "10.244.0.5"),
            "10.244.1.7": network.add_pod("b", "bbbb2222-0000", "10.244.1.7")}
    server = network.listen("192.0.2.77", 6443)
    server.settimeout(10)
    try:
        for pod_ip, pod in pods.items():
            cli = open_in_netns(pod)
            cli.settimeout(10)
            try:
                cli.connect(("192.0.2.77", 6443))
                conn, peer = server.accept()
                assert peer[0] == pod_ip
                cli.sendall(b"ping")
                assert conn.recv(4) == b"ping"
                conn.close()
            finally:
                cli.close()
    finally:
        server.close()


def test_the_api_server_dials_pods_from_its_advertised_address_and_workers_share_its_port(network):
    """What each API server worker does: binds the advertised address and port in the cluster
    namespace beside the others (SO_REUSEPORT), and dials a pod from that address."""
    network.create(NODES)
    pod = network.add_pod("b", "bbbb2222-0000", "10.244.1.7")
    first = network.listen("192.0.2.77", 6443)
    second = listen_in_netns(network.cluster_ns, "192.0.2.77", 6443)
    srv = open_in_netns(pod)
    srv.bind(("0.0.0.0", 8443))
    srv.listen()
    srv.settimeout(10)
    cli = dialer(network.cluster_ns, "192.0.2.77")((socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.244.1.7", 8443)))
    cli.settimeout(10)
    try:
        cli.connect(("10.244.1.7", 8443))
        conn, peer = srv.accept()
        conn.close()
        assert peer[0] == "192.0.2.77"
    finally:
        for s in (cli, srv, first, second):
            s.close()
