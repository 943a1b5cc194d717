"""Go's time.ParseDuration, for the duration flags upstream's components take ("8760h", "1h30m"),
and time.Duration.String, for the durations they print."""

from __future__ import annotations

import re

_NUMBER = re.compile(r"[0-9]*(?:\.[0-9]*)?")
_UNIT_TEXT = re.compile(r"[^0-9.]*")
_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse(text: str, flag: str = "") -> float:
    """Seconds; a ValueError in Go's words ('time: invalid duration "x"', 'time: missing unit in
    duration "10"', 'time: unknown unit "y" in duration "1y"'), after pflag's 'invalid argument
    "<text>" for "<flag>" flag: ' when the text is a flag's value."""
    def fail(why: str) -> ValueError:
        return ValueError(f'invalid argument "{text}" for "{flag}" flag: {why}' if flag else why)

    s = text[1:] if text[:1] in ("+", "-") else text
    if s == "0":
        return 0.0
    if not s:
        raise fail(f'time: invalid duration "{text}"')
    total = 0.0
    while s:
        number = _NUMBER.match(s).group(0)
        if number in ("", "."):
            raise fail(f'time: invalid duration "{text}"')
        s = s[len(number):]
        unit = _UNIT_TEXT.match(s).group(0)
        if not unit:
            raise fail(f'time: missing unit in duration "{text}"')
        if unit not in _UNIT:
            raise fail(f'time: unknown unit "{unit}" in duration "{text}"')
        total += float(number) * _UNIT[unit]
        s = s[len(unit):]
    if total * 1e9 > (2**63 if text[0] == "-" else 2**63 - 1):  # (a time.Duration is int64 nanoseconds)
        raise fail(f'time: invalid duration "{text}"')
    return -total if text[0] == "-" else total


def seconds(n: int) -> float:
    """time.Duration(n) * time.Second, in seconds: nanoseconds in an int64, whose overflow wraps as
    Go's multiplication does (a count of seconds past 292 years is a duration of whatever it wraps to,
    perhaps a negative one)."""
    return ((n * 1_000_000_000 + 2**63) % 2**64 - 2**63) / 1e9


def string(ns: int) -> str:
    """Format nanoseconds the way Go's time.Duration.String does (metav1.Duration's JSON)."""
    if ns == 0:
        return "0s"
    sign, ns = ("-", -ns) if ns < 0 else ("", ns)
    if ns < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if ns >= size:
                return sign + _fraction(ns, size) + unit
    hours, rest = divmod(ns, 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    text = _fraction(rest, 1_000_000_000) + "s"
    if hours or minutes:
        text = f"{minutes}m" + text
    if hours:
        text = f"{hours}h" + text
    return sign + text


def _fraction(value: int, unit: int) -> str:
    whole, frac = divmod(value, unit)
    if not frac:
        return str(whole)
    digits = str(frac).rjust(len(str(unit)) - 1, "0").rstrip("0")
    return f"{whole}.{digits}"


def flag_value(text: str) -> str:
    """An argparse `type` for a duration flag: the text as given (zpages prints a DURATION flag
    from it), refused as Go's ParseDuration refuses it."""
    import argparse

    try:
        parse(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text
