"""A unary answer written to its connection in one go.

Nearly every answer is a `web.Response` of bytes on a kept-alive HTTP/1.1 connection. aiohttp's
`prepare` and `write_eof` take it through some fifteen coroutine and method layers (StreamResponse,
Response, StreamWriter) to finish its headers, call the request's prepare hook, serialise them and
write them with the body: 30-65 k instructions of every request (~5% of a write, 11% of a GET).
`send` takes the same steps for such an answer in one function, with aiohttp's own helpers (Date,
the header serialiser that refuses control characters), and leaves the response and its writer as
aiohttp's path does (prepared, EOF sent, the bytes counted). It writes no `Server` header, as Go's
server writes none (the API server's requests drop the one aiohttp's path adds: AuditedRequest).
Anything else (a stream, a payload or compressed body, cookies, a body-less status or HEAD,
HTTP/1.0, a Content-Length already set) takes aiohttp's path."""

from __future__ import annotations

from aiohttp import hdrs, web
from aiohttp.helpers import must_be_empty_body, rfc822_formatted_time
from aiohttp.http import HttpVersion11
from aiohttp.http_writer import MIN_PAYLOAD_FOR_WRITELINES, SKIP_WRITELINES, _serialize_headers


async def send(request: web.Request, response: web.StreamResponse) -> None:
    """Write `response` (not yet prepared) and end it, as `prepare` then `write_eof` would."""
    writer = request._payload_writer
    body = response._body if type(response) is web.Response else None
    headers = response._headers
    if (type(body) is not bytes or response._compression or response._chunked or response._cookies
            or request.version != HttpVersion11 or writer is None or writer._compress is not None or writer.chunked
            or writer._on_headers_sent is not None or writer._on_chunk_sent is not None
            or writer.on_body_write is not None or hdrs.CONTENT_LENGTH in headers
            or must_be_empty_body(request.method, response._status)):
        await response.prepare(request)
        await response.write_eof()
        return
    keep_alive = response._keep_alive
    if keep_alive is None:
        keep_alive = response._keep_alive = request.keep_alive
    response._must_be_empty_body = False
    response._req, response._payload_writer = request, writer
    size = len(body)
    writer.length = size
    headers[hdrs.CONTENT_LENGTH] = str(size)
    if size:
        headers.setdefault(hdrs.CONTENT_TYPE, "application/octet-stream")
    if hdrs.DATE not in headers:
        headers[hdrs.DATE] = rfc822_formatted_time()
    if not keep_alive and hdrs.CONNECTION not in headers:
        headers[hdrs.CONNECTION] = "close"
    await request._prepare_hook(response)
    head = _serialize_headers(f"HTTP/1.1 {response._status} {response._reason}", headers)
    transport = writer.transport
    if transport is None or transport.is_closing():
        raise ConnectionResetError("Cannot write to closing transport")
    writer._headers_written = True
    writer.buffer_size += len(head) + size
    writer.output_size += len(head) + size
    if SKIP_WRITELINES or size < MIN_PAYLOAD_FOR_WRITELINES:
        transport.write(head + body if size else head)
    else:  # a large body is not copied to go behind its head
        transport.writelines((head, body))
    await writer.drain()
    writer._eof = True
    response._eof_sent = True
    response._req = response._payload_writer = None
    response._body_length = writer.output_size
