"""How long a watch is served, on the server's clock (upstream's request.GetTimeoutForWatch and
serveWatch's timer): its timeoutSeconds, or when that is absent or 0 a random time from
--min-request-timeout to twice that, so watches opened together end apart; a watch that allows
bookmarks gets its last one 2 s before that end, whichever way it was chosen."""

import asyncio

import aiohttp
import orjson

from nanokube.apiserver.app import APIServer
from nanokube.apiserver.rest import SYSTEM, WriteOptions
from nanokube.clock import VirtualClock
from nanokube.store.memory import MemoryStore

STEP = 0.25


async def _served(query: str, watches: int, until: float, min_request_timeout: int = 10) -> list[dict]:
    """Opens `watches` watches of ConfigMaps with `query` and moves the virtual clock on by STEP up to
    `until`, noting for each the instants it sent a BOOKMARK and the instant it ended."""
    clock = VirtualClock()
    server = APIServer(MemoryStore(), None, port=0, clock=clock, min_request_timeout=min_request_timeout)
    await server.start()
    cms = server.index.get("", "v1", "configmaps")
    start = await server.rest.create(cms, "v1", "default", {"metadata": {"name": "start"}}, WriteOptions(user=SYSTEM))
    rv = start.obj["metadata"]["resourceVersion"]  # from a revision: no initial events, nor their bookmark
    url = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={rv}&{query}"
    seen = [{"bookmarks": [], "end": None} for _ in range(watches)]
    try:
        async with aiohttp.ClientSession() as s:
            responses = [await s.get(url) for _ in range(watches)]
            n = 0
            while clock.monotonic() < until:
                await clock.advance(STEP)
                n += 1
                marker = f"m{n}"  # written now: an open watch sends everything before it first
                await server.rest.create(cms, "v1", "default", {"metadata": {"name": marker}}, WriteOptions(user=SYSTEM))
                for r, out in zip(responses, seen):
                    while out["end"] is None:
                        line = await asyncio.wait_for(r.content.readline(), 30)
                        if not line:
                            out["end"] = clock.monotonic()
                            break
                        ev = orjson.loads(line)
                        if ev["type"] == "BOOKMARK":
                            out["bookmarks"].append(clock.monotonic())
                        elif ev["object"]["metadata"]["name"] == marker:
                            break
            for r in responses:
                r.close()
    finally:
        await server.stop()
    return seen


async def test_a_watch_without_timeout_seconds_ends_at_a_random_time_from_min_request_timeout_to_twice_it():
    seen = await _served("allowWatchBookmarks=true", watches=4, until=21)
    ends = [out["end"] for out in seen]
    assert all(e is not None and 10 <= e < 20 + STEP for e in ends), ends
    assert len(set(ends)) > 1, ends  # drawn per watch: four alike at STEP's resolution is a 1 in 64,000 chance
    # the bookmark before the end (nextBookmarkTime) is timed by the drawn timeout too: 2 s before it
    assert [out["bookmarks"] for out in seen] == [[e - 2] for e in ends]


async def test_timeout_seconds_zero_is_the_server_s_choice_too():
    [out] = await _served("timeoutSeconds=0", watches=1, until=21)
    assert out["end"] is not None and 10 <= out["end"] < 20 + STEP, out


async def test_timeout_seconds_ends_the_watch_on_the_server_s_clock():
    [out] = await _served("timeoutSeconds=5&allowWatchBookmarks=true", watches=1, until=8, min_request_timeout=1800)
    assert out == {"bookmarks": [3.0], "end": 5.0}


async def test_timeout_seconds_past_an_int64_of_nanoseconds_wrap_as_gos_duration_does():
    """serveWatch's time.Duration(timeoutSeconds) * time.Second wraps in int64 nanoseconds: the largest
    timeoutSeconds is -1 s, a watch that ends at once, and 2**55 s wraps to 0, the server's random choice.
    Such a watch ran for as many seconds as asked, for ever."""
    [out] = await _served(f"timeoutSeconds={2**63 - 1}", watches=1, until=2, min_request_timeout=1800)
    assert out["end"] == STEP  # (its end is noticed at the first step)
    [out] = await _served(f"timeoutSeconds={2**55}", watches=1, until=21)
    assert out["end"] is not None and 10 <= out["end"] < 20 + STEP, out
