"""The deadline of a request that is not long-running, as kube-apiserver's
WithRequestDeadline and WithTimeoutForNonLongRunningRequests filters keep it.

Every request but a watch, a proxy and the attach/exec/log/portforward/proxy
subresources (apf.long_running) gets a deadline of its `timeout` query
parameter, or of --request-timeout (60 s) where that is absent, not above 0 or
not below it (options.request_deadline); a `timeout` that does not parse is a
400, audited as upstream's withFailedRequestAudit audits it. Past the deadline
the timeout filter answers 504 with its own Status (written by json.Encoder
with no kind, and sniffed as text/plain by Go's server) if nothing was written
yet, else it cuts the connection (ErrAbortHandler). Upstream leaves the
handler running against a cancelled context; here its task is cancelled, as a
client that goes away cancels it: a write not yet handed to the store is not
made, but one the store has taken (SQLite runs the statement at once and
commits its batch whatever the caller does) is made all the same, as upstream's
may commit after its 504. What the request did beside the write is settled by
the write's own end, never by the request's: a Service's create goes on in a
task of its own (rest._unabandoned), which releases its ClusterIP and node
ports only if the write fails, and keeps them (and, with several workers, their
store records: reservations.written) if it is made.
Deadlines run on the server's clock; a paced simulation hands it the wall
clock's (sim/driver.py).
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Awaitable

import orjson
from aiohttp import web

from ..clock import Clock
from .options import REQUEST_TIMEOUT

#: set on a request whose deadline passed while it was served (audit's ResponseComplete reads it)
TIMED_OUT = web.RequestKey("timed_out", bool)
#: the timeout filter's answer: NewTimeoutError's Status as json.Encoder writes it (no TypeMeta, a newline)
_BODY = orjson.dumps({"metadata": {}, "status": "Failure",
                      "message": "Timeout: request did not complete within the allotted timeout",
                      "reason": "Timeout", "details": {}, "code": 504}) + b"\n"
#: what the REST handler's finisher answers as the context ends (audited as the handler's response)
FINISHER_MESSAGE = "Timeout: request did not complete within requested timeout - context deadline exceeded"


class _Expiry:
    """Cancels the serving task once, marking its request as timed out; `at`: when, on the clock."""

    __slots__ = ("request", "task", "expired", "done", "at")

    def __init__(self, request: web.Request, task: asyncio.Task) -> None:
        self.request, self.task, self.expired, self.done, self.at = request, task, False, False, 0.0

    def __call__(self) -> None:
        self.expired = True
        self.request[TIMED_OUT] = True
        self.task.cancel()


class Deadlines:
    """The deadlines of the requests a server is serving, on its clock. Those of --request-timeout,
    which nearly every request gets, come due in the order their requests came, so they wait in a
    queue under one timer, set for the first still served (a loop timer per request, scheduled and
    cancelled, cost 24 k instructions of each); a `timeout` below it gets a timer of its own."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._queue: deque[_Expiry] = deque()
        self._timer = None

    async def within(self, request: web.Request, seconds: float,
                     serve: Awaitable[web.StreamResponse]) -> web.StreamResponse:
        """`serve`'s response, or, once `seconds` have passed, the timeout filter's 504 in its place
        (its own response dropped); a response whose bytes had begun to go out ends with the
        connection closed. A cancellation from elsewhere (the client went away) goes on as it came."""
        expiry = _Expiry(request, asyncio.current_task())
        timer = None
        if seconds == REQUEST_TIMEOUT:
            expiry.at = self.clock.monotonic() + seconds
            self._queue.append(expiry)
            if self._timer is None:
                self._timer = self.clock.call_later(seconds, self._expire)
        else:
            timer = self.clock.call_later(seconds, expiry)
        try:
            response = await serve
        except asyncio.CancelledError:
            if not expiry.expired or expiry.task.uncancel() > 0:
                raise
        else:
            if not expiry.expired:
                return response
            expiry.task.uncancel()  # (a handler that swallowed the cancellation: timed out all the same)
        finally:
            expiry.done = True
            if timer is not None:
                timer.cancel()
            queue = self._queue
            while queue and queue[0].done:
                queue.popleft()
        writer, transport = request.writer, request.transport
        if writer is not None and writer.output_size > 0 and transport is not None:
            if transport.get_write_buffer_size():  # unsent, for a client that reads nothing: held forever by a close
                transport.abort()
            else:
                transport.close()
        return web.Response(status=504, body=_BODY, content_type="text/plain", charset="utf-8")

    def _expire(self) -> None:
        """The queue's timer: the requests due by now that are still served time out; then the timer
        is set for the next one."""
        queue, now = self._queue, self.clock.monotonic()
        while queue and (queue[0].done or queue[0].at <= now):
            expiry = queue.popleft()
            if not expiry.done:
                expiry()
        self._timer = self.clock.call_later(max(0.0, queue[0].at - now), self._expire) if queue else None
