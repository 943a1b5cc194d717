"""Which connections a server keeps open after its answer: not one whose request asked to switch
protocols (an Upgrade header that its Connection header names, or CONNECT), whether or not it was
switched.

aiohttp's parser (llhttp, as aiohttp 3.14.5 drives it) stops at the end of such a request and
drops what follows it on the connection unless aiohttp takes the upgrade (a WebSocket) and the
handler declines it before those bytes arrive. A refused upgrade whose body comes after its answer
(a client sends the body once the headers are out; the handler answers from the headers), or a
request pipelined behind one, is never read: the client waits on the connection for an answer that
never comes. Go's server reads on; here the answer says `Connection: close` and the connection ends
with it, so a client's next request goes on a new one, as after an upgrade that was taken."""

from __future__ import annotations

from aiohttp import web


class Request(web.Request):
    """A request whose answer keeps the connection only when neither side asked to close it and the
    request asked for no upgrade (aiohttp's answer reads `keep_alive` as it writes its headers)."""

    @property
    def keep_alive(self) -> bool:
        message = self._message
        return not message.should_close and not message.upgrade
