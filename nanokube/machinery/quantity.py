"""Resource quantities ("100m", "1.5Gi", "1e3") as exact numbers.

Follows apimachinery's resource.Quantity: parsing accepts the same grammar
and returns the same three errors; values are rounded up (away from zero) to
nano precision, binary-suffixed values above 2^63-1 are capped; the canonical
form keeps the format the user wrote (binary, decimal SI or exponent) unless
that would lose precision. Exact `Fraction`s keep sums and comparisons (the
scheduler's resource fits, requests <= limits) free of float error.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

FORMAT_WRONG = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
NUMERIC = "unable to parse numeric part of quantity"
SUFFIX = "unable to parse quantity's suffix"

BINARY_SI = "BinarySI"
DECIMAL_SI = "DecimalSI"
DECIMAL_EXPONENT = "DecimalExponent"

_MAX = Fraction(2**63 - 1)
_NANO = Fraction(1, 10**9)
# Decimal exponents must fit upstream's int32 scale (negated, so -MaxInt32 is
# the lower bound); anything else is "unable to parse quantity's suffix".
_MAX_EXPONENT = 2**31 - 1
# Values with more integer digits than this are kept exactly as text but
# compare as this bound: no capacity comes close, and the exact number
# (up to 10^2147483647) would cost unbounded time and memory to build.
_EXACT_DIGITS = 1000
_SATURATED = Fraction(10**_EXACT_DIGITS)
# Fractional digits kept exactly (far below a nano even after a 2^60 suffix).
_FRACTION_DIGITS = 1100

_SHAPE = re.compile(r"([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)")
_NUMBER = re.compile(r"[+-]?([0-9]*)(?:\.([0-9]*))?")
_SUFFIX_SHAPE = re.compile(r"[eEinumkKMGTP]*[-+]?[0-9]*")
_EXPONENT = re.compile(r"[+-]?0*([0-9]+)")

_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_BY_EXP = {e: s for s, e in _DECIMAL.items()}
_BINARY_BY_EXP = {e: s for s, e in _BINARY.items()} | {0: ""}


class QuantityError(ValueError):
    """A string that is not a quantity; str() is upstream's message."""


@dataclass(frozen=True, slots=True)
class Quantity:
    value: Fraction
    format: str
    text: str = ""  # canonical form when `value` is saturated

    def __str__(self) -> str:
        return self.text or format_quantity(self.value, self.format)

    def ceil(self) -> int:
        """Integer value rounded up, like Quantity.Value()."""
        return math.ceil(self.value)

    def milli(self) -> int:
        """Value in thousandths rounded up, like Quantity.MilliValue()."""
        return math.ceil(self.value * 1000)


def add(a: Quantity | None, b: Quantity) -> Quantity:
    """Quantity.Add: the sum keeps the first non-zero operand's format (a zero or missing `a`
    takes `b`'s)."""
    if a is None:
        return b
    return Quantity(a.value + b.value, a.format if a.value else b.format)


def _interpret_suffix(suffix: str) -> tuple[int, int, str]:
    """(base, exponent, format) of a suffix, or QuantityError."""
    if suffix in _BINARY:
        return 2, _BINARY[suffix], BINARY_SI
    if suffix in _DECIMAL:
        return 10, _DECIMAL[suffix], DECIMAL_SI
    m = _EXPONENT.fullmatch(suffix, 1) if len(suffix) > 1 and suffix[0] in "eE" else None
    if m and len(m.group(1)) <= 10:
        exponent = int(suffix[1:])
        if -_MAX_EXPONENT <= exponent <= _MAX_EXPONENT:
            return 10, exponent, DECIMAL_EXPONENT
    raise QuantityError(SUFFIX)


def parse(s: str) -> Quantity:
    """Parse a quantity string, keeping its format for canonical printing."""
    if not isinstance(s, str):
        raise QuantityError(FORMAT_WRONG)
    return _parse(s)


@functools.lru_cache(maxsize=4096)
def _parse(s: str) -> Quantity:
    """Quantities are immutable and a cluster uses few distinct strings, so
    parses are shared; strings that fail are not cached.

    The work is linear in the length of `s` whatever its exponent: the
    number is kept as a digit string and a power of ten until it is rounded
    to nano precision, and only values of bounded size become integers."""
    if not _SHAPE.fullmatch(s):
        raise QuantityError(FORMAT_WRONG)
    m = _NUMBER.match(s)
    whole, frac = m.group(1), m.group(2) or ""
    number, suffix = s[: m.end()], s[m.end():]
    if not _SUFFIX_SHAPE.fullmatch(suffix):
        raise QuantityError(FORMAT_WRONG)
    if not whole and not frac:
        raise QuantityError(NUMERIC)
    base, exponent, fmt = _interpret_suffix(suffix)
    negative = number.startswith("-")
    digits = (whole + frac).lstrip("0")
    if not digits:
        return Quantity(Fraction(0), fmt)
    # value = digits * 10^exp10 (* 2^exponent for binary suffixes)
    exp10 = exponent - len(frac) if base == 10 else -len(frac)
    stripped = digits.rstrip("0")
    exp10 += len(digits) - len(stripped)
    digits = stripped
    sign = -1 if negative else 1
    if len(digits) + exp10 > _EXACT_DIGITS:
        if fmt == BINARY_SI:
            return Quantity(sign * _MAX, fmt)
        return Quantity(sign * _SATURATED, fmt, _format_decimal(negative, digits, exp10, fmt))
    if -exp10 > _FRACTION_DIGITS:
        # Digits this far below a nano only decide whether to round up: keep
        # one sticky digit for all of them.
        cut = -exp10 - _FRACTION_DIGITS
        head, tail = digits[:-cut] if cut < len(digits) else "", digits[-cut:]
        digits, exp10 = head + ("1" if tail.strip("0") else "0"), -_FRACTION_DIGITS - 1
    n = int(digits) << (exponent if base == 2 else 0)
    mag = Fraction(n, 10**-exp10) if exp10 < 0 else Fraction(n * 10**exp10)
    mag = Fraction(math.ceil(mag / _NANO)) * _NANO
    if fmt == BINARY_SI and mag > _MAX:
        mag = _MAX
    return Quantity(sign * mag, fmt)


def _format_decimal(negative: bool, digits: str, exp10: int, fmt: str) -> str:
    """Canonical text of digits * 10^exp10 (no trailing zeros in digits)."""
    while exp10 % 3:
        digits += "0"
        exp10 -= 1
    while exp10 > _MAX_EXPONENT:
        digits += "000"
        exp10 -= 3
    sign = "-" if negative else ""
    if fmt == DECIMAL_SI and exp10 in _DECIMAL_BY_EXP:
        return f"{sign}{digits}{_DECIMAL_BY_EXP[exp10]}"
    return f"{sign}{digits}" + (f"e{exp10}" if exp10 else "")


def parse_list(rl: Mapping | None) -> dict[str, Quantity]:
    """A resource list ({"cpu": "100m", ...}) as Quantities by name, those that parse (validation
    reports the others)."""
    out = {}
    for name, q in (rl or {}).items():
        try:
            out[name] = parse(str(q))
        except QuantityError:
            continue
    return out


def parse_quantity(s: str) -> Fraction:
    """The exact value of a quantity string."""
    return parse(s).value


def whole_count(quantity) -> int:
    """An extended resource's amount (a device count): a whole number, as validation allows no
    fractions of one; 0 for anything else."""
    try:
        value = parse_quantity(str(quantity))
    except QuantityError:
        return 0
    return int(value) if value.denominator == 1 else 0


def nano_value(s: str) -> int:
    """The exact value of a quantity string in billionths, an int (parsed values are rounded to
    nano precision): sums and comparisons of ints cost a fraction of those of `Fraction`s, which
    every pod create's validation and QoS class make several of."""
    if not isinstance(s, str):
        raise QuantityError(FORMAT_WRONG)
    return _nano_value(s)


@functools.lru_cache(maxsize=4096)
def _nano_value(s: str) -> int:
    return int(_parse(s).value * 1_000_000_000)


def is_quantity(s: str) -> bool:
    try:
        parse(s)
    except QuantityError:
        return False
    return True


def _strip_tens(n: int) -> tuple[int, int]:
    exp = 0
    while n and n % 10 == 0:
        n //= 10
        exp += 1
    return n, exp


def format_quantity(value: Fraction, fmt: str = DECIMAL_SI) -> str:
    """Canonical string of `value` in format `fmt` (Quantity.String())."""
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    mag = abs(value)
    if fmt == BINARY_SI and (mag < 1024 or mag.denominator != 1):
        fmt = DECIMAL_SI
    if fmt == BINARY_SI:
        n, exp = mag.numerator, 0
        while n % 1024 == 0 and exp < 60:
            n //= 1024
            exp += 10
        return f"{sign}{n}{_BINARY_BY_EXP[exp]}"
    # value = mantissa * 10^exp with an integer mantissa; nano-rounded values
    # always have a power-of-ten denominator, others are rounded up to nano.
    scaled = math.ceil(mag / _NANO)
    mantissa, exp = _strip_tens(scaled)
    exp -= 9
    while exp % 3:
        mantissa *= 10
        exp -= 1
    if fmt == DECIMAL_SI and exp in _DECIMAL_BY_EXP:
        return f"{sign}{mantissa}{_DECIMAL_BY_EXP[exp]}"
    return f"{sign}{mantissa}" + (f"e{exp}" if exp else "")


def canonical(s: str) -> str:
    """The form the API server stores and returns for a quantity string."""
    if not isinstance(s, str):
        raise QuantityError(FORMAT_WRONG)
    return _canonical(s)


@functools.lru_cache(maxsize=4096)
def _canonical(s: str) -> str:
    return str(_parse(s))
