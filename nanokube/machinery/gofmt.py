"""Go's printing of values, where upstream's messages embed them: strconv.Quote (%q), %v of a
float64, and encoding/json's Marshal of JSON-typed values (maps with sorted keys, HTML-safe
strings). field.Error renders a bad value with these, so a 422 reads as kube-apiserver's."""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Any

import orjson

_PLAIN = re.compile(r'[ !#-\[\]-~]*\Z')  # printable ASCII without '"' and '\\': quoted as is
_SHORT_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v",
                  '"': '\\"', "\\": "\\\\"}


def quote(s: str) -> str:
    """strconv.Quote: Go escapes for control and non-printable runes (Python's isprintable is
    unicode.IsPrint: letters, marks, numbers, punctuation, symbols and the ASCII space)."""
    if _PLAIN.match(s):
        return f'"{s}"'
    out = ['"']
    for c in s:
        if c in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[c])
        elif c.isprintable():
            out.append(c)
        else:
            n = ord(c)
            if 0xD800 <= n <= 0xDFFF:  # not UTF-8: Go sees invalid bytes, printed as the replacement rune
                out.append("\ufffd")
            elif n < 0x20 or n == 0x7F:
                out.append(f"\\x{n:02x}")
            elif n < 0x10000:
                out.append(f"\\u{n:04x}")
            else:
                out.append(f"\\U{n:08x}")
    out.append('"')
    return "".join(out)


def _digits(f: float) -> tuple[str, int]:
    """The shortest digits that read back as abs(f), and the decimal point's place after the first."""
    _, digits, exp = Decimal(repr(abs(f))).normalize().as_tuple()
    text = "".join(map(str, digits))
    return text, len(text) + int(exp)


def _fixed(digits: str, point: int) -> str:
    if point <= 0:
        return "0." + "0" * -point + digits
    if point >= len(digits):
        return digits + "0" * (point - len(digits))
    return f"{digits[:point]}.{digits[point:]}"


def _exponent(digits: str, point: int) -> str:
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    x = point - 1
    return f"{mantissa}e{'-' if x < 0 else '+'}{abs(x):02d}"


def _special(f: float) -> str | None:
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    if f == 0:
        return "-0" if math.copysign(1, f) < 0 else "0"
    return None


def format_float(f: float) -> str:
    """%v of a float64 (strconv 'g', shortest): exponent form below 1e-4 and from 1e+06."""
    if (s := _special(f)) is not None:
        return s
    digits, point = _digits(f)
    body = _exponent(digits, point) if not -4 <= point - 1 < 6 else _fixed(digits, point)
    return "-" + body if f < 0 else body


def value(v: Any) -> str:
    """%v of a decoded JSON value (interface{}): maps as map[k:v ...] with sorted keys, slices as
    [a b], nil as <nil>."""
    if v is None:
        return "<nil>"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return format_float(v)
    if isinstance(v, list):
        return "[" + " ".join(value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "map[" + " ".join(f"{k}:{value(v[k])}" for k in sorted(v)) + "]"
    return str(v)


def _json_float(f: float) -> str:
    """encoding/json's float64: fixed form from 1e-6 up to 1e21, else 'e' form without a padded
    negative exponent (1e-7, 1e+21)."""
    if (s := _special(f)) is not None:
        return s
    digits, point = _digits(f)
    if 1e-6 <= abs(f) < 1e21:
        body = _fixed(digits, point)
    else:
        body = _exponent(digits, point)
        if body[-3:-1] == "-0":
            body = body[:-2] + body[-1]
    return "-" + body if f < 0 else body


def _json_string(s: str) -> str:
    try:
        text = orjson.dumps(s).decode()
    except orjson.JSONEncodeError:  # lone surrogates: Go's encoder writes the replacement rune
        text = orjson.dumps("".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in s)).decode()
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


class Struct(dict):
    """A Go struct's JSON fields, in its declaration order: json.Marshal sorts a map's keys, not a
    struct's (an internal type has no JSON tags: its keys are the Go field names)."""

    __slots__ = ()


def marshal(v: Any) -> str:
    """json.Marshal of a JSON-typed value (map[string]interface{}, []interface{}, string, int64,
    float64, bool, nil) or a Struct: map keys sorted, '<', '>', '&', U+2028 and U+2029 escaped."""
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return _json_float(v)
    if isinstance(v, str):
        return _json_string(v)
    if isinstance(v, dict):
        keys = v if type(v) is Struct else sorted(v, key=str)
        return "{" + ",".join(f"{_json_string(str(k))}:{marshal(v[k])}" for k in keys) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(marshal(x) for x in v) + "]"
    return _json_string(str(v))
