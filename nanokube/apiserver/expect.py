"""`Expect: 100-continue` as Go's net/http server answers it for kube-apiserver: the 100 Continue
goes out when a handler first reads the body, so a request refused before it reads (authentication,
authorization, APF, a 406 or 415) is answered at once and its body is never sent; that answer closes
the connection, since the client may be sending the body after all. Another expectation is a 417
before any handler (aiohttp's application answers it, as net/http does)."""

from __future__ import annotations

from http import HTTPStatus

from aiohttp import HttpVersion11, hdrs, web

#: a request whose client holds its body back until the 100 Continue
_PENDING = web.RequestKey("nanokube.expect_continue", bool)


def accepted(request: web.Request) -> bool:
    """False for an expectation other than 100-continue (the 417's); a 100-continue on a request
    with a body is pending until `continued`, as net/http wraps such a body in its expectContinueReader."""
    expect = request.headers.get(hdrs.EXPECT)
    if expect is None:
        return True
    if "100-continue" not in (t.strip().lower() for t in expect.split(",")):
        return False
    if request.version >= HttpVersion11 and request.body_exists:  # net/http: a ContentLength not 0 (-1: chunked)
        request[_PENDING] = True
    return True


async def continued(request: web.Request) -> None:
    """Before the first read of the body: the 100 Continue, once, if the client waits for it."""
    if request.get(_PENDING):
        request[_PENDING] = False
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        request.writer.output_size = 0  # (the answer's size counts from its own status line)


async def informational(request: web.Request, code: int, headers) -> None:
    """An interim answer (1xx but 101) ahead of the response, as net/http's WriteHeader writes one: its
    status line with Go's status text, its headers but Content-Length and Transfer-Encoding. A 100
    Continue is the one a pending client waits for: none follows on the body's first read."""
    if code == 100:
        request[_PENDING] = False
    try:
        text = HTTPStatus(code).phrase
    except ValueError:
        text = f"status code {code}"
    lines = [f"HTTP/{request.version.major}.{request.version.minor} {code} {text}"]
    lines += [f"{k}: {v}" for k, v in headers.items() if k.lower() not in ("content-length", "transfer-encoding")]
    await request.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("utf-8", "surrogateescape"))
    request.writer.output_size = 0


def answered(request: web.Request, response: web.StreamResponse) -> web.StreamResponse:
    """`response`, closing the connection after it where the body was never asked for (net/http's
    closeAfterReply), at once: the body is taken as ended rather than waited for."""
    if request.get(_PENDING) and not response.prepared:
        response.force_close()
        request.content.feed_eof()
    return response
