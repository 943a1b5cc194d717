"""Informers and the shared informer factory, over the in-process API server."""

import asyncio

import pytest

from nanokube.client.informer import InformerFactory
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
    lists, real_list = [], inf.rc.list

    async def counted(*a, **kw):
        lists.append(1)
        return await real_list(*a, **kw)
    inf.rc.list = counted

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
    assert lists == [1]


async def test_a_failed_list_is_retried_after_a_second_of_the_injected_clock():
    s = await make_stack()
    clock = VirtualClock()
    factory = InformerFactory(clock)
    pods = s.client.resource("", "v1", "pods")
    inf = factory.informer(pods, field_selector="spec.noSuchField=x")
    try:
        factory.start([inf])
        await clock.advance(0)
        assert clock.next_due() == 1.0, "the retry waits on the informer's clock"
        await clock.advance(1)
        assert clock.next_due() == 2.0, "a second list failed after one virtual second"
        assert not inf.synced.is_set()
    finally:
        await factory.stop()
        await s.close()
