"""fuzz63: a request's line and headers are bounded all together as Go's server bounds them
(machinery/headlimit.py): past 1 MiB and 4 KiB a 431, on the API server and a component's secure port,
however many lines; below it any number of headers is served (aiohttp refused more than 128)."""

import asyncio
import ssl

import orjson

from nanokube.apiserver.app import APIServer
from nanokube.machinery.headlimit import READ_LIMIT
from nanokube.pki.ca import ensure_pki
from nanokube.store.memory import MemoryStore
from tests.apiserver.test_request_body import admin_context
from tests.component_port import component_port

#: 64 lines of 17 KiB: each far below a line's limit, together past READ_LIMIT
WIDE = b"".join(b"X-Pad-%d: %s\r\n" % (i, b"v" * (17 << 10)) for i in range(64))
#: 2,000 short headers, 40 KiB in all
MANY = b"".join(b"Impersonate-Group: g%d\r\n" % i for i in range(2000))


async def _ask(port: int, ctx: ssl.SSLContext, path: bytes, headers: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname="localhost")
    try:
        writer.write(b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n" + headers + b"Connection: close\r\n\r\n")
        return await asyncio.wait_for(reader.read(), 20)
    finally:
        writer.close()


async def test_the_api_servers_headers_are_bounded_in_all_not_in_number(tmp_path):
    assert len(WIDE) > READ_LIMIT
    pki = ensure_pki(str(tmp_path))
    s = APIServer(MemoryStore(), pki, port=0)
    await s.start()
    ctx = admin_context(pki, tmp_path)
    try:
        wide = await _ask(s.port, ctx, b"/version", WIDE)
        impersonated = await _ask(s.port, ctx, b"/version", b"Impersonate-User: bob\r\n" + MANY)
    finally:
        await s.stop()
    assert wide.split(b"\r\n", 1)[0].endswith(b" 431 Request Header Fields Too Large"), wide[:300]
    assert orjson.loads(wide.split(b"\r\n\r\n", 1)[1])["code"] == 431
    assert impersonated.startswith(b"HTTP/1.1 200 "), impersonated[:300]


async def test_a_component_ports_headers_are_bounded_in_all_not_in_number():
    async with component_port() as (port, insecure):
        wide = await _ask(port, insecure, b"/healthz", WIDE)
        many = await _ask(port, insecure, b"/healthz", MANY)
    assert wide.startswith(b"HTTP/1.0 431 ") and wide.endswith(b"\r\n\r\n431 Request Header Fields Too Large"), wide[:300]
    assert many.startswith(b"HTTP/1.1 200 ") and many.endswith(b"ok"), many[:300]
