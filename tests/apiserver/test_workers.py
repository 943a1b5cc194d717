"""A second API server worker (apiserver/workers.py) runs the cycle collector as worker 0's `up` does
(nanokube/gcsettle.py): no full collection while it starts, then what start-up built is frozen; under
the process runtime it dials Services' endpoints from the cluster network namespace from its first request."""

from __future__ import annotations

import asyncio

from nanokube import gcsettle
from nanokube.apiserver import serving, workers
from nanokube.apiserver.aggregator.aggregator import Aggregator
from nanokube.apiserver.app import APIServer
from nanokube.apiserver.webhook.client import WebhookClient


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
    args = workers.parser().parse_args(["--worker", "1", "--workers", "2", "--ppid", "1", "--data-dir", str(tmp_path),
                                        "--store", "sqlite", "--address", "127.0.0.1", "--port", "0",
                                        "--relay-port", "1", "--audit-log-path", ""])
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


async def test_a_worker_dials_services_from_the_cluster_namespace_before_it_serves(tmp_path, monkeypatch):
    """A worker answers requests as soon as it listens: a webhook call or an APIService request
    served before its dialer is set would dial pod IPs from the host, which cannot reach them."""
    steps: list[str] = []
    servers: list[APIServer] = []
    monkeypatch.setattr(gcsettle, "defer", lambda: None)
    monkeypatch.setattr(gcsettle, "settle", lambda young_only=False: (700, 10, 10))
    monkeypatch.setattr(workers, "share_service_allocations", lambda server: None)
    start, listen = APIServer.start, serving.Site.start
    webhooks_dial, aggregator_dial = WebhookClient.dial_services_from, Aggregator.dial_services_from

    async def recorded_start(self: APIServer) -> None:
        servers.append(self)
        await start(self)

    async def recorded_listen(self) -> None:
        steps.append("listening")
        await listen(self)

    def recorded_webhooks_dial(self, socket_factory) -> None:
        steps.append("webhooks dial from the namespace")
        webhooks_dial(self, socket_factory)

    async def recorded_aggregator_dial(self, socket_factory) -> None:
        steps.append("APIServices dial from the namespace")
        await aggregator_dial(self, socket_factory)

    monkeypatch.setattr(APIServer, "start", recorded_start)
    monkeypatch.setattr(serving.Site, "start", recorded_listen)
    monkeypatch.setattr(WebhookClient, "dial_services_from", recorded_webhooks_dial)
    monkeypatch.setattr(Aggregator, "dial_services_from", recorded_aggregator_dial)
    args = workers.parser().parse_args(["--worker", "1", "--workers", "2", "--ppid", "1", "--data-dir", str(tmp_path),
                                        "--store", "sqlite", "--address", "127.0.0.1", "--port", "0",
                                        "--relay-port", "1", "--audit-log-path", "", "--dial-netns", "nk-test-cluster"])
    task = asyncio.create_task(workers._serve(args))
    try:
        for _ in range(600):
            if "listening" in steps or task.done():
                break
            await asyncio.sleep(0.05)
        assert not task.done(), task.exception()
        assert steps == ["webhooks dial from the namespace", "APIServices dial from the namespace", "listening"]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        for server in servers:
            await server.stop()
