import asyncio

import orjson
import pytest

from nanokube.machinery.errors import APIError
from nanokube.apiserver.cache import served_json
from nanokube.apiserver.rest import MERGE_PATCH, STRATEGIC_PATCH, WriteOptions
from nanokube.apiserver.subresources import Subresources
from nanokube.store.interface import DELETE, PUT
from nanokube.store.sqlite import SQLiteStore
from tests.controllers import make_stack, tries

NS = "default"


@pytest.fixture
def cms(stack):
    return stack.client.resource("", "v1", "configmaps")


def cm(name, labels=None, **md):
    return {"metadata": {"name": name, "namespace": NS, **({"labels": labels} if labels else {}), **md}, "data": {"k": "v"}}


def deployment(name, replicas=1):
    tpl = {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
    return {"metadata": {"name": name, "namespace": NS},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "template": tpl}}


async def next_event(stream):
    """The next watch event; the bound only stops a broken test from hanging."""
    return await asyncio.wait_for(stream.__anext__(), 5)


async def names(rc, **kw):
    items, _ = await rc.list(NS, **kw)
    return [o["metadata"]["name"] for o in items]


async def test_label_and_field_selectors_on_list(cms):
    await cms.create(cm("a", {"app": "web"}))
    await cms.create(cm("b", {"app": "db"}))
    await cms.create(cm("c"))
    assert await names(cms, label_selector="app in (web,db)") == ["a", "b"]
    assert await names(cms, label_selector="!app") == ["c"]
    assert await names(cms, field_selector="metadata.name!=a") == ["b", "c"]
    assert await names(cms, field_selector="metadata.namespace=default,metadata.name=b") == ["b"]
    with pytest.raises(APIError) as e:
        await cms.list(NS, field_selector="data.k=v")
    # a ConfigMap registers no field label conversion: apimachinery's default one answers
    assert e.value.code == 400 and e.value.message == (
        '"data.k" is not a known field selector: only "metadata.name", "metadata.namespace"')
    with pytest.raises(APIError) as e:
        await cms.list(NS, label_selector="app in web")
    assert e.value.code == 400


async def test_resource_specific_field_selector(stack):
    pods = stack.client.resource("", "v1", "pods")
    await pods.create({"metadata": {"name": "p", "namespace": NS},
                       "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
    assert await names(pods, field_selector="status.phase=Pending") == ["p"]
    assert await names(pods, field_selector="spec.nodeName=n1") == []


async def test_pagination_with_continue_and_remaining_count(stack, cms):
    for i in range(5):
        await cms.create(cm(f"cm{i}"))
    res = cms.res
    page1, m1 = await stack.rest.list(res, "v1", NS, limit=2)
    assert [o["metadata"]["name"] for o in page1] == ["cm0", "cm1"]
    assert m1["remainingItemCount"] == 3 and m1["continue"]
    page2, m2 = await stack.rest.list(res, "v1", NS, limit=2, continue_=m1["continue"])
    assert [o["metadata"]["name"] for o in page2] == ["cm2", "cm3"]
    assert m2["remainingItemCount"] == 1
    page3, m3 = await stack.rest.list(res, "v1", NS, limit=2, continue_=m2["continue"])
    assert [o["metadata"]["name"] for o in page3] == ["cm4"]
    assert "continue" not in m3 and "remainingItemCount" not in m3
    with pytest.raises(APIError) as e:
        await stack.rest.list(res, "v1", NS, continue_="not-a-token")
    assert e.value.code == 400


async def test_a_continued_list_is_the_snapshot_of_its_first_page(stack, cms):
    for i in range(5):
        await cms.create(cm(f"cm{i}"))
    res = cms.res
    page1, m1 = await stack.rest.list(res, "v1", NS, limit=2)
    await cms.delete("cm3", NS)  # after the first page: the rest of the list still shows the objects as they were
    await cms.create(cm("cm25"))
    await cms.update({**await cms.get("cm2", NS), "data": {"k": "changed"}})
    page2, m2 = await stack.rest.list(res, "v1", NS, limit=2, continue_=m1["continue"])
    page3, m3 = await stack.rest.list(res, "v1", NS, limit=2, continue_=m2["continue"])
    assert [o["metadata"]["name"] for o in page1 + page2 + page3] == [f"cm{i}" for i in range(5)]
    assert page2[0]["data"] == {"k": "v"} and m2["remainingItemCount"] == 1
    assert m1["resourceVersion"] == m2["resourceVersion"] == m3["resourceVersion"]
    assert [o["metadata"]["name"] for o in (await stack.rest.list(res, "v1", NS))[0]] == ["cm0", "cm1", "cm2", "cm25", "cm4"]


async def test_a_continue_token_older_than_the_cache_window_is_expired_with_a_token_for_the_latest(stack, cms):
    stack.rest.cache.capacity_min = stack.rest.cache.capacity_max = 1  # each resource's history: its newest event
    for i in range(3):
        await cms.create(cm(f"cm{i:02d}"))
    res = cms.res
    _, m1 = await stack.rest.list(res, "v1", NS, limit=1)
    stack.rest.cache.window = 1  # the window drops one old event per new one, down to the newest
    for i in range(3, 3 + len(stack.rest.cache._events) + 1):
        await cms.create(cm(f"cm{i:02d}"))
    assert stack.rest.cache.oldest_revision > int(m1["resourceVersion"])
    with pytest.raises(APIError) as e:
        await stack.rest.list(res, "v1", NS, limit=1, continue_=m1["continue"])
    status = e.value.status()
    assert e.value.code == 410 and status["reason"] == "Expired" and "too old to display a consistent list" in status["message"]
    rest, meta = await stack.rest.list(res, "v1", NS, continue_=status["metadata"]["continue"])
    assert [o["metadata"]["name"] for o in rest] == [f"cm{k:02d}" for k in range(1, i + 1)]  # inconsistent: the latest state
    assert int(meta["resourceVersion"]) == stack.rest.cache.rev


async def test_list_resource_version_semantics(stack, cms):
    created = await cms.create(cm("a"))
    res = cms.res
    _, meta = await stack.rest.list(res, "v1", NS)
    assert int(meta["resourceVersion"]) >= int(created["metadata"]["resourceVersion"])
    items, meta0 = await stack.rest.list(res, "v1", NS, resource_version="0")
    assert [o["metadata"]["name"] for o in items] == ["a"]
    items, _ = await stack.rest.list(res, "v1", NS, resource_version=created["metadata"]["resourceVersion"],
                                     resource_version_match="NotOlderThan")
    assert [o["metadata"]["name"] for o in items] == ["a"]
    for kw, msg in [
        ({"resource_version": "abc"}, "invalid resource version"),
        ({"resource_version": "1", "continue_": "x"}, "not allowed when using continue"),
    ]:
        with pytest.raises(APIError) as e:
            await stack.rest.list(res, "v1", NS, **kw)
        assert e.value.code == 400 and msg in e.value.message


async def test_watch_from_resource_version_replays_only_later_events(cms):
    a = await cms.create(cm("a"))
    rv = a["metadata"]["resourceVersion"]
    await cms.create(cm("b"))
    await cms.patch("a", {"data": {"k": "v2"}}, namespace=NS)
    stream = await cms.watch(NS, rv)
    try:
        t1, o1 = await next_event(stream)
        t2, o2 = await next_event(stream)
        assert (t1, o1["metadata"]["name"]) == ("ADDED", "b")
        assert (t2, o2["metadata"]["name"], o2["data"]["k"]) == ("MODIFIED", "a", "v2")
        await cms.delete("b", NS)
        t3, o3 = await next_event(stream)
        assert (t3, o3["metadata"]["name"]) == ("DELETED", "b")
    finally:
        await stream.aclose()


async def test_the_initial_events_end_bookmark_names_the_state_sent_not_later_writes(stack, cms):
    """A watch-list's k8s.io/initial-events-end bookmark carries the revision of the initial state:
    a write made while the initial events go out comes after the bookmark with a newer revision (a
    reflector resuming from the bookmark would skip it otherwise)."""
    await cms.create(cm("a"))
    stream = await stack.rest.watch(cms.res, "v1", NS, resource_version="", send_initial_events=True,
                                    resource_version_match="NotOlderThan", allow_bookmarks=True)
    try:
        t1, _ = await next_event(stream)
        later = await cms.create(cm("b"))  # after the initial state was taken, before its end is sent
        t2, bookmark = await next_event(stream)
        t3, added = await next_event(stream)
        assert (t1, t2, t3, added["metadata"]["name"]) == ("ADDED", "BOOKMARK", "ADDED", "b")
        assert bookmark["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
        assert int(bookmark["metadata"]["resourceVersion"]) < int(later["metadata"]["resourceVersion"])
    finally:
        await stream.aclose()


async def test_watch_from_too_old_resource_version_is_gone():
    s = await make_stack()
    s.cache.capacity_min = s.cache.capacity_max = 2  # each resource's history: its 2 newest events
    try:
        cms = s.client.resource("", "v1", "configmaps")
        first = await cms.create(cm("first"))
        for i in range(4):
            last = await cms.create(cm(f"cm{i}"))
        with pytest.raises(APIError) as e:
            await cms.watch(NS, first["metadata"]["resourceVersion"])
        assert e.value.code == 410
        assert str(e.value) == f"too old resource version: {first['metadata']['resourceVersion']} ({int(last['metadata']['resourceVersion']) - 2})"
        _, rv = await cms.list(NS)
        stream = await cms.watch(NS, rv)
        await stream.aclose()
    finally:
        await s.close()


async def test_watch_with_label_selector_turns_label_changes_into_added_deleted(cms):
    _, rv = await cms.list(NS)
    stream = await cms.watch(NS, rv, label_selector="app=web")
    try:
        await cms.create(cm("x"))
        await cms.patch("x", {"metadata": {"labels": {"app": "web"}}}, namespace=NS)
        typ, obj = await next_event(stream)
        assert (typ, obj["metadata"]["name"]) == ("ADDED", "x")
        await cms.patch("x", {"data": {"k": "v2"}}, namespace=NS)
        typ, modified = await next_event(stream)
        assert typ == "MODIFIED"
        left = await cms.patch("x", {"metadata": {"labels": {"app": "db"}}}, namespace=NS)
        typ, obj = await next_event(stream)
        # as upstream's cacheWatcher sends it: the object as the watch last saw it, at the new revision
        assert (typ, obj["metadata"]["labels"]) == ("DELETED", {"app": "web"})
        assert obj["metadata"]["resourceVersion"] == left["metadata"]["resourceVersion"] != modified["metadata"]["resourceVersion"]
    finally:
        await stream.aclose()


async def test_a_selector_watch_is_not_handed_events_it_drops_on_both_sides(cms):
    """Writes to objects its selector matches neither before nor after never reach the watch's
    queue (the watch's task is not woken for them); a change into or out of it still does."""
    _, rv = await cms.list(NS)
    stream = await cms.watch(NS, rv, label_selector="app=web")
    try:
        queue = stream.watcher.queue
        await cms.create(cm("other", {"app": "db"}))
        await cms.patch("other", {"data": {"k": "v2"}}, namespace=NS)
        await cms.delete("other", NS)
        assert queue.qsize() == 0
        await cms.create(cm("x", {"app": "db"}))
        await cms.patch("x", {"metadata": {"labels": {"app": "web"}}}, namespace=NS)
        assert queue.qsize() == 1
        typ, obj = await next_event(stream)
        assert (typ, obj["metadata"]["name"]) == ("ADDED", "x")
    finally:
        await stream.aclose()


async def test_direct_watches_of_one_version_are_served_one_converted_object_per_event(stack):
    """The direct watches' translate (`WatchStream.translate`) converts an event's object once for
    every watch of its resource and version (and translates the event once for those without
    selectors), still filtering per watch, and never serves an earlier event's or another
    version's object."""
    rest, cache = stack.rest, stack.cache
    events = rest.index.get("events.k8s.io", "v1", "events")
    hpas = rest.index.get("autoscaling", "v2", "horizontalpodautoscalers")
    core = stack.client.resource("", "v1", "events")
    await core.create({"metadata": {"name": "e1", "namespace": NS, "labels": {"app": "web"}},
                       "involvedObject": {"kind": "Pod", "name": "p", "namespace": NS}, "reason": "Started",
                       "message": "one", "type": "Normal"})
    streams = [await rest.watch(events, "v1", NS), await rest.watch(events, "v1", NS),
               await rest.watch(events, "v1", NS, label_selector="app=db"),
               await rest.watch(events, "v1", NS, label_selector="app=web"), await rest.watch(events, "v1", NS, name="e1")]
    try:
        ev = cache._events[-1]
        # each as the cache hands it: the event as the watch's `accept` judged it, or nothing
        first, second, none, web, named = (s.translate(ev if j is True else j) if (j := s.watcher.accept(ev)) else None
                                           for s in streams)
        assert web == named == first and web[1] is first[1]  # filtered per watch, converted once
        assert none is None and first == ("ADDED", second[1]) and first is second  # one translation
        assert first[1]["apiVersion"] == "events.k8s.io/v1" and first[1] is not ev.entry.obj
        assert first[1]["note"] == "one"
        await core.patch("e1", {"message": "two"}, namespace=NS)
        ev = cache._events[-1]
        typ, obj = streams[1].translate(ev)
        assert (typ, obj["note"]) == ("MODIFIED", "two") and streams[0].translate(ev)[1] is obj
    finally:
        for s in streams:
            await s.aclose()
    hpa = {"metadata": {"name": "h", "namespace": NS},
           "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "d", "apiVersion": "apps/v1"}, "maxReplicas": 3}}
    await stack.client.resource("autoscaling", "v2", "horizontalpodautoscalers").create(hpa)
    v1, v2 = await rest.watch(hpas, "v1", NS), await rest.watch(hpas, "v2", NS)
    try:
        ev = cache._events[-1]
        assert [s.translate(ev)[1]["apiVersion"] for s in (v1, v2, v1)] == [
            "autoscaling/v1", "autoscaling/v2", "autoscaling/v1"]
    finally:
        await v1.aclose()
        await v2.aclose()


async def test_stale_resource_version_conflicts(cms):
    a = await cms.create(cm("a"))
    await cms.update({**a, "data": {"k": "new"}})
    with pytest.raises(APIError) as e:
        await cms.update({**a, "data": {"k": "lost"}})
    assert e.value.code == 409 and e.value.reason == "Conflict"
    with pytest.raises(APIError) as e:
        await cms.delete("a", NS, preconditions={"resourceVersion": a["metadata"]["resourceVersion"]})
    assert e.value.code == 409
    assert (await cms.get("a", NS))["data"] == {"k": "new"}


async def test_generation_bumps_only_on_spec_changes(stack):
    deps = stack.client.resource("apps", "v1", "deployments")
    d = await deps.create(deployment("d"))
    assert d["metadata"]["generation"] == 1
    d = await deps.patch("d", {"metadata": {"labels": {"x": "y"}}}, namespace=NS)
    assert d["metadata"]["generation"] == 1
    d = await deps.patch("d", {"status": {"replicas": 3}}, namespace=NS, subresource="status")
    assert d["metadata"]["generation"] == 1
    d = await deps.patch("d", {"spec": {"replicas": 4}}, namespace=NS)
    assert d["metadata"]["generation"] == 2


async def test_status_subresource_isolates_status_from_spec(stack):
    deps = stack.client.resource("apps", "v1", "deployments")
    created = await deps.create({**deployment("d"), "status": {"replicas": 9}})
    assert "replicas" not in (created.get("status") or {})
    d = await deps.update({**created, "spec": {**created["spec"], "replicas": 2}, "status": {"replicas": 7}})
    assert d["spec"]["replicas"] == 2 and (d.get("status") or {}).get("replicas") is None
    s = await deps.update({**d, "spec": {**d["spec"], "replicas": 5}, "status": {"replicas": 2}}, subresource="status")
    assert s["status"]["replicas"] == 2 and s["spec"]["replicas"] == 2


async def test_finalizers_keep_a_deleted_object_until_removed(cms):
    await cms.create(cm("f", finalizers=["example.com/hold"]))
    await cms.delete("f", NS)
    held = await cms.get("f", NS)
    assert held["metadata"]["deletionTimestamp"]
    assert held["metadata"]["finalizers"] == ["example.com/hold"]
    await cms.patch("f", {"metadata": {"finalizers": None}}, namespace=NS)
    with pytest.raises(APIError) as e:
        await cms.get("f", NS)
    assert e.value.code == 404


async def test_dry_run_creates_and_deletes_nothing(stack, cms):
    r = await stack.rest.create(cms.res, "v1", NS, cm("dry"), WriteOptions(dry_run=True))
    assert r.code == 201 and r.obj["metadata"]["name"] == "dry"
    with pytest.raises(APIError) as e:
        await cms.get("dry", NS)
    assert e.value.code == 404
    await cms.create(cm("kept"))
    await stack.rest.delete(cms.res, "v1", NS, "kept", {}, WriteOptions(dry_run=True))
    assert (await cms.get("kept", NS))["metadata"]["name"] == "kept"


async def test_generate_name(cms):
    a = await cms.create({"metadata": {"generateName": "gen-", "namespace": NS}})
    b = await cms.create({"metadata": {"generateName": "gen-", "namespace": NS}})
    for o in (a, b):
        assert o["metadata"]["name"].startswith("gen-") and len(o["metadata"]["name"]) == len("gen-") + 5
    assert a["metadata"]["name"] != b["metadata"]["name"]
    assert (await cms.get(a["metadata"]["name"], NS))["metadata"]["uid"] == a["metadata"]["uid"]


async def test_a_long_generate_name_is_cut_so_the_name_fits_63_characters(core):
    """Upstream's SimpleNameGenerator keeps 58 characters of the prefix before its five random ones
    (a ReplicaSet's pods of a long-named Deployment get 63-character names, not longer)."""
    prefix = "an-operators-long-generated-prefix-" * 2  # 70 characters
    made = await asyncio.to_thread(core.create_namespaced_config_map, "default", {"metadata": {"generateName": prefix}})
    assert len(made.metadata.name) == 63 and made.metadata.name.startswith(prefix[:58])
    assert made.metadata.generate_name == prefix


async def test_a_generate_name_is_judged_as_a_prefix_before_the_name_made_of_it(cms):
    """ValidateObjectMeta's order: generateName (its trailing "x-" masked, as a name goes on after
    it), then the generated name."""
    with pytest.raises(APIError) as e:
        await cms.create({"metadata": {"generateName": "G_", "namespace": NS}})
    causes = e.value.details["causes"]
    assert [c["field"] for c in causes] == ["metadata.generateName", "metadata.name"]
    assert causes[1]["message"].startswith(f'Invalid value: "{e.value.details["name"]}"')
    with pytest.raises(APIError) as e:  # "a.-" is a fine prefix ("aa"); the name made of it is not
        await cms.create({"metadata": {"generateName": "a.-", "namespace": NS}})
    assert [c["field"] for c in e.value.details["causes"]] == ["metadata.name"]


async def test_a_name_held_by_an_object_being_deleted_is_said_to_be(cms):
    """Store.create reads the object holding the name: one being deleted makes the AlreadyExists
    message start "object is being deleted: "."""
    await cms.create(cm("held", finalizers=["example.com/x"]))
    await cms.delete("held", NS)
    with pytest.raises(APIError) as e:
        await cms.create(cm("held"))
    assert (e.value.code, e.value.reason) == (409, "AlreadyExists")
    assert e.value.message == 'object is being deleted: configmaps "held" already exists'
    await cms.update({**await cms.get("held", NS), "metadata": {**(await cms.get("held", NS))["metadata"], "finalizers": []}})


async def test_create_in_missing_namespace_is_404(cms):
    with pytest.raises(APIError) as e:
        await cms.create({"metadata": {"name": "x", "namespace": "nowhere"}})
    assert e.value.code == 404


async def test_node_create_keeps_its_status_other_resources_start_empty():
    from tests.controllers import make_stack

    s = await make_stack()
    try:
        node = await s.client.resource("", "v1", "nodes").create({
            "metadata": {"name": "n1"},
            "status": {"capacity": {"cpu": "4"}, "config": {"active": {}},
                       "conditions": [{"type": "Ready", "status": "True"}]}})
        assert node["status"]["capacity"] == {"cpu": "4"} and node["status"]["allocatable"] == {"cpu": "4"}
        assert node["status"]["conditions"][0]["type"] == "Ready" and "config" not in node["status"]
        dep = await s.client.resource("apps", "v1", "deployments").create({
            "metadata": {"name": "d", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
                "metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}},
            "status": {"replicas": 7}})
        assert (dep.get("status") or {}).get("replicas") is None
    finally:
        await s.close()


async def test_patches_without_a_resource_version_win_races_with_other_writes():
    import asyncio

    from tests.controllers import make_stack

    s = await make_stack()
    try:
        cms = s.client.resource("", "v1", "configmaps")
        await cms.create({"metadata": {"name": "busy", "namespace": "default"}, "data": {}})
        await asyncio.gather(*(cms.patch("busy", {"data": {f"k{i}": str(i)}}, namespace="default")
                               for i in range(30)))
        assert len((await cms.get("busy", "default"))["data"]) == 30
        cur = await cms.get("busy", "default")
        stale = {"metadata": {"resourceVersion": cur["metadata"]["resourceVersion"]}, "data": {"x": "1"}}
        await cms.patch("busy", {"data": {"y": "2"}}, namespace="default")
        with pytest.raises(APIError) as e:
            await cms.patch("busy", stale, namespace="default")
        assert e.value.code == 409, "a patch naming an old resourceVersion still fails its precondition"
    finally:
        await s.close()


SMP = "application/strategic-merge-patch+json"


@pytest.mark.parametrize("patch_type", [SMP, "application/merge-patch+json"])
async def test_a_patch_result_is_decoded_strictly_in_what_the_patch_names(stack, patch_type):
    pods = stack.client.resource("", "v1", "pods")
    await pods.create({"metadata": {"name": "p", "namespace": NS}, "spec": {"containers": [{"name": "c", "image": "x"}]}})
    for patch, message in (
        ({"status": {"hostIPs": [{"ip": "10.0.0.1", "zone": "a"}]}}, 'unknown field "status.hostIPs[0].zone"'),
        ({"metadata": {"labels": {"a": "b"}, "colour": "red"}}, 'unknown field "metadata.colour"'),
        ({"status": {"phase": 3}}, "cannot convert int64 to string" if patch_type == SMP else
         "cannot unmarshal number into Go struct field PodStatus.status.phase of type string"),
        ({"colour": "red"}, 'unknown field "colour"'),
    ):
        with pytest.raises(APIError) as e:
            await pods.patch("p", patch, patch_type, namespace=NS, subresource="status")
        assert e.value.code == 422 and message in e.value.message  # the patchers' `patch: Invalid value`
    # nulls the decoder drops or zeroes are dropped or zeroed in the stored object
    out = await pods.patch("p", {"status": {"conditions": [{"type": "Ready", "status": "False", "reason": None}]}},
                           patch_type, namespace=NS, subresource="status")
    assert out["status"]["conditions"] == [{"type": "Ready", "status": "False", "lastProbeTime": None,
                                            "lastTransitionTime": None}]


@pytest.mark.parametrize("patch_type", [SMP, "application/merge-patch+json"])
async def test_a_patch_that_lost_a_race_is_applied_again_as_it_was_sent(stack, patch_type):
    """The merge takes over the request's decoded patch (a strategic one loses its directives on
    the way): a retry after another write came first merges the patch as sent, not what is left."""
    from nanokube.store.interface import RevisionMismatch

    pods = stack.client.resource("", "v1", "pods")
    await pods.create({"metadata": {"name": "p", "namespace": NS}, "spec": {"containers": [{"name": "c", "image": "x"}]}})
    both = [{"type": "A", "status": "True"}, {"type": "B", "status": "True"}]
    await pods.patch("p", {"status": {"conditions": both}}, MERGE_PATCH, namespace=NS, subresource="status")
    store_update, calls = stack.store.update, []

    async def lose_once(key, value, rev, prev=None):
        calls.append(key)
        if len(calls) == 1:
            raise RevisionMismatch(key, None)
        return await store_update(key, value, rev, prev)

    stack.store.update = lose_once
    if patch_type == SMP:
        patch = {"status": {"$setElementOrder/conditions": [{"type": "B"}, {"type": "A"}],
                            "conditions": [{"type": "B", "status": "False"}]}}
        want = [{"type": "B", "status": "False"}, {"type": "A", "status": "True"}]
    else:
        patch = {"status": {"conditions": [{"type": "B", "status": "False", "reason": None}]}}
        want = [{"type": "B", "status": "False"}]
    out = await pods.patch("p", patch, patch_type, namespace=NS, subresource="status")
    assert len(calls) == 2 and [{k: c[k] for k in ("type", "status")} for c in out["status"]["conditions"]] == want


async def test_a_patch_does_not_fail_on_what_the_live_object_held_before(stack):
    """Upstream patches the object it decoded from storage, which cannot hold an unknown field;
    one left in a stored object (a store-level write, an older schema) does not fail a status
    patch that does not touch it."""
    from nanokube.apiserver.cache import stored_value

    pods = stack.client.resource("", "v1", "pods")
    p = await pods.create({"metadata": {"name": "p", "namespace": NS}, "spec": {"containers": [{"name": "c", "image": "x"}]}})
    odd = {**p, "metadata": {**p["metadata"], "shade": "dark"}, "spec": {**p["spec"], "colour": "red"}}
    kv = await stack.store.update("/registry/pods/default/p", stored_value(odd), int(p["metadata"]["resourceVersion"]))
    await stack.cache.wait_for(kv.mod_revision)
    out = await pods.patch("p", {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}, SMP, namespace=NS,
                           subresource="status")
    assert out["status"]["conditions"] == [{"type": "Ready", "status": "False", "lastProbeTime": None,
                                            "lastTransitionTime": None}]
    with pytest.raises(APIError) as e:  # a patch of the spec decodes the spec, and finds it
        await pods.patch("p", {"spec": {"activeDeadlineSeconds": 5}}, SMP, namespace=NS)
    assert 'unknown field "spec.colour"' in e.value.message
    with pytest.raises(APIError) as e:  # and one of the metadata, the metadata
        await pods.patch("p", {"metadata": {"labels": {"a": "b"}}}, SMP, namespace=NS)
    assert 'unknown field "metadata.shade"' in e.value.message


async def test_deleting_a_namespace_leaves_the_cached_version_it_replaced_alone(stack):
    """A namespace turns Terminating in a new status: the version cached before the delete
    (which readers and the watch history hold) keeps its own."""
    ns = stack.client.resource("", "v1", "namespaces")
    await ns.create({"metadata": {"name": "going"}})
    key = stack.rest.index.get("", "v1", "namespaces").key(None, "going")
    before = stack.rest.cache.get(key).obj
    await ns.delete("going")
    assert stack.rest.cache.get(key).obj["status"]["phase"] == "Terminating"
    assert before["status"]["phase"] == "Active"


async def test_a_write_answers_with_the_json_it_stored_when_it_serves_the_cached_object(stack):
    rest = stack.rest
    res = rest.index.get("", "v1", "configmaps")
    created = await rest.create(res, "v1", NS, cm("a", {"app": "x"}), WriteOptions())
    assert created.obj is stack.cache.get(res.key(NS, "a")).obj
    assert served_json(*created.stored) == orjson.dumps(created.obj) + b"\n"
    updated = await rest.update(res, "v1", NS, "a", {**created.obj, "data": {"k": "w"}}, WriteOptions())
    assert served_json(*updated.stored) == orjson.dumps(updated.obj) + b"\n" and updated.obj["data"] == {"k": "w"}
    patched = await rest.patch(res, "v1", NS, "a", MERGE_PATCH, b'{"metadata":{"annotations":{"a":"1"}}}', WriteOptions())
    assert served_json(*patched.stored) == orjson.dumps(patched.obj) + b"\n"
    assert patched.obj["metadata"]["resourceVersion"] != updated.obj["metadata"]["resourceVersion"]
    # served in another version than stored (autoscaling/v1 of a v2 object): encoded as converted
    hpas = rest.index.get("autoscaling", "v1", "horizontalpodautoscalers")
    hpa = {"metadata": {"name": "h"}, "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "d", "apiVersion": "apps/v1"},
                                               "maxReplicas": 3, "targetCPUUtilizationPercentage": 50}}
    converted = await rest.create(hpas, "v1", NS, hpa, WriteOptions())
    assert converted.stored is None and converted.obj["apiVersion"] == "autoscaling/v1"


async def test_a_write_hands_the_store_the_cached_kv_its_precondition_names(tmp_path):
    """GuaranteedUpdate's cachedExistingObject: a status patch, a patch, an update, a binding and
    graceful deletes (of pods on a node) each hand the store the watch cache's KV of the object, so
    SQLite reads no row first, also after the object was served whole (its JSON kept in place of the
    stored bytes, as a GET or a watch event leaves it); each event's prev is what was stored."""
    stack = await make_stack(store=SQLiteStore(str(tmp_path / "db")))
    try:
        pods, key = stack.client.resource("", "v1", "pods"), "/registry/pods/default/p"
        made = await pods.create({"metadata": {"name": "p", "namespace": NS},
                                  "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x"}]}})
        events, statements, stored = [], [], []
        stack.store.follow(int(made["metadata"]["resourceVersion"]), events.append)
        stack.store._db.set_trace_callback(statements.append)

        async def written(write):
            stored.append(await stack.store.get(key))
            statements.clear()
            out = await write
            assert not [q for q in statements if q.startswith("SELECT")]
            return out

        cond = {"type": "PodScheduled", "status": "False"}
        await written(pods.patch("p", {"status": {"conditions": [cond]}}, STRATEGIC_PATCH, namespace=NS,
                                 subresource="status"))
        got = await written(pods.patch("p", {"metadata": {"labels": {"a": "1"}}}, MERGE_PATCH, namespace=NS))
        assert orjson.loads(stack.cache.get(key).raw) == got
        await written(pods.update({**got, "metadata": {**got["metadata"], "annotations": {"b": "2"}}}))
        await written(pods.delete("p", NS))
        assert orjson.loads(events[-1].kv.value)["metadata"]["deletionTimestamp"]
        assert await stack.store.get(key) == events[-1].kv
        await pods.create({"metadata": {"name": "q", "namespace": NS}, "spec": {"containers": [{"name": "c", "image": "x"}]}})
        pods_res, key = stack.rest.index.get("", "v1", "pods"), "/registry/pods/default/q"
        await written(Subresources(stack.rest).bind(pods_res, NS, "q", {
            "metadata": {"name": "q"}, "target": {"kind": "Node", "name": "n1"}}, WriteOptions()))
        await written(pods.delete("q", NS))
        # the deletes that remove the key: a pod's at grace 0, an object's without a grace period,
        # and one's whose last finalizer goes (as the GC's and the namespace controller's)
        await written(pods.delete("q", NS, grace_period_seconds=0))
        cms = stack.client.resource("", "v1", "configmaps")
        for name, finalizers in (("plain", []), ("held", ["example.com/hold"])):
            await cms.create({"metadata": {"name": name, "namespace": NS, "finalizers": finalizers}})
            key = f"/registry/configmaps/default/{name}"
            await written(cms.delete(name, NS))
        got = await cms.get("held", NS)
        await written(cms.update({**got, "metadata": {**got["metadata"], "finalizers": []}}))
        assert [e.type for e in events[-6:]] == [DELETE, PUT, DELETE, PUT, PUT, DELETE]
        assert [await stack.store.get(k) for k in (key, "/registry/pods/default/q")] == [None, None]
        assert [e.prev for e in events if e.prev] == stored
    finally:
        await stack.close()


async def test_updates_without_a_resource_version_win_races_with_other_writes(cms):
    """Upstream's GuaranteedUpdate: an update that names no resourceVersion is applied to whatever
    is stored when it is written, tried again on a newer object when another write came first."""
    made = await cms.create(cm("busy"))
    body = {k: v for k, v in made.items() if k != "metadata"}
    done = await asyncio.gather(*(cms.update({**body, "metadata": {"name": "busy", "namespace": NS, "labels": {"n": str(i)}},
                                              "data": {"k": str(i)}}) for i in range(20)))
    assert sorted(int(d["data"]["k"]) for d in done) == list(range(20))
    revs = [int(d["metadata"]["resourceVersion"]) for d in done]
    assert len(set(revs)) == 20
    last = done[revs.index(max(revs))]
    assert (await cms.get("busy", NS))["data"] == last["data"]
    stale = {**made, "data": {"k": "lost"}}
    with pytest.raises(APIError) as e:
        await cms.update(stale)
    assert e.value.code == 409, "an update naming an old resourceVersion still fails its precondition"


async def test_an_update_cannot_start_or_change_a_deletion(cms):
    """ValidateObjectMetaUpdate: deletionTimestamp and deletionGracePeriodSeconds are immutable to an
    update; BeforeUpdate keeps the stored ones where the body leaves them out."""
    live = await cms.create(cm("d"))
    for field, value in (("deletionTimestamp", "2026-01-01T00:00:00Z"), ("deletionGracePeriodSeconds", 30)):
        with pytest.raises(APIError) as e:
            await cms.update({**live, "metadata": {**live["metadata"], field: value}})
        assert e.value.code == 422
        assert f"metadata.{field}: Invalid value: " in e.value.message and "field is immutable" in e.value.message
    assert "deletionTimestamp" not in (await cms.get("d", NS))["metadata"]
    live = await cms.update({**live, "metadata": {**live["metadata"], "finalizers": ["example.com/hold"]}})
    await cms.delete("d", NS)
    deleting = await cms.get("d", NS)
    since = deleting["metadata"]["deletionTimestamp"]
    body = {**deleting, "data": {"k": "w"}, "metadata": {
        k: v for k, v in deleting["metadata"].items() if k not in ("deletionTimestamp", "deletionGracePeriodSeconds")}}
    kept = await cms.update(body)
    assert kept["metadata"]["deletionTimestamp"] == since and kept["data"] == {"k": "w"}
    await cms.update({**kept, "metadata": {**kept["metadata"], "finalizers": []}})


async def test_over_http_a_generated_name_that_is_taken_is_drawn_again(tmp_path):
    """RetryGenerateName: up to 8 names are drawn for a generateName create before a 409; a name
    the client gave is never replaced. (The fuzzer's ReplicaSet of 2^31 replicas got 1,786 409s
    among some 200,000 pods of one prefix.)"""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    from tests.served import served

    async with served(tmp_path) as (server, api_client):
        drawn = iter(["taken", "taken", "free1"] + ["taken"] * 8)
        server.rest.name_suffix = lambda prefix: next(drawn)
        core = client.CoreV1Api(api_client)
        body = {"metadata": {"name": "x-taken"}}
        await asyncio.to_thread(core.create_namespaced_config_map, "default", body)
        got = await asyncio.to_thread(core.create_namespaced_config_map, "default", {"metadata": {"generateName": "x-"}})
        assert got.metadata.name == "x-free1"
        with pytest.raises(ApiException) as e:  # eight draws, all taken
            await asyncio.to_thread(core.create_namespaced_config_map, "default", {"metadata": {"generateName": "x-"}})
        assert e.value.status == 409
        status = orjson.loads(e.value.body)  # CheckGeneratedNameError's conflict
        assert (status["reason"], status["message"], status["details"]) == (
            "AlreadyExists", 'configmaps "x-taken" already exists, the server was not able to generate a unique name '
            "for the object", {"name": "x-taken", "kind": "configmaps", "retryAfterSeconds": 1})
        assert next(drawn, None) is None
        with pytest.raises(ApiException) as e:
            await asyncio.to_thread(core.create_namespaced_config_map, "default", body)
        assert e.value.status == 409
        names = [c.metadata.name for c in (await asyncio.to_thread(core.list_namespaced_config_map, "default")).items]
        assert sorted(n for n in names if n.startswith("x-")) == ["x-free1", "x-taken"]


async def test_applying_a_field_a_custom_resource_schema_does_not_declare_is_a_bad_request(tmp_path):
    """Upstream's SSA types the apply configuration against the CRD's schema before any fieldValidation
    check: an undeclared field (outside x-kubernetes-preserve-unknown-fields) is refused whatever
    fieldValidation says, with structured-merge-diff's message (a 400, as kubernetes#139255 makes
    upstream's 500); the preserved subtree takes anything."""
    from tests.served import served

    group = "typed.example.com"
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": f"widgets.{group}"},
           "spec": {"group": group, "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                        "type": "object", "properties": {"spec": {"type": "object", "properties": {
                            "size": {"type": "integer"},
                            "open": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}}}]}}
    path = f"/apis/{group}/v1/namespaces/default/widgets"

    async with served(tmp_path) as (_, api):
        def call(method: str, url: str, body, ctype: str = "application/json", query=()) -> tuple[int, dict]:
            request = api.param_serialize(method, url, query_params=list(query), body=body,
                                          header_params={"Content-Type": ctype, "Accept": "application/json"})
            response = api.call_api(*request[:4])
            response.read()
            return response.status, orjson.loads(response.data)

        async def apply(spec: dict, validation: str) -> tuple[int, dict]:
            body = {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "a", "namespace": "default"},
                    "spec": spec}
            return await asyncio.to_thread(call, "PATCH", f"{path}/a", body, "application/apply-patch+yaml",
                                           [("fieldManager", "m"), ("fieldValidation", validation)])

        assert (await asyncio.to_thread(call, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd))[0] == 201
        for _ in tries():
            if (await asyncio.to_thread(call, "GET", path, None))[0] == 200:
                break
            await asyncio.sleep(0.05)
        head = "failed to create typed patch object (default/a; typed.example.com/v1, Kind=Widget): "
        for validation in ("Strict", "Warn", "Ignore"):
            code, got = await apply({"size": 1, "foo": 1}, validation)
            assert (code, got["message"]) == (400, head + ".spec.foo: field not declared in schema"), validation
            assert got["reason"] == "BadRequest"
        code, got = await apply({"foo": 1, "open": {"x": 1}, "bar": {"y": 2}}, "Ignore")
        assert (code, got["message"]) == (400, head + "errors:\n  .spec.foo: field not declared in schema\n"
                                                       "  .spec.bar: field not declared in schema")
        code, got = await apply({"size": 1, "open": {"anything": {"goes": True}}}, "Strict")
        assert code == 201 and got["spec"]["open"] == {"anything": {"goes": True}}, got
