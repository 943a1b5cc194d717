"""The cache mutation detector catches an object changed in place after the loopback client (get,
list, watch, a write's result) or an informer handed it out, and says what changed and where the
object came from. Each test runs its own detector, so the suite's (tests/conftest.py) sees none
of these deliberate mutations."""

import asyncio
import gc
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nanokube.client import mutation
from nanokube.client.informer import Informer
from nanokube.client.mutation import CacheMutationError, MutationDetector
from tests.controllers import eventually, make_stack
from tests.e2e.conftest import cache_mutations

NS = "default"


def cm(name, **data):
    return {"metadata": {"name": name, "namespace": NS}, "data": {"k": "v", **data}}


@pytest.fixture
def detector(monkeypatch):
    d = MutationDetector()
    monkeypatch.setattr(mutation, "DETECTOR", d)
    return d


@pytest.fixture
async def cms(detector):
    s = await make_stack()
    yield s.client.resource("", "v1", "configmaps")
    await s.close()


async def test_a_change_to_what_get_returned_is_found_with_its_origin(detector, cms):
    await cms.create(cm("a"))
    got = await cms.get("a", NS)
    assert detector.check() == []
    got["data"]["k"] = "changed"
    [found] = detector.take_found()
    assert found.startswith("ConfigMap default/a (resourceVersion ")
    assert f"get configmaps by kube-controller-manager at {__file__}:" in found
    assert "data.k: 'v' -> 'changed'" in found


async def test_a_change_to_a_listed_item_is_found(detector, cms):
    await cms.create(cm("a"))
    await cms.create(cm("b"))
    items, _ = await cms.list(NS)
    items[1]["metadata"].setdefault("labels", {})["x"] = "y"
    [found] = detector.take_found()
    assert found.startswith("ConfigMap default/b ") and "list configmaps by kube-controller-manager" in found
    assert "metadata.labels: (missing) -> {'x': 'y'}" in found


async def test_a_change_to_a_watched_object_is_found(detector, cms):
    stream = await cms.watch(NS)
    try:
        await cms.create(cm("a"))
        typ, obj = await asyncio.wait_for(stream.__anext__(), 5)
        assert typ == "ADDED"
        del obj["data"]["k"]
    finally:
        await stream.aclose()
    [found] = detector.take_found()
    assert "watch configmaps by kube-controller-manager" in found and "data.k: 'v' -> (removed)" in found


async def test_a_change_to_what_a_write_returned_is_found(detector, cms):
    created = await cms.create(cm("a"))
    created["data"]["extra"] = "1"
    [found] = detector.take_found()
    assert "create configmaps by kube-controller-manager" in found and "data.extra: (missing) -> '1'" in found


async def test_an_informers_objects_are_checked_over_any_client(detector):
    """An informer over a client that hands out fresh objects (HTTPClient decodes each response)
    still shares each one among its handlers and readers."""

    class FreshClient:
        class res:
            plural = "configmaps"

        async def list(self, namespace, label_selector, field_selector, resource_version=""):
            return [{"kind": "ConfigMap", **cm("a")}], "1"

        async def watch(self, namespace, rv, label_selector, field_selector, timeout_seconds=None):
            async def events():
                yield "ADDED", {"kind": "ConfigMap", **cm("b")}
                await asyncio.Event().wait()
            return events()

    inf = Informer(FreshClient())
    task = asyncio.create_task(inf.run())
    try:
        async def both():
            return inf.get("default/a") and inf.get("default/b")
        await eventually(both)
        inf.get("default/a")["data"]["k"] = "1"
        inf.list()[1]["data"]["k"] = "2"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    found = sorted(detector.take_found())
    assert [f.split(" (")[0] for f in found] == ["ConfigMap default/a", "ConfigMap default/b"]
    assert all("handed out by the informer for configmaps" in f for f in found)


async def test_an_informers_objects_over_the_loopback_client_are_checked(detector, cms):
    inf = Informer(cms)
    task = asyncio.create_task(inf.run())
    try:
        await asyncio.wait_for(inf.synced.wait(), 5)
        await cms.create(cm("a"))

        async def seen():
            return inf.get("default/a")
        (await eventually(seen))["data"]["k"] = "mine"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    [found] = detector.take_found()
    # the watch cache keeps the object the create stored (it follows the store's commits), so the
    # create is its first hand-out and the informer its last
    assert "the informer for configmaps (last)" in found and "data.k: 'v' -> 'mine'" in found


async def test_updating_a_changed_cache_object_raises_at_once(detector, cms):
    """In-process the update would be a no-op: the cache already holds the change."""
    await cms.create(cm("a"))
    got = await cms.get("a", NS)
    got["data"]["k"] = "changed"
    with pytest.raises(CacheMutationError, match="data.k: 'v' -> 'changed'"):
        await cms.update(got)
    assert len(detector.take_found()) == 1, "reported again at the end, should the caller swallow the error"


async def test_an_unchanged_object_and_a_copy_are_fine(detector, cms):
    await cms.create(cm("a"))
    got = await cms.get("a", NS)
    mine = {**got, "data": {**got["data"], "k": "changed"}}
    updated = await cms.update(mine)
    assert updated["data"]["k"] == "changed" and got["data"]["k"] == "v"
    assert detector.take_found() == []


def test_objects_only_the_detector_holds_are_dropped():
    d = MutationDetector(batch=2)
    held = {"metadata": {"name": "held"}}
    d.keep(held, "here")
    d.keep({"metadata": {"name": "dropped"}}, "there")
    gc.collect()
    d.check()
    assert len(d) == 1
    held["metadata"]["name"] = "renamed"
    assert "metadata.name: 'held' -> 'renamed'" in d.take_found()[0]
    assert len(d) == 0


def test_off_unless_the_variable_says_true(monkeypatch):
    monkeypatch.delenv(mutation.ENV, raising=False)
    assert not mutation.on_in_env()
    monkeypatch.setenv(mutation.ENV, "true")
    assert mutation.on_in_env()


def test_a_process_with_the_variable_set_reports_at_exit_what_the_e2e_suite_reads():
    """`nanokube up` started by the e2e suite logs its last check as it exits; the suite's
    log reader picks up each report with the changes under it."""
    script = ("import logging; logging.basicConfig(); from nanokube.client import mutation; "
              "o = {'kind': 'Pod', 'metadata': {'name': 'p', 'namespace': 'ns'}}; "
              "mutation.DETECTOR.keep(o, 'get pods by test'); o['metadata']['name'] = 'q'")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                       env={**os.environ, mutation.ENV: "true"}, cwd=Path(__file__).resolve().parents[2])
    assert r.returncode == 0, r.stderr
    [found] = cache_mutations(r.stderr + "INFO something else\n    indented, not a change\n")
    assert "Pod ns/p (resourceVersion None), handed out by get pods by test, was changed in place" in found
    assert found.endswith("\n    metadata.name: 'p' -> 'q'")
