"""The server's record of how long a request held its event loop (apiserver/loophold.py)."""

from __future__ import annotations

import time

from tests.served import send, served

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


async def test_a_request_that_computes_without_yielding_is_recorded_with_its_hold(tmp_path, monkeypatch):
    async with served(tmp_path) as (server, api):
        dispatch = server.handlers.dispatch

        async def blocking(request):
            if request.method == "POST":  # computes 0.3 CPU s, as a huge object's write would, serving no one else
                end = time.thread_time() + 0.3
                while time.thread_time() < end:
                    pass
            return await dispatch(request)
        monkeypatch.setattr(server.handlers, "dispatch", blocking)
        code, got = await send(api, "POST", CONFIGMAPS, {"metadata": {"name": "a"}, "data": {"k": "v"}})
        assert code == 201, got
        assert server.loop_holds.longest >= 0.3
        assert server.loop_holds.longest_request == f"POST {CONFIGMAPS}"
        assert server.stats()["longest_loop_hold"] == server.loop_holds.longest
