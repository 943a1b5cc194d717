"""Go's time.Parse(time.RFC3339, s), for the times upstream reads from query parameters
(metav1.Time.UnmarshalQueryParameter: a pods/log request's sinceTime): the time, or Go's
error text, element by element as its parser meets them (`parsing time "x" as
"2006-01-02T15:04:05Z07:00": cannot parse "x" as "2006"`, `parsing time "...": month out of
range`, `...: extra text: "..."`); and Go's t.UTC().Format(time.RFC3339) of such a time, as the API server
hands it on to the kubelet (metav1.Time.MarshalQueryParameter)."""

from __future__ import annotations

import datetime
import math

from .gofmt import quote

RFC3339 = "2006-01-02T15:04:05Z07:00"
#: the seconds of 400 Gregorian years, after which the calendar repeats
_CYCLE = 146097 * 86400
#: the first second of year 1 and of year 10000: datetime's range
_FIRST, _PAST_LAST = -62135596800, 253402300800
#: the layout's elements: (literal before it, element, what it reads)
_ELEMENTS = (("", "2006", "year"), ("-", "01", "month"), ("-", "02", "day"), ("T", "15", "hour"),
             (":", "04", "minute"), (":", "05", "second"), ("", "Z07:00", "zone"))

#: the range each number must be in (the day's end depends on the month, checked last, as Go does)
_LOW = {"month": 1, "day": 0, "hour": 0, "minute": 0, "second": 0}
_LIMIT = {"month": 13, "day": 100, "hour": 24, "minute": 60, "second": 60}
_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


class TimeParseError(ValueError):
    pass


def _digit(s: str, i: int) -> bool:
    return i < len(s) and "0" <= s[i] <= "9"


def _getnum(s: str, fixed: bool) -> tuple[int, str] | None:
    if not _digit(s, 0):
        return None
    if not _digit(s, 1):
        return None if fixed else (int(s[0]), s[1:])
    return int(s[:2]), s[2:]


def parse_rfc3339(value: str) -> float:
    """Seconds since the epoch of `value`; a TimeParseError holding Go's message otherwise."""
    def cannot(rest: str, elem: str) -> TimeParseError:
        return TimeParseError(f"parsing time {quote(value)} as {quote(RFC3339)}: cannot parse {quote(rest)} as {quote(elem)}")

    def out_of_range(what: str) -> TimeParseError:
        return TimeParseError(f"parsing time {quote(value)}: {what} out of range")

    rest, got, frac, offset = value, {}, 0.0, 0
    for literal, elem, name in _ELEMENTS:
        if literal:
            if not rest or rest[0] != literal:
                raise cannot(rest, literal)
            rest = rest[1:]
        hold = rest
        if name == "year":
            if len(rest) < 4 or not rest[:4].isdigit() or not rest[:4].isascii():
                raise cannot(hold, elem)
            got[name], rest = int(rest[:4]), rest[4:]
        elif name == "zone":
            if rest[:1] == "Z":
                rest = rest[1:]
                continue
            if len(rest) < 6 or rest[3] != ":":
                raise cannot(hold, elem)
            sign, hh, mm, rest = rest[0], _getnum(rest[1:3], True), _getnum(rest[4:6], True), rest[6:]
            if hh is None or mm is None:
                raise cannot(hold, elem)
            if hh[0] > 24:
                raise out_of_range("time zone offset hour")
            if mm[0] > 60:
                raise out_of_range("time zone offset minute")
            if sign not in "+-":
                raise cannot(hold, elem)
            offset = (hh[0] * 60 + mm[0]) * 60 * (1 if sign == "+" else -1)
        else:
            num = _getnum(rest, name != "hour")
            if num is None:
                raise cannot(hold, elem)
            got[name], rest = num
            if not _LOW[name] <= got[name] < _LIMIT[name]:
                raise out_of_range(name)
            if name == "second" and len(rest) >= 2 and rest[0] in ".," and _digit(rest, 1):
                n = 2
                while _digit(rest, n):
                    n += 1
                frac, rest = float("0." + rest[1:min(n, 10)]), rest[n:]
    if rest:
        raise TimeParseError(f"parsing time {quote(value)}: extra text: {quote(rest)}")
    year, month, day = got["year"], got["month"], got["day"]
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    if not 1 <= day <= (29 if month == 2 and leap else _DAYS[month - 1]):
        raise out_of_range("day")
    seconds = ((_days_from_civil(year, month, day) * 24 + got["hour"]) * 60 + got["minute"]) * 60 + got["second"]
    return seconds - offset + frac


def _days_from_civil(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (year 0 included, as Go's)."""
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def format_rfc3339(seconds: float) -> str:
    """`seconds` since the epoch in UTC as Go's RFC 3339 layout writes them: the fraction dropped (the second
    it falls in), any year (Go's year 0 or -1 of a zone's offset, 10000: moved into datetime's years 1 to
    9999 by whole 400-year cycles, then back), a negative one with its sign before four digits."""
    sec, cycles = math.floor(seconds), 0
    while sec < _FIRST:
        sec, cycles = sec + _CYCLE, cycles - 1
    while sec >= _PAST_LAST:
        sec, cycles = sec - _CYCLE, cycles + 1
    t = datetime.datetime.fromtimestamp(sec, datetime.timezone.utc)
    year = t.year + 400 * cycles
    return (f"{year:04d}" if year >= 0 else f"-{-year:04d}") + t.strftime("-%m-%dT%H:%M:%SZ")
