"""Lists in pages, as client-go's pager asks for them and its reflector uses it, against a server over HTTP
holding more than one page of objects: 500 a page, each continue token followed with no resourceVersion, the
list at its first page's resourceVersion (every page is read at that revision, and a watch starts from it), and
one full list in place of a continue token that expired."""

from __future__ import annotations

import asyncio

from nanokube.client.informer import Informer
from nanokube.client.pager import PAGE_SIZE, list_pages
from nanokube.machinery.errors import APIError
from tests.client.test_informer_rewatch import TOO_LARGE, cm, served
from tests.controllers import tries

N = 2 * PAGE_SIZE + 1  # three pages: 500, 500, 1


async def fill(cms, n: int = N) -> None:
    for start in range(0, n, 100):
        await asyncio.gather(*(cms.create(cm(f"cm{i:04d}")) for i in range(start, min(start + 100, n))))


def recorded(cms, after_first_page=None) -> list[tuple[str, int, bool, str]]:
    """The list requests `cms` sends from now on, as (resourceVersion, limit, continued, answer's
    resourceVersion or refusal's reason); `after_first_page` runs once a page with a continue token
    was answered."""
    calls: list[tuple[str, int, bool, str]] = []
    real = cms.list_page

    async def page(*a, resource_version="", limit=0, continue_="", **kw):
        try:
            items, meta = await real(*a, resource_version=resource_version, limit=limit, continue_=continue_, **kw)
        except APIError as e:
            calls.append((resource_version, limit, bool(continue_), e.reason))
            raise
        calls.append((resource_version, limit, bool(continue_), meta["resourceVersion"]))
        if after_first_page is not None and meta.get("continue") and not continue_:
            await after_first_page()
        return items, meta
    cms.list_page = page
    return calls


async def test_a_list_in_pages_is_read_at_its_first_page_s_revision(tmp_path):
    async with served(tmp_path) as (client, _):
        cms = client.resource("", "v1", "configmaps")
        await fill(cms)
        calls = recorded(cms, lambda: cms.create(cm("late")))
        items, rv, paginated = await list_pages(cms, "default", "", "", "")
        assert paginated and [c[:3] for c in calls] == [("", 500, False), ("", 500, True), ("", 500, True)]
        assert {c[3] for c in calls} == {rv}
        assert [o["metadata"]["name"] for o in items] == [f"cm{i:04d}" for i in range(N)]  # not "late"

        calls.clear()
        items, at_zero, paginated = await list_pages(cms, "default", "", "", "0")
        assert not paginated and [c[:3] for c in calls] == [("0", 500, False)]  # the cache ignores the limit
        assert len(items) == N + 1 and int(at_zero) > int(rv)
        calls.clear()
        await list_pages(cms, "default", "", "", at_zero, page_size=0)
        assert [c[:3] for c in calls] == [(at_zero, 0, False)]


async def test_a_continue_token_that_expired_gives_way_to_one_full_list(tmp_path):
    async with served(tmp_path, window=2, history=2) as (client, _):
        cms = client.resource("", "v1", "configmaps")
        await fill(cms)

        async def past_the_window():  # the revision the pages are read at leaves the server's window
            for name in ("x", "y", "z"):
                await cms.create(cm(name))
        calls = recorded(cms, past_the_window)
        items, rv, paginated = await list_pages(cms, "default", "", "", "")
        assert paginated  # a continue token was seen, as the pager reports it
        assert [c[:3] for c in calls] == [("", 500, False), ("", 500, True), ("", 0, False)]
        assert calls[1][3] == "Expired"
        assert len(items) == N + 3 and rv == calls[-1][3]


class _Restored:
    """`cms`, seen through a server restored from a backup: its first watch is refused as out of the
    window (410), the relist at the version the informer saw as too large (504), and the quorum read
    right after it with a 500 (the store still starting); the rest is the server's own answers."""

    def __init__(self, cms):
        self.cms = cms
        self.watches: list[str] = []
        #: (resourceVersion, limit) of the lists refused
        self.refused: list[tuple[str, int]] = []
        real_page, real_watch = cms.list_page, cms.watch

        async def page(namespace, label_selector, field_selector, resource_version="", limit=0, continue_=""):
            if resource_version not in ("", "0") or (resource_version == "" and len(self.refused) == 1):
                self.refused.append((resource_version, limit))
                raise TOO_LARGE if len(self.refused) == 1 else APIError(500, "InternalError",
                                                                        "etcdserver: leader changed")
            return await real_page(namespace, label_selector, field_selector, resource_version=resource_version,
                                   limit=limit, continue_=continue_)

        async def watch(namespace, rv, *a, **kw):
            self.watches.append(rv)
            if len(self.watches) == 1:
                raise APIError(410, "Expired", f"too old resource version: {rv}")
            return await real_watch(namespace, rv, *a, **kw)
        cms.list_page, cms.watch = page, watch


async def test_the_informer_relists_a_quorum_read_in_pages_and_watches_from_its_first_page(tmp_path):
    """The reflector's page sizes: its first list at "0" asks for 500 (the watch cache serves all), the relist
    at the version it saw for no limit, as does the quorum read retried at once after that was refused; the
    next run, at "" since no list succeeded, is paged, and the watch starts from the first page's version: an
    object created between the pages comes as the watch's ADDED."""
    async with served(tmp_path) as (client, clock):
        cms = client.resource("", "v1", "configmaps")
        cms.watch_list = False  # a client without streaming lists (WatchListClient off)
        await fill(cms)
        calls = recorded(cms, lambda: cms.create(cm("late")))
        restored = _Restored(cms)
        inf = Informer(cms, namespace="default", clock=clock, draw=lambda: 0.5)
        added: list[str] = []
        inf.add_handlers(on_add=lambda o: added.append(o["metadata"]["name"]))
        task = asyncio.create_task(inf.run())
        try:
            for _ in tries():
                if "late" in added:
                    break
                await clock.advance(1)  # through the backoffs, on the informer's clock
                await asyncio.sleep(0.01)
            else:
                raise AssertionError(f"no late add: calls {calls}, watches {restored.watches}")
            first = calls[0][3]
            assert [c[:3] for c in calls] == [("0", 500, False), ("", 500, False), ("", 500, True), ("", 500, True)]
            assert restored.refused == [(first, 0), ("", 0)]
            paged = calls[1][3]
            assert {c[3] for c in calls[1:]} == {paged} and int(paged) > int(first)
            assert restored.watches == [first, paged]
            assert len(inf.list()) == N + 1 and added.count("late") == 1
            assert added.index("late") == N  # after the first list's adds; the paged relist changed nothing
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
