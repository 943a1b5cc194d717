"""Objects of hundreds of kilobytes (a pod of 3,000 containers, a 320 KB body): accepted as upstream accepts them,
their managed fields and server-side applies computed in a worker thread (rest.OFF_LOOP_OBJECT), so
that the event loop goes on serving other clients meanwhile."""

from __future__ import annotations

import asyncio
import json
import threading

from nanokube.apiserver.patch import apply as ssa
from tests.served import send, served

PODS = "/api/v1/namespaces/default/pods"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def _pod(name: str, n: int) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": f"c{i}", "image": "busybox", "ports": [{"containerPort": 8000 + i % 1000}],
                                     "resources": {"requests": {"cpu": "10m"}}} for i in range(n)]}}


def _fields(got: dict, manager: str) -> dict:
    return next(e for e in got["metadata"]["managedFields"] if e["manager"] == manager)["fieldsV1"]


async def test_a_pod_of_3000_containers_is_created_applied_patched_and_printed(tmp_path):
    async with served(tmp_path) as (server, api):
        code, got = await send(api, "POST", f"{PODS}?fieldManager=maker", _pod("big", 3000))
        assert code == 201, got
        containers = _fields(got, "maker")["f:spec"]["f:containers"]
        assert len(containers) == 3000
        assert containers['k:{"name":"c2999"}']["f:image"] == {}
        code, got = await send(api, "PATCH", f"{PODS}/big?fieldManager=applier&force=true",
                               {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "big"},
                                "spec": {"containers": [{"name": "c5", "image": "nginx"}]}},
                               "application/apply-patch+yaml")
        assert code == 200, got
        assert got["spec"]["containers"][5]["image"] == "nginx"
        assert list(_fields(got, "applier")["f:spec"]["f:containers"]) == ['k:{"name":"c5"}']
        assert "f:image" not in _fields(got, "maker")["f:spec"]["f:containers"]['k:{"name":"c5"}']
        code, got = await send(api, "PATCH", f"{PODS}/big", {"metadata": {"labels": {"a": "b"}}},
                               "application/merge-patch+json")
        assert code == 200 and got["metadata"]["labels"] == {"a": "b"}, got
        r = await asyncio.to_thread(
            api.rest_client.pool_manager.request, "GET", api.configuration.host + f"{PODS}/big", headers={"Accept": TABLE})
        table = json.loads(r.data)
        assert r.status == 200 and table["rows"][0]["cells"][:2] == ["big", "0/3000"], table["rows"][0]["cells"]
        # (a bound no honest request comes near, meant to catch a hang)
        assert server.loop_holds.longest < 5.0, server.loop_holds.longest_request


async def test_large_objects_have_their_fields_tracked_in_a_worker_thread(tmp_path, monkeypatch):
    threads: list[tuple[int, bool]] = []
    create = ssa.create_managed_fields

    def recorded(obj, *args, **kwargs):
        if obj.get("kind") == "Pod":
            threads.append((len(obj["spec"]["containers"]), threading.current_thread() is threading.main_thread()))
        return create(obj, *args, **kwargs)
    monkeypatch.setattr(ssa, "create_managed_fields", recorded)
    async with served(tmp_path) as (_, api):
        for name, n in (("small", 1), ("large", 3000)):
            code, got = await send(api, "POST", PODS, _pod(name, n))
            assert code == 201, got
    assert threads == [(1, True), (3000, False)]


async def test_large_objects_have_their_updates_and_patches_tracked_in_a_worker_thread(tmp_path, monkeypatch):
    """Sized without encoding them: a patch by the stored object's length and its own, an update by
    its body; a body not kept (fieldValidation=Ignore) by encoding the object."""
    threads: list[tuple[str, int, bool]] = []
    create, update = ssa.create_managed_fields, ssa.update_managed_fields

    def recorded(fn, what):
        def call(*args, **kwargs):
            new = args[1] if what == "update" else args[0]
            if new.get("kind") == "Pod":
                threads.append((what, len(new["spec"]["containers"]), threading.current_thread() is threading.main_thread()))
            return fn(*args, **kwargs)
        return call
    monkeypatch.setattr(ssa, "create_managed_fields", recorded(create, "create"))
    monkeypatch.setattr(ssa, "update_managed_fields", recorded(update, "update"))
    async with served(tmp_path) as (_, api):
        for name, n in (("small", 1), ("large", 3000)):
            code, got = await send(api, "POST", f"{PODS}?fieldValidation=Ignore", _pod(name, n))
            assert code == 201, got
            code, got = await send(api, "PATCH", f"{PODS}/{name}", {"metadata": {"labels": {"a": "b"}}},
                                   "application/strategic-merge-patch+json")
            assert code == 200, got
            code, got = await send(api, "PATCH", f"{PODS}/{name}/status", {"status": {"message": "m"}},
                                   "application/merge-patch+json")
            assert code == 200 and got["status"]["message"] == "m", got
            code, got = await send(api, "PUT", f"{PODS}/{name}", {**got, "metadata": {**got["metadata"], "labels": {}}})
            assert code == 200 and "labels" not in got["metadata"], got
    assert threads == [("create", 1, True), ("update", 1, True), ("update", 1, True), ("update", 1, True),
                       ("create", 3000, False), ("update", 3000, False), ("update", 3000, False), ("update", 3000, False)]
