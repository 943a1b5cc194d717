"""The console's static files under /ui/, as a file server answers them: each by name from
the package (no request path reaches the file system), revalidated through its ETag
(Cache-Control: no-cache, so a new nanokube's page is never stale), and under a Content
Security Policy that lets the page load only its own files and talk only to this server."""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

PREFIX = "/ui/"
STATIC = Path(__file__).with_name("static")
_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
          ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
HEADERS = {
    "Cache-Control": "no-cache",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
                               "form-action 'none'; frame-ancestors 'none'",
}


@dataclass(frozen=True)
class Asset:
    body: bytes
    content_type: str
    etag: str


def is_console(path: str) -> bool:
    """Whether `path` is the console's (its shell, which a browser loads before it holds a token)."""
    return path == "/ui" or path.startswith(PREFIX)


@functools.cache
def assets() -> dict[str, Asset]:
    """Every file the console ships, by the name it is served under, read once."""
    found = {}
    for f in sorted(STATIC.iterdir()):
        if f.suffix in _TYPES:
            body = f.read_bytes()
            found[f.name] = Asset(body, _TYPES[f.suffix], '"' + hashlib.sha256(body).hexdigest()[:32] + '"')
    return found


async def _redirect(request: web.Request) -> web.Response:
    """/ui to /ui/, so the page's relative links resolve under it (http.FileServer's redirect)."""
    return web.Response(status=301, headers={"Location": PREFIX, **HEADERS})


async def _file(request: web.Request) -> web.Response:
    asset = assets().get(request.match_info["name"] or "index.html")
    if asset is None:
        return web.Response(status=404, text="404 page not found\n", headers=HEADERS)
    headers = {**HEADERS, "ETag": asset.etag}
    if asset.etag in {t.strip().removeprefix("W/") for t in request.headers.get("If-None-Match", "").split(",")}:
        return web.Response(status=304, headers=headers)
    return web.Response(body=asset.body, headers={**headers, "Content-Type": asset.content_type})


def install(app: web.Application) -> None:
    """GET (and HEAD) of /ui and /ui/NAME on `app`, ahead of its catch-all API route."""
    app.router.add_get("/ui", _redirect)
    app.router.add_get(PREFIX + "{name:.*}", _file)
