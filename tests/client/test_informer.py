"""Informers and the shared informer factory, over the in-process API server."""

import asyncio

import pytest

from nanokube.client.informer import Backoff, Informer, InformerFactory
from nanokube.client.ratelimit import limited
from nanokube.clock import VirtualClock
from tests.controllers import eventually, make_stack


def pod(name, app="a"):
    return {"metadata": {"name": name, "namespace": "default", "labels": {"app": app}},
            "spec": {"containers": [{"name": "c", "image": "x"}]}}


@pytest.fixture
async def env():
    """The in-process stack and a factory over it, stopped after the test."""
    s = await make_stack()
    factory = InformerFactory()
    yield s, factory
    await factory.stop()
    await s.close()


async def test_one_informer_per_resource_and_selectors_run_once(env):
    s, factory = env
    pods = s.client.resource("", "v1", "pods")
    inf = factory.informer(pods)
    assert factory.informer(s.client.resource("", "v1", "pods")) is inf
    assert factory.informer(pods, label_selector="app=b") is not inf
    assert factory.informer(pods, namespace="default") is not inf
    before = s.cache.watcher_count
    factory.start([inf])
    factory.start([inf])
    await asyncio.wait_for(inf.synced.wait(), 5)
    await pods.create(pod("p"))

    async def seen():
        return inf.get("default/p")
    await eventually(seen)
    assert s.cache.watcher_count == before + 1
    await factory.stop()
    assert s.cache.watcher_count == before


async def test_a_handler_added_after_sync_sees_what_the_informer_holds(env):
    s, factory = env
    pods = s.client.resource("", "v1", "pods")
    await pods.create(pod("old"))
    inf = factory.informer(pods)
    first: list[str] = []
    inf.add_handlers(on_add=lambda o: first.append(o["metadata"]["name"]))
    factory.start([inf])
    await asyncio.wait_for(inf.synced.wait(), 5)
    late: list[str] = []
    inf.add_handlers(on_add=lambda o: late.append(o["metadata"]["name"]))
    assert first == late == ["old"]
    await pods.create(pod("new"))

    async def both():
        return late == first == ["old", "new"]
    await eventually(both)


async def test_a_failing_handler_does_not_keep_the_event_from_the_others_or_restart_the_watch(env):
    s, factory = env
    pods = s.client.resource("", "v1", "pods")
    inf = factory.informer(pods)
    watches, real_watch = [], inf.rc.watch

    async def counted(*a, **kw):  # the streaming list that syncs it is its one watch
        watches.append(1)
        return await real_watch(*a, **kw)
    inf.rc.watch = counted

    def broken(o):
        raise RuntimeError("a controller's bug")
    seen: list[str] = []
    inf.add_handlers(on_add=broken, on_update=lambda old, new: broken(new))
    inf.add_handlers(on_add=lambda o: seen.append(o["metadata"]["name"]),
                     on_update=lambda old, new: seen.append(new["metadata"]["name"] + "'"))
    factory.start([inf])
    await asyncio.wait_for(inf.synced.wait(), 5)
    await pods.create(pod("p"))
    await pods.patch("p", {"metadata": {"labels": {"app": "b"}}}, namespace="default")

    async def both():
        return seen == ["p", "p'"]
    await eventually(both)
    assert watches == [1]


async def test_an_in_process_informer_syncs_by_a_streaming_list_that_its_spent_bucket_does_not_hold(env):
    """client-go's WatchListClient (on since 1.35): an informer's initial list is a watch with
    sendInitialEvents, which no client bucket limits, so informers over an in-process client whose
    bucket is spent sync at once, as over HTTP; a LIST through the same client waits for its token."""
    s, _ = env
    await s.client.resource("", "v1", "pods").create(pod("a"))
    await s.client.resource("", "v1", "pods").create(pod("b"))
    clock = VirtualClock()
    client = limited(s.client, 1.0, 1, clock)
    client.bucket.reserve()  # the burst spent: the next request waits a second
    pods = client.resource("", "v1", "pods")
    inf = Informer(pods, clock=clock)
    added: list[str] = []
    inf.add_handlers(on_add=lambda o: added.append(o["metadata"]["name"]))
    task = asyncio.create_task(inf.run())
    listed = None
    try:
        await clock.advance(0)
        assert inf.synced.is_set() and sorted(added) == ["a", "b"] and clock.monotonic() == 0
        listed = asyncio.create_task(pods.list())
        await clock.advance(0)
        assert not listed.done()
        await clock.advance(1.0)
        assert sorted(o["metadata"]["name"] for o in listed.result()[0]) == ["a", "b"]
    finally:
        for t in (task, listed):
            if t is not None:
                t.cancel()
        await asyncio.gather(task, *([listed] if listed else []), return_exceptions=True)


async def test_a_failed_list_is_retried_after_the_reflectors_backoff_on_the_injected_clock():
    """client-go's reflector backoff (800 ms doubling to 30 s; jitter drawn 0 here), on the informer's
    clock: each failed list waits one step longer than the last, up to the cap."""
    s = await make_stack()
    clock = VirtualClock()
    pods = s.client.resource("", "v1", "pods")
    inf = Informer(pods, field_selector="spec.noSuchField=x", clock=clock, draw=lambda: 0.0)
    task = asyncio.create_task(inf.run())
    try:
        waits = []
        await clock.advance(0)
        for _ in range(9):
            waits.append(round(clock.next_due() - clock.monotonic(), 6))
            await clock.advance(waits[-1])
        assert waits == [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0, 30.0]
        assert not inf.synced.is_set()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await s.close()


async def test_the_backoff_jitters_up_to_twice_its_step_and_starts_over_after_two_quiet_minutes():
    clock = VirtualClock()
    draws = iter([0.5, 0.999, 0.0, 0.0])
    backoff = Backoff(clock, lambda: next(draws))
    assert [backoff.next(), backoff.next()] == [0.8 * 1.5, 1.6 * 1.999]
    await clock.advance(120)  # two minutes since the last wait began: not yet more
    assert backoff.next() == 3.2
    await clock.advance(120.5)
    assert backoff.next() == 0.8

