"""The serving certificate and client CAs read from files again when they change: a new
connection gets what the files hold now, a pair that does not load keeps the last good one."""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import threading

from nanokube.apiserver.serving_tls import SNICert, ServingTLS, signed_by, verified_chain
from nanokube.pki.ca import issue, new_ca


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _write(path, data: bytes) -> str:
    path.with_suffix(".tmp").write_bytes(data)
    os.replace(path.with_suffix(".tmp"), path)
    return str(path)


class _Transport:
    """What asyncio's TLS transport gives of its connection: the SSL object."""

    def __init__(self, ssl_object) -> None:
        self.ssl_object = ssl_object

    def get_extra_info(self, name):
        return self.ssl_object if name == "ssl_object" else None


def _handshake(tls: ServingTLS, tmp_path, client=None, server_name=None, chains=None) -> tuple[bytes, dict | None]:
    """(the certificate the server served, the client certificate it verified) of one connection;
    the chain it verified added to `chains` where given."""
    a, b = socket.socketpair()
    got: dict = {}

    def serve() -> None:
        try:
            with tls.context().wrap_socket(a, server_side=True) as s:
                got["peer"] = s.getpeercert()
                if chains is not None:
                    chains.append(verified_chain(_Transport(s)))
                s.recv(1)
        except (ssl.SSLError, OSError) as e:
            got["error"] = e

    t = threading.Thread(target=serve)
    t.start()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    if client is not None:
        ctx.load_cert_chain(_write(tmp_path / "c.crt", client.cert_pem), _write(tmp_path / "c.key", client.key_pem))
    served = b""
    try:  # (a refused client certificate may end the connection before or after the client's write)
        with ctx.wrap_socket(b, server_hostname=server_name) as c:
            served = c.getpeercert(True)
            c.send(b"x")
    except (ssl.SSLError, OSError):
        pass
    t.join(10)
    return served, got.get("peer")


def test_rotated_files_are_served_to_new_connections(tmp_path):
    import cryptography.x509 as x509
    from cryptography.hazmat.primitives import serialization

    der = lambda pem: x509.load_pem_x509_certificate(pem).public_bytes(serialization.Encoding.DER)
    ca, other_ca, front = new_ca("one"), new_ca("two"), new_ca("front")
    first = issue(ca, "server", ips=("127.0.0.1",), server=True)
    cert, key = _write(tmp_path / "s.crt", first.cert_pem), _write(tmp_path / "s.key", first.key_pem)
    clients = _write(tmp_path / "clients.crt", ca.cert_pem)
    sni = issue(ca, "sni", dns_names=("*.example.test",), server=True)
    clock = Clock()
    tls = ServingTLS((cert, key), clients, front.cert_pem,
                     [SNICert(_write(tmp_path / "n.crt", sni.cert_pem), _write(tmp_path / "n.key", sni.key_pem))],
                     monotonic=clock)
    alice, bob = issue(ca, "alice", client=True), issue(other_ca, "bob", client=True)
    served, peer = _handshake(tls, tmp_path, alice)
    assert served == der(first.cert_pem) and peer["subject"] == ((("commonName", "alice"),),)
    assert _handshake(tls, tmp_path, server_name="api.example.test")[0] == der(sni.cert_pem)
    second = issue(ca, "server", ips=("127.0.0.1",), server=True)
    _write(tmp_path / "s.crt", second.cert_pem)  # the certificate before its key: does not load yet
    clock.t += 1
    assert _handshake(tls, tmp_path)[0] == der(first.cert_pem)
    _write(tmp_path / "s.key", second.key_pem)
    _write(tmp_path / "clients.crt", other_ca.cert_pem)
    assert _handshake(tls, tmp_path)[0] == der(first.cert_pem)  # (looked at no more than once a second)
    clock.t += 1
    served, peer = _handshake(tls, tmp_path, bob)
    assert served == der(second.cert_pem) and peer["subject"] == ((("commonName", "bob"),),)
    assert tls.client_ca_pem == other_ca.cert_pem
    assert _handshake(tls, tmp_path, alice)[1] is None  # the CA taken out of the file verifies no one


def test_a_ca_file_of_an_intermediate_alone_verifies_its_certificates(tmp_path):
    """Every certificate of a CA file is an anchor, as in Go's x509 pools: an intermediate CA
    without its root verifies the certificates it issued (and not its root's own)."""
    root = new_ca("root")
    mid = new_ca("intermediate", parent=root)
    server = issue(root, "server", server=True)
    tls = ServingTLS((server.cert_pem, server.key_pem), mid.cert_pem, new_ca("front").cert_pem)
    chains: list = []
    carol = issue(mid, "carol", client=True)
    assert _handshake(tls, tmp_path, carol, chains=chains)[1]["subject"] == ((("commonName", "carol"),),)
    assert chains == [[ssl.PEM_cert_to_DER_cert(p.decode()) for p in (carol.cert_pem, mid.cert_pem)]]
    assert signed_by(tls, chains[0]) == (False, True)  # (the users' CA anchors it)
    assert _handshake(tls, tmp_path, issue(root, "dan", client=True))[1] is None


def test_the_verified_chain_is_read_from_asyncios_transport(tmp_path):
    """The server judges a client certificate by the chain the handshake verified, read from
    asyncio's TLS transport: on 3.11 through the private object the SSL object wraps (the only way
    there), on 3.13 through the public method. Should either go, this fails here rather than
    requests turning anonymous."""
    root = new_ca("root")
    mid = new_ca("intermediate", parent=root)
    server = issue(root, "server", ips=("127.0.0.1",), server=True)
    tls = ServingTLS((server.cert_pem, server.key_pem), root.cert_pem, new_ca("front").cert_pem)
    erin = issue(mid, "erin", client=True)

    async def chain() -> list[bytes]:
        got = asyncio.get_running_loop().create_future()

        def connected(_reader, writer) -> None:
            got.set_result(verified_chain(writer.transport))
            writer.close()

        srv = await asyncio.start_server(connected, "127.0.0.1", 0, ssl=tls.context())
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
        ctx.load_cert_chain(_write(tmp_path / "erin.crt", erin.cert_pem + mid.cert_pem),
                            _write(tmp_path / "erin.key", erin.key_pem))
        _, writer = await asyncio.open_connection("127.0.0.1", srv.sockets[0].getsockname()[1], ssl=ctx)
        try:
            return await asyncio.wait_for(got, 10)
        finally:
            writer.close()
            srv.close()
            await srv.wait_closed()

    assert asyncio.run(chain()) == [ssl.PEM_cert_to_DER_cert(p.decode()) for p in (erin.cert_pem, mid.cert_pem,
                                                                                   root.cert_pem)]
