"""A timestamp's accessors in a time zone (`t.getHours('America/New_York')`, `t.getDate('+05:30')`),
which the engine lacks. Kubernetes' environment reads a timestamp without a zone in UTC
(cel.DefaultUTCTimeZone), where the engine reads it in its own offset, so the rewrite (see
`desugar`) passes those calls here with "UTC"."""

from __future__ import annotations

import datetime
import re
import zoneinfo
from typing import Callable

from ..errors import CELError
from ..types import INT, STRING, TIMESTAMP
from .overload import Overload

_OFFSET = re.compile(r"([+-]?)(\d\d):(\d\d)\Z")


def zone(name: str) -> datetime.tzinfo:
    """An IANA name (or UTC), or a fixed offset `[+|-]HH:MM`, as cel-go reads a time zone."""
    if ":" in name:
        m = _OFFSET.match(name)
        if m is None:
            raise CELError(f"unknown time zone {name}")
        delta = datetime.timedelta(hours=int(m[2]), minutes=int(m[3]))
        return datetime.timezone(-delta if m[1] == "-" else delta)
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a directory of zones ("America")
        raise CELError(f"unknown time zone {name}") from None


def _accessor(read: Callable[[datetime.datetime], int]) -> Callable[[datetime.datetime, str], int]:
    return lambda t, tz: read(t.astimezone(zone(tz)))


#: name -> the field it reads; months, days of the month and of the year count from 0 (getDate from 1)
ACCESSORS: dict[str, Callable[[datetime.datetime], int]] = {
    "getFullYear": lambda t: t.year,
    "getMonth": lambda t: t.month - 1,
    "getDate": lambda t: t.day,
    "getDayOfMonth": lambda t: t.day - 1,
    "getDayOfWeek": lambda t: (t.weekday() + 1) % 7,  # Sunday is 0
    "getDayOfYear": lambda t: t.timetuple().tm_yday - 1,
    "getHours": lambda t: t.hour,
    "getMinutes": lambda t: t.minute,
    "getSeconds": lambda t: t.second,
    "getMilliseconds": lambda t: t.microsecond // 1000,
}

OVERLOADS = [Overload(name, (TIMESTAMP, STRING), INT, member=True, impl=_accessor(read))
             for name, read in ACCESSORS.items()]
