import asyncio
import random

import orjson
import pytest
from sortedcontainers import SortedList

from nanokube.apiserver.cache import (ADDED, DELETED, MODIFIED, WATCH_BUDGET, Entry, WatchCache, Watcher, decode, served_json,
                                      stored_json, stored_value)
from nanokube.clock import VirtualClock
from nanokube.machinery.fieldorder import in_unstructured_order, in_upstream_order
from nanokube.store.interface import Compacted
from nanokube.store.memory import MemoryStore
from tests.controllers import eventually

PREFIX = "/registry/configmaps/"


@pytest.fixture
async def env():
    store = MemoryStore()
    await store.create(PREFIX + "ns/pre", b'{"metadata":{"name":"pre"}}')
    cache = WatchCache(store, window=3)
    await cache.start()
    yield store, cache
    await cache.stop()
    await store.close()


@pytest.fixture
async def virtual():
    """A cache whose waits count a virtual clock's seconds: (the clock, the store, the cache)."""
    clock = VirtualClock()
    store = MemoryStore()
    cache = WatchCache(store, clock=clock)
    await cache.start()
    yield clock, store, cache
    await cache.stop()
    await store.close()


async def test_start_lists_existing_objects_with_their_revision(env):
    store, cache = env
    e = cache.get(PREFIX + "ns/pre")
    assert e.obj["metadata"] == {"name": "pre", "resourceVersion": "1"}
    assert cache.rev == cache.oldest_revision == 1


async def test_follows_the_store_and_reads_your_writes(env):
    store, cache = env
    kv = await store.create(PREFIX + "ns/a", b'{"metadata":{"name":"a"}}')
    await cache.wait_for(kv.mod_revision)
    assert cache.get(PREFIX + "ns/a").rev == kv.mod_revision
    await store.create("/registry/secrets/ns/s", b'{"metadata":{"name":"s"}}')
    await cache.sync()
    assert [k for k, _ in cache.list(PREFIX)] == [PREFIX + "ns/a", PREFIX + "ns/pre"]
    assert [k for k, _ in cache.list(PREFIX + "other/")] == []
    assert cache.count("/registry/secrets/") == 1


async def test_a_wait_fails_at_its_own_deadline_and_leaves_the_others_waiting(virtual):
    """On the cache's clock, a virtual one: the deadline comes when the test moves it, after the create
    reached the cache (a real second raced the create on a loaded machine)."""
    clock, store, cache = virtual
    long = asyncio.create_task(cache.wait_for(cache.rev + 2, timeout=5))
    # one deadline for both: its timer fails the one and forgets the other, met before it
    short = asyncio.create_task(cache.wait_for(cache.rev + 2, timeout=1))
    met = asyncio.create_task(cache.wait_for(cache.rev + 1, timeout=1))
    await clock.advance(0)
    await store.create(PREFIX + "ns/a", b'{"metadata":{"name":"a"}}')
    await met
    await clock.advance(1)  # met before its deadline: no error when the deadline passes
    with pytest.raises(TimeoutError):
        await short
    assert not long.done()
    await store.create(PREFIX + "ns/b", b'{"metadata":{"name":"b"}}')
    await long


async def test_scan_pages_a_namespace_in_key_order_through_creates_and_deletes(env):
    store, cache = env
    for ns, name in [("b", "x"), ("a", "2"), ("ab", "1"), ("a", "1"), ("a", "3"), ("a-", "0")]:
        await store.create(f"{PREFIX}{ns}/{name}", b"{}")
    kv = (await store.list(PREFIX + "a/2"))[0][0]
    await store.delete(kv.key, kv.mod_revision)
    await cache.sync()
    assert [k for k, _ in cache.list(PREFIX + "a/")] == [PREFIX + "a/1", PREFIX + "a/3"]
    assert [k for k, _ in cache.list(PREFIX)] == sorted(
        PREFIX + k for k in ["a-/0", "a/1", "a/3", "ab/1", "b/x", "ns/pre"])
    total, page = cache.scan(PREFIX, after=PREFIX + "a/1", limit=2)
    assert total == 4 and [k for k, _ in page] == [PREFIX + "a/3", PREFIX + "ab/1"]
    total, page = cache.scan(PREFIX + "a/", after=PREFIX + "a/1", limit=5)
    assert total == 1 and [k for k, _ in page] == [PREFIX + "a/3"]
    assert cache.scan(PREFIX + "zz/") == (0, [])


@pytest.fixture
def small_key_blocks(monkeypatch):
    """Key lists made from here on hold blocks of 2 to 4 keys, so every page crosses some."""
    monkeypatch.setattr(SortedList, "DEFAULT_LOAD_FACTOR", 2)


async def test_pages_and_namespaces_of_a_resource_held_in_many_key_blocks(small_key_blocks, env):
    store, cache = env
    names = [f"{ns}/{i:02d}" for ns in ("a", "b", "c") for i in range(12)]
    random.Random(7).shuffle(names)
    for n in names:
        await store.create(PREFIX + n, b"{}")
    for n in names[::3]:
        kv = await store.get(PREFIX + n)
        await store.delete(kv.key, kv.mod_revision)
    await cache.sync()
    assert len(cache._keys[PREFIX]._lists) > 6  # the keys are in blocks indeed
    rev = cache.rev
    left = sorted(PREFIX + n for n in [*names[1::3], *names[2::3], "ns/pre"])
    await store.create(PREFIX + "b/99", b"{}")  # after the first page: the continued pages stay at `rev`
    await cache.sync()
    pages, after = [], ""
    while True:
        total, page = cache.scan(PREFIX, after=after, limit=5, rev=rev)
        assert total == len(left) - 5 * len(pages)
        if not page:
            break
        pages.append([k for k, _ in page])
        after = page[-1][0]
    assert [k for p in pages for k in p] == left
    assert [k for k, _ in cache.list(PREFIX + "b/")] == [k for k in left if k.startswith(PREFIX + "b/")] + [PREFIX + "b/99"]
    for prefix in (PREFIX, PREFIX + "b/", PREFIX + "zz/"):  # one at a time (RBAC's walk), across the blocks
        assert list(cache.entries(prefix)) == cache.list(prefix)
    total, page = cache.scan(PREFIX + "c/", after=PREFIX + "c/05", limit=3)
    assert (total, [k for k, _ in page]) == (len([k for k in left if k > PREFIX + "c/05" and k < PREFIX + "d"]),
                                             [k for k in left if k > PREFIX + "c/05"][:3])


async def test_a_scan_at_a_past_revision_is_its_snapshot_whether_or_not_its_range_changed_since(env):
    store, _ = env
    cache = WatchCache(store, window=100)
    await cache.start()
    try:
        for name in ("1", "2", "3"):
            await store.create(f"{PREFIX}a/{name}", b'{"v":0}')
        await cache.sync()
        rev = cache.rev
        before = cache.scan(PREFIX + "a/", after=PREFIX + "a/1", limit=1)
        await store.create("/registry/secrets/a/s", b"{}")  # another resource
        await store.create(PREFIX + "b/x", b"{}")  # another namespace
        kv = (await store.list(PREFIX + "a/1"))[0][0]
        await store.update(kv.key, b'{"v":1}', kv.mod_revision)  # before the page
        await cache.sync()
        assert cache.scan(PREFIX + "a/", after=PREFIX + "a/1", limit=1, rev=rev) == before
        assert before[0] == 2 and [(k, e.rev) for k, e in before[1]] == [(PREFIX + "a/2", rev - 1)]
        assert cache.scan(PREFIX, after=PREFIX + "a/3", rev=rev) == (1, [(PREFIX + "ns/pre", cache.get(PREFIX + "ns/pre"))])
        kv = (await store.list(PREFIX + "a/3"))[0][0]
        await store.delete(kv.key, kv.mod_revision)  # inside the rest of the list: still there at `rev`
        await cache.sync()
        total, page = cache.scan(PREFIX + "a/", after=PREFIX + "a/2", limit=1, rev=rev)
        assert total == 1 and [(k, e.obj["v"]) for k, e in page] == [(PREFIX + "a/3", 0)]
        assert cache.scan(PREFIX + "a/", after=PREFIX + "a/2", limit=1) == (0, [])
    finally:
        await cache.stop()


def test_entry_objects_and_kept_json_decode_and_encode_only_what_is_asked():
    lazy = Entry(None, 5, None, b'{"metadata":{"name":"a"}}')  # loaded at start: decoded on first use
    plain = Entry({"metadata": {"name": "b", "resourceVersion": "6"}}, 6)
    objs = Entry.objects([lazy, plain])
    assert objs == [{"metadata": {"name": "a", "resourceVersion": "5"}}, {"metadata": {"name": "b", "resourceVersion": "6"}}]
    assert objs[0] is lazy.obj and objs[1] is plain.obj
    converted = {**objs[1], "apiVersion": "v2"}
    assert Entry.kept_json([lazy, plain], [objs[0], converted]) == [orjson.dumps(objs[0]), None]
    assert lazy.raw is Entry.kept_json([lazy], objs[:1])[0]  # kept, not built again
    assert plain._raw is None  # served converted: its JSON is not built


async def test_past_versions_keep_their_json_and_read_back_as_one_equal_object(env, monkeypatch):
    from nanokube.apiserver import cache as cache_module

    store, _ = env
    monkeypatch.setattr(cache_module, "_DECODED_HISTORY", 2)
    cache = WatchCache(store, window=100)
    await cache.start()
    try:
        created = b'{"metadata":{"name":"a"},"data":{"v":"0"}}'
        kv = await store.create(PREFIX + "ns/a", created)
        for v in range(1, 5):
            kv = await store.update(PREFIX + "ns/a", b'{"metadata":{"name":"a"},"data":{"v":"%d"}}' % v, kv.mod_revision)
        await cache.sync()
        evs = cache.events_since(cache.oldest_revision, PREFIX)
        first_prev = evs[1].prev  # the created version, replaced three events before the newest two
        # it keeps the bytes the store's event says it was stored as: nothing was encoded for it
        assert first_prev._obj is None and first_prev._raw is None and first_prev._stored is created
        assert first_prev.obj == {"metadata": {"name": "a", "resourceVersion": str(evs[0].rev)}, "data": {"v": "0"}}
        assert first_prev.obj is first_prev.obj
        assert first_prev.raw == orjson.dumps(first_prev.obj)
        assert evs[-1].prev._obj is not None  # among the newest: still decoded
    finally:
        await cache.stop()


async def test_a_deleted_version_past_the_decoded_history_keeps_its_last_stored_bytes(env, monkeypatch):
    from nanokube.apiserver import cache as cache_module

    store, _ = env
    monkeypatch.setattr(cache_module, "_DECODED_HISTORY", 2)
    cache = WatchCache(store, window=100)
    await cache.start()
    try:
        kv = await store.create(PREFIX + "ns/d", b'{"metadata":{"name":"d"},"data":{"v":"0"}}')
        last = b'{"metadata":{"name":"d"},"data":{"v":"1"}}'
        kv = await store.update(PREFIX + "ns/d", last, kv.mod_revision)
        gone = await store.delete(PREFIX + "ns/d")
        for i in range(3):  # three newer events push the deletion out of the decoded history
            await store.create(PREFIX + f"ns/o{i}", b'{"metadata":{"name":"o%d"}}' % i)
        await cache.sync()
        deleted = next(e for e in cache.events_since(cache.oldest_revision, PREFIX) if e.type == DELETED)
        assert deleted.entry._obj is None and deleted.entry._raw is None and deleted.entry._stored is last
        assert deleted.prev._obj is None and deleted.prev._raw is None and deleted.prev._stored is last
        # read back as the deletion served it (its revision) and the version it replaced (its own)
        assert deleted.entry.obj == {"metadata": {"name": "d", "resourceVersion": str(gone.mod_revision)}, "data": {"v": "1"}}
        assert deleted.prev.obj == {"metadata": {"name": "d", "resourceVersion": str(kv.mod_revision)}, "data": {"v": "1"}}
    finally:
        await cache.stop()


async def test_events_since_reads_the_resource_s_own_history(env):
    """A watch resumes from its resource's history (3 events here), which other resources' writes
    do not age, though they move the window of lists at a revision (3 events of all resources)."""
    store, cache = env
    cache.capacity_min = cache.capacity_max = 3
    kv = await store.create(PREFIX + "ns/a", b'{"metadata":{"name":"a"}}')
    kv2 = await store.update(PREFIX + "ns/a", b'{"metadata":{"name":"a"},"data":{"x":"1"}}', kv.mod_revision)
    await store.delete(PREFIX + "ns/a", kv2.mod_revision)
    for i in range(5):
        await store.create(f"/registry/secrets/ns/s{i}", b"{}")
    await cache.sync()
    evs = cache.events_since(kv.mod_revision, PREFIX)
    assert [e.type for e in evs] == [MODIFIED, DELETED]
    assert evs[1].entry.obj["data"] == {"x": "1"}
    assert evs[1].entry.obj["metadata"]["resourceVersion"] == str(evs[1].rev)
    assert [e.type for e in cache.events_since(1, PREFIX)] == [ADDED, MODIFIED, DELETED]  # from the start's list on
    with pytest.raises(Compacted) as c:
        cache.events_since(0, PREFIX)
    assert c.value.compacted == 1
    assert cache.oldest_revision > kv.mod_revision + 3  # the lists' window moved on
    await store.create(PREFIX + "ns/b", b"{}")  # a fourth event drops the first
    await cache.sync()
    assert [e.type for e in cache.events_since(kv.mod_revision, PREFIX)] == [MODIFIED, DELETED, ADDED]
    with pytest.raises(Compacted) as c:
        cache.events_since(kv.mod_revision - 1, PREFIX)
    assert c.value.compacted == kv.mod_revision  # one before the oldest event kept


async def test_watchers_receive_accepted_events_for_their_prefix(env):
    store, cache = env
    w = Watcher(PREFIX + "ns/", lambda ev: ev.key.startswith(PREFIX + "ns/"))
    cache.add_watcher(w)
    await store.create(PREFIX + "other/x", b"{}")
    await store.create("/registry/secrets/ns/s", b"{}")
    await store.create(PREFIX + "ns/y", b"{}")
    ev = await eventually(lambda: _get_nowait(w))
    assert (ev.type, ev.key) == (ADDED, PREFIX + "ns/y")
    assert w.queue.empty()
    cache.remove_watcher(w)
    assert cache.watcher_count == 0


async def _get_nowait(w):
    return None if w.queue.empty() else w.queue.get_nowait()


def test_stored_value_drops_resource_version():
    obj = {"metadata": {"name": "a", "resourceVersion": "5"}}
    assert stored_value(obj) == b'{"metadata":{"name":"a"}}'
    assert obj["metadata"]["resourceVersion"] == "5"


@pytest.mark.parametrize("obj", [
    {"metadata": {"name": "a", "resourceVersion": "5"}},
    {"spec": {"x": 1}, "kind": "Pod", "metadata": {"labels": {"a": "b"}, "uid": "u", "namespace": "n", "name": "p"},
     "status": {"phase": "Pending"}, "apiVersion": "v1"},
    {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "c"}, "data": {"k": '"resourceVersion":""'}},
    {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"namespace": "n", "labels": {"a": "b"}}},
    {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "c", "uid": "u", "resourceVersion": "3"}},
    {"kind": "ConfigMap", "metadata": {"name": ['"resourceVersion":""', 1], "labels": {"a": "b"}}},
    {"kind": "X", "apiVersion": "e.io/v1", "metadata": {"zz": 1, "name": 'é\\"resourceVersion":""', "creationTimestamp": None}},
    {"apiVersion": "v1", "status": {}, "metadata": {"annotations": {"resourceVersion": ""}, "name": "s"}, "data": None},
    {"kind": "ConfigMap", "metadata": {"name": "{"}},
])
def test_stored_bytes_are_served_with_the_revision_put_back(obj):
    value, handed, at = stored_json(obj)
    assert at > 0 and value == stored_value(in_upstream_order(dict(obj), ""))
    assert obj["metadata"].get("resourceVersion") in (None, "5", "3")  # the writer's object is left as it was
    served = decode(value, 17)
    assert served_json(value, at, 17) == orjson.dumps(served) + b"\n"
    assert served == {**obj, "metadata": {**obj["metadata"], "resourceVersion": "17"}}
    assert list(served["metadata"]).index("resourceVersion") == sum(k in obj["metadata"] for k in ("name", "namespace", "uid"))
    handed["metadata"]["resourceVersion"] = "17"  # what the cache makes of a write's hand-over
    assert orjson.dumps(handed) == orjson.dumps(served)


@pytest.mark.parametrize("metadata", [{"name": {"resourceVersion": ""}, "labels": {}}, {"labels": {}},
                                      {"name": "{", "annotations": {"resourceVersion": ""}}])
def test_bytes_whose_resource_version_has_no_known_place_are_stored_but_not_served(metadata):
    value, handed, at = stored_json({"kind": "ConfigMap", "metadata": metadata})
    assert at == -1 and value == stored_value({"kind": "ConfigMap", "metadata": metadata})
    assert served_json(value, at, 3) is None and handed["metadata"]["resourceVersion"] == ""


@pytest.mark.parametrize("labels", [{"a": "b"}, {"a": "b", "resourceVersion": ""}])
def test_a_custom_resources_bytes_are_served_with_the_revision_put_back_after_its_managed_fields(labels):
    """A custom resource's metadata is sorted, its managedFields (maps) before its resourceVersion:
    the field is still found where it is the only one of that name (a label of that name and value
    before it leaves it unknown), and the object is not encoded a second time."""
    obj = {"kind": "Gizmo", "apiVersion": "e.io/v1", "spec": {"b": 1, "a": {"c": ""}},
           "metadata": {"name": "g", "labels": labels, "managedFields": [
               {"manager": "m", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:a": {}}}}]}}
    value, handed, at = stored_json(obj, unstructured=True)
    assert value == stored_value(in_unstructured_order(obj, ""))
    if "resourceVersion" in labels:
        assert at == -1 and served_json(value, at, 9) is None
        return
    served = decode(value, 9, unstructured=True)
    assert served_json(value, at, 9) == orjson.dumps(served) + b"\n"
    assert list(served["metadata"]) == ["labels", "managedFields", "name", "resourceVersion"]
    assert served["metadata"]["resourceVersion"] == "9" and list(served["spec"]) == ["a", "b"]


async def test_encode_event_shares_one_line_per_object_and_type(env):
    _, cache = env
    obj = {"metadata": {"name": "a", "resourceVersion": "7"}}
    line = cache.encode_event(MODIFIED, obj)
    assert line == b'{"type":"MODIFIED","object":{"metadata":{"name":"a","resourceVersion":"7"}}}\n'
    assert cache.encode_event(MODIFIED, obj) is line
    assert cache.encode_event(DELETED, obj).startswith(b'{"type":"DELETED",')
    other = {"metadata": {"name": "a", "resourceVersion": "8"}}
    assert b'"8"' in cache.encode_event(MODIFIED, other)


async def test_watchers_are_handed_an_event_in_the_order_they_started(env):
    """Which watcher hears an event first decides whose task runs first: in the order the watches
    started, the same in every run (a set of watchers went in address order: `nanokube simulate`
    placed pods differently run to run), also after some have gone."""
    store, cache = env
    heard = []
    watchers = [Watcher(PREFIX, lambda ev: True, direct=lambda cev, i=i: heard.append(i) or True) for i in range(64)]
    for w in watchers:
        cache.add_watcher(w)
    getters = [asyncio.ensure_future(w.queue.get()) for w in watchers]  # each watch's task, parked
    await asyncio.sleep(0)
    for w in watchers[::3]:
        cache.remove_watcher(w)
    kv = await store.create(PREFIX + "ns/a", b"{}")
    await cache.wait_for(kv.mod_revision)
    assert heard == [i for i in range(64) if i % 3]
    for g in getters:
        g.cancel()


async def test_a_waiting_watcher_takes_events_directly_and_in_order(env):
    """Events go to `direct` only while the watch's task waits on an empty queue; otherwise, or when
    `direct` declines or fails, they are queued, so the order a watcher sees never changes."""
    store, cache = env
    taken, answer = [], [True]

    def direct(cev):
        if answer[0] == "fail":
            raise RuntimeError("broken")
        if answer[0]:
            taken.append(cev.key)
        return answer[0]

    w = Watcher(PREFIX + "ns/", lambda ev: ev.key.startswith(PREFIX + "ns/"), direct=direct)
    cache.add_watcher(w)

    async def write(name):
        kv = await store.create(PREFIX + name, b"{}")
        await cache.wait_for(kv.mod_revision)

    async def next_event():  # the watch's task, waiting for its next event
        waiting = asyncio.ensure_future(w.queue.get())
        await asyncio.sleep(0)
        return waiting

    await write("ns/busy")  # the task is not waiting: queued
    waiting = await next_event()
    await write("ns/behind")  # queued behind the event the task is about to take
    assert (await waiting).key == PREFIX + "ns/busy" and w.queue.get_nowait().key == PREFIX + "ns/behind"
    waiting = await next_event()
    await write("ns/direct")
    await write("other/skipped")
    assert taken == [PREFIX + "ns/direct"] and not waiting.done()
    answer[0] = False  # a client that does not keep up
    await write("ns/declined")
    assert (await waiting).key == PREFIX + "ns/declined"
    answer[0] = "fail"
    waiting = await next_event()
    await write("ns/failed")
    assert (await waiting).key == PREFIX + "ns/failed" and w.direct is None
    assert taken == [PREFIX + "ns/direct"]


async def test_watch_lines_and_chunks_are_encoded_once_from_the_entry(env):
    store, cache = env
    kv = await store.create(PREFIX + "ns/a", b'{"metadata":{"name":"a"}}')
    await cache.wait_for(kv.mod_revision)
    entry = cache.get(PREFIX + "ns/a")
    line = cache.encode_event(ADDED, entry.obj)
    assert line == orjson.dumps({"type": ADDED, "object": entry.obj}) + b"\n"
    assert entry.raw in line  # the same encoding LIST serves
    chunk = cache.encode_chunk(ADDED, entry.obj)
    assert chunk == b"%x\r\n" % len(line) + line + b"\r\n"
    assert cache.encode_chunk(ADDED, entry.obj) is chunk
    assert cache.encode_chunk(DELETED, entry.obj).startswith(b"%x\r\n" % (len(line) + 2) + b'{"type":"DELETED",')
    assert cache.encode_chunk(ADDED, entry.obj) is chunk  # the last chunk's memo gave way to the other type


async def test_specs_share_values_of_identical_json_and_encode_as_before(env):
    store, cache = env

    async def put(name, spec, update=None):
        value = orjson.dumps({"metadata": {"name": name[3:]}, "spec": spec})
        kv = await (store.update(PREFIX + name, value, update) if update else store.create(PREFIX + name, value))
        await cache.wait_for(kv.mod_revision)
        return kv, cache.get(PREFIX + name)

    ports = [{"name": "http", "containerPort": 8080}]
    _, a = await put("ns/a", {"containers": [{"name": "app", "image": "a:1", "ports": ports}], "tolerations": [], "n": 1})
    kv, b = await put("ns/b", {"containers": [{"name": "app", "image": "b:1", "ports": ports}], "tolerations": [], "n": 1})
    _, c = await put("ns/c", {"containers": [{"name": "app", "image": "c:1", "ports": [{"containerPort": 8080, "name": "http"}]}],
                              "tolerations": [{"n": 1.0}]})
    assert a.obj["spec"]["containers"][0]["ports"] is b.obj["spec"]["containers"][0]["ports"]
    assert a.obj["spec"]["tolerations"] is b.obj["spec"]["tolerations"]
    assert c.obj["spec"]["containers"][0]["ports"] is not a.obj["spec"]["containers"][0]["ports"]  # another key order
    assert b'"ports":[{"name":"http","containerPort":8080}]' in a.raw
    assert b'"ports":[{"containerPort":8080,"name":"http"}]' in c.raw and b'"tolerations":[{"n":1.0}]' in c.raw
    _, b2 = await put("ns/b", {"containers": [{"name": "app", "image": "b:1", "ports": ports}], "tolerations": [], "n": 1},
                      kv.mod_revision)
    assert b2.obj["spec"] is b.obj["spec"]  # an unchanged spec is the previous version's


async def test_the_shared_values_are_bounded_by_their_json_size(env, monkeypatch):
    from nanokube.apiserver import cache as cache_module

    store, cache = env
    monkeypatch.setattr(cache_module, "_SHARED_MAX", 64)
    for i in range(20):
        for name in (f"s{i}", f"t{i}"):  # a value is kept once a second object holds it
            kv = await store.create(PREFIX + f"ns/{name}", orjson.dumps({"metadata": {"name": name}, "spec": {"v": [i] * 20}}))
            await cache.wait_for(kv.mod_revision)
        assert cache.get(PREFIX + f"ns/s{i}").obj["spec"]["v"] is cache.get(PREFIX + f"ns/t{i}").obj["spec"]["v"]
        assert cache._shared_size <= 64 + len(orjson.dumps([i] * 20))
    assert cache.get(PREFIX + "ns/s7").obj["spec"] == {"v": [7] * 20}


async def test_spec_fields_whose_values_never_repeat_stop_sharing_and_others_keep_on(env, monkeypatch):
    from nanokube.apiserver import cache as cache_module

    store, cache = env
    monkeypatch.setattr(cache_module, "_SHARE_PROBE", 500)
    slices, pods = "/registry/resourceslices/", "/registry/pods/"

    async def put(prefix, name, spec):
        kv = await store.create(prefix + name, orjson.dumps({"metadata": {"name": name}, "spec": spec}))
        await cache.wait_for(kv.mod_revision)
        return cache.get(prefix + name).obj

    unique = [{"devices": [{"name": "gpu-0", "attributes": {"uuid": {"string": f"GPU-{i:040d}"}},
                            "capacity": {"memory": {"value": "80Gi"}}}]} for i in range(40)]
    for i, spec in enumerate(unique[:20]):
        await put(slices, f"s{i}", spec)
    size = cache._shared_size
    assert size == len(b'{"memory":{"value":"80Gi"}}')  # the capacity, which repeats; no device list or attribute
    encoded = cache._share_gain[(slices, "devices")][1]  # JSON bytes of the device lists seen
    assert encoded > 500
    for i, spec in enumerate(unique[20:], 20):
        assert (await put(slices, f"s{i}", spec))["spec"] == spec
    assert cache._shared_size == size
    assert cache._share_gain[(slices, "devices")][1] == encoded  # stopped: the device lists are not even encoded
    capacities = [cache.get(slices + f"s{i}").obj["spec"]["devices"][0]["capacity"] for i in (0, 39)]
    assert capacities[0] is capacities[1]  # the field whose values repeat is still shared
    template = {"containers": [{"name": "app", "image": "app:1", "ports": [{"containerPort": 80}]}]}
    first, second = await put(pods, "a", template), await put(pods, "b", template)
    assert second["spec"]["containers"] is first["spec"]["containers"]
    assert orjson.loads(cache.get(slices + "s39").raw)["spec"] == unique[39]


async def test_a_field_that_stopped_sharing_is_probed_again_later(env, monkeypatch):
    from nanokube.apiserver import cache as cache_module

    store, cache = env
    monkeypatch.setattr(cache_module, "_SHARE_PROBE", 100)
    monkeypatch.setattr(cache_module, "_SHARE_REPROBE", 10)

    async def put(name, value):  # specs that differ (by "own"): shared field by field, never whole
        spec = {"v": {"x": value}, "own": name}
        kv = await store.create(PREFIX + name, orjson.dumps({"metadata": {"name": name[3:]}, "spec": spec}))
        await cache.wait_for(kv.mod_revision)
        return cache.get(PREFIX + name).obj["spec"]["v"]

    for i in range(5):  # values that never repeat: the field stops
        await put(f"ns/u{i}", "u" * 40 + str(i))
    assert (await put("ns/a", "same")) is not (await put("ns/b", "same"))  # stopped: not shared
    for i in range(10):  # the objects after which the fields are probed again
        await put(f"ns/n{i}", None)
    assert (await put("ns/c", "again")) is (await put("ns/d", "again"))


async def test_objects_of_one_spec_share_it_whole_and_a_change_to_one_leaves_the_others(env):
    store, cache = env
    pods = "/registry/pods/"
    template = {"containers": [{"name": "app", "image": "app:1", "resources": {"requests": {"cpu": "100m"}}}],
                "nodeSelector": {"zone": "nowhere"}, "priority": 0}

    async def put(name, spec, rev=0):
        value = orjson.dumps({"metadata": {"name": name}, "spec": spec})
        kv = await (store.update(pods + name, value, rev) if rev else store.create(pods + name, value))
        await cache.wait_for(kv.mod_revision)
        return cache.get(pods + name)

    a, b = await put("a", template), await put("b", template)
    assert b.obj["spec"] is a.obj["spec"]
    other = await put("c", {**template, "priority": 0.0})  # equal in Python, another JSON: its own
    assert other.obj["spec"] is not a.obj["spec"] and orjson.loads(other.raw)["spec"]["priority"] == 0.0
    bound = await put("b", {**template, "nodeName": "n1"}, b.rev)  # b bound: a keeps its spec
    assert bound.obj["spec"]["nodeName"] == "n1"
    assert "nodeName" not in cache.get(pods + "a").obj["spec"]
    assert orjson.loads(cache.get(pods + "a").raw)["spec"] == template


async def test_values_that_one_object_holds_are_not_kept_for_sharing(env):
    store, cache = env

    async def put(name, token):  # a pod as ServiceAccount admission leaves it: its own token volume, mounted twice
        mounts = [{"name": token, "readOnly": True, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]
        spec = {"containers": [{"name": "app", "image": "app:1", "ports": [{"containerPort": 80}], "volumeMounts": mounts},
                               {"name": "side", "image": "side:1", "volumeMounts": mounts}],
                "volumes": [{"name": token, "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}]}
        kv = await store.create(PREFIX + name, orjson.dumps({"metadata": {"name": name[3:]}, "spec": spec}))
        await cache.wait_for(kv.mod_revision)
        return cache.get(PREFIX + name)

    a = await put("ns/a", "kube-api-access-aaaaa")
    assert cache._shared_size == 0  # nothing seen in a second object yet
    b = await put("ns/b", "kube-api-access-bbbbb")
    assert b'[{"containerPort":80}]' in cache._shared  # the ports both pods hold, kept, and b's are a's
    assert b.obj["spec"]["containers"][0]["ports"] is a.obj["spec"]["containers"][0]["ports"]
    assert b.obj["spec"]["volumes"][0]["projected"] is a.obj["spec"]["volumes"][0]["projected"]
    assert not any(b"kube-api-access-" in k for k in cache._shared)  # each pod's own mounts and volume are not kept
    assert b.obj["spec"]["containers"][0]["volumeMounts"][0]["name"] == "kube-api-access-bbbbb"
    assert orjson.loads(b.raw)["spec"]["containers"][1]["volumeMounts"][0]["name"] == "kube-api-access-bbbbb"


@pytest.fixture
async def sqlite_env(tmp_path):
    from nanokube.store.sqlite import SQLiteStore

    store = SQLiteStore(str(tmp_path / "db.sqlite"))
    await store.start()
    cache = WatchCache(store)
    await cache.start()
    yield store, cache
    await cache.stop()
    await store.close()


async def test_a_local_store_hands_its_commits_to_the_cache_as_it_publishes_them(sqlite_env):
    store, cache = sqlite_env
    seen = []
    w = Watcher(PREFIX, lambda ev: True)
    w.direct = lambda ev: seen.append((ev.type, ev.rev)) or True
    cache.add_watcher(w)
    getter = asyncio.ensure_future(w.queue.get())  # the watch's task waiting: events go to `direct`
    await asyncio.sleep(0)
    write = asyncio.ensure_future(store.create(PREFIX + "ns/a", b'{"metadata":{"name":"a"}}'))
    await asyncio.sleep(0)  # the write runs; its batch commits at the start of the next turn
    assert seen == [] and not write.done()
    loop = asyncio.get_running_loop()
    committed = loop.create_future()
    loop.call_soon(lambda: committed.set_result(list(seen)))  # runs right after the commit's callback
    assert await committed == [(ADDED, 1)]  # fanned out in the commit's own turn, before the writer is answered
    assert not write.done() and cache.rev == 1
    assert (await write).mod_revision == 1
    getter.cancel()


async def test_an_event_that_fails_to_apply_is_taken_again_from_the_change_stream(sqlite_env, monkeypatch):
    store, cache = sqlite_env
    real, calls = WatchCache._apply, []

    def flaky(self, ev):
        calls.append(ev.revision)
        if len(calls) == 1:
            raise RuntimeError("boom")
        real(self, ev)

    monkeypatch.setattr(WatchCache, "_apply", flaky)
    a = await store.create(PREFIX + "ns/a", b'{"metadata":{"name":"a"}}')
    b = await store.create(PREFIX + "ns/b", b'{"metadata":{"name":"b"}}')
    await cache.wait_for(b.mod_revision, timeout=5)
    assert calls == [a.mod_revision, a.mod_revision, b.mod_revision]  # once failed, then each once, in order
    assert [k for k, _ in cache.list(PREFIX)] == [PREFIX + "ns/a", PREFIX + "ns/b"]
    assert cache._unfollow is None  # the stream's task follows from now on


async def test_a_lazy_cache_decodes_an_unwatched_resource_only_when_it_is_read(env):
    store, cache = env
    cache.lazy = True
    seen = []
    cache.on_event.append(lambda ev: seen.append(ev))
    kv = await store.create(PREFIX + "ns/a", b'{"metadata":{"name":"a"},"data":{"k":"v"}}')
    await cache.wait_for(kv.mod_revision)
    e = cache.get(PREFIX + "ns/a")
    assert e._obj is None and e._stored is not None  # nobody watches configmaps: nothing decoded
    assert seen[-1].entry.obj == {"metadata": {"name": "a", "resourceVersion": str(kv.mod_revision)}, "data": {"k": "v"}}
    assert cache.get(PREFIX + "ns/a").obj is seen[-1].entry.obj  # decoded once, for whoever reads it
    w = Watcher(PREFIX, lambda ev: True)
    cache.add_watcher(w)
    kv = await store.update(PREFIX + "ns/a", b'{"metadata":{"name":"a"},"data":{"k":"w"}}', kv.mod_revision)
    await cache.wait_for(kv.mod_revision)
    ev = w.queue.get_nowait()
    assert ev.entry._obj is not None and ev.entry.obj["data"] == {"k": "w"}  # watched: decoded as it comes
    gone = await store.delete(PREFIX + "ns/a")
    await cache.wait_for(gone.mod_revision)
    assert w.queue.get_nowait().entry.obj["metadata"]["resourceVersion"] == str(gone.mod_revision)


async def test_a_worker_behind_the_shared_change_log_relists_and_follows_on(tmp_path, monkeypatch):
    """Two API server workers' stores on one SQLite file: the cache of the one that fell behind the
    trimmed log is told so (the store's `lost`), relists, and takes the other's writes again."""
    from nanokube.store import sqlite as sqlite_mod
    from nanokube.store.sqlite import SQLiteStore

    monkeypatch.setattr(sqlite_mod, "LOG_WINDOW", 10)
    monkeypatch.setattr(sqlite_mod, "LOG_TRIM", 5)
    here, other = SQLiteStore(str(tmp_path / "db"), shared=True), SQLiteStore(str(tmp_path / "db"), shared=True)
    await here.start()
    await other.start()
    cache = WatchCache(here)
    await cache.start()
    bell = here._bell
    try:
        bell._loop.remove_reader(bell.sock.fileno())  # busy: it reads no rings while the other writes
        for i in range(30):
            await other.create(f"{PREFIX}ns/{i}", b'{"metadata":{"name":"x"}}')
        await cache.sync()  # finds the gap: the cache relists
        await eventually(lambda: _async(cache.count(PREFIX) == 30))
        bell._loop.add_reader(bell.sock.fileno(), bell._read)
        kv = await other.create(PREFIX + "ns/after", b'{"metadata":{"name":"after"}}')
        await cache.wait_for(kv.mod_revision)
        assert cache.get(PREFIX + "ns/after").rev == kv.mod_revision
    finally:
        await cache.stop()
        await other.close()
        await here.close()


async def _async(value):
    return value


async def test_a_watcher_that_falls_behind_is_ended_and_counted_as_terminated(virtual):
    """The cacher's TerminatedWatchersCounter: a watcher whose queue is still past its buffer when its
    resource's dispatch budget (WATCH_BUDGET here, of the cache's clock) runs out is closed, what it had
    not taken dropped, counted under its resource in apiserver_terminated_watchers_total; one back
    within its buffer by then is not. Events received count every write, watched or not."""
    from nanokube.apiserver.metrics import WatchCacheCollector
    clock, store, cache = virtual
    await clock.advance(2)  # the budget refills to its most
    w, kept = Watcher(PREFIX + "ns/", lambda ev: True, size=1), Watcher(PREFIX + "ns/", lambda ev: True, size=1)
    cache.add_watcher(w)
    cache.add_watcher(kept)
    for name in ("a", "b"):
        await store.create(PREFIX + f"ns/{name}", b"{}")
    await cache.sync()
    assert kept.queue.get_nowait().key == PREFIX + "ns/a"  # back within its buffer
    await clock.advance(WATCH_BUDGET / 2)
    assert not w.overflowed
    await clock.advance(WATCH_BUDGET / 2 + 1e-6)
    assert w.overflowed and cache.stats.terminated == {PREFIX: 1}
    assert w.queue.get_nowait() is None and w.queue.empty()
    assert not kept.overflowed and kept.queue.get_nowait().key == PREFIX + "ns/b"
    fams = {m.name: m for m in WatchCacheCollector(cache.stats, lambda: cache.rev).collect()}
    [terminated] = fams["apiserver_terminated_watchers"].samples
    assert (terminated.name, terminated.labels, terminated.value) == (
        "apiserver_terminated_watchers_total", {"group": "", "resource": "configmaps"}, 1)
    assert [s.value for s in fams["apiserver_watch_cache_events_received"].samples] == [2]


async def test_a_wait_times_out_on_the_cache_s_clock_and_one_met_leaves_no_timer(virtual):
    """wait_for counts the injected clock's seconds (virtual ones here), as upstream's waitUntilFreshAndBlock
    takes its clock; its one timer is gone once nobody waits, so a virtual clock has nothing due for it."""
    clock, store, cache = virtual
    late = asyncio.create_task(cache.wait_for(cache.rev + 2, timeout=5))
    met = asyncio.create_task(cache.wait_for(cache.rev + 1, timeout=5))
    await clock.advance(0)
    assert clock.next_due() == clock.monotonic() + 5
    await store.create(PREFIX + "ns/a", b'{"metadata":{"name":"a"}}')
    await met
    await clock.advance(4.5)
    assert not late.done()
    await clock.advance(0.5)
    with pytest.raises(TimeoutError):
        await late
    assert clock.next_due() is None

    again = asyncio.create_task(cache.wait_for(cache.rev + 1, timeout=5))
    await clock.advance(1)
    assert clock.next_due() == clock.monotonic() + 5 - 1
    await store.create(PREFIX + "ns/b", b'{"metadata":{"name":"b"}}')
    await again
    assert clock.next_due() is None


async def test_a_resource_relisted_on_its_own_keeps_a_write_applied_while_its_list_was_read(env):
    """WatchCache.relist (an encryption reload's): a write of the resource the cache applies while the
    list is read is past the list's revision, so the list is read again rather than put back the value
    that write replaced (a get would serve it as current until the key's next write)."""
    store, cache = env
    kv = await store.create(PREFIX + "ns/a", b'{"metadata":{"name":"a"},"data":{"v":"1"}}')
    await cache.wait_for(kv.mod_revision)
    lists, real = [], store.list

    async def overtaken(prefix: str):
        listed = await real(prefix)
        lists.append(listed[1])
        if len(lists) == 1:  # (a writer's update lands, and the cache applies it, before the list is answered)
            done = await store.update(PREFIX + "ns/a", b'{"metadata":{"name":"a"},"data":{"v":"2"}}', kv.mod_revision)
            await cache.wait_for(done.mod_revision)
        return listed

    store.list = overtaken
    cache.relist(PREFIX)

    async def relisted():
        return len(lists) == 2 and cache.get(PREFIX + "ns/a")
    entry = await eventually(relisted)
    assert lists[1] > lists[0]
    assert (entry.rev, entry.obj["data"]) == (kv.mod_revision + 1, {"v": "2"})
