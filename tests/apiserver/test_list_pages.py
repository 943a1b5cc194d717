"""Lists as kube-apiserver serves them (the watch cache's GetList, or etcd's where it delegates):
pages of a list with selectors, the limit a resourceVersion=0 list ignores, ListOptions decoding,
and the answers to revisions the cache cannot serve (too old, from the future, with Retry-After)."""

import base64

import aiohttp
import orjson

from nanokube.apiserver import rest
from nanokube.apiserver.app import APIServer
from nanokube.store.memory import MemoryStore


async def test_a_selected_page_has_no_remaining_count_and_continues_while_anything_follows():
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    cms = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps"
    try:
        async with aiohttp.ClientSession() as s:
            for name, labels in (("a", {"x": "1"}), ("b", {}), ("c", {"x": "1"}), ("d", {})):
                async with s.post(cms, json={"metadata": {"name": name, "labels": labels}}) as r:
                    assert r.status == 201
            pages, token = [], ""
            while True:
                async with s.get(cms, params={"labelSelector": "x=1", "limit": "1", "continue": token}) as r:
                    got = await r.json()
                assert "remainingItemCount" not in got["metadata"]
                pages.append([o["metadata"]["name"] for o in got["items"]])
                token = got["metadata"].get("continue", "")
                if not token:
                    break
            async with s.get(cms, params={"limit": "1"}) as r:
                plain = (await r.json())["metadata"]
        # "c" is followed by "d", which does not match: one more (empty) page, as upstream
        assert pages == [["a"], ["c"], []]
        assert plain["remainingItemCount"] == 3 and plain["continue"]
    finally:
        await server.stop()


async def test_an_exact_revision_the_cache_cannot_serve_is_answered_as_etcd_answers_it():
    """resourceVersionMatch=Exact past the current revision is GetList's ErrFutureRev (504 Too large,
    with no retry hint); one older than both the resource's history and the window of all
    resources' events (etcd's history) is ErrCompacted's 410."""
    server = APIServer(MemoryStore(), None, port=0)
    server.cache.capacity_min = server.cache.capacity_max = 1
    await server.start()
    cms = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps"
    try:
        async with aiohttp.ClientSession() as s:
            async with s.post(cms, json={"metadata": {"name": "a"}}) as r:
                first = int((await r.json())["metadata"]["resourceVersion"])
            server.rest.cache.window = 1  # the window drops one old event per new one, down to the newest
            for i in range(len(server.rest.cache._events) + 1):
                async with s.post(cms, json={"metadata": {"name": f"b{i}"}}) as r:
                    assert r.status == 201
            assert server.rest.cache.oldest_revision > first
            current = server.rest.cache.rev
            async with s.get(cms, params={"resourceVersion": str(current + 1000), "resourceVersionMatch": "Exact"}) as r:
                future = r.status, await r.json()
            async with s.get(cms, params={"resourceVersion": str(first), "resourceVersionMatch": "Exact"}) as r:
                old = r.status, await r.json()
        assert future[0] == 504 and future[1]["reason"] == "Timeout"
        assert future[1]["message"] == f"Timeout: Too large resource version: {current + 1000}, current: {current}"
        assert future[1]["details"] == {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}]}
        assert (old[0], old[1]["reason"], old[1]["message"]) == (410, "Expired", "The resourceVersion for the provided list is too old.")
    finally:
        await server.stop()


async def test_a_list_decodes_its_timeout_seconds_as_an_int64():
    """ListOptions are decoded whole before the list is read: a timeoutSeconds that is not an int64
    is a 400 for a list too (before a bad limit), not only for a watch."""
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    cms = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps"
    try:
        async with aiohttp.ClientSession() as s:
            async with s.get(cms, params={"timeoutSeconds": "abc", "limit": "x"}) as r:
                got = r.status, (await r.json())["message"]
            async with s.get(cms, params={"timeoutSeconds": "30"}) as r:
                assert r.status == 200
        assert got == (400, 'strconv.ParseInt: parsing "abc": invalid syntax')
    finally:
        await server.stop()


async def test_a_list_at_resource_version_0_ignores_its_limit():
    """The watch cache's computeListLimit: "the limit is ignored for requests that set RV == 0" (a
    reflector's first list): the whole collection, no continue token. Without it, pages."""
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    cms = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps"
    try:
        async with aiohttp.ClientSession() as s:
            for name in ("a", "b", "c"):
                async with s.post(cms, json={"metadata": {"name": name}}) as r:
                    assert r.status == 201
            got = {}
            for rv in ("0", ""):
                async with s.get(cms, params={"resourceVersion": rv, "limit": "1"}) as r:
                    body = await r.json()
                got[rv] = len(body["items"]), "continue" in body["metadata"]
        assert got == {"0": (3, False), "": (1, True)}
    finally:
        await server.stop()


async def test_a_list_from_the_future_says_when_to_retry(monkeypatch):
    """The watch cache's 504 for a resourceVersion it did not reach in time carries retryAfterSeconds
    1, which ErrorNegotiated also sets as a Retry-After header (client-go waits and retries on it)."""
    monkeypatch.setattr(rest, "FUTURE_RV_WAIT", 0.05)
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    cms = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps"
    try:
        async with aiohttp.ClientSession() as s, s.get(cms, params={"resourceVersion": "999999"}) as r:
            got = r.status, r.headers.get("Retry-After"), (await r.json())["details"]["retryAfterSeconds"]
        assert got == (504, "1", 1)
    finally:
        await server.stop()


async def test_a_continue_token_from_the_future_is_too_large_a_resource_version():
    """A continue token naming a revision past the store's (one a client made up) is served from
    etcd upstream, whose ErrFutureRev GetList reports as the 504 Too large resource version; the
    list is not answered as of a revision that does not exist yet.

    "current" is the store's revision when the answer was made: the server's own loops (the identity
    Lease, the system namespaces) may write meanwhile, so it lies between the revisions read just
    before the request and just after the answer, which this event loop reads with nothing between."""
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    cms = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps"
    token = base64.urlsafe_b64encode(orjson.dumps({"v": "meta.k8s.io/v1", "rv": 99999999, "start": "a\x00"}))
    try:
        async with aiohttp.ClientSession() as s:
            before = server.rest.cache.rev
            async with s.get(cms, params={"limit": "1", "continue": token.decode().rstrip("=")}) as r:
                got = r.status, (await r.json())["message"]
                after = server.rest.cache.rev
        prefix = "Timeout: Too large resource version: 99999999, current: "
        assert got[0] == 504 and got[1].startswith(prefix), got
        assert before <= int(got[1].removeprefix(prefix)) <= after, (before, got, after)
    finally:
        await server.stop()
