"""A request served in its connection's own task, not in a task of its own.

aiohttp's connection loop (RequestHandler.start, 3.14.5 on Python 3.11) makes a task for every
request, only so that the request runs in a copy of the connection's context variables: the task's
creation, its scheduling and the loop turn it waits for are ~18 k instructions of every request
(3% of a GET, 1.5% of a write). `start` here serves the ordinary request, one whose head and body
have all arrived, through aiohttp's own `_handle_request` (its error answers, its response
finishing) awaited in place, each step of it run in a context copied for the request, as the task
would have run it. Anything else, a parser's refusal, an upgrade, a body still arriving (which
aiohttp may linger to read after the answer), an access log, is left to aiohttp's loop, which then
serves the rest of the connection. Requests a client pipelined, queued while one is served, are
served a loop turn apart: one that needs no other await would otherwise follow the last in the same
step, and thousands of them in one write held the event loop, every other client, for seconds. A
request handler marked `own_context` (the API server's, loophold.LoopHolds.serve) steps its request
in a context of its own already, in the one generator layer that also times the steps, so the
connection awaits it as it is (aiohttp's own code around the handler, its error answers, which sets
no context variable, then runs in the connection's)."""

from __future__ import annotations

import asyncio
import contextvars
import types
from typing import Any

from aiohttp.http import RawRequestMessage
from aiohttp.http_writer import StreamWriter
from aiohttp.web_protocol import _PAYLOAD_ACCESS_ERROR, RequestHandler


#: the attribute, true on a request handler, that says it runs each step of a request in a
#: context copied for the request
OWN_CONTEXT = "steps_in_own_context"


def own_context(handler):
    """Marks `handler` as one that runs each request's steps in a context of its own."""
    setattr(handler, OWN_CONTEXT, True)
    return handler


class InlineRequests(RequestHandler):
    """A connection whose ordinary requests run in its own task (`start`)."""

    async def start(self) -> None:
        loop = self._loop
        messages = self._messages
        while not self._force_close:
            if not messages:
                try:
                    self._waiter = loop.create_future()
                    await self._waiter
                finally:
                    self._waiter = None
            message, payload = messages[0]
            if type(message) is not RawRequestMessage or message.upgrade or not payload.is_eof() \
                    or self._logging_enabled:
                return await RequestHandler.start(self)  # (it takes the request from the queue)
            messages.popleft()
            if self._parser is not None:
                self._parser.message_consumed()
            if self._buffer_paused and len(messages) <= self._msg_queue_resume_size:
                self._resume_reading_if_drained()
            self._manager.requests_count += 1
            request = self._request_factory(message, payload, self, StreamWriter(self, loop),
                                            self._task_handler or asyncio.current_task(loop))
            try:
                try:
                    handled = self._handle_request(request, None, self._request_handler)
                    if not getattr(self._request_handler, OWN_CONTEXT, False):
                        handled = _in_context(handled, contextvars.copy_context())
                    response, reset = await handled
                except ConnectionError:
                    break
                if reset:
                    break
                self._keepalive = bool(response.keep_alive)
                payload.set_exception(_PAYLOAD_ACCESS_ERROR)
            except asyncio.CancelledError:
                self.force_close()
                raise
            except Exception as e:
                self.log_exception("Unhandled exception", exc_info=e)
                self.force_close()
            except BaseException:
                self.force_close()
                raise
            finally:
                request._task = None
            if not self._keepalive or self._close or self._force_close:
                break
            self._next_keepalive_close_time = loop.time() + self._keepalive_timeout
            if self._keepalive_handle is None:
                self._keepalive_handle = loop.call_at(self._next_keepalive_close_time, self._process_keepalive)
            if messages:  # pipelined requests: one loop turn between them, as a task each would take
                await asyncio.sleep(0)
        if not self._force_close:
            self._task_handler = None
            if self.transport is not None:
                self.transport.close()


@types.coroutine
def _in_context(coro, context: contextvars.Context) -> Any:
    """`await coro` with each of its steps run in `context`, as a task made for it runs them."""
    run, send, throw = context.run, coro.send, coro.throw
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            yielded = run(send, value) if error is None else run(throw, error)
        except StopIteration as done:
            return done.value
        value = error = None
        try:
            value = yield yielded
        except BaseException as e:  # the loop's cancellation, handed on to the request
            error = e
