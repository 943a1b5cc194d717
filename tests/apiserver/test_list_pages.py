"""Pages of a list with selectors, as the watch cache's GetList (PrepareContinueToken) makes them:
a continue token while anything follows the page's last item, matching or not, and no
remainingItemCount, which is counted only for a list without selectors."""

import aiohttp

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
