"""A watch event of a large object reaches its watchers whole, written in slices with the event loop
free between them (handlers._write_sliced): its TLS encryption and copies cost each watcher ~30 ms
at 3 MB, and forty watchers woken by one event held the loop for 1.2 s in one turn."""

from __future__ import annotations

import asyncio

import orjson

from nanokube.apiserver import handlers
from nanokube.apiserver.app import APIServer
from nanokube.apiserver.rest import SYSTEM, WriteOptions
from nanokube.store.memory import MemoryStore
from tests.apiserver.test_watch_final_chunk import _open_watch


async def _events(reader: asyncio.StreamReader, n: int) -> list[list[bytes]]:
    """The chunks of each of the first `n` events of a chunked watch body."""
    head = await reader.readuntil(b"\r\n\r\n")
    assert b"200 OK" in head and b"chunked" in head.lower(), head
    events: list[list[bytes]] = [[]]
    while len(events) <= n:
        size = int((await reader.readline()).strip(), 16)
        assert size, "the watch ended"
        chunk = (await reader.readexactly(size + 2))[:-2]
        events[-1].append(chunk)
        if chunk.endswith(b"\n"):
            events.append([])
    return events[:n]


async def test_a_large_event_reaches_every_watcher_whole_in_slices():
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    try:
        watches = [await _open_watch(server.port, "") for _ in range(3)]
        read = [asyncio.ensure_future(_events(reader, 2)) for reader, _ in watches]
        for _ in range(3000):  # until the three watch requests are registered (seconds on a loaded machine)
            if sum(w.prefix.startswith("/registry/configmaps/") for ws in server.cache._watchers.values() for w in ws) == 3:
                break
            await asyncio.sleep(0.01)
        cms = server.index.get("", "v1", "configmaps")
        large = {f"k{i}": "v" * 1000 for i in range(3 * handlers._EVENT_SLICE // 1000)}
        for name, data in (("small", {"k": "v"}), ("large", large)):
            await server.rest.create(cms, "v1", "default", {"metadata": {"name": name}, "data": data},
                                     WriteOptions(user=SYSTEM))
        for events in await asyncio.wait_for(asyncio.gather(*read), 60):
            small, big = events
            assert len(small) == 1 and orjson.loads(small[0])["object"]["data"] == {"k": "v"}
            assert len(big) >= 3 and all(len(c) <= handlers._EVENT_SLICE for c in big), [len(c) for c in big]
            event = orjson.loads(b"".join(big))
            assert event["type"] == "ADDED" and event["object"]["data"] == large
        for _, writer in watches:
            writer.close()
    finally:
        await server.stop()
