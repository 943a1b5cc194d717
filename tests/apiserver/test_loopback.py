"""LocalClient's subresource POSTs run the API server's own pods/binding
and pods/eviction code, so in-process and HTTP callers get one behaviour;
each of its requests gives the event loop a turn, as a network round trip does."""

import asyncio
import copy

import orjson
import pytest

from nanokube.clock import VirtualClock
from nanokube.machinery.errors import APIError


def binding(name: str, node: str, uid: str | None = None) -> dict:
    md = {"name": name, "namespace": "default", **({"uid": uid} if uid else {})}
    return {"apiVersion": "v1", "kind": "Binding", "metadata": md, "target": {"kind": "Node", "name": node}}


async def new_pod(client, name: str) -> dict:
    return await client.resource("", "v1", "pods").create(
        {"metadata": {"name": name, "namespace": "default"}, "spec": {"containers": [{"name": "c", "image": "pause"}]}})


async def test_binding_assigns_the_node_once(stack):
    pods = stack.client.resource("", "v1", "pods")
    created = await new_pod(stack.client, "p")
    status = await pods.create_subresource("p", "binding", binding("p", "n1", created["metadata"]["uid"]), "default")
    assert status["status"] == "Success"
    got = await pods.get("p", "default")
    assert got["spec"]["nodeName"] == "n1"
    assert [c["status"] for c in got["status"]["conditions"] if c["type"] == "PodScheduled"] == ["True"]
    with pytest.raises(APIError) as e:
        await pods.create_subresource("p", "binding", binding("p", "n2"), "default")
    assert e.value.code == 409 and 'already assigned to node "n1"' in e.value.message


async def test_binding_refuses_a_gated_pod_and_a_target_other_than_a_node(stack):
    """setPodNodeAndMetadata rejects binding a scheduling un-ready pod (409), and
    ValidatePodBinding a target of another kind (422, its field path)."""
    pods = stack.client.resource("", "v1", "pods")
    await pods.create({"metadata": {"name": "gated", "namespace": "default"},
                       "spec": {"schedulingGates": [{"name": "example.com/hold"}],
                                "containers": [{"name": "c", "image": "pause"}]}})
    with pytest.raises(APIError) as e:
        await pods.create_subresource("gated", "binding", binding("gated", "n1"), "default")
    assert e.value.code == 409 and e.value.message.endswith("pod gated has non-empty .spec.schedulingGates")
    assert "nodeName" not in (await pods.get("gated", "default"))["spec"]
    await new_pod(stack.client, "p")
    wrong = binding("p", "n1")
    wrong["target"]["kind"] = "Pod"
    with pytest.raises(APIError) as e:
        await pods.create_subresource("p", "binding", wrong, "default")
    assert e.value.code == 422
    assert [(c["field"], c["reason"]) for c in e.value.details["causes"]] == [("target.kind", "FieldValueNotSupported")]
    assert "nodeName" not in (await pods.get("p", "default"))["spec"]


async def test_binding_checks_the_uid_precondition(stack):
    pods = stack.client.resource("", "v1", "pods")
    await new_pod(stack.client, "p")
    with pytest.raises(APIError) as e:
        await pods.create_subresource("p", "binding", binding("p", "n1", "other-uid"), "default")
    assert e.value.code == 409
    assert "nodeName" not in (await pods.get("p", "default"))["spec"]


async def test_eviction_deletes_the_pod(stack):
    pods = stack.client.resource("", "v1", "pods")
    await new_pod(stack.client, "p")
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p", "namespace": "default"}}
    await pods.create_subresource("p", "eviction", body, "default")
    with pytest.raises(APIError) as e:
        await pods.get("p", "default")
    assert e.value.code == 404, "an unscheduled pod goes at once"


async def test_other_subresources_are_not_allowed(stack):
    with pytest.raises(APIError) as e:
        await stack.client.resource("", "v1", "pods").create_subresource("x", "status", {}, "default")
    assert e.value.code == 405


async def test_a_subresource_the_resource_lacks_is_not_found_as_over_http(stack):
    """A path no route serves: 404 with empty details, not a write of the object itself (a namespace
    passed where the subresource goes was taken as the main resource's update)."""
    maps = stack.client.resource("", "v1", "configmaps")
    cm = await maps.create({"metadata": {"name": "x", "namespace": "default"}, "data": {"a": "1"}})
    calls = (maps.update({**cm, "data": {"a": "2"}}, "default"),
             maps.patch("x", {"data": {"a": "2"}}, namespace="default", subresource="status"),
             maps.create_subresource("x", "binding", {}, "default"))
    for call in calls:
        with pytest.raises(APIError) as e:
            await call
        assert (e.value.code, e.value.details) == (404, {})
    assert (await maps.get("x", "default"))["data"] == {"a": "1"}


async def test_a_finalize_update_leaves_the_object_it_replaces_as_it_was(stack):
    """The cached Namespace a client was handed stays as it was after the write (the finalize merge
    copied only the top level, and the update set managedFields on the cached object's metadata)."""
    namespaces = stack.client.resource("", "v1", "namespaces")
    await namespaces.create({"metadata": {"name": "doomed"}, "spec": {"finalizers": ["kubernetes"]}})
    before = await namespaces.get("doomed")
    snapshot = copy.deepcopy(before)
    body = {**before, "metadata": {**before["metadata"]}, "spec": {"finalizers": []}}
    after = await namespaces.update(body, subresource="finalize")
    assert after["spec"]["finalizers"] == [] and after["metadata"]["managedFields"] != snapshot["metadata"]["managedFields"]
    assert before == snapshot


async def test_a_writer_loop_lets_a_runnable_task_run_before_each_create(stack):
    """An in-process component creating in a loop interleaves with the others as a network client
    does: a task that is ready while the loop runs sees every count of creates, not only the last."""
    cms = stack.client.resource("", "v1", "configmaps")
    n = 20
    done: list[int] = []
    seen: list[int] = []

    async def writer():
        for i in range(n):
            await cms.create({"metadata": {"name": f"c{i}", "namespace": "default"}})
            done.append(i)

    async def observer():
        while len(done) < n:
            seen.append(len(done))
            await asyncio.sleep(0)

    await asyncio.gather(writer(), observer())
    assert sorted(set(seen)) == list(range(n))
    assert len((await cms.list("default"))[0]) == n


def deployment(name: str) -> dict:
    labels = {"app": name}
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {
        "replicas": 1, "selector": {"matchLabels": labels},
        "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "pause"}]}}}}


REQUESTS = {
    "get": lambda c: c.resource("", "v1", "configmaps").get("cm", "default"),
    "get of a missing object": lambda c: c.resource("", "v1", "configmaps").get("missing", "default"),
    "list": lambda c: c.resource("", "v1", "configmaps").list("default"),
    "watch": lambda c: c.resource("", "v1", "configmaps").watch("default"),
    "create": lambda c: c.resource("", "v1", "configmaps").create({"metadata": {"name": "new", "namespace": "default"}}),
    "update": lambda c: c.resource("", "v1", "configmaps").update(
        {"metadata": {"name": "cm", "namespace": "default"}, "data": {"k": "v"}}),
    "patch": lambda c: c.resource("", "v1", "configmaps").patch("cm", {"data": {"k": "w"}}, namespace="default"),
    "delete": lambda c: c.resource("", "v1", "configmaps").delete("cm", "default"),
    "deletecollection": lambda c: c.resource("", "v1", "configmaps").delete_collection("default"),
    "get scale": lambda c: c.resource("apps", "v1", "deployments").get_scale("d", "default"),
    "update scale": lambda c: c.resource("apps", "v1", "deployments").update_scale("d", 2, "default"),
    "binding": lambda c: c.resource("", "v1", "pods").create_subresource("p", "binding", binding("p", "n1"), "default"),
}


@pytest.mark.parametrize("verb", list(REQUESTS))
async def test_every_request_gives_the_loop_a_turn(stack, verb):
    """Whatever it asks, and whether it succeeds or fails, a request lets a ready task run before it returns."""
    client = stack.client
    await client.resource("", "v1", "configmaps").create({"metadata": {"name": "cm", "namespace": "default"}})
    await client.resource("apps", "v1", "deployments").create(deployment("d"))
    await new_pod(client, "p")
    turns = 0

    async def ticker():
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    before = turns
    try:
        out = await REQUESTS[verb](client)
    except APIError as e:
        out = e
    after = turns
    task.cancel()
    assert after > before
    if verb == "get of a missing object":
        assert isinstance(out, APIError) and out.code == 404
    else:
        assert not isinstance(out, APIError), out
    if verb == "watch":
        await out.aclose()


async def test_a_review_is_answered_by_the_servers_reviews_and_never_stored(tmp_path):
    """A SubjectAccessReview created through the loopback client (csrapproving's, in `up`) is
    answered as over HTTP, by the server's authorizer."""
    from nanokube.apiserver.app import APIServer
    from nanokube.apiserver.loopback import LocalClient
    from nanokube.pki.ca import ensure_pki
    from nanokube.store.memory import MemoryStore

    server = APIServer(MemoryStore(), ensure_pki(str(tmp_path)), port=0)
    await server.start()
    try:
        reviews = LocalClient(server.rest).resource("authorization.k8s.io", "v1", "subjectaccessreviews")
        attrs = {"group": "certificates.k8s.io", "resource": "certificatesigningrequests", "verb": "create",
                 "subresource": "nodeclient"}
        admin = await reviews.create({"spec": {"user": "root", "groups": ["system:masters"], "resourceAttributes": attrs}})
        nobody = await reviews.create({"spec": {"user": "bob", "groups": ["system:authenticated"],
                                                "resourceAttributes": attrs}})
    finally:
        await server.stop()
    assert (admin["kind"], admin["status"]) == ("SubjectAccessReview", {"allowed": True, "reason": 'allowed by group "system:masters"'})
    assert nobody["status"] == {"allowed": False}


EVENT = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "p.1", "namespace": "default"},
         "eventTime": "2026-12-05T22:00:00.123456Z", "reportingController": "default-scheduler",
         "reportingInstance": "default-scheduler-h", "action": "Scheduling", "reason": "FailedScheduling",
         "type": "Warning", "note": "0/1 nodes are available",
         "regarding": {"apiVersion": "v1", "kind": "Pod", "name": "p", "namespace": "default", "uid": "u"}}


@pytest.mark.parametrize("level", ["", "RequestResponse"])
async def test_a_create_whose_answer_is_dropped_is_stored_and_audited_as_any(stack, tmp_path, level):
    """An Event recorder's create (response=False) gets None instead of the Event converted back to
    events.k8s.io/v1; it is stored as any create, its audit line names the object asked for (as
    upstream, with no uid or resourceVersion: the request's, not the answer's), and a policy logging
    the response logs it in the request's version."""
    from nanokube.apiserver import audit_policy
    from nanokube.apiserver.audit import AuditLog

    policy = audit_policy.parse({"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": ["RequestReceived"],
                                 "rules": [{"level": level}]}) if level else None
    stack.rest.audit = audit = AuditLog(str(tmp_path / "audit.log"), policy=policy)
    events = stack.client.resource("events.k8s.io", "v1", "events")
    try:
        assert await events.create(EVENT, response=False) is None
        answered = await events.create({**EVENT, "metadata": {"name": "p.2", "namespace": "default"}})
    finally:
        audit.close()
        stack.rest.audit = None
    stored = await events.get("p.1", "default")
    assert (stored["note"], stored["regarding"]) == (EVENT["note"], EVENT["regarding"])
    assert answered["note"] == EVENT["note"] and answered["apiVersion"] == "events.k8s.io/v1"
    dropped, kept = [orjson.loads(line) for line in (tmp_path / "audit.log").read_bytes().splitlines()]
    assert dropped["objectRef"] == {"resource": "events", "namespace": "default", "name": "p.1",
                                    "apiGroup": "events.k8s.io", "apiVersion": "v1"}
    assert dropped["responseStatus"] == kept["responseStatus"] == {"metadata": {}, "code": 201}
    if level:
        assert dropped["responseObject"] == stored
        assert kept["responseObject"] == answered
    else:
        assert "responseObject" not in dropped


async def test_a_create_hands_the_server_its_json_as_an_http_body_does(stack, monkeypatch):
    """The server judges a loopback create's size (whether its checks leave the loop) by the JSON the
    client's copy was made from, as by an HTTP request's body, not by encoding the object again."""
    from nanokube.apiserver import rest

    sizes = []
    judge = rest._large
    monkeypatch.setattr(rest, "_large", lambda obj, size=0: sizes.append((size, obj == sent)) or judge(obj, size))
    small = {"metadata": {"name": "small", "namespace": "default"}, "data": {"k": "v"}}
    large = {"metadata": {"name": "large", "namespace": "default"}, "data": {"k": "v" * rest.OFF_LOOP_OBJECT}}
    configmaps = stack.client.resource("", "v1", "configmaps")
    for sent in (small, large):
        await configmaps.create(sent)
    assert sizes == [(len(orjson.dumps(small)), True), (len(orjson.dumps(large)), True)]
    assert (await configmaps.get("large", "default"))["data"] == large["data"]


async def test_a_streaming_list_ends_its_initial_events_with_a_bookmark_and_goes_on_losing_nothing(stack):
    """A watch with sendInitialEvents, as an informer over the in-process client asks for its list: the
    objects as ADDED, the initial-events-end bookmark at their resourceVersion, then the changes made
    since (those made before the next event is asked for included), and no watcher left once closed."""
    pods = stack.client.resource("", "v1", "pods")
    for name in ("a", "b"):
        await new_pod(stack.client, name)
    before = stack.cache.watcher_count
    stream = await pods.watch(send_initial_events=True)
    try:
        got = [await anext(stream) for _ in range(3)]
        assert [(t, o["metadata"]["name"]) for t, o in got[:2]] == [("ADDED", "a"), ("ADDED", "b")]
        typ, mark = got[2]
        assert typ == "BOOKMARK" and mark["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
        assert mark["metadata"]["resourceVersion"] == (await pods.list())[1]
        await new_pod(stack.client, "c")
        await pods.delete("a", "default", grace_period_seconds=0)
        later = [await anext(stream) for _ in range(2)]
        assert [(t, o["metadata"]["name"]) for t, o in later] == [("ADDED", "c"), ("DELETED", "a")]
    finally:
        await stream.aclose()
    assert stack.cache.watcher_count == before


async def test_a_streaming_list_goes_on_without_periodic_bookmarks(stack):
    """After its initial-events-end bookmark an in-process streaming list is a plain watch: no
    bookmark a minute on the server's clock (each would wake a simulated run), and the next event is
    the next change, however long that takes."""
    clock = stack.rest.clock = VirtualClock()
    pods = stack.client.resource("", "v1", "pods")
    await new_pod(stack.client, "a")
    stream = await pods.watch(send_initial_events=True)
    assert [typ for typ, _ in [await anext(stream) for _ in range(2)]] == ["ADDED", "BOOKMARK"]
    following = asyncio.ensure_future(anext(stream))  # the watch goes on, waiting for its next event
    try:
        await clock.advance(600)
        assert clock.wakeups == 0 and not following.done()
        await new_pod(stack.client, "b")
        typ, obj = await asyncio.wait_for(following, 5)
        assert (typ, obj["metadata"]["name"]) == ("ADDED", "b")
    finally:
        following.cancel()
        await asyncio.gather(following, return_exceptions=True)
        await stream.aclose()


async def test_a_get_reads_another_api_servers_write_at_once_as_over_http(tmp_path):
    """A GET without a resourceVersion is the most recent object, as over HTTP: the loopback client's
    (the controllers in `up`) reads a write another API server made to the shared store, though its
    watch cache has not taken it yet (two workers' stores on one SQLite file; the bell's wake-up
    unread, as on a busy loop or an etcd watch that trails)."""
    from nanokube.apiserver.app import APIServer
    from nanokube.apiserver.loopback import LocalClient
    from nanokube.store.sqlite import SQLiteStore

    db = str(tmp_path / "db")
    here, other = APIServer(SQLiteStore(db, shared=True), None, port=0), APIServer(SQLiteStore(db, shared=True), None, port=0)
    for s in (here, other):
        await s.store.start()
        await s.cache.start()
    bell = here.store.inner._bell
    try:
        mine, theirs = (LocalClient(s.rest).resource("", "v1", "configmaps") for s in (here, other))
        await LocalClient(here.rest).resource("", "v1", "namespaces").create({"metadata": {"name": "default"}})
        made = await mine.create({"metadata": {"name": "a", "namespace": "default"}, "data": {"k": "0"}})
        await other.cache.wait_for(int(made["metadata"]["resourceVersion"]))
        bell._loop.remove_reader(bell.sock.fileno())
        patched = await theirs.patch("a", {"data": {"k": "1"}}, namespace="default")
        assert here.cache.rev < int(patched["metadata"]["resourceVersion"])  # the cache trails
        got = await mine.get("a", "default")
        assert (got["data"], got["metadata"]["resourceVersion"]) == ({"k": "1"}, patched["metadata"]["resourceVersion"])
    finally:
        bell._loop.add_reader(bell.sock.fileno(), bell._read)
        for s in (other, here):
            await s.cache.stop()
            await s.store.close()
