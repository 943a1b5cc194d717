"""Which connections a server keeps open after its answer: not one whose request asked to switch
protocols (an Upgrade header that its Connection header names, or CONNECT), whether or not it was
switched.

aiohttp's parser (llhttp, as aiohttp 3.14.5 drives it) stops at the end of such a request and
drops what follows it on the connection unless aiohttp takes the upgrade (a WebSocket) and the
handler declines it before those bytes arrive. A refused upgrade whose body comes after its answer
(a client sends the body once the headers are out; the handler answers from the headers), or a
request pipelined behind one, is never read: the client waits on the connection for an answer that
never comes. Go's server reads on; here the answer says `Connection: close` and the connection ends
with it, so a client's next request goes on a new one, as after an upgrade that was taken. Nor does
an answer name the server: Go's writes no Server header, where aiohttp names itself and its version."""

from __future__ import annotations

from aiohttp import hdrs, web
from aiohttp.http import SERVER_SOFTWARE


class Request(web.Request):
    """A request whose answer keeps the connection only when neither side asked to close it and the
    request asked for no upgrade (aiohttp's answer reads `keep_alive` as it writes its headers)."""

    @property
    def keep_alive(self) -> bool:
        message = self._message
        return not message.should_close and not message.upgrade

    async def _prepare_hook(self, response: web.StreamResponse) -> None:
        unbranded(response.headers)
        await super()._prepare_hook(response)


def unbranded(headers) -> None:
    """`headers` without the Server header aiohttp adds to an answer (not one a handler set: a
    proxied backend's)."""
    if headers.get(hdrs.SERVER) == SERVER_SOFTWARE:
        del headers[hdrs.SERVER]
