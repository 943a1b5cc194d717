"""The watch cache's decoded objects share their values of identical JSON, as written ones do (cache.py)."""

import gc

import orjson

from nanokube.apiserver.cache import WatchCache, decode
from nanokube.store.memory import MemoryStore

PODS = "/registry/pods/"
OWNER = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "u-rs", "controller": True,
         "blockOwnerDeletion": True}
FIELDS = {"f:metadata": {"f:labels": {".": {}, "f:app": {}}, "f:ownerReferences": {".": {}, 'k:{"uid":"u-rs"}': {}}},
          "f:spec": {"f:containers": {'k:{"name":"c"}': {".": {}, "f:image": {}, "f:name": {}}}}}


def pod(name: str, app: str = "web", node: str | None = None) -> bytes:
    """A pod of the ReplicaSet `web` as the store holds it (no resourceVersion)."""
    spec = {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1m"}}}],
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}]}
    if node:
        spec["nodeName"] = node
    return orjson.dumps({
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}", "labels": {"app": app},
                     "ownerReferences": [OWNER], "finalizers": ["example.com/keep"],
                     "managedFields": [{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
                                        "time": f"2026-12-03T10:00:0{ord(name[0]) % 10}Z", "fieldsType": "FieldsV1",
                                        "fieldsV1": FIELDS}]},
        "spec": spec, "status": {"phase": "Pending"}})


async def started(values: dict[str, bytes]) -> tuple[MemoryStore, WatchCache]:
    store = MemoryStore()
    for name, value in values.items():
        await store.create(PODS + "ns/" + name, value)
    cache = WatchCache(store)
    await cache.start()
    return store, cache


def tracked(obj) -> dict[int, object]:
    """The containers in `obj` that the cycle collector tracks, by id."""
    seen: dict[int, object] = {}
    todo = [obj]
    while todo:
        o = todo.pop()
        if id(o) not in seen:
            seen[id(o)] = o
            todo.extend(o.values() if type(o) is dict else o if type(o) is list else ())
    return {i: o for i, o in seen.items() if gc.is_tracked(o)}


async def test_objects_loaded_at_start_share_their_equal_values_and_serve_the_same_json():
    values = {"a": pod("a"), "b": pod("b", node="n1"), "c": pod("c", app="other")}
    store, cache = await started(values)
    a, b, c = (cache.get(PODS + "ns/" + n).obj for n in "abc")
    assert a is not b
    assert a["spec"]["containers"] is b["spec"]["containers"]
    assert a["spec"]["tolerations"] is b["spec"]["tolerations"]
    assert b["spec"]["nodeName"] == "n1" and "nodeName" not in a["spec"]
    for k in ("labels", "ownerReferences", "finalizers"):
        assert a["metadata"][k] is b["metadata"][k], k
    assert a["metadata"]["labels"] is not c["metadata"]["labels"]
    assert c["metadata"]["labels"] == {"app": "other"}
    fa, fb = (o["metadata"]["managedFields"][0] for o in (a, b))
    assert fa is not fb and fa["time"] != fb["time"]  # each entry its own; its FieldsV1 shared
    assert fa["fieldsV1"] is fb["fieldsV1"]
    for name in "abc":  # what is served is what was stored
        e = cache.get(PODS + "ns/" + name)
        assert orjson.loads(e.raw) == decode(values[name], e.rev)
        assert e.raw == orjson.dumps(decode(values[name], e.rev))
    # of the 18 the collector tracks in a pod decoded alone, 5 are b's own: the object, its metadata, its
    # managedFields list and entry, and its spec (which has a field of its own)
    assert len(tracked(decode(values["b"], 1))) == 18
    own = tracked(b).keys() - tracked(a).keys()
    assert own == {id(b), id(b["metadata"]), id(b["metadata"]["managedFields"]), id(fb), id(b["spec"])}
    await cache.stop()


async def test_objects_decoded_from_the_store_after_start_share_with_those_loaded_at_start():
    store, cache = await started({"a": pod("a")})
    a = cache.get(PODS + "ns/a").obj
    kv = await store.create(PODS + "ns/d", pod("d"))  # not a write through the REST stack: decoded by the cache
    await cache.wait_for(kv.mod_revision)
    d = cache.get(PODS + "ns/d").obj
    assert d["metadata"]["managedFields"][0]["fieldsV1"] is a["metadata"]["managedFields"][0]["fieldsV1"]
    assert d["metadata"]["ownerReferences"] is a["metadata"]["ownerReferences"]
    assert d["spec"]["containers"] is a["spec"]["containers"]
    assert d["metadata"]["resourceVersion"] == str(kv.mod_revision)
    await cache.stop()
