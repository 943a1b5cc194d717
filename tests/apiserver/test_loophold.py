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


async def test_the_writing_of_a_large_lists_body_counts_in_its_hold(tmp_path, monkeypatch):
    """A list's body is written slice by slice after the handler returns (JoinedPayload: each slice
    joined, then encrypted into the TLS transport on the loop); that writing is part of the request's
    hold. One slice is made to compute 0.3 CPU s, as a slow encryption would, and the list still
    arrives whole."""
    from nanokube.apiserver.handlers import JoinedPayload

    async with served(tmp_path) as (server, api):
        for i in range(48):  # about 3 MiB of list: a dozen slices
            code, got = await send(api, "POST", CONFIGMAPS, {"metadata": {"name": f"big-{i}"}, "data": {"k": "x" * 65536}})
            assert code == 201, got
        server.loop_holds.longest = 0.0
        real = JoinedPayload.write

        async def slow(self, writer):
            end = time.thread_time() + 0.3
            while time.thread_time() < end:
                pass
            await real(self, writer)
        monkeypatch.setattr(JoinedPayload, "write", slow)
        code, got = await send(api, "GET", CONFIGMAPS)
        assert code == 200 and len(got["items"]) == 48
        assert server.loop_holds.longest >= 0.3
        assert server.loop_holds.longest_request == f"GET {CONFIGMAPS}"
