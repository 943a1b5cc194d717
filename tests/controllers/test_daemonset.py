"""DaemonSet controller against the in-process API: one pinned pod per
eligible node, taints and selectors, rolling updates node by node, history."""

from __future__ import annotations

import asyncio

import pytest

from nanokube.clock import VirtualClock, format_time
from nanokube.controllers.daemonset import DaemonSetController, pin_to_node, target_node
from nanokube.machinery.errors import APIError
from tests.controllers import becomes, event_counts, eventually, make_stack, pod_quota, settled
from tests.controllers.test_pod_update_handlers import informing, seen, stopped
from tests.controllers.test_replicaset import stop

AUTO = {("node.kubernetes.io/not-ready", "NoExecute"), ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/disk-pressure", "NoSchedule"), ("node.kubernetes.io/memory-pressure", "NoSchedule"),
        ("node.kubernetes.io/pid-pressure", "NoSchedule"), ("node.kubernetes.io/unschedulable", "NoSchedule")}


class Kubelets:
    """Plays scheduler and kubelet: binds each pinned pod to its node and
    makes it Running and Ready, unless `hold` names the node; finishes deletions."""

    def __init__(self, client):
        self.pods = client.resource("", "v1", "pods")
        self.hold: set[str] = set()
        self.task = asyncio.create_task(self._run())

    async def _run(self):
        while True:
            items, _ = await self.pods.list("default")
            for pod in items:
                node = target_node(pod)
                try:
                    if pod["metadata"].get("deletionTimestamp"):
                        await self.pods.delete(pod["metadata"]["name"], "default", grace_period_seconds=0)
                        continue
                    if node in self.hold:
                        continue
                    if not pod["spec"].get("nodeName"):
                        await self.pods.create_subresource(pod["metadata"]["name"], "binding", {
                            "metadata": {"name": pod["metadata"]["name"]},
                            "target": {"kind": "Node", "name": node}}, namespace="default")
                        pod = await self.pods.get(pod["metadata"]["name"], "default")
                    if (pod.get("status") or {}).get("phase") != "Running":
                        await self.pods.update({**pod, "status": {"phase": "Running", "conditions": [
                            {"type": "Ready", "status": "True", "lastTransitionTime": "2020-01-01T00:00:00Z"}]}},
                            subresource="status")
                except APIError:
                    pass
            await asyncio.sleep(0.01)


@pytest.fixture
async def env():
    s = await make_stack()
    nodes = s.client.resource("", "v1", "nodes")
    for i in range(3):
        await nodes.create({"metadata": {"name": f"node-{i}", "labels": {"zone": "a" if i < 2 else "b"}}})
    ctrl = DaemonSetController(s.client)
    await ctrl.start()
    kubelets = Kubelets(s.client)
    kubelets.ctrl = ctrl
    yield s.client, kubelets
    kubelets.task.cancel()
    await stop(ctrl)
    await s.close()


def daemonset(name="agent", image="agent:1", **spec):
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": image}]}}, **spec}}


async def live_pods(client):
    items, _ = await client.resource("", "v1", "pods").list("default")
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


async def by_node(client, n):
    pods = await live_pods(client)
    nodes = {target_node(p): p for p in pods}
    return nodes if len(pods) == n and len(nodes) == n else None


async def ds_status(client, pred):
    st = (await client.resource("apps", "v1", "daemonsets").get("agent", "default")).get("status") or {}
    return st if pred(st) else None


async def test_one_pinned_pod_per_node_with_daemon_tolerations_and_history(env):
    client, _ = env
    await client.resource("", "v1", "nodes").patch("node-2", {"spec": {"taints": [
        {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]}})
    ds = await client.resource("apps", "v1", "daemonsets").create(daemonset())
    pods = await eventually(lambda: by_node(client, 2))
    assert set(pods) == {"node-0", "node-1"}, "none on the tainted node"
    pod = pods["node-0"]
    assert pod["spec"]["affinity"] == {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-0"]}]}]}}}
    assert {(t["key"], t["effect"]) for t in pod["spec"]["tolerations"]} == AUTO
    assert all(t["operator"] == "Exists" and "tolerationSeconds" not in t for t in pod["spec"]["tolerations"])
    labels = pod["metadata"]["labels"]
    assert labels["pod-template-generation"] == "1" and labels["app"] == "agent"
    revs, _ = await client.resource("apps", "v1", "controllerrevisions").list("default")
    assert len(revs) == 1
    rev = revs[0]
    assert rev["metadata"]["name"] == f"agent-{labels['controller-revision-hash']}" and rev["revision"] == 1
    assert rev["data"]["spec"]["template"]["$patch"] == "replace"
    assert rev["metadata"]["ownerReferences"][0]["uid"] == ds["metadata"]["uid"]
    st = await eventually(lambda: ds_status(client, lambda s: s.get("numberAvailable") == 2))
    assert st == {"currentNumberScheduled": 2, "numberMisscheduled": 0, "desiredNumberScheduled": 2,
                  "numberReady": 2, "observedGeneration": 1, "updatedNumberScheduled": 2, "numberAvailable": 2}
    # a toleration lets it onto the tainted node
    await client.resource("apps", "v1", "daemonsets").patch("agent", {"spec": {"template": {"spec": {
        "tolerations": [{"key": "dedicated", "operator": "Exists"}]}}}}, namespace="default")
    pods = await eventually(lambda: by_node(client, 3))
    assert set(pods) == {"node-0", "node-1", "node-2"}


async def test_node_selector_and_no_execute_taint(env):
    client, _ = env
    nodes = client.resource("", "v1", "nodes")
    spec = {"template": {"metadata": {"labels": {"app": "agent"}},
                         "spec": {"nodeSelector": {"zone": "a"}, "containers": [{"name": "c", "image": "agent:1"}]}}}
    await client.resource("apps", "v1", "daemonsets").create(daemonset(**spec))
    pods = await eventually(lambda: by_node(client, 2))
    assert set(pods) == {"node-0", "node-1"}
    await nodes.patch("node-2", {"metadata": {"labels": {"zone": "a"}}})
    await eventually(lambda: by_node(client, 3))
    await nodes.patch("node-1", {"spec": {"taints": [{"key": "evict", "effect": "NoExecute"}]}})
    pods = await eventually(lambda: by_node(client, 2))
    assert set(pods) == {"node-0", "node-2"}, "an untolerated NoExecute taint removes the pod"
    await eventually(lambda: ds_status(client, lambda s: s.get("desiredNumberScheduled") == 2
                                       and s.get("numberMisscheduled") == 0))


async def test_rolling_update_replaces_one_node_at_a_time(env):
    client, kubelets = env
    dss = client.resource("apps", "v1", "daemonsets")
    await dss.create(daemonset())
    first = await eventually(lambda: by_node(client, 3))
    await eventually(lambda: ds_status(client, lambda s: s.get("numberAvailable") == 3))
    kubelets.hold = {"node-0", "node-1", "node-2"}  # new pods stay pending until released
    await dss.patch("agent", {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "agent:2"}]}}}},
                    namespace="default")

    async def images():
        pods = await live_pods(client)
        return sorted(p["spec"]["containers"][0]["image"] for p in pods)
    await eventually(lambda: _equals(images, ["agent:1", "agent:1", "agent:2"]))
    await asyncio.sleep(0.1)
    assert await images() == ["agent:1", "agent:1", "agent:2"], "maxUnavailable 1: one node at a time"
    kubelets.hold = set()
    await eventually(lambda: _equals(images, ["agent:2", "agent:2", "agent:2"]))
    st = await eventually(lambda: ds_status(client, lambda s: s.get("updatedNumberScheduled") == 3
                                            and s.get("numberAvailable") == 3))
    assert st["observedGeneration"] == 2
    now = await by_node(client, 3)
    assert {p["metadata"]["labels"]["pod-template-generation"] for p in now.values()} == {"2"}
    assert not {p["metadata"]["uid"] for p in now.values()} & {p["metadata"]["uid"] for p in first.values()}
    revs, _ = await client.resource("apps", "v1", "controllerrevisions").list("default")
    assert sorted(r["revision"] for r in revs) == [1, 2]
    # undo as kubectl does it: patch the template from revision 1 back
    old = next(r for r in revs if r["revision"] == 1)
    await dss.patch("agent", old["data"], patch_type="application/strategic-merge-patch+json", namespace="default")
    await eventually(lambda: _equals(images, ["agent:1", "agent:1", "agent:1"]))

    async def renumbered():
        items, _ = await client.resource("apps", "v1", "controllerrevisions").list("default")
        return {r["metadata"]["name"]: r["revision"] for r in items} == {
            old["metadata"]["name"]: 3, next(r for r in revs if r["revision"] == 2)["metadata"]["name"]: 2}
    await eventually(renumbered)


async def test_surge_starts_the_new_pod_before_removing_the_old(env):
    client, kubelets = env
    dss = client.resource("apps", "v1", "daemonsets")
    await dss.create(daemonset(updateStrategy={"type": "RollingUpdate",
                                               "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}))
    await eventually(lambda: by_node(client, 3))
    await eventually(lambda: ds_status(client, lambda s: s.get("numberAvailable") == 3))
    kubelets.hold = {"node-0", "node-1", "node-2"}
    await dss.patch("agent", {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "agent:2"}]}}}},
                    namespace="default")

    async def count(n):
        return len(await live_pods(client)) == n
    await eventually(lambda: count(4))
    await asyncio.sleep(0.1)
    assert len(await live_pods(client)) == 4, "one extra pod at a time; the old ones stay until it is available"
    kubelets.hold = set()

    async def all_new():
        pods = await live_pods(client)
        return len(pods) == 3 and {p["spec"]["containers"][0]["image"] for p in pods} == {"agent:2"}
    await eventually(all_new)


async def _equals(fn, want):
    return await fn() == want


def test_pinning_replaces_required_terms_only():
    aff = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {}}]},
        "podAntiAffinity": {"x": 1}}
    pinned = pin_to_node(aff, "n1")
    assert pinned["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]
    assert pinned["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] and pinned["podAntiAffinity"]
    assert aff["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0][
        "matchExpressions"], "the template is not modified"


async def test_adopts_a_matching_orphan_on_its_node(env):
    client, kubelets = env
    pods = client.resource("", "v1", "pods")
    # generation 1's label: the pod counts as up to date, so the rolling update keeps it
    labels = {"app": "agent", "pod-template-generation": "1"}
    orphan = await pods.create({"metadata": {"name": "orphan", "namespace": "default", "labels": labels},
                                "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "agent:1"}]}})

    async def seen():
        return kubelets.ctrl.pod_inf.get("default/orphan")
    await eventually(seen)  # else the controller may create a pod there first, as upstream's would
    ds = await client.resource("apps", "v1", "daemonsets").create(daemonset())
    got = await eventually(lambda: by_node(client, 3))
    assert got["node-1"]["metadata"]["uid"] == orphan["metadata"]["uid"], "adopted instead of a second pod"
    assert got["node-1"]["metadata"]["ownerReferences"][0]["uid"] == ds["metadata"]["uid"]


async def test_failed_pods_are_replaced_with_backoff():
    """A pod failing again on its node within the 1 s backoff is replaced only once the backoff ends
    (virtual time: the controller's clock, moved on by the test)."""
    s = await make_stack()
    for i in range(3):
        await s.client.resource("", "v1", "nodes").create({"metadata": {"name": f"node-{i}"}})
    clock = VirtualClock()
    ctrl = DaemonSetController(s.client, clock=clock)
    await ctrl.start()
    kubelets = Kubelets(s.client)
    kubelets.hold = {"node-0", "node-1", "node-2"}
    client, pods = s.client, s.client.resource("", "v1", "pods")

    async def fail(pod):
        cur = await pods.get(pod["metadata"]["name"], "default")
        await pods.update({**cur, "status": {"phase": "Failed"}}, subresource="status")

    async def replacement(old_uid):
        pod = (await by_node(client, 3) or {}).get("node-0")
        return pod if pod and pod["metadata"]["uid"] != old_uid else None

    async def seen_failed(pod):
        """The controller's informer has the failure (or the pod is gone already)."""
        cur = ctrl.pod_inf.get(f"default/{pod['metadata']['name']}")
        return cur is None or cur["status"].get("phase") == "Failed"
    try:
        await client.resource("apps", "v1", "daemonsets").create(daemonset())
        first = (await settled(clock, lambda: by_node(client, 3)))["node-0"]
        await fail(first)
        second = await settled(clock, lambda: replacement(first["metadata"]["uid"]))
        await fail(second)
        await settled(clock, lambda: seen_failed(second))
        await clock.advance(0.9)
        live = await live_pods(client)
        assert second["metadata"]["uid"] in {p["metadata"]["uid"] for p in live}, "the second failure waits out 1 s"
        await clock.advance(0.2)
        await settled(clock, lambda: replacement(second["metadata"]["uid"]))

        async def failures():
            events, _ = await client.resource("", "v1", "events").list("default")
            return sum(e["reason"] == "FailedDaemonPod" for e in events)
        await becomes(failures, 2)
    finally:
        kubelets.task.cancel()
        await stop(ctrl)
        await s.close()


async def test_on_delete_replaces_only_deleted_pods(env):
    client, _ = env
    dss = client.resource("apps", "v1", "daemonsets")
    await dss.create(daemonset(updateStrategy={"type": "OnDelete"}))
    first = await eventually(lambda: by_node(client, 3))
    await eventually(lambda: ds_status(client, lambda s: s.get("numberAvailable") == 3))
    await dss.patch("agent", {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "agent:2"}]}}}},
                    namespace="default")
    await eventually(lambda: ds_status(client, lambda s: s.get("observedGeneration") == 2))
    await asyncio.sleep(0.1)
    assert {p["metadata"]["uid"] for p in (await by_node(client, 3)).values()} == {
        p["metadata"]["uid"] for p in first.values()}, "OnDelete leaves running pods alone"
    assert (await ds_status(client, lambda s: True)).get("updatedNumberScheduled", 0) == 0
    await client.resource("", "v1", "pods").delete(first["node-1"]["metadata"]["name"], "default")

    async def node1_new():
        pods = await by_node(client, 3)
        return pods and pods["node-1"]["spec"]["containers"][0]["image"] == "agent:2"
    await eventually(node1_new)
    await eventually(lambda: ds_status(client, lambda s: s.get("updatedNumberScheduled") == 1))


async def test_adopts_orphaned_revisions(env):
    client, _ = env
    revs = client.resource("apps", "v1", "controllerrevisions")
    await revs.create({"metadata": {"name": "agent-old", "namespace": "default", "labels": {"app": "agent"}},
                       "data": {"spec": {"template": {"$patch": "replace", "metadata": {"labels": {"app": "agent"}}}}},
                       "revision": 4})
    ds = await client.resource("apps", "v1", "daemonsets").create(daemonset())

    async def history():
        items, _ = await revs.list("default")
        owned = [r for r in items if (r["metadata"].get("ownerReferences") or [{}])[0].get("uid") == ds["metadata"]["uid"]]
        return sorted((r["metadata"]["name"], r["revision"]) for r in owned) if len(owned) == 2 else None
    got = await eventually(history)
    assert ("agent-old", 4) in got and max(n for _, n in got) == 5, "the new revision follows the adopted one"


async def test_number_available_follows_min_ready_seconds_with_no_other_event():
    """A daemon pod ready at t counts in numberAvailable at t + minReadySeconds: the controller
    comes back by itself (virtual time)."""
    s = await make_stack()
    await s.client.resource("", "v1", "nodes").create({"metadata": {"name": "node-0"}})
    clock = VirtualClock()
    ctrl = DaemonSetController(s.client, clock=clock)
    await ctrl.start()
    sets, pods = s.client.resource("apps", "v1", "daemonsets"), s.client.resource("", "v1", "pods")

    async def status(**want):
        st = (await sets.get("agent", "default")).get("status") or {}
        return st if all(st.get(k, 0) == v for k, v in want.items()) else None

    async def one_pod():
        got = await live_pods(s.client)
        return got if len(got) == 1 else None
    try:
        await sets.create(daemonset(minReadySeconds=10))
        [p] = await settled(clock, one_pod)
        await pods.update({**p, "status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": format_time(clock.now())}]}},
            subresource="status")
        before = await settled(clock, lambda: status(numberReady=1, numberAvailable=0, numberUnavailable=1))
        assert before.get("numberAvailable", 0) == 0
        await clock.advance(11)
        after = await settled(clock, lambda: status(numberReady=1, numberAvailable=1, numberUnavailable=0))
        assert after["numberAvailable"] == 1 and after.get("numberUnavailable", 0) == 0
    finally:
        await stop(ctrl)
        await s.close()


async def test_a_pod_naming_a_predecessor_uid_is_no_creation_of_the_daemonset(env):
    """resolveControllerRef: a pod whose controller reference names this DaemonSet's name with
    another uid is not observed as one of its creations, and is neither adopted nor released."""
    client, kubelets = env
    ctrl = kubelets.ctrl
    await client.resource("apps", "v1", "daemonsets").create(daemonset())
    await eventually(lambda: by_node(client, 3))

    async def quiet():
        return ctrl.expectations.satisfied("default/agent")
    await eventually(quiet)
    ctrl.expectations.expect("default/agent", adds=1)
    stale_ref = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "0-predecessor",
                 "controller": True}
    pods = client.resource("", "v1", "pods")
    await pods.create({"metadata": {"name": "stale", "namespace": "default", "labels": {"app": "agent"},
                                    "ownerReferences": [stale_ref]},
                       "spec": {"containers": [{"name": "c", "image": "agent:1"}]}})

    async def seen():
        return ctrl.pod_inf.get("default/stale")
    await eventually(seen)
    assert not ctrl.expectations.satisfied("default/agent")
    assert (await pods.get("stale", "default"))["metadata"]["ownerReferences"] == [stale_ref]


async def test_creates_in_slow_start_batches_then_writes_its_status():
    """syncNodes' slow start: five nodes, room for two pods. Batches of 1 and 2: the third create is
    refused and the last two nodes are not tried; the status is written all the same, and the next
    sync, once the quota allows, makes the rest."""
    s = await make_stack()
    client = s.client
    for i in range(5):
        await client.resource("", "v1", "nodes").create({"metadata": {"name": f"node-{i}"}})
    ctrl = await informing(DaemonSetController(client))
    dss = client.resource("apps", "v1", "daemonsets")
    try:
        await pod_quota(client, 2)
        await seen(ctrl.ds_inf, await dss.create(daemonset()))
        with pytest.raises(APIError) as e:
            await ctrl.sync("default/agent")
        assert e.value.code == 403 and "exceeded quota: pods" in e.value.message
        assert await becomes(lambda: event_counts(client, "DaemonSet"), {"SuccessfulCreate": 2, "FailedCreate": 1})
        assert len(await live_pods(client)) == 2
        assert (await ds_status(client, lambda st: True))["desiredNumberScheduled"] == 5

        async def made_ones_seen():
            return ctrl.expectations.satisfied("default/agent")
        await eventually(made_ones_seen)
        await pod_quota(client, 5)
        await ctrl.sync("default/agent")
        assert await becomes(lambda: event_counts(client, "DaemonSet"), {"SuccessfulCreate": 5, "FailedCreate": 1})
        assert sorted(target_node(p) for p in await live_pods(client)) == [f"node-{i}" for i in range(5)]
    finally:
        await stopped(ctrl)
        await s.close()


async def test_a_create_refused_in_a_terminating_namespace_is_no_failure(env, caplog):
    """A daemon pod refused because its namespace is being deleted is no failure: no FailedCreate
    Event, nothing logged, and the status is written."""
    client, _ = env
    namespaces, dss = client.resource("", "v1", "namespaces"), client.resource("apps", "v1", "daemonsets")
    await namespaces.create({"metadata": {"name": "doomed", "finalizers": ["e2e.nanokube.io/hold"]}})
    body = daemonset(template={"metadata": {"labels": {"app": "agent"}}, "spec": {
        "nodeSelector": {"zone": "c"}, "containers": [{"name": "c", "image": "agent:1"}]}})
    body["metadata"]["namespace"] = "doomed"
    await dss.create(body)

    async def synced(desired):
        st = (await dss.get("agent", "doomed")).get("status") or {}
        return st.get("observedGeneration") == 1 and st.get("desiredNumberScheduled") == desired
    await eventually(lambda: synced(0))  # its ControllerRevision made while the namespace lived
    await namespaces.delete("doomed")
    await client.resource("", "v1", "nodes").patch("node-0", {"metadata": {"labels": {"zone": "c"}}})
    await eventually(lambda: synced(1))
    assert await event_counts(client, "DaemonSet", "doomed") == {}
    assert [r.getMessage() for r in caplog.records if "being terminated" in r.getMessage()] == []


async def test_with_creates_unseen_only_the_counts_are_written():
    """syncDaemonSet with expectations not yet satisfied: the status counts follow the cluster, but
    observedGeneration stays, since the new generation was not acted on (no pod made for it)."""
    s = await make_stack()
    client = s.client
    nodes = client.resource("", "v1", "nodes")
    for i in range(2):
        await nodes.create({"metadata": {"name": f"node-{i}"}})
    ctrl = await informing(DaemonSetController(client))
    dss, key = client.resource("apps", "v1", "daemonsets"), "default/agent"
    try:
        await seen(ctrl.ds_inf, await dss.create(daemonset()))
        await ctrl.sync(key)

        async def made_ones_seen():
            return ctrl.expectations.satisfied(key)
        await eventually(made_ones_seen)
        await nodes.create({"metadata": {"name": "node-2"}})
        await seen(ctrl.ds_inf, await dss.patch("agent", {"spec": {"minReadySeconds": 5}}, namespace="default"))

        async def three_nodes_seen():
            return len(ctrl.node_inf.list()) == 3
        await eventually(three_nodes_seen)
        ctrl.expectations.expect(key, adds=1)  # a create of ours not seen yet
        await ctrl.sync(key)
        st = (await dss.get("agent", "default"))["status"]
        assert (st["desiredNumberScheduled"], st["currentNumberScheduled"], st["observedGeneration"]) == (3, 2, 1)
        assert len(await live_pods(client)) == 2
        ctrl.expectations.forget(key)
        await ctrl.sync(key)
        assert (await dss.get("agent", "default"))["status"]["observedGeneration"] == 2
        assert len(await live_pods(client)) == 3
    finally:
        await stopped(ctrl)
        await s.close()
