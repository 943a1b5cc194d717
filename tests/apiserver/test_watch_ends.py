"""A watch the server ends as unresponsive, through the official `kubernetes` client: its stream
ends cleanly after what it was sent, as upstream's cacheWatcher ends one (its result channel
closed, the handler's response finished), so the client's Watch, which has no timeout_seconds,
watches again from the last resourceVersion it had, without an error, and misses nothing."""

import asyncio
import copy
import socket
import time

from kubernetes import client, watch

from nanokube.apiserver.rest import SYSTEM, WriteOptions
from tests.served import served

OPTS = WriteOptions(user=SYSTEM)
NAMES = [f"cm-{i}" for i in range(200)]


async def test_a_slow_kubernetes_client_watch_ended_by_the_server_watches_again_and_misses_nothing(tmp_path):
    async with served(tmp_path) as (server, api):
        cms = server.index.get("", "v1", "configmaps")
        first = await server.rest.create(cms, "v1", "default", {"metadata": {"name": "first"}}, OPTS)
        cfg = copy.copy(api.configuration)  # a socket that takes little at a time: the server's bytes wait
        cfg.socket_options = [(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)]
        slow = client.ApiClient(cfg)
        started = asyncio.Event()
        loop = asyncio.get_running_loop()

        def consume() -> list[str]:
            got = []
            w = watch.Watch()
            for ev in w.stream(client.CoreV1Api(slow).list_namespaced_config_map, "default",
                               resource_version=first.obj["metadata"]["resourceVersion"]):
                if not got:
                    loop.call_soon_threadsafe(started.set)
                got.append(ev["object"].metadata.name)
                if got[-1] == NAMES[-1]:
                    w.stop()
                time.sleep(0.002)  # slower than the server's writes
            return got

        consumer = asyncio.ensure_future(asyncio.to_thread(consume))
        await server.rest.create(cms, "v1", "default", {"metadata": {"name": "seen"}}, OPTS)
        await asyncio.wait_for(started.wait(), 10)
        for name in NAMES:
            await server.rest.create(cms, "v1", "default", {"metadata": {"name": name}, "data": {"k": "x" * 65536}}, OPTS)
            await asyncio.sleep(0)
        got = await asyncio.wait_for(consumer, 60)
        slow.close()
        assert got == ["seen", *NAMES]
        assert server.cache.stats.terminated == {"/registry/configmaps/": 1}
