"""A request body that arrives in several TCP segments is read whole."""

import asyncio
import ssl
import threading

import orjson

from nanokube.apiserver import serializer
from nanokube.apiserver.app import APIServer
from nanokube.pki.ca import ensure_pki
from nanokube.store.memory import MemoryStore


def admin_context(pki, tmp_path) -> ssl.SSLContext:
    """A TLS client context trusting the server's CA and presenting the admin's certificate."""
    ctx = ssl.create_default_context(cadata=pki.ca.cert_pem.decode())
    (tmp_path / "c.crt").write_bytes(pki.admin.cert_pem)
    (tmp_path / "c.key").write_bytes(pki.admin.key_pem)
    ctx.load_cert_chain(tmp_path / "c.crt", tmp_path / "c.key")
    return ctx


async def test_body_sent_in_pieces_is_read_to_the_end(tmp_path):
    pki = ensure_pki(str(tmp_path))
    server = APIServer(MemoryStore(), pki, port=0)
    await server.start()
    try:
        ctx = admin_context(pki, tmp_path)
        body = orjson.dumps({"metadata": {"name": "big", "namespace": "default"}, "data": {"k": "x" * 6000}})
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port, ssl=ctx, server_hostname="localhost")
        writer.write(b"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: localhost\r\n"
                     b"Content-Type: application/json\r\nConnection: close\r\n"
                     b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body[:3000])
        await writer.drain()
        await asyncio.sleep(0.3)
        writer.write(body[3000:])
        await writer.drain()
        response = await reader.read()
        writer.close()
        assert response.startswith(b"HTTP/1.1 201"), response[:300]
        assert orjson.loads(response.split(b"\r\n\r\n", 1)[1])["data"]["k"] == "x" * 6000
    finally:
        await server.stop()


async def test_a_long_yaml_body_is_decoded_while_other_requests_are_answered(tmp_path, monkeypatch):
    """PyYAML builds a YAML body's values in Python (some seconds for a few hundred KB of small
    items); decoded in the event loop, it held every other request until it was done, so a 3 MB
    body stalled the server for half a minute. The decoder here is held until a /readyz sent
    meanwhile is answered: off the loop, /readyz comes first; in the loop, nothing is answered
    until the decoder gives up waiting (10 s) and the create comes first."""
    decoding, answered = threading.Event(), threading.Event()
    loads_yaml = serializer.loads_yaml

    def held(raw):
        decoding.set()
        answered.wait(10)
        return loads_yaml(raw)

    monkeypatch.setattr(serializer, "loads_yaml", held)
    pki = ensure_pki(str(tmp_path))
    server = APIServer(MemoryStore(), pki, port=0)
    await server.start()
    try:
        ctx = admin_context(pki, tmp_path)
        body = ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: y\n  namespace: default\nextra:\n"
                + "".join(f"- {{k: {i}, v: [a, b]}}\n" for i in range(20_000))).encode()
        done: list[str] = []

        async def send(name: str, head: bytes, payload: bytes = b"") -> int:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port, ssl=ctx, server_hostname="localhost")
            writer.write(head + b"Host: localhost\r\nConnection: close\r\nContent-Length: " + str(len(payload)).encode()
                         + b"\r\n\r\n" + payload)
            await writer.drain()
            status = int((await reader.readline()).split()[1])
            await reader.read()
            writer.close()
            done.append(name)
            return status

        create = asyncio.create_task(send("create", b"POST /api/v1/namespaces/default/configmaps?dryRun=All HTTP/1.1\r\n"
                                                    b"Content-Type: application/yaml\r\n", body))
        while not decoding.is_set():
            await asyncio.sleep(0.01)
        ready = await send("readyz", b"GET /readyz HTTP/1.1\r\n")
        answered.set()
        assert (await create, ready) == (201, 200)  # (the unknown field `extra` is a warning)
        assert done == ["readyz", "create"]
    finally:
        await server.stop()
