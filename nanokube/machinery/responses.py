"""Response writers for every HTTP server nanokube runs (the API server, the aggregated metrics
APIs, node agents): JSON bodies and `Status` errors."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from . import errors

_JSON = "application/json"


def go_escaped(data: bytes) -> bytes:
    """JSON as Go's encoder writes it: `<`, `>` and `&` as \\u003c, \\u003e and \\u0026, U+2028 and
    U+2029 as \\u2028 and \\u2029 (HTML-safe; clients that compare encodings byte for byte, as
    `kubectl rollout undo` does, see Go's bytes). Those characters only occur inside strings, so
    replacing them in the encoded bytes is the escape. Each byte is looked for first as an int,
    which is memchr (a bytes needle takes the slower general search)."""
    if 60 in data:  # <
        data = data.replace(b"<", b"\\u003c")
    if 62 in data:  # >
        data = data.replace(b">", b"\\u003e")
    if 38 in data:  # &
        data = data.replace(b"&", b"\\u0026")
    if 0xE2 in data:  # the lead byte of U+2028 and U+2029
        data = data.replace(b"\xe2\x80\xa8", b"\\u2028").replace(b"\xe2\x80\xa9", b"\\u2029")
    return data


def dumps(obj: Any) -> bytes:
    return go_escaped(orjson.dumps(obj))


def json_response(obj: Any, status: int = 200, headers: dict | None = None) -> web.Response:
    """A JSON body as kube-apiserver writes one (json.Encoder: a newline ends it)."""
    return web.Response(body=dumps(obj) + b"\n", status=status, content_type=_JSON, headers=headers)


def error_response(e: errors.APIError) -> web.Response:
    """The Status of `e`; a retry period in its details is also a Retry-After header, as upstream's
    ErrorNegotiated sets it (client-go waits that long and retries a 429 or 5xx that has one)."""
    if not 100 <= e.code <= 999:  # (a webhook's denial may name any int32 code)
        # net/http's WriteHeader panics on such a code, and the API server's panic filter answers for it
        return web.Response(status=500, text="This request caused apiserver to panic. Look in the logs for details.\n",
                            headers={"Content-Type": "text/plain; charset=utf-8", "X-Content-Type-Options": "nosniff"})
    headers = e.headers
    retry = (e.details or {}).get("retryAfterSeconds")
    if retry and "Retry-After" not in headers:
        headers = {**headers, "Retry-After": str(retry)}
    return json_response(e.status(), e.code, headers)
