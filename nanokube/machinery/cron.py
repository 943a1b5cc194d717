"""CronJob schedules as kube-controller-manager reads them: robfig/cron v3's
ParseStandard (five fields, `@hourly`-style descriptors, `@every <duration>`,
an optional `TZ=`/`CRON_TZ=` prefix), with its error texts, which the API
server returns for a bad `spec.schedule`.

Parsing here only checks and normalises; the times themselves come from
`cronsim` (Debian cron semantics: day-of-month and day-of-week are OR-ed unless
either starts with `*`, as robfig does), in the schedule's time zone.
"""

from __future__ import annotations

import datetime as dt
import re
import zoneinfo
from dataclasses import dataclass

from cronsim import CronSim, CronSimError

from . import goduration

_DESCRIPTORS = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}
_MONTHS = {m: i + 1 for i, m in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split())}
_DAYS = {d: i for i, d in enumerate("sun mon tue wed thu fri sat".split())}
#: (min, max, names) of minute, hour, day of month, month, day of week
_BOUNDS = ((0, 59, {}), (0, 23, {}), (1, 31, {}), (1, 12, _MONTHS), (0, 6, _DAYS))


class ScheduleError(ValueError):
    """The text robfig/cron's parser returns."""


def load_zone(name: str) -> dt.tzinfo:
    """time.LoadLocation: "UTC" and "" are UTC; else an IANA name."""
    if name in ("", "UTC"):
        return dt.timezone.utc
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a directory of zones ("America")
        raise ScheduleError(f"unknown time zone {name}") from None


@dataclass(frozen=True)
class Schedule:
    expression: str  # five fields, descriptors expanded; "" for @every
    zone: dt.tzinfo | None  # from a TZ= prefix; None means the caller's zone
    every: float = 0.0  # @every's period in seconds
    #: the values each field allows, and whether day of month / of week began with `*` or `?`
    values: tuple[frozenset[int], ...] = ()
    day_stars: tuple[bool, bool] = (True, True)

    def next(self, after: float, zone: dt.tzinfo) -> float:
        """The first activation strictly after epoch second `after`; ValueError
        for a schedule that never fires. A wall time a DST jump skips is not
        run (robfig), where cron would run it after the jump."""
        if self.every:
            return float(int(after) + self.every)
        start = dt.datetime.fromtimestamp(int(after), self.zone or zone)
        try:
            for t in CronSim(self.expression, start):
                if self.matches(t):
                    return t.timestamp()
        except CronSimError:  # a date that never comes (Feb 30): robfig finds no time either
            pass
        raise ValueError("time difference between two schedules is less than 1 second")

    def matches(self, t: dt.datetime) -> bool:
        minute, hour, dom, month, dow = self.values
        if t.minute not in minute or t.hour not in hour or t.month not in month:
            return False
        day, weekday = t.day in dom, (t.weekday() + 1) % 7 in dow
        return (day and weekday) if any(self.day_stars) else (day or weekday)


def parse(spec: str) -> Schedule:
    """ParseStandard(spec); raises ScheduleError with robfig's message."""
    if not spec:
        raise ScheduleError("empty spec string")
    zone = None
    if spec.startswith(("TZ=", "CRON_TZ=")):
        space, eq = spec.find(" "), spec.index("=")
        name = spec[eq + 1:space] if space > 0 else spec[eq + 1:]
        try:
            zone = load_zone(name)
        except ScheduleError as e:
            raise ScheduleError(f"provided bad location {name}: {e}") from None
        spec = spec[space:].strip() if space > 0 else ""
    if spec.startswith("@"):
        if spec.startswith("@every "):
            return Schedule("", zone, _every(spec[len("@every "):], spec))
        if spec not in _DESCRIPTORS:
            raise ScheduleError(f"unrecognized descriptor: {spec}")
        spec = _DESCRIPTORS[spec]
    fields = spec.split()
    if len(fields) != 5:
        raise ScheduleError(f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]")
    checked = [_check_field(f, *_BOUNDS[i]) for i, f in enumerate(fields)]
    return Schedule(" ".join(text for text, _ in checked), zone, values=tuple(v for _, v in checked),
                    day_stars=(fields[2][:1] in "*?", fields[4][:1] in "*?"))


def _check_field(field: str, lo: int, hi: int, names: dict) -> tuple[str, frozenset[int]]:
    """robfig's getField: comma-separated ranges `a-b/step`, `*` or `?`; names
    become numbers so cronsim reads the same values. Returns the text and the values."""
    out, values = [], set()
    for expr in field.split(","):
        range_step = expr.split("/")
        if len(range_step) > 2:
            raise ScheduleError(f"too many slashes: {expr}")
        bounds = range_step[0].split("-")
        if len(bounds) > 2:
            raise ScheduleError(f"too many hyphens: {expr}")
        if range_step[0] in ("*", "?"):
            text, start, end = "*", lo, hi
        else:
            start = _value(bounds[0], names)
            end = _value(bounds[1], names) if len(bounds) == 2 else start
            if start < lo:
                raise ScheduleError(f"beginning of range ({start}) below minimum ({lo}): {expr}")
            if end > hi:
                raise ScheduleError(f"end of range ({end}) above maximum ({hi}): {expr}")
            if start > end:
                raise ScheduleError(f"beginning of range ({start}) beyond end of range ({end}): {expr}")
            text = f"{start}-{end}" if len(bounds) == 2 else str(start)
            if len(range_step) == 2 and len(bounds) == 1:
                text, end = f"{start}-{hi}", hi  # robfig: `N/step` means N through the maximum
        step = 1
        if len(range_step) == 2:
            step = _value(range_step[1], {})
            if step <= 0:
                raise ScheduleError(f"step of range should be a positive number: {expr}")
            text += f"/{step}"
        out.append(text)
        values.update(range(start, end + 1, step))
    return ",".join(out), frozenset(values)


def _value(text: str, names: dict) -> int:
    if text.lower() in names:
        return names[text.lower()]
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        raise ScheduleError(f'failed to parse int from {text}: strconv.Atoi: parsing "{text}": invalid syntax')
    if not -(2**63) <= (n := int(text)) < 2**63:
        raise ScheduleError(f'failed to parse int from {text}: strconv.Atoi: parsing "{text}": value out of range')
    return n


def _every(text: str, spec: str) -> float:
    """@every's period: time.ParseDuration, then robfig's Every (whole seconds, at least one)."""
    try:
        seconds = goduration.parse(text)
    except ValueError as e:
        raise ScheduleError(f"failed to parse duration {spec}: {e}") from None
    return max(1.0, float(int(seconds)))
