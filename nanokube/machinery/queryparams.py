"""Query parameters as apimachinery's parameter codec converts them into an options struct: the
server's handlers and an aggregated API's (metrics.k8s.io) decode them alike before reading any."""

from __future__ import annotations

from typing import Mapping

from . import errors, strconv


def integer(query: Mapping[str, str], name: str) -> int | None:
    """An int64 query parameter, or None when absent; 400 when it does not parse."""
    raw = query.get(name)
    if raw is None:
        return None
    try:
        return strconv.parse_int(raw)
    except strconv.NumError as e:
        raise errors.bad_request(str(e)) from None
