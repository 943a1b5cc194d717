"""fuzz63: a request that asks for an upgrade and is answered without one ends its connection
(machinery/keepalive.py). aiohttp's parser dropped what followed such a request: a refused PATCH whose
body came after its answer, or a request pipelined behind a refused exec, left the client's next
request on that connection unanswered for good, on the API server and on a component's secure port."""

import asyncio
import ssl

import pytest

from nanokube.apiserver.app import APIServer
from nanokube.pki.ca import ensure_pki
from nanokube.store.memory import MemoryStore
from tests.apiserver.test_request_body import admin_context
from tests.component_port import component_port

#: the heads of a refused upgrade: a PATCH without a Content-Type (415) whose one-byte body is sent after
#: its answer has come, and an exec of a pod that does not exist (404) with the next request right behind it
LATE_BODY = (b"PATCH /api/v1/namespaces/default/configmaps/c HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\n"
             b"Upgrade: SPDY/3.1\r\nContent-Length: 1\r\n\r\n")
PIPELINED = (b"POST /api/v1/namespaces/default/pods/p/exec HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\n"
             b"Upgrade: websocket\r\nContent-Length: 0\r\n\r\n")
NEXT = b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n"


async def _refused_then_next(port: int, ctx: ssl.SSLContext, late_body: bool) -> tuple[bytes, bytes]:
    """The refusal's head, then all the connection gave after it until the server closed it (a hang:
    a TimeoutError)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname="localhost")
    try:
        writer.write(LATE_BODY if late_body else PIPELINED + NEXT)
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        if late_body:
            writer.write(b"x" + NEXT)
        return head, await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()


@pytest.mark.parametrize("late_body", [True, False], ids=["body after the answer", "request pipelined behind"])
async def test_an_api_request_refused_an_upgrade_closes_its_connection(tmp_path, late_body):
    pki = ensure_pki(str(tmp_path))
    s = APIServer(MemoryStore(), pki, port=0)
    await s.start()
    try:
        head, rest = await _refused_then_next(s.port, admin_context(pki, tmp_path), late_body)
    finally:
        await s.stop()
    assert head.startswith(b"HTTP/1.1 415 " if late_body else b"HTTP/1.1 404 "), head
    assert b"\r\nConnection: close\r\n" in head, head
    assert b"HTTP/1.1" not in rest, "the request after the refusal was read as if the connection were kept"


async def test_a_component_port_refusing_an_upgrade_closes_its_connection():
    async with component_port() as (port, insecure):
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=insecure)
        writer.write(b"PATCH /healthz HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n"
                     b"Content-Length: 1\r\n\r\n")
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        writer.write(b"xGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        rest = await asyncio.wait_for(reader.read(), 10)
        writer.close()
    assert head.startswith(b"HTTP/1.1 405 ") and b"\r\nConnection: close\r\n" in head, head
    assert b"HTTP/1.1" not in rest
