"""Go's strconv.ParseInt and ParseUint in base 10, as Kubernetes parses the integers of flags, query
parameters and resourceVersions: ASCII digits only (after one sign, for ParseInt), leading zeros
taken, a value past the bit size "value out of range", each refusal in strconv's words. Python's
int() takes more (underscores, spaces, other scripts' digits) and refuses a string of over 4300
digits with a ValueError no caller expects, so the digits are checked and counted before it is asked."""

from __future__ import annotations

from .gofmt import quote


class NumError(ValueError):
    """strconv.NumError: its text is Go's (`strconv.ParseInt: parsing "x": invalid syntax`)."""


def _below(digits: str, limit: int) -> int | None:
    """int(digits) where `digits` are ASCII digits of a value below `limit` (at most 2^64); None
    where they are not digits (invalid syntax), -1 where the value is not below (out of range)."""
    if not (digits.isascii() and digits.isdigit()):
        return None
    digits = digits.lstrip("0") or "0"
    if len(digits) > 20:  # (2^64 has 20 digits; int() refuses over 4300)
        return -1
    n = int(digits)
    return n if n < limit else -1


def parse_int(text: str, bits: int = 64) -> int:
    """ParseInt(text, 10, bits); NumError where Go's refuses it."""
    negative = text[:1] == "-"
    n = _below(text[1:] if text[:1] in ("+", "-") else text, (1 << (bits - 1)) + negative)
    if n is None or n < 0:
        why = "invalid syntax" if n is None else "value out of range"
        raise NumError(f"strconv.ParseInt: parsing {quote(text)}: {why}")
    return -n if negative else n


def parse_uint(text: str, bits: int = 64) -> int:
    """ParseUint(text, 10, bits); NumError where Go's refuses it."""
    n = _below(text, 1 << bits)
    if n is None or n < 0:
        why = "invalid syntax" if n is None else "value out of range"
        raise NumError(f"strconv.ParseUint: parsing {quote(text)}: {why}")
    return n
