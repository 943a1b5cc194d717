"""CronJob schedules read as robfig/cron's ParseStandard reads them."""

import datetime as dt
import zoneinfo

import pytest

from nanokube.machinery import cron

UTC = dt.timezone.utc
T0 = dt.datetime(2026, 3, 28, 23, 30, tzinfo=UTC).timestamp()  # a Saturday, the night before Europe's DST switch


def nexts(spec: str, n: int = 3, zone=UTC, after: float = T0) -> list[str]:
    s, out = cron.parse(spec), []
    for _ in range(n):
        after = s.next(after, zone)
        out.append(dt.datetime.fromtimestamp(after, s.zone or zone).isoformat())
    return out


def test_fields_descriptors_and_names():
    assert nexts("*/20 * * * *") == ["2026-03-28T23:40:00+00:00", "2026-03-29T00:00:00+00:00",
                                     "2026-03-29T00:20:00+00:00"]
    assert nexts("@daily", 1) == ["2026-03-29T00:00:00+00:00"]
    assert nexts("0 9 * * mon-fri", 2) == ["2026-03-30T09:00:00+00:00", "2026-03-31T09:00:00+00:00"]
    assert nexts("30 5/6 * * ?", 2) == ["2026-03-29T05:30:00+00:00", "2026-03-29T11:30:00+00:00"]
    assert nexts("@every 90m", 2) == ["2026-03-29T01:00:00+00:00", "2026-03-29T02:30:00+00:00"]


def test_every_runs_whole_seconds_and_at_least_one_as_robfigs_every():
    assert nexts("@every 1m30.9s", 2) == ["2026-03-28T23:31:30+00:00", "2026-03-28T23:33:00+00:00"]
    assert nexts("@every 1.5ms", 2) == ["2026-03-28T23:30:01+00:00", "2026-03-28T23:30:02+00:00"]
    assert nexts("@every -1h", 1) == ["2026-03-28T23:30:01+00:00"]


def test_day_of_month_or_day_of_week_when_both_are_restricted():
    assert nexts("0 0 1 * SUN", 2) == ["2026-03-29T00:00:00+00:00", "2026-04-01T00:00:00+00:00"]


def test_time_zones_and_dst():
    berlin = zoneinfo.ZoneInfo("Europe/Berlin")
    assert nexts("30 2 * * *", 2, berlin) == ["2026-03-30T02:30:00+02:00", "2026-03-31T02:30:00+02:00"], \
        "02:30 does not exist on the night clocks spring forward"
    assert nexts("TZ=America/New_York 0 12 * * *", 1) == ["2026-03-29T12:00:00-04:00"]


@pytest.mark.parametrize("spec,message", [
    ("", "empty spec string"),
    ("* * * * * *", "expected exactly 5 fields, found 6: [* * * * * *]"),
    ("* 24 * * *", "end of range (24) above maximum (23): 24"),
    ("* * * 13 *", "end of range (13) above maximum (12): 13"),
    ("* * * * 7", "end of range (7) above maximum (6): 7"),
    ("5-1 * * * *", "beginning of range (5) beyond end of range (1): 5-1"),
    ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
    ("*/2/3 * * * *", "too many slashes: */2/3"),
    ("* * L * *", 'failed to parse int from L: strconv.Atoi: parsing "L": invalid syntax'),
    ("@sometimes", "unrecognized descriptor: @sometimes"),
    ("@every 5", 'failed to parse duration @every 5: time: missing unit in duration "5"'),
    ("@every 1d", 'failed to parse duration @every 1d: time: unknown unit "d" in duration "1d"'),
    ("TZ=Mars/Base * * * * *", "provided bad location Mars/Base: unknown time zone Mars/Base"),
])
def test_errors_carry_robfigs_text(spec, message):
    with pytest.raises(cron.ScheduleError) as e:
        cron.parse(spec)
    assert str(e.value) == message


def test_a_date_that_never_comes():
    with pytest.raises(ValueError, match="less than 1 second"):
        cron.parse("0 0 31 2 *").next(T0, UTC)
