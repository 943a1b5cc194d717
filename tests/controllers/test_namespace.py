import pytest

from nanokube.apiserver.loopback import LocalClient
from nanokube.machinery.errors import APIError
from nanokube.controllers.namespace import NamespaceController
from tests.controllers import eventually, make_stack, over_http, serve_widgets


@pytest.fixture
async def env():
    s = await make_stack()
    ctrl = NamespaceController(s.client)
    await ctrl.start()
    yield s.client
    await ctrl.stop()
    await s.close()


def absent(rc, name, namespace=None):
    async def check():
        try:
            await rc.get(name, namespace)
        except APIError as e:
            return e.code == 404
        return False
    return check


async def test_deleting_a_namespace_removes_contents_then_itself(env):
    namespaces = env.resource("", "v1", "namespaces")
    cms = env.resource("", "v1", "configmaps")
    await namespaces.create({"metadata": {"name": "doomed"}})
    await cms.create({"metadata": {"name": "a", "namespace": "doomed"}})
    await cms.create({"metadata": {"name": "held", "namespace": "doomed", "finalizers": ["example.com/hold"]}})
    await namespaces.delete("doomed")
    ns = await namespaces.get("doomed")
    assert ns["metadata"]["deletionTimestamp"] and ns["status"]["phase"] == "Terminating"
    with pytest.raises(APIError) as e:
        await cms.create({"metadata": {"name": "late", "namespace": "doomed"}})
    assert e.value.code == 403 and "being terminated" in e.value.message
    assert await eventually(absent(cms, "a", "doomed"))
    held = await cms.get("held", "doomed")
    assert held["metadata"]["deletionTimestamp"]
    assert (await namespaces.get("doomed"))["spec"]["finalizers"] == ["kubernetes"]
    await cms.patch("held", {"metadata": {"finalizers": None}}, namespace="doomed")
    assert await eventually(absent(cms, "held", "doomed"))
    assert await eventually(absent(namespaces, "doomed"))


def _conditions(ns: dict) -> dict:
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in ns["status"].get("conditions") or []}


async def test_a_namespace_held_by_finalizers_says_so_in_its_conditions(env):
    """The deleter's conditions, as upstream's: what remains, and which finalizers hold it."""
    namespaces = env.resource("", "v1", "namespaces")
    cms = env.resource("", "v1", "configmaps")
    await namespaces.create({"metadata": {"name": "stuck"}})
    for name in ("a", "b"):
        await cms.create({"metadata": {"name": name, "namespace": "stuck", "finalizers": ["example.com/hold"]}})
    await namespaces.delete("stuck")

    async def reported():
        ns = await namespaces.get("stuck")
        return ns if "NamespaceContentRemaining" in _conditions(ns) else None

    ns = await eventually(reported)
    assert [c["type"] for c in ns["status"]["conditions"]] == [
        "NamespaceDeletionDiscoveryFailure", "NamespaceDeletionGroupVersionParsingFailure",
        "NamespaceDeletionContentFailure", "NamespaceContentRemaining", "NamespaceFinalizersRemaining"]
    assert _conditions(ns) == {
        "NamespaceDeletionDiscoveryFailure": ("False", "ResourcesDiscovered", "All resources successfully discovered"),
        "NamespaceDeletionGroupVersionParsingFailure": (
            "False", "ParsedGroupVersions", "All legacy kube types successfully parsed"),
        "NamespaceDeletionContentFailure": (
            "False", "ContentDeleted", "All content successfully deleted, may be waiting on finalization"),
        "NamespaceContentRemaining": (
            "True", "SomeResourcesRemain", "Some resources are remaining: configmaps. has 2 resource instances"),
        "NamespaceFinalizersRemaining": (
            "True", "SomeFinalizersRemain",
            "Some content in the namespace has finalizers remaining: example.com/hold in 2 resource instances"),
    }
    for name in ("a", "b"):
        await cms.patch(name, {"metadata": {"finalizers": None}}, namespace="stuck")
    assert await eventually(absent(namespaces, "stuck"))


async def test_an_emptied_namespace_is_finalized_over_its_new_conditions_without_a_conflict(env, caplog):
    """The pass that writes the deletion conditions finalizes the namespace it wrote, not the
    informer's older copy (which failed with a conflict and a warning, then took another pass)."""
    namespaces = env.resource("", "v1", "namespaces")
    await namespaces.create({"metadata": {"name": "brief"}})
    await env.resource("", "v1", "configmaps").create({"metadata": {"name": "a", "namespace": "brief"}})
    await namespaces.delete("brief")
    assert await eventually(absent(namespaces, "brief"))
    assert not [r.getMessage() for r in caplog.records if r.levelno >= 30]


async def test_over_http_custom_resources_whose_crd_came_later_are_emptied_at_once():
    """Over HTTP the controller's client read discovery at its start; each deletion pass reads it
    again, as upstream's deleter asks discovery, so a custom resource whose CRD came after the
    controller started goes with its namespace without waiting for any period."""
    async with over_http(NamespaceController) as (server, client):
        local = LocalClient(server.rest)
        await serve_widgets(server, "ns.example.com")
        namespaces = local.resource("", "v1", "namespaces")
        await namespaces.create({"metadata": {"name": "crs"}})
        widgets = local.resource("ns.example.com", "v1", "widgets")
        await widgets.create({"apiVersion": "ns.example.com/v1", "kind": "Widget",
                              "metadata": {"name": "w", "namespace": "crs"}})
        assert client.index.by_kind("ns.example.com", "Widget") is None
        await namespaces.delete("crs")
        assert await eventually(absent(widgets, "w", "crs"))
        assert await eventually(absent(namespaces, "crs"))
