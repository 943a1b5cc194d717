"""The events.k8s.io recorder (client/events.py) against an in-process API server on virtual
time: repeats fold into a series, written at the first repeat, every 30 minutes and once
when the series ends; an Event that expired meanwhile is created again."""

from __future__ import annotations

import asyncio
import gc
import warnings

import pytest

from nanokube.client.events import FINISH_TIME, REFRESH_TIME, RETRY_SLEEP, EventBroadcaster
from nanokube.clock import VirtualClock
from tests.client import expiring_events

POD = {"kind": "Pod", "apiVersion": "v1", "namespace": "default", "name": "p", "uid": "u1", "resourceVersion": "7"}


@pytest.fixture
async def env():
    """A server expiring Events an hour after their last write, and a started broadcaster."""
    clock = VirtualClock()
    async with expiring_events(clock) as client:
        b = EventBroadcaster(client, clock)
        b.start()
        yield clock, b, client.resource("events.k8s.io", "v1", "events")
        await b.stop()


async def report(recorder, note: str = "0/3 nodes are available", regarding: dict = POD) -> None:
    await recorder.event(regarding, None, "Warning", "FailedScheduling", "Scheduling", note)


async def stored(events) -> list[dict]:
    items, _ = await events.list("default")
    return sorted(items, key=lambda e: e["eventTime"])


async def test_repeats_fold_into_one_series_written_at_the_first_repeat_and_at_each_refresh(env):
    clock, b, events = env
    rec = b.recorder("default-scheduler", "default-scheduler-h")
    await report(rec)
    [ev] = await stored(events)
    assert "series" not in ev and ev["reportingInstance"] == "default-scheduler-h" and ev["action"] == "Scheduling"
    await clock.advance(300)
    await report(rec, note="another note: not part of the key")
    [ev] = await stored(events)
    assert ev["series"] == {"count": 2, "lastObservedTime": clock.rfc3339_micro()}
    assert ev["note"] == "0/3 nodes are available"
    for _ in range(4):
        await clock.advance(300)
        await report(rec)
    [same] = await stored(events)
    assert same["metadata"]["resourceVersion"] == ev["metadata"]["resourceVersion"]  # no write per repeat
    last = clock.rfc3339_micro()
    await clock.advance(REFRESH_TIME - clock.monotonic())  # the refresh loop's tick, 30 min after the first Event
    [refreshed] = await stored(events)
    assert refreshed["series"] == {"count": 6, "lastObservedTime": last}


async def test_a_series_observed_every_5_minutes_outlives_the_ttl_and_a_finished_one_expires(env):
    """The refreshes renew the Event's TTL (an hour here); a series no longer observed gets its
    final write within 12 minutes and expires an hour after it."""
    clock, b, events = env
    rec = b.recorder("default-scheduler", "h")
    uids = set()
    for hour in range(3):
        for _ in range(12):
            await report(rec)
            if hour == 0:
                await report(rec, regarding={**POD, "name": "q", "uid": "u2"})
            await clock.advance(300)
        got = {e["regarding"]["name"]: e for e in await stored(events)}
        uids.add(got["p"]["metadata"]["uid"])
        assert hour or "q" in got
    assert len(uids) == 1 and got["p"]["series"]["count"] >= 30  # the same Event all along
    assert "q" not in got  # its final write was at most 12 minutes after its last report, 2 hours ago


async def test_a_series_ends_with_a_final_write_and_a_singleton_is_forgotten(env):
    clock, b, events = env
    rec = b.recorder("c", "h")
    await report(rec)
    await report(rec)
    await report(rec, regarding={**POD, "name": "single", "uid": "u2"})
    await report(rec)  # counted in memory only
    assert len(b.cache) == 2
    await clock.advance(FINISH_TIME + 1)  # the first finish tick: nothing is 6 minutes old yet
    assert len(b.cache) == 2
    await clock.advance(FINISH_TIME)
    assert b.cache == {}
    series = next(e for e in await stored(events) if e["regarding"]["name"] == "p")
    assert series["series"]["count"] == 3  # the final write
    await report(rec)  # after the end, the same report starts a new Event
    assert len([e for e in await stored(events) if e["regarding"]["name"] == "p"]) == 2


async def test_an_event_gone_from_the_server_is_created_again_with_its_series(env):
    clock, b, events = env
    rec = b.recorder("c", "h")
    await report(rec)
    await report(rec)
    [ev] = await stored(events)
    await events.delete(ev["metadata"]["name"], "default")
    await report(rec)
    await b.refresh()
    [again] = await stored(events)
    assert again["metadata"]["name"] == ev["metadata"]["name"] and again["series"]["count"] == 3


async def test_another_resource_version_is_another_event(env):
    _, b, events = env
    rec = b.recorder("c", "h")
    await report(rec)
    await report(rec, regarding={**POD, "resourceVersion": "8"})
    assert [("series" in e, e["regarding"]["resourceVersion"]) for e in await stored(events)] == [(False, "7"),
                                                                                                   (False, "8")]


class Flaky:
    """An events client whose first `fails` creates fail as a lost connection would."""

    def __init__(self, inner, fails: int) -> None:
        self.inner, self.fails, self.creates = inner, fails, 0

    async def create(self, obj, **kw):
        self.creates += 1
        if self.creates <= self.fails:
            raise ConnectionResetError("connection reset by peer")
        return await self.inner.create(obj, **kw)


async def test_a_transport_error_is_retried_after_a_pause_on_the_clock(env):
    clock, b, events = env
    b.events = Flaky(events, fails=2)
    rec = b.recorder("c", "h")
    task = asyncio.create_task(b.write(rec.record(POD, None, "Warning", "FailedScheduling", "Scheduling", "n")))
    await clock.advance(RETRY_SLEEP - 1)
    assert b.events.creates == 1 and await stored(events) == []
    await clock.advance(3 * RETRY_SLEEP)
    await task
    assert b.events.creates == 3 and len(await stored(events)) == 1


async def test_an_event_recorded_but_never_written_leaves_no_coroutine_behind(env):
    """`record` hands back the Event, not its write: a caller that drops it (a queue dropped at a
    stop) leaves no coroutine unawaited, and the cache still folds a repeat into its series."""
    clock, b, events = env
    rec = b.recorder("c", "h")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = rec.record(POD, None, "Warning", "FailedScheduling", "Scheduling", "n")
        second = rec.record(POD, None, "Warning", "FailedScheduling", "Scheduling", "n")
        assert first["reason"] == "FailedScheduling" and "series" not in first
        assert second["series"]["count"] == 2 and second["metadata"]["name"] == first["metadata"]["name"]
        del first, second
        gc.collect()
    assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []
    assert await stored(events) == []


async def test_a_posted_event_retrying_holds_up_no_other(env):
    """`post` returns at once; each posted Event is written on its own task, as upstream's
    recordToSink starts a goroutine per Event: one waiting to try again after a transport error
    does not hold up the next, which lands first. `stop` drops the one still retrying."""
    clock, b, events = env
    flaky = b.events = Flaky(events, fails=1)
    rec = b.recorder("c", "h")
    b.post(rec.record(POD, None, "Warning", "FailedScheduling", "Scheduling", "first"))
    b.post(rec.record({**POD, "name": "q", "uid": "u2"}, None, "Warning", "FailedScheduling", "Scheduling", "next"))
    assert flaky.creates == 0, "post only queues"
    await clock.advance(0)
    assert flaky.creates == 2 and [e["note"] for e in await stored(events)] == ["next"]
    await b.stop()
    await clock.advance(3 * RETRY_SLEEP)
    assert flaky.creates == 2 and [e["note"] for e in await stored(events)] == ["next"]
