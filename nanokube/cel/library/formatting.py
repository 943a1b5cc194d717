"""`<string>.format(<list>)`, cel-go's ext.Strings v2 formatter as Kubernetes enables it.

Each clause prints one argument: `%s` any value as CEL's string() conversion reads it (a double
the shortest way Go's %g does, a duration in seconds, a timestamp in RFC 3339, bytes as their
text), lists and maps as CEL literals (their strings quoted, map entries sorted by key); `%d`,
`%b`, `%o`, `%x`/`%X`, `%f`, `%e` only the types cel-go gives them, refusing others with its
words, which a messageExpression reports as an error (and falls back to its message). `%f` and
`%e` print through golang.org/x/text/message for en-US, cel-go's default locale: '1,234.500000',
'1.234500 × 10⁰³', '∞'."""

from __future__ import annotations

import datetime
import math
from typing import Any

from ...machinery import gofmt
from ..cost import STRING_LIMIT
from ..errors import COST_LIMIT_ERROR, CELError
from .values import MARKERS, marker

_TYPE_NAMES = {v: k for k, v in MARKERS.items()}
_FLOAT_WORDS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _type_name(a: Any) -> str:
    if isinstance(a, bool):
        return "bool"
    if isinstance(a, int):
        return "int"
    if isinstance(a, float):
        return "double"
    if isinstance(a, str):
        return "string"
    if isinstance(a, bytes):
        return "bytes"
    if isinstance(a, datetime.datetime):
        return "google.protobuf.Timestamp"
    if isinstance(a, datetime.timedelta):
        return "google.protobuf.Duration"
    if a is None:
        return "null_type"
    if isinstance(a, list):
        return "list"
    if (m := marker(a)) is not None:
        return _TYPE_NAMES[m]
    if isinstance(a, dict):
        return "map"
    return type(a).__name__


def _clause_error(what: str, a: Any) -> CELError:
    return CELError(f"error during formatting: {what}, was given {_type_name(a)}")


def timestamp_text(t: datetime.datetime) -> str:
    """Go's time.RFC3339Nano: fractional seconds without trailing zeros, the offset the timestamp
    was written with ('Z' for none)."""
    frac = f".{t.microsecond:06d}".rstrip("0") if t.microsecond else ""
    offset = t.utcoffset() or datetime.timedelta(0)
    if not offset:
        return t.strftime("%Y-%m-%dT%H:%M:%S") + frac + "Z"
    minutes = int(abs(offset).total_seconds()) // 60
    return t.strftime("%Y-%m-%dT%H:%M:%S") + frac + f"{'-' if offset < datetime.timedelta(0) else '+'}" \
        f"{minutes // 60:02d}:{minutes % 60:02d}"


def duration_text(d: datetime.timedelta) -> str:
    """cel-go's string(duration): its seconds, shortest, then 's' (90m is '5400s')."""
    micros = (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds
    whole, rest = divmod(abs(micros), 1_000_000)
    text = str(whole) + (f".{rest:06d}".rstrip("0") if rest else "")
    return ("-" if micros < 0 else "") + text + "s"


def convert(a: Any) -> str:
    """CEL's string(a) (cel-go's conversions: a double as Go's %g, a duration in seconds, a
    timestamp in RFC 3339, bytes as UTF-8 text; an IP, a CIDR or a URL as written)."""
    if isinstance(a, bytes):
        try:
            return a.decode("utf-8")
        except UnicodeDecodeError:
            raise CELError("invalid UTF-8 in bytes, cannot convert to string") from None
    if isinstance(a, (list, type(None))) or (isinstance(a, dict) and marker(a) not in ("@ip", "@cidr", "@url")):
        raise CELError("no such overload")
    if isinstance(a, dict):
        return next(iter(a.values()))
    return string_of(a)


def string_of(a: Any) -> str:
    """`%s` of one value."""
    if isinstance(a, list):
        return "[" + ", ".join(_literal(x) for x in a) + "]"
    if isinstance(a, bool):
        return "true" if a else "false"
    if a is None:
        return "null"
    if isinstance(a, float):
        return gofmt.format_float(a)
    if isinstance(a, (int, str)):
        return str(a)
    if isinstance(a, bytes):
        return a.decode("utf-8", errors="replace")
    if isinstance(a, datetime.datetime):
        return timestamp_text(a)
    if isinstance(a, datetime.timedelta):
        return duration_text(a)
    if isinstance(a, dict) and marker(a) is None:
        return _map(a)
    raise _clause_error("string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, "
                        "types, durations, and timestamps", a)


def _literal(a: Any) -> str:
    """A list element or map value as cel-go prints it inside a list or map: quoted strings and
    bytes, timestamps and durations as their constructor calls, doubles with six decimals."""
    if isinstance(a, str):
        return gofmt.quote(a)
    if isinstance(a, bytes):
        return "b" + gofmt.quote(string_of(a))
    if isinstance(a, float):
        return f'"{gofmt.format_float(a)}"' if math.isinf(a) or math.isnan(a) else f"{a:.6f}"
    if isinstance(a, datetime.datetime):
        return f'timestamp("{timestamp_text(a)}")'
    if isinstance(a, datetime.timedelta):
        return f'duration("{duration_text(a)}")'
    if isinstance(a, dict) and marker(a) is not None:
        raise CELError(f"error during formatting: no formatting function for {_type_name(a)}")
    return string_of(a)


def _map(m: dict) -> str:
    entries = []
    for k, v in m.items():
        if isinstance(k, bool):
            key = "true" if k else "false"
        elif isinstance(k, (str, int)):
            key = gofmt.quote(k) if isinstance(k, str) else str(k)
        else:
            raise CELError(f"error during formatting: no formatting function for map key of type {_type_name(k)}")
        entries.append((key, _literal(v)))
    return "{" + ", ".join(f"{k}:{v}" for k, v in sorted(entries, key=lambda e: e[0])) + "}"


def _integer(a: Any, what: str, allow_bool: bool = False) -> int:
    if isinstance(a, bool) and allow_bool:
        return int(a)
    if isinstance(a, int) and not isinstance(a, bool):
        return a
    raise _clause_error(what, a)


def _double(a: Any, what: str) -> float:
    if isinstance(a, float):
        return a
    if isinstance(a, str) and a in _FLOAT_WORDS:
        return _FLOAT_WORDS[a]
    raise _clause_error(what, a)


_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def _localized(f: float) -> str | None:
    """NaN and the infinities as golang.org/x/text/message prints them for en-US."""
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "∞" if f > 0 else "-∞"
    return None


def _fixed(f: float, prec: int) -> str:
    """cel-go's %f through x/text/message's en-US printer: digits grouped by thousands."""
    return _localized(f) or format(f, f",.{prec}f")


def _scientific(f: float) -> str:
    """cel-go's %e through x/text/message's en-US printer: '1.052033 × 10⁰³' (narrow no-break
    spaces around the sign, the exponent in superscript digits, at least two)."""
    if (text := _localized(f)) is not None:
        return text
    mantissa, exponent = format(f, ".6e").split("e")
    digits = f"{'-' if exponent[0] == '-' else ''}{abs(int(exponent)):02d}"
    return f"{mantissa}\u202f×\u202f10{digits.translate(_SUPERSCRIPT)}"


def _clause(verb: str, prec: int | None, a: Any) -> str:
    if verb == "s":
        return string_of(a)
    if verb == "d":
        return str(_integer(a, "decimal clause can only be used on integers"))
    if verb == "f":
        return _fixed(_double(a, "fixed-point clause can only be used on doubles"), 6 if prec is None else prec)
    if verb == "e":  # cel-go writes its precision as a width ("%6e"): six decimals, padded to it
        return _scientific(_double(a, "scientific clause can only be used on doubles")).rjust(6 if prec is None else prec)
    if verb == "b":
        return format(_integer(a, "only integers and bools can be formatted as binary", allow_bool=True), "b")
    if verb == "o":
        return format(_integer(a, "octal clause can only be used on integers"), "o")
    if verb in "xX":
        if isinstance(a, (str, bytes)):
            s = (a.encode() if isinstance(a, str) else a).hex()
        else:
            s = format(_integer(a, "only integers, byte buffers, and strings can be formatted as hex"), "x")
        return s.upper() if verb == "X" else s
    raise CELError(f'could not parse formatting clause: unrecognized formatting clause "{verb}"')


def format_string(fmt: str, args: list) -> str:
    out, i, n = [], 0, 0
    while i < len(fmt):
        c = fmt[i]
        if c != "%":
            out.append(c)
            i += 1
            continue
        if fmt[i + 1:i + 2] == "%":
            out.append("%")
            i += 2
            continue
        if n >= len(args):
            raise CELError(f"index {n} out of range")
        j, prec = i + 1, None
        if fmt[j:j + 1] == ".":
            k = j + 1
            while k < len(fmt) and fmt[k].isdigit():
                k += 1
            if k >= len(fmt):
                raise CELError("could not parse formatting clause: error while parsing precision: "
                               "could not find end of precision specifier")
            prec, j = int(fmt[j + 1:k] or 0), k
            if prec > STRING_LIMIT:  # as many digits as the string would cost over the limit to build
                raise CELError(COST_LIMIT_ERROR)
        if j >= len(fmt):
            raise CELError("unexpected end of string")
        out.append(_clause(fmt[j], prec, args[n]))
        n += 1
        i = j + 1
    return "".join(out)
