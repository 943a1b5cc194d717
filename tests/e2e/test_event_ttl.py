"""`nanokube up --event-ttl`: an Event is listed, then deleted once its TTL passes (a watch
sees DELETED), and one already past its TTL when the server starts again goes at once."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from kubernetes import client

from .conftest import KUBECTL, STORE, running_cluster, start_cluster, wait_for

#: the restart case depends on the store: this module runs again on etcd
pytestmark = pytest.mark.store

QUIET = ("--scheduler", "none", "--controllers", "")


def event(name: str) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": "default"},
                       "type": "Normal", "reason": "Tested", "message": "by the event TTL test",
                       "involvedObject": {"kind": "ConfigMap", "name": "x", "namespace": "default"}})


def event_names(api: client.CoreV1Api) -> list[str]:
    """The Events listed in `default`, through a client made beforehand (a kubectl process takes
    seconds to start on a loaded machine, of a TTL of a few)."""
    return [e.metadata.name for e in api.list_namespaced_event("default").items]


def test_an_event_is_listed_then_deleted_after_its_ttl_and_a_watch_sees_it_go():
    with running_cluster("event-ttl", ("--event-ttl", "2s", *QUIET)) as c:
        api = client.CoreV1Api(c.client())
        rv = c.kubectl_json("get", "events", "-n", "default")["metadata"]["resourceVersion"]
        watch = subprocess.Popen(
            [KUBECTL, "--kubeconfig", c.kubeconfig, "get", "--raw",
             f"/api/v1/namespaces/default/events?watch=1&resourceVersion={rv}&timeoutSeconds=30"],
            stdout=subprocess.PIPE, text=True)
        try:
            api.create_namespaced_event("default", json.loads(event("short-lived")))
            assert "short-lived" in event_names(api)
            wait_for(lambda: "short-lived" not in event_names(api), timeout=30, what="the event expired")
            seen = []
            for line in watch.stdout:
                ev = json.loads(line)
                if ev["object"]["metadata"]["name"] == "short-lived":
                    seen.append(ev["type"])
                    if ev["type"] == "DELETED":
                        break
        finally:
            watch.kill()
            watch.wait()
        assert seen == ["ADDED", "DELETED"]


@pytest.mark.skipif(STORE == "memory", reason="the memory store keeps nothing across a restart")
def test_after_a_restart_an_event_past_its_ttl_is_deleted_at_once(store_url):
    d = Path(tempfile.mkdtemp(prefix="nanokube-event-ttl-"))
    try:
        c = start_cluster(d, store_url, QUIET)
        try:
            c.kubectl("create", "-f", "-", input=event("from-before"))
        finally:
            c.stop()
        c = start_cluster(d, store_url, QUIET)  # the default TTL (1h): the restart alone keeps it
        try:
            assert "from-before" in event_names(client.CoreV1Api(c.client()))
        finally:
            c.stop()
        c = start_cluster(d, store_url, ("--event-ttl", "1s", *QUIET))
        try:
            api = client.CoreV1Api(c.client())
            wait_for(lambda: "from-before" not in event_names(api), timeout=60, what="the restored event expired")
            assert "from-before" not in event_names(api)
        finally:
            c.stop()
    finally:
        shutil.rmtree(d, ignore_errors=True)
