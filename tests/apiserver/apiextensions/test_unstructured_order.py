"""A custom resource is an unstructured object to kube-apiserver (a map[string]interface{} all the
way down), and Go's encoder writes a map's keys sorted: apiVersion, kind, metadata's
creationTimestamp ... uid, the managedFields entries' keys, the spec's and the status's keys, in
byte order, whatever order a request used. So are its stored bytes, a list's keys (apiVersion,
items, kind, metadata) and what a watch sends. Checked over HTTP against the bytes Go writes."""

from __future__ import annotations

import asyncio
import json

import orjson

from tests.apiserver.apiextensions import install, lines_until, open_watch
from tests.served import served

GROUP = "order.example.com"
THINGS = f"/apis/{GROUP}/v1/namespaces/default/things"
MERGE = "application/merge-patch+json"
CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
       "metadata": {"name": f"things.{GROUP}"},
       "spec": {"group": GROUP, "scope": "Namespaced", "names": {"plural": "things", "kind": "Thing"},
                "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                              "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                  "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                                           "properties": {"zone": {"type": "string", "default": "z1"}}},
                                  "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}]}}


async def _raw(api, method: str, path: str, body: dict | None = None,
               content_type: str = "application/json") -> tuple[int, bytes]:
    """The status and body bytes of a request, as the server sent them."""
    def send():
        r = api.rest_client.pool_manager.request(method, api.configuration.host + path, preload_content=True,
                                                 body=None if body is None else json.dumps(body).encode(),
                                                 headers={"Content-Type": content_type})
        return r.status, r.data
    return await asyncio.to_thread(send)


def go_json(value) -> bytes:
    """What Go's json.Marshal writes for `value` decoded into interface{}: every map's keys sorted."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def as_go_writes(body: bytes) -> bool:
    """`body` is Go's encoding of what it holds (indented by two spaces where ?pretty asked for it)."""
    value = json.loads(body)
    if body.startswith(b"{\n"):
        return body.rstrip(b"\n") == json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False).encode()
    return body.rstrip(b"\n") == go_json(value)


def thing(name: str) -> dict:
    """Every level out of order, as a client may send it."""
    return {"spec": {"size": 3, "image": {"tag": "1", "name": "x"}, "args": [{"z": 1, "a": 2}]},
            "metadata": {"name": name, "labels": {"z": "1", "a": "2"}, "annotations": {"y": "", "b": ""}},
            "kind": "Thing", "apiVersion": f"{GROUP}/v1"}


async def test_a_custom_resource_is_written_stored_and_served_with_every_map_sorted(tmp_path):
    async with served(tmp_path) as (server, api):
        await install(api, CRD, THINGS)
        code, created = await _raw(api, "POST", THINGS, thing("a"))
        assert code == 201 and as_go_writes(created), created
        assert list(json.loads(created)) == ["apiVersion", "kind", "metadata", "spec"]
        assert json.loads(created)["spec"]["zone"] == "z1"  # a default, in its place
        stored = await server.store.get(f"/registry/things.{GROUP}/default/a")
        assert stored.value == go_json(orjson.loads(stored.value)), stored.value

        watch = await open_watch(api, f"{THINGS}?watch=1&timeoutSeconds=30&resourceVersion=0")
        code, dry = await _raw(api, "POST", f"{THINGS}?dryRun=All", thing("b"))
        assert code == 201 and as_go_writes(dry), dry
        for path in (f"{THINGS}/a", f"{THINGS}/a?pretty=true"):
            code, body = await _raw(api, "GET", path)
            assert code == 200 and json.loads(body) == json.loads(created) and as_go_writes(body), body

        got = json.loads(created)
        got["spec"] = {"size": 4, "image": {"tag": "2", "name": "x"}}
        code, updated = await _raw(api, "PUT", f"{THINGS}/a", got)
        assert code == 200 and as_go_writes(updated), updated
        same = {**thing("a"), "spec": json.loads(updated)["spec"]}  # nothing changes: the stored object answers
        same["metadata"]["resourceVersion"] = json.loads(updated)["metadata"]["resourceVersion"]
        code, unchanged = await _raw(api, "PUT", f"{THINGS}/a", same)
        assert code == 200 and as_go_writes(unchanged), unchanged

        status = {**json.loads(updated), "status": {"ready": True, "conditions": [{"type": "A", "status": "True"}]}}
        code, body = await _raw(api, "PUT", f"{THINGS}/a/status", status)
        assert code == 200 and as_go_writes(body), body
        for _ in range(2):  # the second the same patch over the same status: remembered (patch/status.py)
            code, body = await _raw(api, "PATCH", f"{THINGS}/a/status?fieldValidation=Strict",
                                    {"status": {"replicas": 2, "observed": {"z": 1, "a": 0}}}, MERGE)
            assert code == 200 and as_go_writes(body), body
        code, body = await _raw(api, "PATCH", f"{THINGS}/a", {"spec": {"more": {"y": 1, "b": 2}}}, MERGE)
        assert code == 200 and as_go_writes(body), body
        code, body = await _raw(api, "PATCH", f"{THINGS}/a", [{"op": "add", "path": "/spec/extra", "value": {"q": 1, "c": 2}}],
                                "application/json-patch+json")
        assert code == 200 and as_go_writes(body), body

        code, body = await _raw(api, "PATCH", f"{THINGS}/a?fieldManager=tool&force=true",
                                {"metadata": {"name": "a"}, "kind": "Thing", "apiVersion": f"{GROUP}/v1",
                                 "spec": {"applied": {"y": 1, "b": 2}}}, "application/apply-patch+yaml")
        assert code == 200 and as_go_writes(body), body

        await _raw(api, "POST", THINGS, thing("c"))
        code, listed = await _raw(api, "GET", THINGS)
        assert code == 200 and as_go_writes(listed), listed
        assert list(json.loads(listed)) == ["apiVersion", "items", "kind", "metadata"]
        code, limited = await _raw(api, "GET", f"{THINGS}?limit=1")
        assert code == 200 and as_go_writes(limited) and list(json.loads(limited)["metadata"]) == [
            "continue", "remainingItemCount", "resourceVersion"], limited

        lines = await lines_until(watch, lambda seen: json.loads(seen[-1])["object"]["metadata"]["name"] == "c")
        assert watch.status == 200 and len(lines) > 5, lines
        for line in lines:  # the event itself is a struct (type, object); its object a map
            ev = json.loads(line)
            assert line == b'{"type":"%s","object":%s}' % (ev["type"].encode(), go_json(ev["object"])), line

        code, deleted = await _raw(api, "DELETE", THINGS)
        assert code == 200 and as_go_writes(deleted) and list(json.loads(deleted)) == [
            "apiVersion", "items", "kind", "metadata"], deleted


async def test_a_custom_resource_stored_in_another_order_is_served_sorted(tmp_path):
    """What another server wrote (or this one before it sorted them) is read in Go's order too."""
    async with served(tmp_path) as (server, api):
        await install(api, CRD, THINGS)
        code, created = await _raw(api, "POST", THINGS, thing("a"))
        key = f"/registry/things.{GROUP}/default/a"
        kv = await server.store.get(key)
        obj = orjson.loads(kv.value)
        shuffled = {"kind": obj["kind"], "metadata": dict(reversed(obj["metadata"].items())),
                    "spec": {"size": 5, "image": {"tag": "1", "name": "x"}}, "apiVersion": obj["apiVersion"]}
        written = await server.store.update(key, orjson.dumps(shuffled), kv.mod_revision)
        await server.cache.wait_for(written.mod_revision, 10)
        code, body = await _raw(api, "GET", f"{THINGS}/a")
        assert code == 200 and json.loads(body)["spec"]["size"] == 5 and as_go_writes(body), body
