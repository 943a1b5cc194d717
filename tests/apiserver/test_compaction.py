"""The API server's compactor (kube-apiserver's --etcd-compaction-interval) on the embedded stores,
driven by the official `kubernetes` client on a virtual clock: each interval the store forgets its
history up to the revision the previous round saw, so a continue token or a list at an exact
resourceVersion is served for one to two intervals, then answered 410 Expired as etcd's ErrCompacted
is; a watch resumes from its resource's watch-cache history, which compaction leaves alone."""

from __future__ import annotations

import asyncio
import json

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from nanokube.clock import VirtualClock
from nanokube.store.memory import MemoryStore
from nanokube.store.sqlite import SQLiteStore
from tests.controllers import tries
from tests.served import served

INTERVAL = 300.0
NS = "default"
CONTINUE_EXPIRED = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new list "
    "without the continue parameter, or use the continue token in this response to retrieve the remainder of the "
    "results. Continuing with the provided token results in an inconsistent list - objects that were created, "
    "modified, or deleted between the time the first chunk was returned and now may show up in the list.")


@pytest.fixture(params=["memory", "sqlite"])
def store(request, tmp_path):
    return MemoryStore() if request.param == "memory" else SQLiteStore(str(tmp_path / "state.db"))


def _refused(call, *args, **kwargs) -> tuple[int, dict]:
    try:
        call(*args, **kwargs)
    except ApiException as e:
        return e.status, json.loads(e.body)
    raise AssertionError("answered")


async def test_a_continue_token_is_served_until_the_second_round_after_it_then_expires(tmp_path, store):
    clock = VirtualClock()
    async with served(tmp_path, store=store, clock=clock, compaction_interval=INTERVAL) as (_, api):
        core = client.CoreV1Api(api)

        def first_page():
            for i in range(5):
                core.create_namespaced_config_map(NS, {"metadata": {"name": f"cm{i}"}})
            page = core.list_namespaced_config_map(NS, limit=2)
            core.create_namespaced_config_map(NS, {"metadata": {"name": "cm9"}})  # after the page's revision
            return page.metadata._continue, page.metadata.resource_version
        token, rv = await asyncio.to_thread(first_page)

        await clock.advance(INTERVAL)  # the first round notes the revision, compacting nothing
        page = await asyncio.to_thread(core.list_namespaced_config_map, NS, limit=2, _continue=token)
        assert [o.metadata.name for o in page.items] == ["cm2", "cm3"] and page.metadata.resource_version == rv

        await clock.advance(INTERVAL)  # the second compacts at the first's revision, past the token's
        code, status = await asyncio.to_thread(_refused, core.list_namespaced_config_map, NS, limit=2, _continue=token)
        assert (code, status["reason"], status["message"]) == (410, "Expired", CONTINUE_EXPIRED)
        rest = await asyncio.to_thread(core.list_namespaced_config_map, NS, _continue=status["metadata"]["continue"])
        assert [o.metadata.name for o in rest.items] == ["cm2", "cm3", "cm4", "cm9"]  # from the latest revision
        assert int(rest.metadata.resource_version) > int(rv)

        for kwargs in ({"resource_version": rv, "resource_version_match": "Exact"}, {"resource_version": rv, "limit": 2}):
            code, status = await asyncio.to_thread(_refused, core.list_namespaced_config_map, NS, **kwargs)
            assert (code, status["reason"], status["message"]) == (
                410, "Expired", "The resourceVersion for the provided list is too old."), kwargs
        at_least = await asyncio.to_thread(core.list_namespaced_config_map, NS, resource_version=rv)
        assert len(at_least.items) == 6  # not older than rv: the latest

        def resumed():  # the watch cache's history still holds every event since rv
            w = watch.Watch()
            for ev in w.stream(core.list_namespaced_config_map, NS, resource_version=rv, _request_timeout=30):
                w.stop()
                return ev["type"], ev["object"].metadata.name
        assert await asyncio.to_thread(resumed) == ("ADDED", "cm9")


async def test_an_exact_list_within_the_interval_is_served_and_interval_0_never_compacts(tmp_path):
    clock = VirtualClock()
    async with served(tmp_path, clock=clock, compaction_interval=0) as (_, api):
        core = client.CoreV1Api(api)

        def writes():
            core.create_namespaced_config_map(NS, {"metadata": {"name": "a"}})
            rv = core.list_namespaced_config_map(NS).metadata.resource_version
            core.create_namespaced_config_map(NS, {"metadata": {"name": "b"}})
            return rv
        rv = await asyncio.to_thread(writes)
        await clock.advance(10 * INTERVAL)
        exact = await asyncio.to_thread(core.list_namespaced_config_map, NS, resource_version=rv,
                                        resource_version_match="Exact")
        legacy = await asyncio.to_thread(core.list_namespaced_config_map, NS, resource_version=rv, limit=5)
        assert [o.metadata.name for o in exact.items] == [o.metadata.name for o in legacy.items] == ["a"]
        assert exact.metadata.resource_version == legacy.metadata.resource_version == rv


async def test_a_watch_older_than_its_resource_s_history_is_expired_and_the_client_lists_again(tmp_path):
    """Past a compaction, a watch from a revision its resource's watch-cache history no longer reaches
    is the ERROR event 410 "too old resource version" (the client's retry meets it again and raises);
    the client lists again and watches from the list's revision."""
    clock = VirtualClock()

    def small_history(server):
        server.cache.capacity_min = server.cache.capacity_max = 2
    async with served(tmp_path, clock=clock, compaction_interval=INTERVAL, prepare=small_history) as (_, api):
        core = client.CoreV1Api(api)

        def writes(names):
            for name in names:
                core.create_namespaced_config_map(NS, {"metadata": {"name": name}})
            return core.list_namespaced_config_map(NS).metadata.resource_version
        old = await asyncio.to_thread(writes, ["a"])
        await asyncio.to_thread(writes, ["b", "c", "d"])
        await clock.advance(2 * INTERVAL)

        def watched(rv):
            w = watch.Watch()
            try:
                for ev in w.stream(core.list_namespaced_config_map, NS, resource_version=rv, _request_timeout=30):
                    w.stop()
                    return ev["type"], ev["object"].metadata.name
            except ApiException as e:
                return e.status, e.reason
        code, reason = await asyncio.to_thread(watched, old)
        assert code == 410 and reason.startswith(f"Expired: too old resource version: {old} (")
        relisted = await asyncio.to_thread(writes, ["e"])
        await asyncio.to_thread(writes, ["f"])
        assert await asyncio.to_thread(watched, relisted) == ("ADDED", "f")


async def test_on_etcd_a_token_older_than_the_cache_s_window_is_read_from_etcd_until_compacted(tmp_path):
    """Where the watch cache's window no longer reaches a continue token's or an Exact list's revision,
    etcd's own history serves it (upstream's cacher delegates such a list to etcd), until the
    compactor compacts it; the embedded stores keep no past values, so there it is 410 at once."""
    from nanokube.store.etcd import EtcdStore
    from tests.conftest import EtcdServer, etcd_binary

    (tmp_path / "etcd").mkdir()
    etcd = EtcdServer(etcd_binary(), tmp_path / "etcd")
    etcd.start()
    clock = VirtualClock()

    def narrow(server):  # the window and the configmaps' history: their newest event only
        server.cache.window = 1
        server.cache.capacity_min = server.cache.capacity_max = 1
    try:
        async with served(tmp_path, store=EtcdStore([etcd.endpoint]), clock=clock, compaction_interval=INTERVAL,
                          prepare=narrow) as (server, api):
            core = client.CoreV1Api(api)

            def first_page():
                for i in range(5):
                    core.create_namespaced_config_map(NS, {"metadata": {"name": f"cm{i}"}})
                page = core.list_namespaced_config_map(NS, limit=2)
                for name in ("cm8", "cm9"):
                    core.create_namespaced_config_map(NS, {"metadata": {"name": name}})
                core.list_namespaced_config_map(NS)  # (the cache has seen them)
                return page.metadata._continue, page.metadata.resource_version
            token, rv = await asyncio.to_thread(first_page)
            assert server.cache.oldest_revision > int(rv)

            page = await asyncio.to_thread(core.list_namespaced_config_map, NS, limit=2, _continue=token)
            assert [o.metadata.name for o in page.items] == ["cm2", "cm3"] and page.metadata.resource_version == rv
            assert page.metadata.remaining_item_count == 1
            exact = await asyncio.to_thread(core.list_namespaced_config_map, NS, resource_version=rv,
                                            resource_version_match="Exact")
            assert [o.metadata.name for o in exact.items] == [f"cm{i}" for i in range(5)]
            assert {o.metadata.resource_version for o in exact.items} <= {str(r) for r in range(int(rv) + 1)}

            for _ in tries():  # (each round waits on etcd, real I/O the virtual clock does not wait for)
                await clock.advance(INTERVAL)
                try:
                    await asyncio.to_thread(core.list_namespaced_config_map, NS, limit=2, _continue=token)
                except ApiException as e:
                    refused = e
                    break
            status = json.loads(refused.body)
            assert (refused.status, status["reason"], status["message"]) == (410, "Expired", CONTINUE_EXPIRED)
    finally:
        etcd.stop()
