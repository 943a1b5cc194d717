"""`Expect: 100-continue` over a raw TLS connection, as curl sends it for a large body: the server
sends the 100 Continue only when it reads the body, as kube-apiserver's net/http does, so what it
refuses first (a 415, a 406, authorization) is answered at once, without the body and closing the
connection; what it reads goes through the same negotiation, admission and Status as any request."""

import asyncio
import contextlib
import ssl

import orjson
import yaml

from nanokube.apiserver.app import APIServer
from nanokube.pki.ca import ensure_pki
from nanokube.store.memory import MemoryStore
from tests.apiserver.test_request_body import admin_context

PATH = b"/api/v1/namespaces/default/configmaps"


@contextlib.asynccontextmanager
async def served(tmp_path):
    pki = ensure_pki(str(tmp_path))
    server = APIServer(MemoryStore(), pki, port=0)
    await server.start()
    try:
        yield server, admin_context(pki, tmp_path)
    finally:
        await server.stop()


class Conn:
    """One connection; `head` sends a request's headers only, `answer` reads one response."""

    def __init__(self, reader, writer):
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, server, ctx: ssl.SSLContext) -> "Conn":
        return cls(*await asyncio.open_connection("127.0.0.1", server.port, ssl=ctx, server_hostname="localhost"))

    async def head(self, body: bytes, *headers: str, expect: str = "100-continue", path: bytes = PATH) -> None:
        lines = [f"POST {path.decode()} HTTP/1.1", "Host: localhost", f"Content-Length: {len(body)}",
                 f"Expect: {expect}", *headers]
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        await self.writer.drain()

    async def answer(self) -> tuple[int, dict[str, str], bytes]:
        status = await asyncio.wait_for(self.reader.readline(), 10)
        headers: dict[str, str] = {}
        while (line := await self.reader.readline()) != b"\r\n":
            k, v = line.decode().split(":", 1)
            headers[k.lower()] = v.strip()
        body = await self.reader.readexactly(int(headers.get("content-length", "0")))
        return int(status.split()[1]), headers, body

    def close(self) -> None:
        self.writer.close()


def cm(name: str) -> bytes:
    return orjson.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                         "data": {"k": "x" * 200_000}})


async def test_the_100_continue_comes_when_the_body_is_read_and_the_connection_is_kept(tmp_path):
    async with served(tmp_path) as (server, ctx):
        c = await Conn.open(server, ctx)
        try:
            body = cm("big")
            await c.head(body, "Content-Type: application/json")
            code, _, _ = await c.answer()
            assert code == 100
            c.writer.write(body)
            code, headers, out = await c.answer()
            assert code == 201 and orjson.loads(out)["data"]["k"] == "x" * 200_000
            assert headers.get("connection") != "close"
            # the same connection again: an error after the body was read, negotiated as YAML
            await c.head(body, "Content-Type: application/json", "Accept: application/yaml")
            assert (await c.answer())[0] == 100
            c.writer.write(body)
            code, headers, out = await c.answer()
            assert code == 409 and headers["content-type"] == "application/yaml"
            assert yaml.safe_load(out)["reason"] == "AlreadyExists"
        finally:
            c.close()


async def test_a_request_refused_before_its_body_is_read_is_answered_at_once_and_the_connection_closed(tmp_path):
    async with served(tmp_path) as (server, ctx):
        anonymous = ssl.create_default_context(cadata=ctx.get_ca_certs(binary_form=True)[0])
        for context, headers, code, reason in [
            (ctx, ("Content-Type: text/plain",), 415, "UnsupportedMediaType"),
            (ctx, ("Content-Type: application/json", "Accept: application/foo"), 406, "NotAcceptable"),
            (anonymous, ("Content-Type: application/json",), 403, "Forbidden"),
        ]:
            c = await Conn.open(server, context)
            try:
                await c.head(cm("refused"), *headers)  # and no body
                got, hdrs, out = await c.answer()
                assert (got, orjson.loads(out)["reason"]) == (code, reason)
                assert hdrs["connection"] == "close"
                assert await asyncio.wait_for(c.reader.read(), 10) == b""  # the server closed it
            finally:
                c.close()
        c = await Conn.open(server, ctx)  # none of them created anything
        try:
            c.writer.write(b"GET " + PATH + b"/refused HTTP/1.1\r\nHost: localhost\r\n\r\n")
            assert (await c.answer())[0] == 404
        finally:
            c.close()


async def test_another_expectation_is_a_417(tmp_path):
    async with served(tmp_path) as (server, ctx):
        c = await Conn.open(server, ctx)
        try:
            await c.head(b"{}", "Content-Type: application/json", expect="something-else")
            assert (await c.answer())[0] == 417
        finally:
            c.close()
