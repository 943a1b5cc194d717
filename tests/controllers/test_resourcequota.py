"""The resource-quota controller: status.hard mirrors the spec, status.used
counts what the namespace's objects charge (compute, extended resources,
DRA devices by class, object counts, scopes), and drops when objects go."""

import pytest

from nanokube.apiserver.loopback import LocalClient
from nanokube.controllers.resourcequota import ResourceQuotaController
from nanokube.controllers.base import TURN
from tests.controllers import eventually, make_stack, over_http, serve_widgets, turns_during


@pytest.fixture
async def env():
    s = await make_stack()
    ctrl = ResourceQuotaController(s.client)
    await ctrl.start()
    yield s.client
    await ctrl.stop()
    await s.close()


def used_is(client, expected, name="q"):
    async def check():
        q = await client.resource("", "v1", "resourcequotas").get(name, "default")
        return (q.get("status") or {}).get("used") == expected and q
    return check


def pod(name, resources=None, **spec):
    c = {"name": "c", "image": "busybox", **({"resources": resources} if resources else {})}
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {"containers": [c], **spec}}


async def test_used_follows_pods_claims_and_counts(env):
    client = env
    hard = {"pods": "10", "requests.cpu": "4", "limits.memory": "8Gi", "requests.nvidia.com/gpu": "4",
            "gpu.nanokube.io.deviceclass.resource.k8s.io/devices": "8", "count/configmaps": "5"}
    quotas = client.resource("", "v1", "resourcequotas")
    await quotas.create({"metadata": {"name": "q", "namespace": "default"}, "spec": {"hard": hard}})
    q = await eventually(used_is(client, {k: "0" for k in hard}))
    assert q["status"]["hard"] == hard
    pods = client.resource("", "v1", "pods")
    await pods.create(pod("a", {"requests": {"cpu": "500m"}, "limits": {"memory": "1Gi", "nvidia.com/gpu": "2"}}))
    await pods.create(pod("b", {"requests": {"cpu": "1"}, "limits": {"memory": "512Mi"}}))
    await client.resource("resource.k8s.io", "v1", "resourceclaims").create({
        "metadata": {"name": "c", "namespace": "default"}, "spec": {"devices": {"requests": [
            {"name": "all", "exactly": {"deviceClassName": "gpu.nanokube.io", "count": 3}},
            {"name": "alt", "firstAvailable": [{"name": "one", "deviceClassName": "gpu.nanokube.io"},
                                               {"name": "two", "deviceClassName": "gpu.nanokube.io", "count": 2}]}]}}})
    await client.resource("", "v1", "configmaps").create({"metadata": {"name": "cm", "namespace": "default"}})
    expected = {"pods": "2", "requests.cpu": "1500m", "limits.memory": "1536Mi", "requests.nvidia.com/gpu": "2",
                "gpu.nanokube.io.deviceclass.resource.k8s.io/devices": "5", "count/configmaps": "1"}
    await eventually(used_is(client, expected))
    await pods.delete("a", "default", grace_period_seconds=0)
    await eventually(used_is(client, {**expected, "pods": "1", "requests.cpu": "1", "limits.memory": "512Mi",
                                      "requests.nvidia.com/gpu": "0"}))


async def test_used_leaves_out_what_no_evaluator_counts(env):
    """status.used holds the names some evaluator counts, as upstream's syncResourceQuota masks it:
    a quota also naming `limits.nvidia.com/gpu`, a bare `nvidia.com/gpu` (extended resources are
    quota'd as requests.<name> only) and a count of a resource nobody serves shows no used for
    them (kubectl prints 0 all the same), and the GPU pod charges only requests.nvidia.com/gpu."""
    client = env
    hard = {"requests.nvidia.com/gpu": "4", "limits.nvidia.com/gpu": "4", "nvidia.com/gpu": "4",
            "count/widgets.example.com": "1", "limits.cpu": "4"}
    await client.resource("", "v1", "resourcequotas").create(
        {"metadata": {"name": "q", "namespace": "default"}, "spec": {"hard": hard}})
    assert await eventually(used_is(client, {"requests.nvidia.com/gpu": "0", "limits.cpu": "0"}))
    await client.resource("", "v1", "pods").create(pod("a", {"limits": {"nvidia.com/gpu": "2", "cpu": "1"}}))
    q = await eventually(used_is(client, {"requests.nvidia.com/gpu": "2", "limits.cpu": "1"}))
    assert q["status"]["hard"] == hard


async def test_claims_are_recounted_under_their_classes_extended_resources(env):
    """A ResourceClaim charges its DeviceClass's extended resources (the implicit
    requests.deviceclass.resource.kubernetes.io/<class> and the class's extendedResourceName):
    the controller's recount keeps counting them, not only the pods asking for them."""
    client = env
    await client.resource("resource.k8s.io", "v1", "deviceclasses").create(
        {"metadata": {"name": "gpu.example.com"}, "spec": {"extendedResourceName": "example.com/gpu"}})
    await client.resource("resource.k8s.io", "v1", "resourceclaims").create({
        "metadata": {"name": "c", "namespace": "default"}, "spec": {"devices": {"requests": [
            {"name": "r", "exactly": {"deviceClassName": "gpu.example.com", "count": 2}}]}}})
    await client.resource("", "v1", "pods").create(pod("a", {"limits": {"example.com/gpu": "1"}}))
    hard = {"requests.example.com/gpu": "8", "requests.deviceclass.resource.kubernetes.io/gpu.example.com": "8"}
    await client.resource("", "v1", "resourcequotas").create(
        {"metadata": {"name": "q", "namespace": "default"}, "spec": {"hard": hard}})
    assert await eventually(used_is(client, {"requests.example.com/gpu": "3",
                                             "requests.deviceclass.resource.kubernetes.io/gpu.example.com": "2"}))


async def test_scopes_select_what_counts(env):
    client = env
    quotas = client.resource("", "v1", "resourcequotas")
    await quotas.create({"metadata": {"name": "besteffort", "namespace": "default"},
                         "spec": {"hard": {"pods": "5"}, "scopes": ["BestEffort"]}})
    await eventually(used_is(client, {"pods": "0"}, "besteffort"))  # admission charges once the status exists
    pods = client.resource("", "v1", "pods")
    await pods.create(pod("plain"))
    await pods.create(pod("sized", {"requests": {"cpu": "1"}}))
    assert await eventually(used_is(client, {"pods": "1"}, "besteffort"))


async def test_object_counts_of_any_kind_are_replenished(env):
    client = env
    quotas = client.resource("", "v1", "resourcequotas")
    await quotas.create({"metadata": {"name": "apps", "namespace": "default"},
                         "spec": {"hard": {"count/deployments.apps": "2"}}})
    await eventually(used_is(client, {"count/deployments.apps": "0"}, "apps"))
    deployments = client.resource("apps", "v1", "deployments")
    tpl = {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
    await deployments.create({"metadata": {"name": "a", "namespace": "default"},
                              "spec": {"selector": {"matchLabels": {"app": "a"}}, "template": tpl}})
    await eventually(used_is(client, {"count/deployments.apps": "1"}, "apps"))
    await deployments.delete("a", "default")
    assert await eventually(used_is(client, {"count/deployments.apps": "0"}, "apps"))


async def test_a_quota_over_many_pods_is_counted_in_turns():
    """A quota's sync counts the namespace's objects letting the loop run every TURN of them (the
    in-process controllers share the API server's loop; a namespace of 300,000 pods held it for
    seconds), and counts them all."""
    s = await make_stack()
    ctrl = ResourceQuotaController(s.client)
    try:
        quota = await s.client.resource("", "v1", "resourcequotas").create({
            "metadata": {"name": "q", "namespace": "default"}, "spec": {"hard": {"pods": "100000", "requests.cpu": "1k"}}})
        n = 3 * TURN + 1
        pods = [{**pod(f"p{i}", {"requests": {"cpu": "100m"}}), "status": {"phase": "Running"}} for i in range(n)]
        ctrl.quotas.get = lambda key: quota if key == "default/q" else None

        async def objects(group, plural, ns):
            return pods if (plural, ns) == ("pods", "default") else []
        ctrl._objects = objects
        during, _ = await turns_during(ctrl.sync("default/q"))
        st = (await s.client.resource("", "v1", "resourcequotas").get("q", "default"))["status"]
        assert st["used"] == {"pods": str(n), "requests.cpu": f"{n * 100}m"}
        assert during >= 3
    finally:
        await s.close()


async def test_over_http_a_count_of_a_custom_resource_whose_crd_came_later_is_counted():
    """Over HTTP the controller's client read discovery at its start; a quota's `count/` of a resource
    discovery did not list then has discovery read again (upstream's quota Sync finds new resources
    every 30 s; here when a name maps to nothing), so the CRD's objects are counted."""
    async with over_http(ResourceQuotaController) as (server, client):
        local = LocalClient(server.rest)
        await serve_widgets(server, "q.example.com")
        widgets = local.resource("q.example.com", "v1", "widgets")
        for name in ("a", "b"):
            await widgets.create({"apiVersion": "q.example.com/v1", "kind": "Widget",
                                  "metadata": {"name": name, "namespace": "default"}})
        assert client.index.get("q.example.com", "v1", "widgets") is None
        await local.resource("", "v1", "resourcequotas").create(
            {"metadata": {"name": "q", "namespace": "default"}, "spec": {"hard": {"count/widgets.q.example.com": "5"}}})
        assert await eventually(used_is(local, {"count/widgets.q.example.com": "2"}))


async def test_a_quota_counting_a_custom_resource_before_its_crd_is_counted_once_the_crd_is_established():
    """A quota naming `count/widgets...` before the CRD exists has no used for it (nothing serves it), and
    quota admission refuses the kind's creates while that is unknown: the CRD's establishment recounts
    the quota at once, not at the next resync (300 s) or discovery period (30 s)."""
    async with over_http(ResourceQuotaController) as (server, client):
        local = LocalClient(server.rest)
        await local.resource("", "v1", "resourcequotas").create(
            {"metadata": {"name": "q", "namespace": "default"},
             "spec": {"hard": {"count/widgets.late.example.com": "5", "count/configmaps": "9"}}})
        assert await eventually(used_is(local, {"count/configmaps": "0"}))  # discovery read, no widgets in it
        await serve_widgets(server, "late.example.com")
        assert await eventually(used_is(local, {"count/configmaps": "0", "count/widgets.late.example.com": "0"}),
                                timeout=5)
        await local.resource("late.example.com", "v1", "widgets").create(
            {"apiVersion": "late.example.com/v1", "kind": "Widget", "metadata": {"name": "a", "namespace": "default"}})
        assert await eventually(used_is(local, {"count/configmaps": "0", "count/widgets.late.example.com": "1"}))
