"""Disruption controller: PodDisruptionBudget status from the pods it
selects and their controllers' scale, disruptedPods bookkeeping, and stale
DisruptionTarget conditions."""

import pytest

from nanokube.clock import format_time
from nanokube.controllers.base import TURN
from nanokube.controllers.disruption import DisruptionController, scaled_value
from tests.controllers import eventually, make_stack, tries, turns_during
from tests.node import ManualClock

P = "policy"


@pytest.fixture
async def env():
    s = await make_stack()
    clock = ManualClock()
    ctrl = DisruptionController(s.client, clock)
    await ctrl.start()
    yield s.client, clock
    await ctrl.stop()
    await s.close()


async def pod(client, name, ready=True, labels=None, owner=None):
    pods = client.resource("", "v1", "pods")
    md = {"name": name, "namespace": "default", "labels": labels or {"app": "web"}}
    if owner:
        md["ownerReferences"] = [{"apiVersion": owner.get("apiVersion", "apps/v1"), "kind": owner["kind"], "name": owner["metadata"]["name"],
                                  "uid": owner["metadata"]["uid"], "controller": True}]
    p = await pods.create({"metadata": md, "spec": {"containers": [{"name": "c", "image": "pause"}]}})
    return await pods.update({**p, "status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True" if ready else "False"}]}}, subresource="status")


async def pdb(client, name="budget", **spec):
    return await client.resource(P, "v1", "poddisruptionbudgets").create({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec}})


async def status_when(client, check, name="budget"):
    async def get():
        st = (await client.resource(P, "v1", "poddisruptionbudgets").get(name, "default")).get("status") or {}
        return check(st) and st
    return await eventually(get)


async def reported(client) -> list[dict]:
    """The Events written, once there is one: a controller's recorder queues them, so they may be
    written after the status of the sync that reported them."""
    async def listed():
        items, _ = await client.resource("", "v1", "events").list("default")
        return items
    return await eventually(listed)


def condition(st):
    return next(c for c in st["conditions"] if c["type"] == "DisruptionAllowed")


def test_scaled_value_rounds_percentages_as_asked():
    assert scaled_value(2, 10, True) == 2
    assert scaled_value("25%", 5, True) == 2
    assert scaled_value("25%", 5, False) == 1


async def test_min_available_counts_ready_pods(env):
    client, _ = env
    for i in range(3):
        await pod(client, f"ready-{i}")
    await pod(client, "unready", ready=False)
    await pod(client, "other", labels={"app": "db"})
    await pdb(client, minAvailable=2)
    st = await status_when(client, lambda s: s.get("expectedPods") == 4)
    assert (st["currentHealthy"], st["desiredHealthy"], st["disruptionsAllowed"], st["observedGeneration"]) == (3, 2, 1, 1)
    c = condition(st)
    assert (c["status"], c["reason"], c["observedGeneration"]) == ("True", "SufficientPods", 1)

    await client.resource("", "v1", "pods").delete("ready-0", "default")
    st = await status_when(client, lambda s: s.get("currentHealthy") == 2)
    assert st["disruptionsAllowed"] == 0 and condition(st)["reason"] == "InsufficientPods"
    assert condition(st)["status"] == "False"


async def test_max_unavailable_uses_the_deployment_scale(env):
    client, _ = env
    d = await client.resource("apps", "v1", "deployments").create({
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}})
    rs = await client.resource("apps", "v1", "replicasets").create({
        "metadata": {"name": "web-abc", "namespace": "default", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": d["metadata"]["uid"], "controller": True}]},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}})
    for i in range(3):
        await pod(client, f"web-{i}", owner=rs)
    await pdb(client, maxUnavailable="50%")
    st = await status_when(client, lambda s: s.get("expectedPods") == 4)
    assert (st["desiredHealthy"], st["currentHealthy"], st["disruptionsAllowed"]) == (2, 3, 1)


async def test_max_unavailable_uses_the_statefulset_and_replication_controller_scale(env):
    """getExpectedScale's finders: a StatefulSet's and a ReplicationController's spec.replicas, so a budget
    over a database StatefulSet's pods is computed instead of failing 'found no controllers'."""
    client, _ = env
    template = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    sts = await client.resource("apps", "v1", "statefulsets").create({
        "metadata": {"name": "db", "namespace": "default"},
        "spec": {"replicas": 3, "serviceName": "db", "selector": {"matchLabels": {"app": "web"}}, "template": template}})
    rc = await client.resource("", "v1", "replicationcontrollers").create({
        "metadata": {"name": "old", "namespace": "default"},
        "spec": {"replicas": 2, "selector": {"app": "web"}, "template": template}})
    for i in range(2):
        await pod(client, f"db-{i}", owner=sts)
    await pod(client, "old-a", owner={**rc, "apiVersion": "v1"})
    await pdb(client, maxUnavailable=1)
    st = await status_when(client, lambda s: s.get("expectedPods") == 5)
    assert (st["desiredHealthy"], st["currentHealthy"], st["disruptionsAllowed"]) == (4, 3, 0)


async def test_a_controller_without_a_scale_subresource_is_named(env):
    """getScaleController: a DaemonSet has no scale subresource, which the SyncFailed condition says."""
    client, _ = env
    ds = await client.resource("apps", "v1", "daemonsets").create({
        "metadata": {"name": "agent", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {
            "metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}})
    await pod(client, "agent-a", owner=ds)
    await pdb(client, maxUnavailable=1)
    c = condition(await status_when(client, lambda s: s.get("conditions")))
    assert (c["reason"], c["message"]) == ("SyncFailed", "daemonsets.apps does not implement the scale subresource")


async def test_pods_without_a_controller_are_left_out_with_an_unmanaged_pods_warning(env):
    """getExpectedScale: an unmanaged pod is not in the controllers' scale and does not fail the sync;
    the budget gets an UnmanagedPods Warning, and with nothing expected it allows no disruption."""
    client, _ = env
    rs = await client.resource("apps", "v1", "replicasets").create({
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": {
            "metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}})
    await pod(client, "bare")
    await pdb(client, minAvailable="50%")
    st = await status_when(client, lambda s: s.get("conditions"))
    assert (st["expectedPods"], st["desiredHealthy"], st["currentHealthy"], st["disruptionsAllowed"]) == (0, 0, 1, 0)
    assert (condition(st)["status"], condition(st)["reason"]) == ("False", "InsufficientPods")
    assert {(e["reason"], e["type"], e["message"]) for e in await reported(client)} == {
        ("UnmanagedPods", "Warning",
         "Pods selected by this PodDisruptionBudget (selector: &LabelSelector{MatchLabels:map[string]string{app: web,},"
         "MatchExpressions:[]LabelSelectorRequirement{},}) were found to be unmanaged. As a result, the status of the "
         "PDB cannot be calculated correctly, which may result in undefined behavior. To account for these pods "
         'please set ".spec.minAvailable" field of the PDB to an integer value.')}
    await pod(client, "web-a", owner=rs)
    await pod(client, "web-b", owner=rs)
    # the ReplicaSet's scale counts from its first pod on, before either is Ready: wait for all three Ready
    st = await status_when(client, lambda s: s.get("expectedPods") == 2 and s.get("currentHealthy") == 3)
    assert (st["desiredHealthy"], st["disruptionsAllowed"]) == (1, 2)


async def test_recently_disrupted_pods_do_not_count_until_they_expire(env):
    client, clock = env
    for i in range(3):
        await pod(client, f"p-{i}")
    b = await pdb(client, minAvailable=1)
    await status_when(client, lambda s: s.get("disruptionsAllowed") == 2)
    pdbs = client.resource(P, "v1", "poddisruptionbudgets")
    cur = await pdbs.get("budget", "default")
    await pdbs.update({**cur, "status": {**cur["status"], "disruptionsAllowed": 1,
                                         "disruptedPods": {"p-0": format_time(clock.now())}}}, subresource="status")
    await client.resource("", "v1", "pods").patch("p-1", {"metadata": {"labels": {"touched": "yes"}}}, namespace="default")
    st = await status_when(client, lambda s: s.get("currentHealthy") == 2)
    assert st["disruptedPods"] == {"p-0": format_time(clock.now())} and st["disruptionsAllowed"] == 1
    await clock.advance(121)
    st = await status_when(client, lambda s: s.get("currentHealthy") == 3)
    assert "disruptedPods" not in st and st["disruptionsAllowed"] == 2
    assert b["metadata"]["name"] == "budget"


async def test_no_pods_reports_an_event_and_zeros(env):
    client, _ = env
    await pdb(client, minAvailable=1)
    st = await status_when(client, lambda s: s.get("conditions"))
    assert (st["expectedPods"], st["currentHealthy"], st["desiredHealthy"], st["disruptionsAllowed"]) == (0, 0, 1, 0)
    assert [(e["reason"], e["message"]) for e in await reported(client)] == [("NoPods", "No matching pods found")]


async def test_a_disruption_target_that_outlives_two_minutes_is_reset(env):
    client, clock = env
    p = await pod(client, "victim")
    pods = client.resource("", "v1", "pods")
    await pods.update({**p, "status": {**p["status"], "conditions": p["status"]["conditions"] + [
        {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
         "lastTransitionTime": format_time(clock.now())}]}}, subresource="status")
    await clock.advance(60)
    assert any(c["type"] == "DisruptionTarget" and c["status"] == "True"
               for c in (await pods.get("victim", "default"))["status"]["conditions"])
    await clock.advance(61)

    async def reset():
        got = await pods.get("victim", "default")
        return next((c for c in got["status"]["conditions"] if c["type"] == "DisruptionTarget" and c["status"] == "False"), None)
    assert await eventually(reset)


async def test_a_budget_without_a_spec_selects_no_pod(env):
    """policy/v1 lets a budget leave its spec out; its status is computed (no pods, nothing
    allowed) instead of the sync failing on every retry."""
    client, _ = env
    await pod(client, "a")
    await client.resource(P, "v1", "poddisruptionbudgets").create({"metadata": {"name": "bare", "namespace": "default"}})
    st = await status_when(client, lambda s: s.get("conditions"), name="bare")
    assert (st["expectedPods"], st["currentHealthy"], st["disruptionsAllowed"]) == (0, 0, 0)


async def test_a_budget_over_many_pods_is_synced_in_turns():
    """A budget's sync passes over its namespace's pods (selection, controllers' scale, disrupted
    and healthy counts) letting the loop run every TURN pods, and counts them all: 3 * TURN + 1 ready
    pods of one ReplicaSet, maxUnavailable 1, one of them recently disrupted."""
    s = await make_stack()
    clock = ManualClock()
    ctrl = DisruptionController(s.client, clock)
    try:
        rs = await s.client.resource("apps", "v1", "replicasets").create({
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": 3 * TURN + 1, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": "pause"}]}}}})
        ref = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": rs["metadata"]["uid"],
               "controller": True}
        n = 3 * TURN + 1
        pods = [{"metadata": {"name": f"web-{i}", "namespace": "default", "uid": f"u{i}",
                              "labels": {"app": "web"}, "ownerReferences": [ref]},
                 "spec": {}, "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
                for i in range(n)]
        pods.append({"metadata": {"name": "other", "namespace": "default", "uid": "o", "labels": {"app": "db"}},
                     "spec": {}, "status": {"phase": "Running"}})
        budget = {**await pdb(s.client, maxUnavailable=1), "status": {"disruptedPods": {"web-7": format_time(clock.now())}}}
        ctrl.pdbs.get = lambda key: budget if key == "default/budget" else None
        ctrl.pods.list_namespace = lambda ns: pods if ns == "default" else []
        during, _ = await turns_during(ctrl.sync(("pdb", "default/budget")))
        st = (await s.client.resource(P, "v1", "poddisruptionbudgets").get("budget", "default"))["status"]
        assert (st["expectedPods"], st["currentHealthy"], st["desiredHealthy"]) == (n, n - 1, n - 1)
        assert st["disruptionsAllowed"] == 0 and list(st["disruptedPods"]) == ["web-7"]
        assert during >= 4 * 3  # selection, scale, disrupted, healthy
    finally:
        await s.close()


async def test_over_http_conditions_are_set_in_place_and_a_stale_disruption_target_is_replaced_whole(tmp_path):
    """Upstream sets DisruptionAllowed with SetStatusCondition (in its place among the budget's
    conditions) and resets a stale DisruptionTarget with UpdatePodCondition (the condition
    replaced whole: the old reason and message go). The controller runs on HTTPClient; the test
    writes and reads with the official client."""
    import asyncio

    import orjson
    from kubernetes import client as k8s

    from nanokube.client.http import HTTPClient
    from nanokube.clock import Clock
    from tests.served import served

    then = "2020-01-01T00:00:00Z"
    async with served(tmp_path) as (_, api_client):
        core, policy = k8s.CoreV1Api(api_client), k8s.PolicyV1Api(api_client)

        async def raw(call, *args):
            return orjson.loads((await asyncio.to_thread(call, *args, _preload_content=False)).data)

        async def until(call, args, check):
            for _ in tries():
                got = await raw(call, *args)
                if check(got):
                    return got
                await asyncio.sleep(0.02)
            return got

        await asyncio.to_thread(core.create_namespaced_pod, "default", {
            "metadata": {"name": "victim", "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "pause"}]}})
        await asyncio.to_thread(core.patch_namespaced_pod_status, "victim", "default", {"status": {"conditions": [
            {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
             "message": "Eviction API: evicting", "lastTransitionTime": then}]}})
        await asyncio.to_thread(policy.create_namespaced_pod_disruption_budget, "default", {
            "metadata": {"name": "budget"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}})

        http = HTTPClient.from_kubeconfig(str(tmp_path / "kubeconfig"))
        await http.start()
        ctrl = DisruptionController(http, Clock())
        await ctrl.start()
        try:
            pod = await until(core.read_namespaced_pod, ("victim", "default"), lambda p: any(
                c["type"] == "DisruptionTarget" and c["status"] == "False" for c in p["status"]["conditions"]))
            pdb = await until(policy.read_namespaced_pod_disruption_budget, ("budget", "default"),
                              lambda b: b.get("status", {}).get("observedGeneration"))
            custom = {"type": "example.com/Audited", "status": "True", "reason": "Seen", "message": "",
                      "lastTransitionTime": then}
            wrong = {"type": "DisruptionAllowed", "status": "True", "reason": "SufficientPods", "message": "",
                     "lastTransitionTime": then, "observedGeneration": 1}
            pdb["status"]["conditions"] = [wrong, custom]
            await asyncio.to_thread(policy.replace_namespaced_pod_disruption_budget_status, "budget", "default", pdb)
            pdb = await until(policy.read_namespaced_pod_disruption_budget, ("budget", "default"),
                              lambda b: b["status"]["conditions"][-1]["type"] == "DisruptionAllowed"
                              or b["status"]["conditions"][0]["status"] == "False")
        finally:
            await ctrl.stop()
            await http.close()
    [target] = [c for c in pod["status"]["conditions"] if c["type"] == "DisruptionTarget"]
    assert target["status"] == "False" and target["lastTransitionTime"] != then
    assert "reason" not in target and "message" not in target
    assert target["observedGeneration"] == 1  # the pod's generation, as syncStalePodDisruption writes it
    first, second = pdb["status"]["conditions"]
    assert (first["type"], first["status"], first["reason"]) == ("DisruptionAllowed", "False", "InsufficientPods")
    assert (second["type"], second["status"], second["reason"]) == ("example.com/Audited", "True", "Seen")
    assert first["lastTransitionTime"] not in (then, wrong["lastTransitionTime"], "2020-01-01T00:00:00+00:00")
