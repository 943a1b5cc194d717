"""A second API server worker (apiserver/workers.py) runs the cycle collector as worker 0's `up` does
(nanokube/gcsettle.py): no full collection while it starts, then what start-up built is frozen."""

from __future__ import annotations

import argparse
import asyncio

from nanokube import gcsettle
from nanokube.apiserver import workers
from nanokube.apiserver.app import APIServer


async def test_a_worker_defers_full_collections_until_it_serves_then_settles(tmp_path, monkeypatch):
    steps: list[str] = []
    servers: list[APIServer] = []
    # recorded, not run: the test process keeps its own collector settings
    monkeypatch.setattr(gcsettle, "defer", lambda: steps.append("defer"))
    monkeypatch.setattr(gcsettle, "settle", lambda young_only=False: steps.append("settle") or (700, 10, 10))
    # not run either: the Service strategy is shared by every server in this process, and a worker's
    # allocations bound to this server would hang later tests' Service creates once it stops
    monkeypatch.setattr(workers, "share_service_allocations", lambda server: None)
    start = APIServer.start

    async def recorded_start(self: APIServer) -> None:
        servers.append(self)
        steps.append("building done")
        await start(self)
        steps.append("serving")

    monkeypatch.setattr(APIServer, "start", recorded_start)
    args = argparse.Namespace(worker=1, workers=2, data_dir=str(tmp_path), store="sqlite", address="127.0.0.1",
                              port=0, relay_port=1, audit_log_path="", flagz=None, disable_admission_plugins="",
                              advertise_address="", service_account_jwks_uri="", dial_netns="")
    task = asyncio.create_task(workers._serve(args))
    try:
        for _ in range(600):
            if "settle" in steps or task.done():
                break
            await asyncio.sleep(0.05)
        assert not task.done(), task.exception()
        assert steps == ["defer", "building done", "serving", "settle"]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        for server in servers:
            await server.stop()
