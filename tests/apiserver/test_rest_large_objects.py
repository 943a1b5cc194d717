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
GIZMOS = "/apis/large.example.com/v1/namespaces/default/gizmos"
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
    creating = threading.local()  # (a create's own call of update_managed_fields is not one of the write's)

    def recorded(fn, what):
        def call(*args, **kwargs):
            new = args[1] if what == "update" else args[0]
            if new.get("kind") == "Pod" and not getattr(creating, "on", False):
                threads.append((what, len(new["spec"]["containers"]), threading.current_thread() is threading.main_thread()))
            creating.on = what == "create"
            try:
                return fn(*args, **kwargs)
            finally:
                creating.on = False
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


def _gizmo_crd() -> dict:
    items = {"type": "object", "required": ["k"], "properties": {"k": {"type": "string"}}}
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {"l": {
        "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"], "items": items}}}}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "gizmos.large.example.com"},
            "spec": {"group": "large.example.com", "scope": "Namespaced", "names": {
                "plural": "gizmos", "singular": "gizmo", "kind": "Gizmo", "listKind": "GizmoList"},
                "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}}]}}


async def test_large_custom_resources_are_patched_decoded_and_validated_in_a_worker_thread(tmp_path, monkeypatch):
    """A custom resource's decoding (pruning, coercion) and schema validation, and the merge of a json or merge
    patch, are linear but were on the loop: an apply of a 150,000-entry list-map (a 3 MB body) held the event
    loop for 3.2 CPU s, a json patch of it 2.5 s (fuzz47; 0.4 s and 0.1 s now, the rest its stored JSON)."""
    from nanokube.apiserver.apiextensions.resource import CustomResourceStrategy
    from nanokube.apiserver.patch import jsonpatch
    from tests.apiserver.apiextensions import install

    threads: list[tuple[str, int, bool]] = []

    def recorded(fn, what):
        def call(*args, **kwargs):
            obj = args[1] if what != "patch" else args[0]
            if obj.get("kind") == "Gizmo":
                threads.append((what, len(obj["spec"]["l"]), threading.current_thread() is threading.main_thread()))
            return fn(*args, **kwargs)
        return call
    for name in ("decode", "validate", "validate_update"):
        monkeypatch.setattr(CustomResourceStrategy, name, recorded(getattr(CustomResourceStrategy, name), name))
    monkeypatch.setattr(jsonpatch, "apply", recorded(jsonpatch.apply, "patch"))
    path = GIZMOS
    async with served(tmp_path) as (_, api):
        await install(api, _gizmo_crd(), path)

        def gizmo(name: str, n: int) -> dict:  # 1,400 keys of 200 bytes: past rest.OFF_LOOP_OBJECT
            return {"apiVersion": "large.example.com/v1", "kind": "Gizmo", "metadata": {"name": name},
                    "spec": {"l": [{"k": f"{i:04}" + "k" * 196} for i in range(n)]}}
        for name, n in (("small", 1), ("large", 1400)):
            code, got = await send(api, "POST", path, gizmo(name, n))
            assert code == 201, got
        code, got = await send(api, "PATCH", f"{path}/large?fieldManager=b&force=true", gizmo("large", 1399),
                               "application/apply-patch+yaml")
        assert code == 200 and len(got["spec"]["l"]) == 1400, got.get("message")  # (the last is the creator's)
        code, got = await send(api, "PATCH", f"{path}/large", [{"op": "remove", "path": "/spec/l/0"}],
                               "application/json-patch+json")
        assert code == 200 and got["spec"]["l"][0]["k"].startswith("0001"), got.get("message")
        repeated = {"op": "add", "path": "/spec/l/-", "value": {"k": "0001" + "k" * 196}}
        code, got = await send(api, "PATCH", f"{path}/large", [repeated], "application/json-patch+json")
        assert code == 422 and got["details"]["causes"][0]["field"] == "spec.l[1399]", got
    assert threads == [("decode", 1, True), ("validate", 1, True), ("decode", 1400, False), ("validate", 1400, False),
                       ("decode", 1400, False), ("validate_update", 1400, False), ("patch", 1400, False),
                       ("decode", 1399, False), ("validate_update", 1399, False), ("patch", 1399, False),
                       ("decode", 1400, False), ("validate_update", 1400, False)]


async def test_large_json_bodies_are_decoded_in_a_worker_thread(tmp_path, monkeypatch):
    """A JSON body's decoding and depth check (~0.25 s for a 2 MB body of 150,000 small maps) leave the
    loop from serializer.OFF_LOOP bytes, and what the decoder found (a number past float64's range)
    still reaches the request's typed decoding."""
    from nanokube.apiserver import serializer
    from tests.apiserver.apiextensions import install
    from tests.apiserver.test_out_of_range_numbers import CONFIGMAPS, _post

    threads: list[tuple[int, bool]] = []
    loads = serializer.loads_json

    def recorded(raw, *args, **kwargs):
        if b"CustomResourceDefinition" not in raw:
            threads.append((len(raw) >= serializer.OFF_LOOP, threading.current_thread() is threading.main_thread()))
        return loads(raw, *args, **kwargs)
    monkeypatch.setattr(serializer, "loads_json", recorded)
    async with served(tmp_path) as (_, api):
        for name, n in (("small", 1), ("large", serializer.OFF_LOOP)):
            body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                               "data": {"a": "b" * n}})[:-1] + ',"x":1e400}'
            code, got, warning = await _post(api, CONFIGMAPS, body)
            assert code == 201 and len(got["data"]["a"]) == n and "x" not in got, got
            assert warning == '299 - "unknown field \\"x\\""'
        code, got = await send(api, "PATCH", f"{CONFIGMAPS}/large", {"data": {"b": "c" * serializer.OFF_LOOP}},
                               "application/merge-patch+json")
        assert code == 200 and sorted(got["data"]) == ["a", "b"], got
        await install(api, _gizmo_crd(), GIZMOS)
        gizmo = json.dumps(_ordered_gizmo("g", serializer.OFF_LOOP // 200))[:-2] + ',"unknown":1e400}}'
        code, got, _ = await _post(api, GIZMOS, gizmo)
        assert (code, got["message"]) == (400, 'Gizmo in version "v1" cannot be handled as a Gizmo: '
                                                "json: cannot unmarshal number 1e400 into Go value of type float64"), got
    assert threads == [(False, True), (True, False), (True, False), (True, False)]


def _ordered_gizmo(name: str, n: int) -> dict:
    """A Gizmo of `n` list items, each with its keys out of Go's (sorted) order."""
    return {"apiVersion": "large.example.com/v1", "kind": "Gizmo", "metadata": {"name": name, "labels": {"b": "1", "a": "2"}},
            "spec": {"l": [{"v": "v" * 200, "k": f"{i:06}"} for i in range(n)]}}


def _status_gizmo_crd() -> dict:
    crd = _gizmo_crd()
    version = crd["spec"]["versions"][0]
    version["subresources"] = {"status": {}}
    schema = version["schema"]["openAPIV3Schema"]
    schema["properties"]["spec"]["properties"]["l"]["items"]["properties"]["v"] = {"type": "string"}
    schema["properties"]["status"] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return crd


async def test_a_large_custom_resource_is_put_in_go_order_while_the_loop_answers_others(tmp_path, monkeypatch):
    """The stored form of a custom resource has every map sorted (Go's map[string]interface{}): for a
    3 MB one ~0.3 s, which held every other client. Its ordering is held here in the worker thread
    until another request has been answered, which only a loop left free can do; the answer and the
    stored object are still in Go's order."""
    from nanokube.apiserver import rest
    from tests.apiserver.apiextensions import install

    entered, answered = threading.Event(), threading.Event()
    waited: list[bool] = []
    order = rest.in_unstructured_order

    def held(obj, rv):
        if obj.get("kind") == "Gizmo" and len(obj["spec"]["l"]) > 1 and not waited:
            entered.set()
            waited.append(answered.wait(30))
        return order(obj, rv)
    monkeypatch.setattr(rest, "in_unstructured_order", held)
    path = GIZMOS
    async with served(tmp_path) as (server, api):
        await install(api, _status_gizmo_crd(), path)
        code, got = await send(api, "POST", path, _ordered_gizmo("small", 1))
        assert code == 201 and list(got["spec"]["l"][0]) == ["k", "v"], got
        assert not waited
        write = asyncio.ensure_future(send(api, "POST", path, _ordered_gizmo("large", 1400)))
        assert await asyncio.to_thread(entered.wait, 30)
        code, got = await send(api, "GET", f"{path}/small")
        assert code == 200, got
        answered.set()
        code, got = await write
        assert waited == [True]
        assert code == 201 and list(got["metadata"]["labels"]) == ["a", "b"], got
        assert [list(x) for x in got["spec"]["l"][:2]] == [["k", "v"], ["k", "v"]]
        stored = json.loads((await server.store.get("/registry/gizmos.large.example.com/default/large")).value)
        assert list(stored["metadata"]) == sorted(stored["metadata"]) and list(stored["spec"]["l"][-1]) == ["k", "v"]
        code, got = await send(api, "GET", f"{path}/large")
        assert code == 200 and list(got["spec"]["l"][-1]) == ["k", "v"] and got["spec"]["l"][-1]["k"] == "001399", got


async def test_large_status_writes_are_validated_in_a_worker_thread(tmp_path, monkeypatch):
    """A /status write of a large object: a custom resource's schema validation (the whole object,
    as upstream's status strategy validates it) and the metadata's checks (a pods/status patch of
    100,000 annotations: each key's syntax, then their size) leave the loop, judged by the stored
    object's length and the patch's."""
    from nanokube.apiserver.apiextensions.resource import CustomResourceStrategy
    from nanokube.registry.base import Resource
    from tests.apiserver.apiextensions import install

    threads: list[tuple[str, str, bool]] = []

    def recorded(fn, what):
        def call(self, new, old):
            if new.get("kind") in ("Gizmo", "Pod"):  # (the server's own writes of other kinds pass by)
                threads.append((what, new["kind"], threading.current_thread() is threading.main_thread()))
            return fn(self, new, old)
        return call
    monkeypatch.setattr(CustomResourceStrategy, "validate_status_update",
                        recorded(CustomResourceStrategy.validate_status_update, "status"))
    monkeypatch.setattr(Resource, "validate_subresource_meta", recorded(Resource.validate_subresource_meta, "meta"))
    path = GIZMOS
    async with served(tmp_path) as (_, api):
        await install(api, _status_gizmo_crd(), path)
        for name, n in (("small", 1), ("large", 1400)):
            code, got = await send(api, "POST", path, _ordered_gizmo(name, n))
            assert code == 201, got
            code, got = await send(api, "PATCH", f"{path}/{name}/status", {"status": {"phase": "Ready"}},
                                   "application/merge-patch+json")
            assert code == 200 and got["status"] == {"phase": "Ready"} and len(got["spec"]["l"]) == n, got
        code, got = await send(api, "POST", PODS, _pod("p", 1))
        assert code == 201, got
        many = {f"example.com/a{i}": "x" for i in range(100_000)}
        code, got = await send(api, "PATCH", f"{PODS}/p/status", {"metadata": {"annotations": many}},
                               "application/merge-patch+json")
        assert code == 422, got
        assert got["details"]["causes"] == [{"reason": "FieldValueTooLong", "field": "metadata.annotations",
                                             "message": "Too long: may not be more than 262144 bytes"}], got
        code, got = await send(api, "PATCH", f"{PODS}/p/status", {"metadata": {"annotations": {"a": "b"}}},
                               "application/merge-patch+json")
        assert code == 200 and got["metadata"]["annotations"] == {"a": "b"}, got
    assert threads == [("status", "Gizmo", True), ("meta", "Gizmo", True),
                       ("status", "Gizmo", False), ("meta", "Gizmo", False),
                       ("meta", "Pod", False), ("meta", "Pod", True)]


async def test_a_large_built_in_objects_metadata_is_validated_in_a_worker_thread(tmp_path, monkeypatch):
    """A pod patched with 100,000 annotations: the metadata's checks (each key's syntax, then their
    size, refused as upstream refuses it) leave the loop; the kind's own checks, which may allocate,
    stay on it."""
    from nanokube.registry.base import Resource

    threads: list[tuple[int, bool]] = []
    meta_errors = Resource.update_meta_errors

    def recorded(self, new, old):
        if new.get("kind") == "Pod":
            threads.append((len(new["metadata"].get("annotations") or {}), threading.current_thread() is threading.main_thread()))
        return meta_errors(self, new, old)
    monkeypatch.setattr(Resource, "update_meta_errors", recorded)
    async with served(tmp_path) as (_, api):
        code, got = await send(api, "POST", PODS, _pod("p", 1))
        assert code == 201, got
        for annotations in ({"a": "b"}, {f"example.com/a{i}": "x" for i in range(100_000)}):
            code, got = await send(api, "PATCH", f"{PODS}/p", {"metadata": {"annotations": annotations}},
                                   "application/merge-patch+json")
            if len(annotations) == 1:
                assert code == 200 and got["metadata"]["annotations"] == annotations, got
            else:
                assert code == 422 and got["details"]["causes"] == [{
                    "reason": "FieldValueTooLong", "field": "metadata.annotations",
                    "message": "Too long: may not be more than 262144 bytes"}], got
    assert threads == [(1, True), (100_001, False)]  # (the first annotation kept)
