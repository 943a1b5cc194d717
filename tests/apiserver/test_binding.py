"""pods/binding: sets spec.nodeName and PodScheduled, merges the binding's
annotations, and leaves the cached pod other readers hold untouched."""

import orjson
import pytest

from nanokube.machinery.errors import APIError
from nanokube.machinery.fieldorder import in_upstream_order
from nanokube.apiserver.rest import PATCH_ATTEMPTS, WriteOptions
from nanokube.apiserver.subresources import Subresources
from nanokube.store.sqlite import SQLiteStore
from tests.controllers import make_stack


@pytest.fixture(params=["memory", "sqlite"])
async def env(request, tmp_path):
    """On SQLite a write hands the store the watch cache's KV of the pod, stale when another write
    came between (see `race`)."""
    s = await make_stack(store=SQLiteStore(str(tmp_path / "db")) if request.param == "sqlite" else None)
    yield s, Subresources(s.rest), s.client.resource("", "v1", "pods")
    await s.close()


def binding(name, node, **metadata):
    return {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, **metadata},
            "target": {"kind": "Node", "name": node}}


async def test_binding_assigns_the_node_and_leaves_the_cached_pod_alone(env):
    s, sub, pods = env
    before = await pods.create({"metadata": {"name": "p", "namespace": "default", "annotations": {"a": "1"}},
                                "spec": {"containers": [{"name": "c", "image": "x"}]}})
    pods_res = s.rest.index.get("", "v1", "pods")
    await sub.bind(pods_res, "default", "p", binding("p", "n1", annotations={"b": "2"}), WriteOptions())
    after = await pods.get("p", "default")
    assert after["spec"]["nodeName"] == "n1"
    assert after["metadata"]["annotations"] == {"a": "1", "b": "2"}
    assert [(c["type"], c["status"]) for c in after["status"]["conditions"]] == [("PodScheduled", "True")]
    assert "nodeName" not in before["spec"] and before["metadata"]["annotations"] == {"a": "1"}
    assert "conditions" not in (before.get("status") or {})
    with pytest.raises(APIError) as e:
        await sub.bind(pods_res, "default", "p", binding("p", "n2"), WriteOptions())
    assert e.value.code == 409 and 'already assigned to node "n1"' in e.value.message


async def test_the_cache_holds_the_bound_pod_as_stored(env):
    """The cache takes the bound pod from the binding instead of decoding the stored bytes:
    the same object, in the same order, as a decode of what the store holds."""
    s, sub, pods = env
    await pods.create({"metadata": {"name": "p", "namespace": "default", "labels": {"app": "a"}},
                       "spec": {"containers": [{"name": "c", "image": "x"}]}})
    pods_res = s.rest.index.get("", "v1", "pods")
    await sub.bind(pods_res, "default", "p", binding("p", "n1", annotations={"b": "2"}), WriteOptions())
    key = pods_res.key("default", "p")
    entry = s.rest.cache.get(key)
    kv = await s.rest.store.get(key)
    decoded = in_upstream_order(orjson.loads(kv.value), str(kv.mod_revision))
    assert orjson.dumps(entry.obj) == orjson.dumps(decoded)
    assert entry.obj["spec"]["nodeName"] == "n1"


async def test_binding_a_pod_deleted_after_it_was_read_is_not_found(env, monkeypatch):
    """The pod goes between the binding's read and its write (a scheduler binding a pod a user just
    deleted): 404, as upstream, not an unexpected error."""
    s, sub, pods = env
    await pods.create({"metadata": {"name": "gone", "namespace": "default"},
                       "spec": {"containers": [{"name": "c", "image": "x"}]}})
    real = s.rest.store.update

    async def deleted_first(key, value, rev, prev=None):
        await s.rest.store.delete(key)
        return await real(key, value, rev, prev)

    monkeypatch.setattr(s.rest.store, "update", deleted_first)
    with pytest.raises(APIError) as e:
        await sub.bind(s.rest.index.get("", "v1", "pods"), "default", "gone", binding("gone", "n1"), WriteOptions())
    assert e.value.code == 404 and e.value.reason == "NotFound"


def race(monkeypatch, s, name: str, times: int) -> None:
    """The store's next `times` writes of pod `name` each lose to a label write landing just before
    them (another writer between the subresource's read and its write)."""
    pods, key = s.client.resource("", "v1", "pods"), s.rest.index.get("", "v1", "pods").key("default", name)
    real, left, busy = s.rest.store.update, [times], []

    async def raced(k, value, rev, prev=None):
        if k == key and left[0] and not busy:
            left[0] -= 1
            busy.append(k)
            try:
                await pods.patch(name, {"metadata": {"labels": {"raced": str(left[0])}}}, namespace="default")
            finally:
                busy.pop()
        return await real(k, value, rev, prev)

    monkeypatch.setattr(s.rest.store, "update", raced)


async def test_a_binding_that_loses_a_race_binds_the_pod_that_won_and_a_dry_run_writes_nothing(env, monkeypatch):
    """GuaranteedUpdate: a write between the binding's read and its own is read again and bound with
    the other write kept; a pod that changes under every one of its PATCH_ATTEMPTS tries is a 409."""
    s, sub, pods = env
    pods_res = s.rest.index.get("", "v1", "pods")
    for name in ("p", "q"):
        await pods.create({"metadata": {"name": name, "namespace": "default"},
                           "spec": {"containers": [{"name": "c", "image": "x"}]}})
    await sub.bind(pods_res, "default", "p", binding("p", "n1"), WriteOptions(dry_run=True))
    assert "nodeName" not in (await pods.get("p", "default"))["spec"]
    race(monkeypatch, s, "p", 1)
    await sub.bind(pods_res, "default", "p", binding("p", "n1"), WriteOptions())
    got = await pods.get("p", "default")
    assert (got["spec"]["nodeName"], got["metadata"]["labels"]) == ("n1", {"raced": "0"})
    race(monkeypatch, s, "q", PATCH_ATTEMPTS)
    with pytest.raises(APIError) as e:
        await sub.bind(pods_res, "default", "q", binding("q", "n1"), WriteOptions())
    assert (e.value.code, e.value.message) == (409, 'Operation cannot be fulfilled on pods/binding "q": the object has '
                                                    "been modified; please apply your changes to the latest version "
                                                    "and try again")
    assert "nodeName" not in (await pods.get("q", "default"))["spec"]


async def test_binding_sets_pod_scheduled_in_its_place_moving_its_time_only_on_a_change(tmp_path):
    """podutil.UpdatePodCondition, over HTTP: PodScheduled stays where it was among the pod's
    conditions, and its lastTransitionTime moves only when its status changes."""
    import asyncio

    from kubernetes import client

    from tests.served import served

    then = "2020-01-01T00:00:00Z"
    custom = {"type": "example.com/ready", "status": "True", "lastTransitionTime": then}
    async with served(tmp_path) as (_, api_client):
        core = client.CoreV1Api(api_client)
        for name, was in (("unschedulable", "False"), ("marked", "True")):
            await asyncio.to_thread(core.create_namespaced_pod, "default", {
                "metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "x"}]}})
            scheduled = {"type": "PodScheduled", "status": was, "lastTransitionTime": then}
            if was == "False":
                scheduled |= {"reason": "Unschedulable", "message": "0/1 nodes are available"}
            await asyncio.to_thread(core.patch_namespaced_pod_status, name, "default",
                                    {"status": {"conditions": [scheduled, custom]}})
            await asyncio.to_thread(core.create_namespaced_pod_binding, name, "default",
                                    {"metadata": {"name": name}, "target": {"kind": "Node", "name": "n1"}},
                                    _preload_content=False)
        for name, moved in (("unschedulable", True), ("marked", False)):
            raw = await asyncio.to_thread(core.read_namespaced_pod, name, "default", _preload_content=False)
            pod = orjson.loads(raw.data)
            first, second = pod["status"]["conditions"]
            assert pod["spec"]["nodeName"] == "n1"
            # a value time left out is served null (lastProbeTime: a metav1.Time, not a pointer)
            assert (first["type"], first["status"], second) == ("PodScheduled", "True", {**custom, "lastProbeTime": None})
            assert "reason" not in first and "message" not in first
            assert (first["lastTransitionTime"] != then) is moved


async def test_a_binding_named_for_another_pod_or_none_is_a_400_over_http(tmp_path):
    """BindingREST.Create refuses a Binding whose name is not the URL's before it binds, and the create handler
    one of another namespace before that (slips found by fuzzing: each bound the URL's pod)."""
    import asyncio

    from kubernetes import client
    from kubernetes.client.rest import ApiException

    from tests.served import served

    async with served(tmp_path) as (_, api_client):
        core = client.CoreV1Api(api_client)
        await asyncio.to_thread(core.create_namespaced_pod, "default", {
            "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}})
        for metadata in ({"name": "other"}, {}):
            with pytest.raises(ApiException) as e:
                await asyncio.to_thread(core.create_namespaced_pod_binding, "p", "default",
                                        {"metadata": metadata, "target": {"kind": "Node", "name": "n1"}},
                                        _preload_content=False)
            got = orjson.loads(e.value.body)
            assert (e.value.status, got["reason"], got["message"]) == (
                400, "BadRequest", "name in URL does not match name in Binding object")
        with pytest.raises(ApiException) as e:  # (the create handler's check, before BindingREST's)
            await asyncio.to_thread(core.create_namespaced_pod_binding, "p", "default",
                                    {"metadata": {"name": "p", "namespace": "other"}, "target": {"kind": "Node", "name": "n1"}},
                                    _preload_content=False)
        assert (e.value.status, orjson.loads(e.value.body)["message"]) == (
            400, "the namespace of the provided object does not match the namespace sent on the request")
        pod = await asyncio.to_thread(core.read_namespaced_pod, "p", "default")
        assert pod.spec.node_name is None


async def test_the_in_process_client_gets_the_same_checks(env):
    """The checks sit in bind itself, as upstream's in BindingREST: a component's in-process client is
    refused a Binding naming another pod, none, or another namespace, as an HTTP client is."""
    _, _, pods = env
    await pods.create({"metadata": {"name": "p", "namespace": "default"},
                       "spec": {"containers": [{"name": "c", "image": "x"}]}})
    for metadata, message in (({"name": "other"}, "name in URL does not match name in Binding object"),
                              ({}, "name in URL does not match name in Binding object"),
                              ({"name": "p", "namespace": "other"},
                               "the namespace of the provided object does not match the namespace sent on the request")):
        with pytest.raises(APIError) as e:
            await pods.create_subresource("p", "binding", {"metadata": metadata, "target": {"kind": "Node", "name": "n1"}},
                                          "default")
        assert (e.value.code, e.value.reason, e.value.message) == (400, "BadRequest", message)
    assert "nodeName" not in (await pods.get("p", "default"))["spec"]


async def test_a_binding_of_another_namespace_to_the_bindings_collection_is_a_400(tmp_path):
    """POST .../namespaces/{ns}/bindings (LegacyBindingREST: the Binding names its pod) takes the
    create handler's namespace check too; it bound the pod of the URL's namespace before."""
    import asyncio

    from kubernetes import client
    from kubernetes.client.rest import ApiException

    from tests.served import served

    async with served(tmp_path) as (_, api_client):
        core = client.CoreV1Api(api_client)
        await asyncio.to_thread(core.create_namespaced_pod, "default", {
            "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}})
        with pytest.raises(ApiException) as e:
            await asyncio.to_thread(core.create_namespaced_binding, "default",
                                    {"metadata": {"name": "p", "namespace": "other"}, "target": {"kind": "Node", "name": "n1"}},
                                    _preload_content=False)
        assert (e.value.status, orjson.loads(e.value.body)["message"]) == (
            400, "the namespace of the provided object does not match the namespace sent on the request")
        assert (await asyncio.to_thread(core.read_namespaced_pod, "p", "default")).spec.node_name is None
        await asyncio.to_thread(core.create_namespaced_binding, "default",
                                {"metadata": {"name": "p"}, "target": {"kind": "Node", "name": "n1"}},
                                _preload_content=False)
        assert (await asyncio.to_thread(core.read_namespaced_pod, "p", "default")).spec.node_name == "n1"


async def test_a_binding_naming_another_uid_or_resource_version_is_the_storages_conflict(env):
    """setPodNodeAndMetadata hands the binding's uid and resourceVersion to GuaranteedUpdate as
    preconditions, checked before its update function: either stale is the storage's 409 on pods, even
    for a pod bound already, and binds nothing. A stale resourceVersion was ignored (a 201), and a stale
    uid was reported after the node already assigned, on pods/binding (found by fuzz64's binding probes)."""
    s, sub, pods = env
    pods_res = s.rest.index.get("", "v1", "pods")
    pod = await pods.create({"metadata": {"name": "p", "namespace": "default"},
                             "spec": {"containers": [{"name": "c", "image": "x"}]}})
    md = pod["metadata"]
    stale = 'Operation cannot be fulfilled on pods "p": StorageError: invalid object, Code: 4, Key: ' \
            '/registry/pods/default/p, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: '
    for metadata, words in (({"resourceVersion": "1"}, f"ResourceVersion in precondition: 1, ResourceVersion in "
                                                       f"object meta: {md['resourceVersion']}"),
                            ({"uid": "other"}, f"UID in precondition: other, UID in object meta: {md['uid']}")):
        for dry_run in (True, False):
            with pytest.raises(APIError) as e:
                await sub.bind(pods_res, "default", "p", binding("p", "n1", **metadata), WriteOptions(dry_run=dry_run))
            assert (e.value.code, e.value.message) == (409, stale + words)
    assert "nodeName" not in (await pods.get("p", "default"))["spec"]
    await sub.bind(pods_res, "default", "p", binding("p", "n1", uid=md["uid"], resourceVersion=md["resourceVersion"]),
                   WriteOptions())
    with pytest.raises(APIError) as e:  # (the preconditions first: a pod bound already is still a stale uid's)
        await sub.bind(pods_res, "default", "p", binding("p", "n2", uid="other"), WriteOptions())
    assert e.value.message.startswith(stale + "UID in precondition: other")
    assert (await pods.get("p", "default"))["spec"]["nodeName"] == "n1"
