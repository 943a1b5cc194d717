"""Kubernetes' `urls` library: `url()`, `isURL()` and the URL accessors, with
Go's net/url.ParseRequestURI rules (an absolute URL or an absolute path)."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, quote, unquote, urlsplit

from ..errors import CELError
from ..types import BOOL, STRING, URL, list_of, map_of
from .overload import Overload

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def _parse(s: str):
    if not (s.startswith("/") or _SCHEME.match(s)) or any(c in s for c in " \t\n\x7f") or "#" in s:
        return None
    try:
        parts = urlsplit(s)
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        return None
    return parts


def _url(s: str) -> dict:
    if _parse(s) is None:
        raise CELError(f"URL parse error during conversion from string: parse {s!r}: invalid URI for request")
    return {"@url": s}


def _parts(u: dict):
    return _parse(u["@url"])


def _host(u: dict) -> str:
    return _parts(u).netloc.rpartition("@")[2]


def _hostname(u: dict) -> str:
    host = _host(u)
    if host.startswith("["):
        return host[1:host.index("]")]
    return host.rsplit(":", 1)[0] if ":" in host else host


def _port(u: dict) -> str:
    host = _host(u)
    after = host[host.index("]") + 1:] if host.startswith("[") else host
    return after.rsplit(":", 1)[1] if ":" in after else ""


def _escaped_path(u: dict) -> str:
    return quote(unquote(_parts(u).path), safe="/:@!$&'()*+,;=-._~")


def _query(u: dict) -> dict:
    return parse_qs(_parts(u).query, keep_blank_values=True)


OVERLOADS = [
    Overload("url", (STRING,), URL, impl=_url),
    Overload("isURL", (STRING,), BOOL, impl=lambda s: _parse(s) is not None),
    Overload("getScheme", (URL,), STRING, member=True, impl=lambda u: _parts(u).scheme),
    Overload("getHost", (URL,), STRING, member=True, impl=_host),
    Overload("getHostname", (URL,), STRING, member=True, impl=_hostname),
    Overload("getPort", (URL,), STRING, member=True, impl=_port),
    Overload("getEscapedPath", (URL,), STRING, member=True, impl=_escaped_path),
    Overload("getQuery", (URL,), map_of(STRING, list_of(STRING)), member=True, impl=_query),
    Overload("string", (URL,), STRING, impl=lambda u: u["@url"]),
]
