"""Each resource's own watch history, as upstream's cacher keeps one watchCache per resource: a watch
resumes from any resourceVersion its resource's history reaches, whatever other resources wrote
meanwhile, and one from older than it is 410 Expired "too old resource version: R (oldest - 1)". The
history starts at 100 events and drops its oldest once full with events older than 75 s (it doubles
while they are fresher). A list at an earlier revision (a continue token's, Exact) is served from it
too, as upstream's cacher serves one from its snapshots. Over HTTP, through the official client, on a
virtual clock."""

import asyncio

import orjson
import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from nanokube.apiserver.cache import CAPACITY_MIN, EVENT_FRESH
from nanokube.clock import VirtualClock
from tests.served import served


def _event(i: int) -> dict:
    return {"metadata": {"name": f"e{i}"}, "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p"},
            "reason": "Flood", "message": f"event {i}", "type": "Normal"}


def _watch_lines(api: client.ApiClient, resource: str, n: int, **params) -> list[dict]:
    """The first `n` lines of a watch of `resource` in the default namespace (the official client's
    request, read raw), or fewer where the server ends it first."""
    query = "&".join(f"{k}={v}" for k, v in {"watch": "1", **params}.items())
    r = api.rest_client.pool_manager.request("GET", f"{api.configuration.host}/api/v1/namespaces/default/{resource}?{query}",
                                             preload_content=False)
    lines = []
    try:
        buf = b""
        for chunk in r.stream(1024):
            buf += chunk
            while b"\n" in buf and len(lines) < n:
                line, buf = buf.split(b"\n", 1)
                lines.append(orjson.loads(line))
            if len(lines) == n:
                break
    finally:
        r.release_conn()
        r.close()
    return lines


async def _flood(core: client.CoreV1Api, clock: VirtualClock, first: int, fresh: int, stale: int) -> list[str]:
    """`fresh` Events, then, 76 s later (the history no longer doubles for them), `stale` more: their
    resourceVersions."""
    def create(lo, hi):
        return [core.create_namespaced_event("default", _event(i)).metadata.resource_version for i in range(lo, hi)]
    rvs = await asyncio.to_thread(create, first, first + fresh)
    await clock.advance(EVENT_FRESH + 1)
    return rvs + await asyncio.to_thread(create, first + fresh, first + fresh + stale)


async def test_a_quiet_resource_s_watch_resumes_past_a_flood_of_another_s_writes_and_the_busy_one_s_expires(tmp_path):
    clock = VirtualClock()
    async with served(tmp_path, clock=clock) as (server, api):
        server.cache.window = 50  # lists at a revision reach 50 events of all resources back: watches are not bound by it
        core = client.CoreV1Api(api)
        created = await asyncio.to_thread(core.create_namespaced_config_map, "default", {"metadata": {"name": "quiet"}})
        updated = await asyncio.to_thread(core.patch_namespaced_config_map, "quiet", "default", {"data": {"k": "v"}})
        rvs = await _flood(core, clock, 0, CAPACITY_MIN, 50)
        assert server.cache.oldest_revision > int(created.metadata.resource_version)

        got = await asyncio.to_thread(_watch_lines, api, "configmaps", 1, resourceVersion=created.metadata.resource_version)
        assert [(e["type"], e["object"]["metadata"]["resourceVersion"]) for e in got] == [
            ("MODIFIED", updated.metadata.resource_version)]

        # the Events' history holds its newest 100: from the 51st on
        oldest = int(rvs[50])
        got = await asyncio.to_thread(_watch_lines, api, "events", 2, resourceVersion=rvs[0])
        assert got == [{"type": "ERROR", "object": {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": f"too old resource version: {rvs[0]} ({oldest - 1})", "reason": "Expired", "code": 410}}]
        got = await asyncio.to_thread(_watch_lines, api, "events", 2, resourceVersion=str(oldest - 2))
        assert got[0]["type"] == "ERROR" and got[0]["object"]["code"] == 410
        got = await asyncio.to_thread(_watch_lines, api, "events", 2, resourceVersion=str(oldest - 1))
        assert [e["object"]["metadata"]["name"] for e in got] == ["e50", "e51"]


async def test_a_watch_from_a_version_no_event_of_its_resource_has_starts_at_the_cache_s_state(tmp_path):
    """A resourceVersion newer than the resource's newest event (another resource's) is served: no
    events before those that come after it; sendInitialEvents from a version past the history is
    the state at the cache's revision, as upstream's watch-list reads it from its store."""
    clock = VirtualClock()
    async with served(tmp_path, clock=clock) as (_, api):
        core = client.CoreV1Api(api)
        await asyncio.to_thread(core.create_namespaced_config_map, "default", {"metadata": {"name": "quiet"}})
        rvs = await _flood(core, clock, 0, CAPACITY_MIN, 10)
        watch = asyncio.create_task(asyncio.to_thread(_watch_lines, api, "configmaps", 1, resourceVersion=rvs[5]))
        await asyncio.to_thread(core.patch_namespaced_config_map, "quiet", "default", {"data": {"k": "v"}})
        got = await asyncio.wait_for(watch, 30)
        assert [(e["type"], e["object"]["data"]) for e in got] == [("MODIFIED", {"k": "v"})]

        got = await asyncio.to_thread(_watch_lines, api, "events", CAPACITY_MIN + 11, resourceVersion=rvs[0],
                                      sendInitialEvents="true", resourceVersionMatch="NotOlderThan", allowWatchBookmarks="true")
        assert [e["type"] for e in got] == ["ADDED"] * (CAPACITY_MIN + 10) + ["BOOKMARK"]
        assert got[-1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


async def test_a_quiet_resource_s_list_at_a_revision_outlives_a_flood_of_another_s_writes(tmp_path):
    """Past the window of all resources' events (50 here: etcd's history, which upstream asks for a
    list its cache cannot serve), a continue token and an Exact list are served from the resource's
    own history; one older than both is 410, as etcd's ErrCompacted."""
    clock = VirtualClock()
    async with served(tmp_path, clock=clock) as (server, api):
        server.cache.window = 50
        core = client.CoreV1Api(api)
        for name in ("a", "b", "c"):
            await asyncio.to_thread(core.create_namespaced_config_map, "default", {"metadata": {"name": name}})
        first = await asyncio.to_thread(core.list_namespaced_config_map, "default", limit=1)
        await asyncio.to_thread(core.delete_namespaced_config_map, "b", "default")
        rvs = await _flood(core, clock, 0, CAPACITY_MIN, 50)
        assert server.cache.oldest_revision > int(rvs[0])

        rest = await asyncio.to_thread(core.list_namespaced_config_map, "default", limit=5, _continue=first.metadata._continue)
        assert [o.metadata.name for o in first.items + rest.items] == ["a", "b", "c"]  # as they were
        assert rest.metadata.resource_version == first.metadata.resource_version
        exact = await asyncio.to_thread(core.list_namespaced_event, "default", resource_version=rvs[60],
                                        resource_version_match="Exact")
        assert [o.metadata.name for o in exact.items] == sorted(f"e{i}" for i in range(61))
        with pytest.raises(ApiException) as e:
            await asyncio.to_thread(core.list_namespaced_event, "default", resource_version=rvs[0],
                                    resource_version_match="Exact")
        status = orjson.loads(e.value.body)
        assert (e.value.status, status["reason"], status["message"]) == (
            410, "Expired", "The resourceVersion for the provided list is too old.")
