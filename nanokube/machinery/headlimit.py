"""How much a request's line and headers may be all together, as Go's server bounds them for the API
server and every component: http.DefaultMaxHeaderBytes (1 MiB) and the 4 KiB it allows over that for
its buffer, in any number of headers. aiohttp bounds a line each (the servers set that to 1 MiB too)
and their count (128 by default), not their sum: 100 lines of 1 MiB were read into memory and served,
where Go answers 431, and a request of 200 short headers (a front proxy's many X-Remote-Group lines,
kubectl's many --as-group) was refused, where Go serves it."""

from __future__ import annotations

from aiohttp.http_exceptions import LineTooLong
from aiohttp.streams import EMPTY_PAYLOAD, StreamReader
from aiohttp.web_protocol import RequestHandler, _ErrInfo

#: the line and headers of a request at most (http.DefaultMaxHeaderBytes)
MAX_HEADER_BYTES = 1 << 20
#: what Go's server reads of them at most before it refuses: the limit and its buffer's slack
READ_LIMIT = MAX_HEADER_BYTES + 4096
#: aiohttp's count of headers, which Go does not bound: as many as the bytes allow
MAX_HEADERS = READ_LIMIT // 4


class HeadLimit(RequestHandler):
    """A connection that counts what arrives between one request's end and the next one's headers: past
    READ_LIMIT the next request is the parser's refusal of a line too long (each server answers it as
    it answers those: 431), then nothing more is read. The servers make it with MAX_HEADERS."""

    _head = 0
    #: the body of the latest request the parser began: while it is still coming, what arrives is not a head
    _body: StreamReader = EMPTY_PAYLOAD
    _refused = False

    def data_received(self, data: bytes) -> None:
        if self._body.is_eof() and self._payload_parser is None and not self._upgraded:
            head = self._head = self._head + len(data)
            if head > READ_LIMIT:
                if not self._refused:
                    self._refuse()
                return
        count = self._request_count
        RequestHandler.data_received(self, data)
        if self._request_count != count and self._messages:  # a request's headers are complete
            self._head, self._body = 0, self._messages[-1][1]

    def _refuse(self) -> None:
        self._refused = True
        error = LineTooLong("request headers", READ_LIMIT)
        self._messages.append((_ErrInfo(status=431, exc=error, message=error.message), EMPTY_PAYLOAD))
        self._request_count += 1
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)
