"""inline.InlineRequests: the API server's connections serve an ordinary request in their own task,
in a context of its own, and leave the others to aiohttp's loop."""

import asyncio
import contextvars

import pytest
from aiohttp import web

from nanokube.apiserver.http_errors import StatusAppRunner
from nanokube.apiserver.inline import own_context
from nanokube.apiserver.loophold import LoopHolds

_SEEN = contextvars.ContextVar("seen", default="")


async def _serve(handler, held: bool = False):
    """An application answering every path with `handler`, served on a free port; `held`: the
    connections call the API server's kind of handler, LoopHolds.serve marked own_context."""
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    holds = LoopHolds()
    # (no access log, as the API server's runner: one enabled, aiohttp's logger at INFO as another
    # test may leave it, hands every request to aiohttp's loop)
    runner = StatusAppRunner(app, own_context(lambda request: holds.serve(request, app._handle)) if held else None,
                             access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]


async def _answers(reader: asyncio.StreamReader, count: int) -> list[tuple[str, bytes]]:
    out = []
    for _ in range(count):
        head = (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)).decode()
        size = int(next(line.split(": ", 1)[1] for line in head.split("\r\n") if line.lower().startswith("content-length")))
        out.append((head.split("\r\n", 1)[0], await reader.readexactly(size)))
    return out


@pytest.mark.parametrize("held", [False, True])
async def test_ordinary_requests_run_in_the_connection_task_each_in_its_own_context(held):
    """Pipelined requests: each handler runs in the task that serves the connection (no task of its
    own), yet a context variable one request sets is not seen by the next, as in a task of its own;
    a request whose body comes after its head (sent on 100 Continue) is served by aiohttp's loop, in
    a task of its own, and so are the requests after it. `held`: the connections call the API
    server's kind of handler, LoopHolds.serve marked own_context, which makes the context itself."""
    tasks: list[tuple[str, bool]] = []

    async def handler(request: web.Request) -> web.Response:
        before = _SEEN.get()
        _SEEN.set(request.path)
        body = await request.read()
        tasks.append((request.path, asyncio.current_task() is request.task))
        return web.Response(body=f"{before}|{len(body)}".encode())

    runner, port = await _serve(handler, held)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nPOST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
        first = await _answers(reader, 2)
        writer.write(b"POST /c HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n")
        assert await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10) == b"HTTP/1.1 100 Continue\r\n\r\n"
        writer.write(b"wxyz")  # the body only once its head was served
        writer.write(b"GET /d HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        later = await _answers(reader, 2)
        assert await asyncio.wait_for(reader.read(), 10) == b""
        writer.close()
    finally:
        await runner.cleanup()
    assert first == [("HTTP/1.1 200 OK", b"|0"), ("HTTP/1.1 200 OK", b"|3")]
    assert later == [("HTTP/1.1 200 OK", b"|4"), ("HTTP/1.1 200 OK", b"|0")]
    assert tasks[:2] == [("/a", True), ("/b", True)]
    assert tasks[2:] == [("/c", False), ("/d", False)]


async def test_a_handler_s_error_is_answered_500_and_ends_the_connection():
    """As aiohttp's loop answers it (handle_error closes the connection): the request pipelined
    behind it is not served."""
    async def handler(request: web.Request) -> web.Response:
        if request.path == "/boom":
            raise RuntimeError("boom")
        return web.Response(body=b"ok")

    runner, port = await _serve(handler)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /boom HTTP/1.1\r\nHost: x\r\n\r\nGET /fine HTTP/1.1\r\nHost: x\r\n\r\n")
        [(boom, body)] = await _answers(reader, 1)
        rest = await asyncio.wait_for(reader.read(), 10)
        writer.close()
    finally:
        await runner.cleanup()
    assert boom == "HTTP/1.1 500 Internal Server Error" and b'"code":500' in body and rest == b""


async def test_a_client_gone_mid_request_ends_its_handler_s_writes_and_the_connection_task(caplog):
    """The client closes while its request is served in the connection's task: the handler's next
    write fails with ConnectionResetError, as it would in a task of its own, and the connection's
    task ends without an unhandled exception logged."""
    reached, go, seen = asyncio.Event(), asyncio.Event(), []

    async def handler(request: web.Request) -> web.StreamResponse:
        seen.append(asyncio.current_task() is request.task)
        response = web.StreamResponse()
        await response.prepare(request)
        reached.set()
        await go.wait()
        try:
            await response.write(b"x")
        except ConnectionResetError as e:
            seen.append(e)
            raise
        return response

    runner, port = await _serve(handler)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        await asyncio.wait_for(reached.wait(), 10)
        [connection] = runner.server.connections
        task = connection._task_handler
        writer.close()
        async with asyncio.timeout(10):
            while connection.transport is not None:  # the server saw the connection go
                await asyncio.sleep(0.01)
            go.set()
            await asyncio.wait({task})
    finally:
        await runner.cleanup()
    assert seen[0] is True and isinstance(seen[1], ConnectionResetError)
    assert not task.cancelled() and task.exception() is None
    assert "Unhandled exception" not in caplog.text


async def test_pipelined_requests_are_served_a_loop_turn_apart():
    """fuzz65: requests a client pipelined in one write, each needing no await, were all served in one
    step of the connection's task, so thousands of them held the event loop (every other client) for
    seconds. A callback the first one schedules now runs before the second is served, as it would
    between tasks of their own."""
    order: list[str] = []

    async def handler(request: web.Request) -> web.Response:
        order.append(request.path)
        if request.path == "/1":
            asyncio.get_running_loop().call_soon(order.append, "turn")
        return web.Response(body=b"ok")

    runner, port = await _serve(handler)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"".join(b"GET /%d HTTP/1.1\r\nHost: x\r\n\r\n" % i for i in range(1, 6)))
        answers = await _answers(reader, 5)
        writer.close()
    finally:
        await runner.cleanup()
    assert [status for status, _ in answers] == ["HTTP/1.1 200 OK"] * 5
    assert order[:3] == ["/1", "turn", "/2"], order
