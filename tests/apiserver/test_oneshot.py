"""oneshot.send against aiohttp's own prepare + write_eof, on the pinned aiohttp (3.14.5).

`send` reads and sets private names of aiohttp's request, response and StreamWriter. These tests
run both paths on the same kind of answer over a real StreamWriter and compare what reaches the
transport and every attribute both leave behind, so an aiohttp upgrade that renames or reshapes
one of those names fails here, naming the attribute, not as a wrong head on the wire."""

import asyncio

import pytest
from aiohttp import web
from aiohttp.http_writer import StreamWriter
from aiohttp.test_utils import make_mocked_request

from nanokube.apiserver.oneshot import send


class _Transport(asyncio.Transport):
    def __init__(self, closing: bool = False) -> None:
        super().__init__()
        self.sent, self.closing = [], closing

    def write(self, data) -> None:
        self.sent.append(bytes(data))

    def writelines(self, chunks) -> None:
        self.sent.append(b"".join(chunks))

    def is_closing(self) -> bool:
        return self.closing


class _Protocol:
    _paused = False

    def __init__(self, transport: _Transport) -> None:
        self.transport = transport


def _request(method: str = "GET", closing: bool = False, gone: bool = False):
    """A request whose connection ends after it (`closing`), over a transport already closing (`gone`)."""
    transport = _Transport(gone)
    writer = StreamWriter(_Protocol(transport), asyncio.get_running_loop())
    app = web.Application()
    request = make_mocked_request(method, "/api/v1/namespaces", app=app, writer=writer, transport=transport,
                                  closing=closing)
    return request, writer, transport


def _response(status: int, body: bytes, **kw) -> web.Response:
    response = web.Response(status=status, body=body, **kw)
    response.headers["Date"] = "Mon, 07 Dec 2026 18:00:00 GMT"  # (the two paths run at different instants)
    return response


@pytest.mark.parametrize("status, body, closing, response_kw", [
    (200, b'{"kind":"NamespaceList"}', False, {"content_type": "application/json"}),
    (201, b"x" * 5000, False, {}),  # large enough for aiohttp's writelines; no Content-Type set: its default
    (404, b"", False, {}),  # empty: Content-Length 0, no Content-Type
    (200, b"{}", True, {"content_type": "application/json"}),  # a request that ends its connection
    (500, b"{}", False, {"content_type": "application/json", "headers": {"Warning": '299 - "w"'}}),
])
async def test_send_writes_and_leaves_what_aiohttp_prepare_and_write_eof_do(status, body, closing, response_kw):
    hooked = []

    async def on_prepare(request, response):
        hooked.append(response.status)
        response.headers["Audit-Id"] = "a1"
        response.headers.popall("Server", None)  # aiohttp's path names itself; the API server's hook drops it

    results = []
    for write in (send, None):
        request, writer, transport = _request(closing=closing)
        request.app.on_response_prepare.append(on_prepare)
        request.app.freeze()
        response = _response(status, body, **response_kw)
        if write is None:
            await response.prepare(request)
            await response.write_eof()
        else:
            await write(request, response)
        results.append((transport.sent, dict(vars(response)), dict(vars(writer)), response.keep_alive,
                        response.body_length, response.prepared))
    (sent, resp, wr, alive, length, prepared), (a_sent, a_resp, a_wr, a_alive, a_length, a_prepared) = results
    assert b"".join(sent) == b"".join(a_sent) and len(sent) == 1  # one write, aiohttp's bytes
    assert hooked == [status, status]  # the prepare hook (on_response_prepare) ran on both
    for name in sorted(set(resp) | set(a_resp)):  # an attribute aiohttp renamed shows here by name
        if name not in ("_headers", "_body"):
            assert resp.get(name, "<absent>") == a_resp.get(name, "<absent>"), f"response.{name}"
    assert dict(resp["_headers"]) == dict(a_resp["_headers"])
    for name in sorted(set(wr) | set(a_wr)):
        if name not in ("_protocol", "loop"):
            assert wr.get(name, "<absent>") == a_wr.get(name, "<absent>"), f"writer.{name}"
    assert (alive, length, prepared) == (a_alive, a_length, a_prepared)
    assert length == len(b"".join(sent)) and prepared and alive is not closing
    assert (b"\r\nConnection: close\r\n" in sent[0]) is closing


async def test_the_names_send_reads_are_aiohttp_s():
    """The attributes `send` decides by, read before anything is written: each still there, with the
    value a fresh response and writer have, so a rename makes no answer take the wrong path."""
    request, writer, _ = _request()
    response = web.Response(body=b"{}")
    assert request._payload_writer is writer and callable(request._prepare_hook)
    assert (response._body, response._compression, response._chunked, response._cookies, response._keep_alive) == (
        b"{}", False, False, None, None)
    assert (response._status, response._reason, response._eof_sent, response._must_be_empty_body) == (
        200, "OK", False, None)
    assert (writer._compress, writer.chunked, writer._on_headers_sent, writer._on_chunk_sent, writer.on_body_write,
            writer.length, writer._eof, writer._headers_written, writer.buffer_size, writer.output_size) == (
        None, False, None, None, None, None, False, False, 0, 0)


@pytest.mark.parametrize("method, status", [
    ("HEAD", 200),  # a head alone
    ("GET", 204),  # a body-less status
])
async def test_what_send_leaves_to_aiohttp_is_answered_as_aiohttp_answers_it(method, status):
    request, writer, transport = _request(method)
    request.app.freeze()
    response = _response(status, b"" if status == 204 else b"{}")
    await send(request, response)
    head = b"".join(transport.sent)
    assert head.endswith(b"\r\n\r\n") and not head.endswith(b"{}")
    assert (b"Content-Length: 2" in head) == (method == "HEAD")
    assert response.prepared and writer._eof


async def test_a_closing_transport_is_a_connection_error_and_nothing_is_written():
    request, writer, transport = _request(gone=True)
    request.app.freeze()
    with pytest.raises(ConnectionResetError):
        await send(request, _response(200, b"{}"))
    assert transport.sent == [] and writer.output_size == 0
