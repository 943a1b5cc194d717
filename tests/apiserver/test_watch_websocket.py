"""A watch asked for over a WebSocket, as kube-apiserver's HandleWS serves one, by a real WebSocket
client over TLS: each event one text message of its JSON, the watch's bookmarks, its timeout ending
it with a close frame (1000), the client's close ending it on the server, and an unauthorised watch
refused before the upgrade with the 403 Status."""

import asyncio

import aiohttp
import orjson
from aiohttp import WSMsgType

from nanokube.apiserver.rest import SYSTEM, WriteOptions
from tests.apiserver.test_request_body import admin_context
from tests.controllers import eventually
from tests.served import served

OPTS = WriteOptions(user=SYSTEM)


async def test_a_websocket_watch_sends_each_event_as_a_message_and_closes_at_its_timeout(tmp_path):
    async with served(tmp_path) as (server, _):
        cms = server.index.get("", "v1", "configmaps")
        await server.rest.create(cms, "v1", "default", {"metadata": {"name": "before"}}, OPTS)
        url = (f"wss://localhost:{server.port}/api/v1/namespaces/default/configmaps?watch=1&allowWatchBookmarks=true"
               "&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=2")
        connector = aiohttp.TCPConnector(ssl=admin_context(server.pki, tmp_path))
        async with aiohttp.ClientSession(connector=connector) as http, http.ws_connect(url, autoclose=False) as ws:
            first, bookmark = await ws.receive(10), await ws.receive(10)
            await server.rest.create(cms, "v1", "default", {"metadata": {"name": "after"}}, OPTS)
            then = await ws.receive(10)
            end = await ws.receive(10)
        assert [m.type for m in (first, bookmark, then)] == [WSMsgType.TEXT] * 3
        events = [orjson.loads(m.data) for m in (first, bookmark, then)]
        assert [(e["type"], e["object"]["kind"]) for e in events] == [
            ("ADDED", "ConfigMap"), ("BOOKMARK", "ConfigMap"), ("ADDED", "ConfigMap")]
        assert [events[0]["object"]["metadata"]["name"], events[2]["object"]["metadata"]["name"]] == ["before", "after"]
        assert events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
        assert (end.type, end.data) == (WSMsgType.CLOSE, 1000)


async def test_a_websocket_watch_on_a_legacy_path_ends_on_the_server_when_its_client_closes(tmp_path):
    async with served(tmp_path) as (server, _):
        cms = server.index.get("", "v1", "configmaps")
        url = f"wss://localhost:{server.port}/api/v1/watch/namespaces/default/configmaps"
        connector = aiohttp.TCPConnector(ssl=admin_context(server.pki, tmp_path))
        before = server.cache.watcher_count
        async with aiohttp.ClientSession(connector=connector) as http, http.ws_connect(url) as ws:
            await server.rest.create(cms, "v1", "default", {"metadata": {"name": "c"}}, OPTS)
            msg = await ws.receive(10)
            assert server.cache.watcher_count == before + 1
            await ws.close()
            assert ws.close_code == 1000

            async def gone():
                return server.cache.watcher_count == before
            await eventually(gone)
        assert msg.type == WSMsgType.TEXT
        assert (orjson.loads(msg.data)["type"], orjson.loads(msg.data)["object"]["metadata"]["name"]) == ("ADDED", "c")


async def test_an_unauthorised_websocket_watch_is_refused_before_the_upgrade(tmp_path):
    async with served(tmp_path) as (server, _):
        connector = aiohttp.TCPConnector(ssl=admin_context(server.pki, tmp_path))
        headers = {"Impersonate-User": "nobody", "Connection": "Upgrade", "Upgrade": "websocket",
                   "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
        async with aiohttp.ClientSession(connector=connector) as http, http.get(
                f"https://localhost:{server.port}/api/v1/pods?watch=1", headers=headers) as r:
            status, body = r.status, await r.json()
    assert status == 403
    assert (body["kind"], body["reason"], body["message"]) == (
        "Status", "Forbidden",
        'pods is forbidden: User "nobody" cannot watch resource "pods" in API group "" at the cluster scope')


async def test_a_websocket_watch_whose_client_stops_reading_is_let_go_at_its_timeout(tmp_path):
    """The events it is not taking stay in neither the server's memory nor its loop past the deadline:
    the connection is aborted, as a chunked watch's is, and the watch is gone."""
    async with served(tmp_path) as (server, _):
        cms = server.index.get("", "v1", "configmaps")
        before = server.cache.watcher_count
        reader, writer = await asyncio.open_connection(
            "localhost", server.port, ssl=admin_context(server.pki, tmp_path), limit=1 << 16)
        writer.write(b"GET /api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1 HTTP/1.1\r\nHost: localhost\r\n"
                     b"Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
                     b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        for i in range(100):  # ~6.5 MB the client never reads
            await server.rest.create(cms, "v1", "default", {"metadata": {"name": f"c{i}"}, "data": {"k": "x" * 65536}}, OPTS)

        async def let_go():
            return server.cache.watcher_count == before
        await eventually(let_go)
        writer.close()
    assert head.startswith(b"HTTP/1.1 101 ")


async def test_a_protobuf_websocket_watch_sends_each_event_as_one_binary_message(tmp_path):
    async with served(tmp_path) as (server, _):
        cms = server.index.get("", "v1", "configmaps")
        url = f"wss://localhost:{server.port}/api/v1/namespaces/default/configmaps?watch=1"
        connector = aiohttp.TCPConnector(ssl=admin_context(server.pki, tmp_path))
        async with aiohttp.ClientSession(connector=connector) as http, http.ws_connect(
                url, headers={"Accept": "application/vnd.kubernetes.protobuf"}) as ws:
            await server.rest.create(cms, "v1", "default", {"metadata": {"name": "c"}}, OPTS)
            msg = await ws.receive(10)
    assert msg.type == WSMsgType.BINARY
    # WatchEvent{type: 1, object: 2}, unframed: the message is the event, with no length before it
    assert msg.data.startswith(b"\x0a\x05ADDED\x12")
    assert b"k8s\x00" in msg.data and b"ConfigMap" in msg.data
