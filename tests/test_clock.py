"""metav1.Time text: second precision, UTC, Z; the per-second memo never returns a stale second."""

from nanokube.clock import REAL, format_time, parse_time


def test_format_time_truncates_to_the_second_and_round_trips():
    assert format_time(1767225600.9) == "2026-01-01T00:00:00Z"
    assert format_time(1767225601.0) == "2026-01-01T00:00:01Z"
    assert format_time(1767225600.2) == "2026-01-01T00:00:00Z", "going back a second is not served from the memo"
    assert parse_time(format_time(1767225659.5)) == 1767225659


def test_parse_time_reads_every_year_go_does():
    """time.Parse reads year 0000 (the API stores it); its epoch seconds are Go's Unix() of it."""
    assert parse_time("0000-01-01T00:00:00Z") == -62167219200
    assert parse_time("0000-03-01T00:00:00.5+01:00") == -62167219200 + 60 * 86400 - 3600 + 0.5  # (year 0 is a leap year)
    assert parse_time("0001-01-01T00:00:00Z") == -62135596800
    assert parse_time("9999-12-31T23:59:59Z") == 253402300799



def test_rfc3339_micro_is_datetimes_text_rounding_edges_and_new_seconds_included():
    import datetime as dt
    import random

    def datetimes(t: float) -> str:
        return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    rng = random.Random(7)
    instants = [rng.uniform(0, 4e9) for _ in range(20_000)]
    # half a microsecond either side of each rounding step, a fraction that rounds up into the next
    # second, the second before again (the per-second memo), whole seconds and tiny fractions
    instants += [1_800_000_000 + k / 1e6 + d for k in range(0, 1_000_000, 9_973) for d in (5e-7, -5e-7, 4.99e-7)]
    instants += [1_799_999_999.9999996, 1_799_999_999.5, 1_800_000_000.0, 0.0, 1.5e-6, 2.5e-6, 1_767_225_600.000001]
    assert [REAL.rfc3339_micro(t) for t in instants] == [datetimes(t) for t in instants]
    assert REAL.rfc3339_micro(1_799_999_999.9999996) == "2027-01-15T08:00:00.000000Z"

async def test_virtual_clock_wakes_sleepers_in_order_at_their_time():
    import asyncio

    from nanokube.clock import VirtualClock

    clock = VirtualClock(start=1000.0)
    woke: list[tuple[str, float]] = []

    async def sleeper(name, seconds):
        await clock.sleep(seconds)
        woke.append((name, clock.now()))

    tasks = [asyncio.create_task(sleeper("late", 90)), asyncio.create_task(sleeper("early", 30))]
    await asyncio.sleep(0)
    await clock.advance(60)
    assert woke == [("early", 1030.0)] and clock.now() == 1060.0 and clock.monotonic() == 60.0
    await clock.advance(3600)
    assert woke == [("early", 1030.0), ("late", 1090.0)] and clock.now() == 4660.0
    await asyncio.gather(*tasks)


async def test_virtual_time_waits_for_what_a_wake_up_sets_off():
    import asyncio

    from nanokube.clock import VirtualClock

    clock = VirtualClock(start=0.0)
    done: list[float] = []

    async def worker():
        await clock.sleep(30)
        for _ in range(500):  # a long chain of steps, e.g. API calls in process
            await asyncio.sleep(0)
        done.append(clock.now())

    task = asyncio.create_task(worker())
    await clock.advance(60)
    assert done == [30.0], "the work finished at its instant, before time moved on"
    await task
