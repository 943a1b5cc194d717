"""A streaming list (WatchList: sendInitialEvents=true, resourceVersionMatch=NotOlderThan) through the
official Python client's watch: the objects there are ADDED, then a BOOKMARK annotated
k8s.io/initial-events-end carries the revision they show, then later writes follow."""

from __future__ import annotations

import asyncio
import threading

from kubernetes import client, watch

from tests.served import served


async def test_the_python_clients_watch_list_gets_the_state_its_end_bookmark_then_changes(tmp_path):
    async with served(tmp_path) as (_, api):
        v1 = client.CoreV1Api(api)
        for name in ("a", "b"):
            await asyncio.to_thread(v1.create_namespaced_config_map, "default", {"metadata": {"name": name}})
        seen: list[tuple[str, str | None, dict | None, str]] = []
        ended = threading.Event()

        def stream() -> None:
            w = watch.Watch()
            for ev in w.stream(v1.list_namespaced_config_map, "default", send_initial_events=True,
                               resource_version_match="NotOlderThan", allow_watch_bookmarks=True, timeout_seconds=30):
                md = ev["raw_object"]["metadata"]
                seen.append((ev["type"], md.get("name"), md.get("annotations"), md["resourceVersion"]))
                if ev["type"] == "BOOKMARK":
                    ended.set()
                if md.get("name") == "c":
                    w.stop()

        reader = asyncio.create_task(asyncio.to_thread(stream))
        assert await asyncio.to_thread(ended.wait, 30)
        await asyncio.to_thread(v1.create_namespaced_config_map, "default", {"metadata": {"name": "c"}})
        await asyncio.wait_for(reader, 30)
        assert [(t, n, a) for t, n, a, _ in seen] == [
            ("ADDED", "a", None), ("ADDED", "b", None), ("BOOKMARK", None, {"k8s.io/initial-events-end": "true"}),
            ("ADDED", "c", None)]
        assert int(seen[1][3]) <= int(seen[2][3]) < int(seen[3][3])
