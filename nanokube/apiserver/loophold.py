"""How long a request held the event loop: the longest stretch its handler ran without yielding.

One process serves every client from one loop, so a request that computes for seconds (a huge
object's managedFields, validation or conversion) answers no other client meanwhile, however fast
its own answer seems to its caller. Each request's coroutine is stepped here, each step timed in
the loop thread's CPU time (what the request computed, not what a loaded machine's other processes
or the server's worker threads took meanwhile, so that a bound on it holds on any machine); the
longest is kept (with the request that took it) for tests and fuzzers to bound, and a step over
WARN_AFTER is logged as the stall it is. The same layer runs each step in a context copied for the
request, as a task made for it would (inline.py: the connection serving it leaves that to `serve`,
one generator layer a step instead of two)."""

from __future__ import annotations

import contextvars
import logging
import time
import types
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from .oneshot import send

log = logging.getLogger(__name__)

#: a step that held the loop this long (CPU seconds) is logged
WARN_AFTER = 1.0


class LoopHolds:
    def __init__(self) -> None:
        #: the longest step of any request so far, in CPU seconds, and that request's method and path
        self.longest = 0.0
        self.longest_request = ""

    async def serve(self, request, handler: Callable[[Any], Awaitable]) -> Any:
        """`handler(request)` and the writing of its answer, each of their steps on the loop timed."""
        held = [0.0]
        try:
            return await _stepped(answered(request, handler), held, contextvars.copy_context())
        finally:
            if held[0] > self.longest:
                self.longest, self.longest_request = held[0], f"{request.method} {request.rel_url}"
            if held[0] > WARN_AFTER:
                log.warning("%s %s held the event loop for %.2f CPU s", request.method, request.rel_url, held[0])


async def answered(request, handler: Callable[[Any], Awaitable]) -> Any:
    """`handler(request)`, its answer written here rather than by the connection after it returns:
    a large list's body (its compression, its copy into the transport) holds the loop as its
    encoding does. A write the client cut off is left to the connection, which closes it."""
    response = await handler(request)
    if response is not None and not response.prepared:
        try:
            await send(request, response)
        except ConnectionError:
            pass
    return response


@types.coroutine
def _stepped(coro: Coroutine, held: list[float], context: contextvars.Context):
    """Runs `coro` as `await coro` would, each step in `context`, passing what it yields to the loop
    and what the loop sends or throws back to it; `held[0]` becomes its longest step."""
    run, send, throw = context.run, coro.send, coro.throw
    value: Any = None
    error: BaseException | None = None
    clock = time.thread_time
    while True:
        start = clock()
        try:
            yielded = run(send, value) if error is None else run(throw, error)
        except StopIteration as done:
            return done.value
        finally:
            took = clock() - start
            if took > held[0]:
                held[0] = took
        value = error = None
        try:
            value = yield yielded
        except BaseException as e:  # the loop's cancellation or close, handed on to the handler
            error = e
