"""LocalClient's subresource POSTs run the API server's own pods/binding
and pods/eviction code, so in-process and HTTP callers get one behaviour."""

import copy

import pytest

from nanokube.machinery.errors import APIError
from tests.controllers import make_stack


@pytest.fixture
async def stack():
    s = await make_stack()
    yield s
    await s.close()


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
        await stack.client.resource("", "v1", "configmaps").create_subresource("x", "binding", {}, "default")
    assert e.value.code == 405


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
