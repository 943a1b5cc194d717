"""`kill -9` during a burst of writes loses no acknowledged write, and the
resourceVersion sequence continues after restart."""

from __future__ import annotations

import shutil
import signal
import tempfile
import threading
from pathlib import Path

import pytest
from kubernetes import client

from .conftest import STORE, start_cluster

#: the outcome depends on the store: this module runs again on etcd
pytestmark = pytest.mark.store


@pytest.mark.skipif(STORE == "memory", reason="the memory store is not durable by design")
def test_kill_9_keeps_acknowledged_writes(store_url):
    d = Path(tempfile.mkdtemp(prefix="nanokube-durable-"))
    c = start_cluster(d, store_url)
    acked: dict[str, str] = {}
    try:
        api = client.CoreV1Api(c.client())
        stop = threading.Event()

        def writer():
            i = 0
            while not stop.is_set():
                try:
                    cm = api.create_namespaced_config_map("default", {"metadata": {"name": f"burst-{i}"}, "data": {"i": str(i)}})
                except Exception:
                    return
                acked[cm.metadata.name] = cm.metadata.resource_version
                i += 1

        t = threading.Thread(target=writer)
        t.start()
        while len(acked) < 150:
            t.join(0.05)
        c.proc.send_signal(signal.SIGKILL)
        c.proc.wait()
        stop.set()
        t.join(30)
        assert len(acked) >= 150
        last_rv = max(int(v) for v in acked.values())

        c2 = start_cluster(d, store_url)
        try:
            api2 = client.CoreV1Api(c2.client())
            items = {cm.metadata.name: cm for cm in api2.list_namespaced_config_map("default").items}
            for name, rv in acked.items():
                assert name in items, f"acknowledged write {name} lost"
                assert items[name].metadata.resource_version == rv
            fresh = api2.create_namespaced_config_map("default", {"metadata": {"name": "after-restart"}})
            assert int(fresh.metadata.resource_version) > last_rv
        finally:
            c2.stop()
    finally:
        c.stop()
        shutil.rmtree(d, ignore_errors=True)
