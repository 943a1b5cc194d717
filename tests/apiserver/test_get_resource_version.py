"""A GET with a resourceVersion, as the watch cache's Get serves it: the object no older than that
revision; one the cache has not reached within its wait is the 504 Too large resource version (with
Retry-After), and one that is not a number a 400."""

import asyncio

import aiohttp

from nanokube.apiserver import rest
from nanokube.apiserver.app import APIServer
from nanokube.clock import VirtualClock
from nanokube.store.memory import MemoryStore
from tests.controllers import tries


async def test_a_get_at_a_resource_version_is_not_older_than_it(monkeypatch):
    monkeypatch.setattr(rest, "FUTURE_RV_WAIT", 0.05)
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    cms = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps"
    try:
        async with aiohttp.ClientSession() as s:
            async with s.post(cms, json={"metadata": {"name": "a"}}) as r:
                rv = (await r.json())["metadata"]["resourceVersion"]
            got = {}
            for asked in (rv, "0", "1", "999999", "abc"):
                async with s.get(f"{cms}/a", params={"resourceVersion": asked}) as r:
                    body = await r.json()
                    got[asked] = r.status, r.headers.get("Retry-After"), body.get("message") or body["metadata"]["name"]
        current = server.rest.cache.rev
        assert got == {rv: (200, None, "a"), "0": (200, None, "a"), "1": (200, None, "a"),
                       "999999": (504, "1", f"Timeout: Too large resource version: 999999, current: {current}"),
                       "abc": (400, None, 'invalid resource version "abc"')}
    finally:
        await server.stop()


async def test_a_read_at_a_future_resource_version_waits_on_the_server_s_clock(monkeypatch):
    """The wait is the server's clock's (virtual seconds in simulation): with a 30 s wait (inside the
    request's 60 s deadline, which runs on the same clock), a GET at a revision never reached answers its
    504 once virtual time passes the 30 s, and one whose revision a write then reaches answers at once."""
    monkeypatch.setattr(rest, "FUTURE_RV_WAIT", 30.0)
    clock = VirtualClock()
    server = APIServer(MemoryStore(), None, port=0, clock=clock)
    await server.start()
    cms = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps"
    cache = server.rest.cache

    async def waiting(n: int) -> None:
        for _ in tries():
            if len(cache._waiters) == n:
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"{n} reads never waited")
    try:
        async with aiohttp.ClientSession() as s:
            async def get(rv: str) -> tuple[int, str]:
                async with s.get(f"{cms}/a", params={"resourceVersion": rv}) as r:
                    body = await r.json()
                    return r.status, body.get("message") or body["metadata"]["name"]
            async with s.post(cms, json={"metadata": {"name": "a"}}) as r:
                rv = int((await r.json())["metadata"]["resourceVersion"])
            never = asyncio.create_task(get(str(rv + 10**6)))
            await waiting(1)
            await clock.advance(29)
            assert not never.done()
            met = asyncio.create_task(get(str(cache.rev + 1)))
            await waiting(2)
            async with s.post(cms, json={"metadata": {"name": "b"}}) as r:
                assert r.status == 201
            assert await asyncio.wait_for(met, 30) == (200, "a")
            await clock.advance(1)
            code, message = await asyncio.wait_for(never, 30)
            assert (code, message.rpartition(" ")[0]) == (
                504, f"Timeout: Too large resource version: {rv + 10**6}, current:")
    finally:
        await server.stop()


async def test_a_resource_version_is_a_plain_unsigned_number_on_every_read(monkeypatch):
    """ParseResourceVersion is strconv.ParseUint: a sign, a space, an underscore or a value past 2^64-1 is the
    400 of an invalid resource version on a get, a list and a watch alike. Python's int() took "-5", "+5",
    " 5" and "1_000" (a watch from revision -5 was served; found by fuzzing watch parameters), and one past
    2^64 was waited for as a future revision (the 504); one of 5,000 digits was int()'s ValueError, a 500."""
    monkeypatch.setattr(rest, "FUTURE_RV_WAIT", 0.05)
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    cms = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps"
    try:
        async with aiohttp.ClientSession() as s:
            async with s.post(cms, json={"metadata": {"name": "a"}}) as r:
                assert r.status == 201
            for asked in ("-5", "+5", " 5", "1_000", "18446744073709551616", "٣", "9" * 5000):  # (int()'s 4300: fuzz62)
                for url, query in ((f"{cms}/a", {}), (cms, {}), (cms, {"resourceVersionMatch": "NotOlderThan"}),
                                   (cms, {"watch": "1", "timeoutSeconds": "1"})):
                    async with s.get(url, params={"resourceVersion": asked, **query}) as r:
                        assert (r.status, (await r.json())["message"]) == (400, f'invalid resource version "{asked}"'), \
                            (url, query, asked)
            async with s.get(cms, params={"resourceVersion": "18446744073709551615", "resourceVersionMatch": "Exact"}) as r:
                assert r.status == 504  # (the largest revision there is: a future one)
    finally:
        await server.stop()


def test_the_wait_for_a_future_resource_version_shortens_only_through_the_environment(caplog):
    """NANOKUBE_FUTURE_RV_WAIT may shorten upstream's 3 s; a value that is not a wait over 0 and at
    most 3 s (read at import, where a refusal would be a traceback) is named in a warning and the
    wait stays 3 s."""
    assert rest.future_rv_wait({}) == rest.BLOCK_TIMEOUT == 3.0
    assert rest.future_rv_wait({"NANOKUBE_FUTURE_RV_WAIT": "0.2"}) == 0.2
    for bad in ("0", "-1", "7", "nan", "soon"):
        caplog.clear()
        assert rest.future_rv_wait({"NANOKUBE_FUTURE_RV_WAIT": bad}) == 3.0
        assert [r.getMessage() for r in caplog.records] == [
            f"NANOKUBE_FUTURE_RV_WAIT={bad} is not a wait of more than 0 and at most 3 seconds: a read at a future "
            "resourceVersion waits 3 s"]
