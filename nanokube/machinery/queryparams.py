"""Query parameters as apimachinery's parameter codec converts them into an options struct: the
server's handlers and an aggregated API's (metrics.k8s.io) decode them alike before reading any."""

from __future__ import annotations

from typing import Mapping

from . import errors


def integer(query: Mapping[str, str], name: str) -> int | None:
    """An int64 query parameter, or None when absent; 400 when it does not parse."""
    raw = query.get(name)
    if raw is None:
        return None
    digits = raw[1:] if raw[:1] in ("+", "-") else raw
    if not (digits.isascii() and digits.isdigit()):
        raise errors.bad_request(f'strconv.ParseInt: parsing "{raw}": invalid syntax')
    value = int(raw) if len(digits) <= 20 else 2**63
    if not -(2**63) <= value < 2**63:
        raise errors.bad_request(f'strconv.ParseInt: parsing "{raw}": value out of range')
    return value
