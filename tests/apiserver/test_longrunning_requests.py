"""apiserver_longrunning_requests counts every long-running request while it is served, as upstream's
RecordLongRunning wraps a watch, a connect (pods/exec, attach, portforward, proxy) and a streamed
log alike: labelled with verb CONNECT for a connect or a log (CleanVerb's, whatever the method), its
group, version, resource, subresource and scope, and back to 0 once the stream ends."""

import asyncio

import aiohttp
import pytest

from nanokube.apiserver.app import APIServer
from nanokube.apiserver.rest import SYSTEM, WriteOptions
from nanokube.store.memory import MemoryStore


def _series(sub: str) -> str:
    return (f'apiserver_longrunning_requests{{component="apiserver",group="",resource="pods",scope="resource",'
            f'subresource="{sub}",verb="CONNECT",version="v1"}}')


class EchoNode:
    """A node agent whose exec echoes stdin until it closes, and whose log follows until `done`."""

    def __init__(self) -> None:
        self.done = asyncio.Event()

    def has_container(self, namespace, pod, uid, container):
        return True

    async def exec(self, namespace, pod, uid, container, command, session):
        while data := await session.read_stdin():
            await session.write_stdout(data)
        return 0

    async def log(self, namespace, pod, container, query):
        yield b"first\n"
        await self.done.wait()
        yield b"last\n"


@pytest.fixture
async def server():
    s = APIServer(MemoryStore(), None, port=0)
    await s.start()
    node = EchoNode()
    s.handlers.streams.node_servers.append(lambda name: node if name == "n1" else None)
    s.handlers.sub.log_readers.append(lambda namespace, name, container, query: _log(node, namespace, name, container, query))
    await s.rest.create(s.index.get("", "v1", "pods"), "v1", "default", {"metadata": {"name": "one"}, "spec": {
        "nodeName": "n1", "containers": [{"name": "app", "image": "x"}]}}, WriteOptions(user=SYSTEM))
    s.node = node
    yield s
    await s.stop()


async def _log(node, namespace, name, container, query):
    return node.log(namespace, name, container, query)


async def _gauge(http, server, series: str) -> float | None:
    async with http.get(f"http://127.0.0.1:{server.port}/metrics") as r:
        for line in (await r.text()).splitlines():
            if line.startswith(series + " "):
                return float(line.rsplit(" ", 1)[1])
    return None


async def test_an_exec_counts_while_its_session_is_open(server):
    url = (f"ws://127.0.0.1:{server.port}/api/v1/namespaces/default/pods/one/exec"
           "?command=cat&stdin=true&stdout=true")
    async with aiohttp.ClientSession() as http:
        assert await _gauge(http, server, _series("exec")) is None
        async with http.ws_connect(url, protocols=("v5.channel.k8s.io",)) as ws:
            await ws.send_bytes(b"\x00ping")
            while (await ws.receive_bytes()) != b"\x01ping":  # (each channel is first announced empty)
                pass
            assert await _gauge(http, server, _series("exec")) == 1
            await ws.send_bytes(bytes([255, 0]))  # v5 CLOSE of stdin: the command ends
            _ = [m async for m in ws]
        for _ in range(100):  # the handler returns once the socket has closed
            if await _gauge(http, server, _series("exec")) == 0:
                break
            await asyncio.sleep(0.01)
        assert await _gauge(http, server, _series("exec")) == 0


async def test_a_followed_log_counts_while_it_streams(server):
    url = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/pods/one/log?follow=true"
    async with aiohttp.ClientSession() as http:
        async with http.get(url) as r:
            assert r.status == 200 and await r.content.readline() == b"first\n"
            assert await _gauge(http, server, _series("log")) == 1
            server.node.done.set()
            assert await r.content.read() == b"last\n"
        for _ in range(100):
            if await _gauge(http, server, _series("log")) == 0:
                break
            await asyncio.sleep(0.01)
        assert await _gauge(http, server, _series("log")) == 0


async def test_a_log_is_counted_and_sized_under_connect(server):
    """A log's GET is a CONNECT in the request metrics (CleanVerb), and its answer is sized as a
    read's (its route is a GET's), under CONNECT too."""
    async def whole_log(namespace, name, container, query):
        return b"first\nlast\n"

    server.handlers.sub.log_readers[:] = [whole_log]
    url = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/pods/one/log"
    labels = 'group="",resource="pods",scope="resource",subresource="log",verb="CONNECT",version="v1"'
    async with aiohttp.ClientSession() as http:
        async with http.get(url) as r:
            assert r.status == 200 and await r.read() == b"first\nlast\n"
        assert await _gauge(http, server, f'apiserver_request_total{{code="200",component="apiserver",dry_run="",'
                                          f'{labels}}}') == 1
        assert await _gauge(http, server, f'apiserver_response_sizes_sum{{component="apiserver",{labels}}}') == 11
        assert await _gauge(http, server, 'apiserver_request_total{code="200",component="apiserver",dry_run="",'
                                          'group="",resource="pods",scope="resource",subresource="log",verb="GET",'
                                          'version="v1"}') is None


async def test_a_watch_whose_client_disconnects_is_no_longer_counted(server):
    """The handler is cancelled when its client goes (handler_cancellation): the gauge falls all the
    same, whatever the handler was awaiting then (its stream's close included)."""
    series = ('apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="namespace",'
              'subresource="",verb="WATCH",version="v1"}')
    url = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/pods?watch=true"
    async with aiohttp.ClientSession() as http:
        before = await _gauge(http, server, series) or 0
        async with aiohttp.ClientSession() as watcher:
            r = await watcher.get(url)
            assert b'"ADDED"' in await r.content.readline()
            assert await _gauge(http, server, series) == before + 1
            r.close()  # the client drops the connection mid-stream
        for _ in range(100):
            if await _gauge(http, server, series) == before:
                break
            await asyncio.sleep(0.01)
        assert await _gauge(http, server, series) == before
