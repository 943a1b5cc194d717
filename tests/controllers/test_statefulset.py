"""StatefulSet controller against the in-process API: ordered creation with
stable identities and claims, parallel management, scale-down order,
partitioned rolling updates, ordinals and the claim retention policy."""

from __future__ import annotations

import asyncio

import pytest

from nanokube.clock import VirtualClock, format_time
from nanokube.controllers.statefulset import StatefulSetController
from nanokube.machinery.errors import APIError
from tests.controllers import eventually, make_stack, pod_quota, settled
from tests.controllers.test_pod_update_handlers import informing, seen, stopped
from tests.controllers.test_replicaset import stop


class Kubelet:
    """Makes pods Running and Ready (unless held) and finishes their deletion."""

    def __init__(self, client):
        self.pods = client.resource("", "v1", "pods")
        self.hold: set[str] = set()
        self.task = asyncio.create_task(self._run())

    async def _run(self):
        while True:
            items, _ = await self.pods.list("default")
            for pod in items:
                name = pod["metadata"]["name"]
                try:
                    if pod["metadata"].get("deletionTimestamp"):
                        await self.pods.delete(name, "default", grace_period_seconds=0)
                    elif name not in self.hold and (pod.get("status") or {}).get("phase") == "Pending":
                        if not pod["spec"].get("nodeName"):  # bound pods are deleted gracefully
                            await self.pods.create_subresource(name, "binding", {
                                "metadata": {"name": name}, "target": {"kind": "Node", "name": "node-a"}},
                                namespace="default")
                            pod = await self.pods.get(name, "default")
                        await self.pods.update({**pod, "status": {"phase": "Running", "conditions": [
                            {"type": "Ready", "status": "True", "lastTransitionTime": "2020-01-01T00:00:00Z"}]}},
                            subresource="status")
                except APIError:
                    pass
            await asyncio.sleep(0.01)


@pytest.fixture
async def env():
    s = await make_stack()
    ctrl = StatefulSetController(s.client)
    await ctrl.start()
    kubelet = Kubelet(s.client)
    yield s.client, kubelet
    kubelet.task.cancel()
    await stop(ctrl)
    await s.close()


def statefulset(replicas=3, image="web:1", **spec):
    return {"metadata": {"name": "web", "namespace": "default"},
            "spec": {"serviceName": "web", "replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": image}]}},
                     "volumeClaimTemplates": [{"metadata": {"name": "www"}, "spec": {
                         "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}],
                     **spec}}


async def names(client) -> list[str]:
    items, _ = await client.resource("", "v1", "pods").list("default")
    return sorted(p["metadata"]["name"] for p in items if not p["metadata"].get("deletionTimestamp"))


async def pods(client) -> dict[str, dict]:
    items, _ = await client.resource("", "v1", "pods").list("default")
    return {p["metadata"]["name"]: p for p in items if not p["metadata"].get("deletionTimestamp")}


async def has(client, want):
    return await names(client) == want


async def sts_status(client, pred):
    st = (await client.resource("apps", "v1", "statefulsets").get("web", "default")).get("status") or {}
    return st if pred(st) else None


async def test_ordered_creation_identity_and_claims(env):
    client, kubelet = env
    kubelet.hold = {"web-0"}
    sts = await client.resource("apps", "v1", "statefulsets").create(statefulset())
    await eventually(lambda: has(client, ["web-0"]))
    await asyncio.sleep(0.1)
    assert await names(client) == ["web-0"], "web-1 waits for web-0 to be Running and Ready"
    kubelet.hold = set()
    await eventually(lambda: has(client, ["web-0", "web-1", "web-2"]))
    web1 = (await pods(client))["web-1"]
    md, spec = web1["metadata"], web1["spec"]
    assert (spec["hostname"], spec["subdomain"]) == ("web-1", "web")
    assert md["labels"]["statefulset.kubernetes.io/pod-name"] == "web-1"
    assert md["labels"]["apps.kubernetes.io/pod-index"] == "1"
    assert md["ownerReferences"][0]["uid"] == sts["metadata"]["uid"]
    assert {"name": "www", "persistentVolumeClaim": {"claimName": "www-web-1"}} in spec["volumes"]
    claims, _ = await client.resource("", "v1", "persistentvolumeclaims").list("default")
    assert sorted(c["metadata"]["name"] for c in claims) == ["www-web-0", "www-web-1", "www-web-2"]
    assert all(c["metadata"]["labels"] == {"app": "web"} and "ownerReferences" not in c["metadata"] for c in claims)
    st = await eventually(lambda: sts_status(client, lambda s: s.get("availableReplicas") == 3))
    rev = md["labels"]["controller-revision-hash"]
    assert st == {"replicas": 3, "readyReplicas": 3, "availableReplicas": 3, "currentReplicas": 3,
                  "updatedReplicas": 3, "currentRevision": rev, "updateRevision": rev, "observedGeneration": 1,
                  "collisionCount": 0}  # upstream's updateStatefulSet always sets it, 0 included
    revs, _ = await client.resource("apps", "v1", "controllerrevisions").list("default")
    assert [r["metadata"]["name"] for r in revs] == [rev] and revs[0]["revision"] == 1
    assert revs[0]["metadata"]["labels"]["controller.kubernetes.io/hash"] == rev.removeprefix("web-")

    async def reported():  # by Events the controller's recorder writes from a queue, after what they report
        events, _ = await client.resource("", "v1", "events").list("default")
        msgs = {e["message"] for e in events}
        return "create Pod web-0 in StatefulSet web successful" in msgs and msgs
    msgs = await eventually(reported)
    assert "create Claim www-web-0 Pod web-0 in StatefulSet web success" in msgs


async def test_scale_down_from_the_highest_ordinal(env):
    client, _ = env
    sets = client.resource("apps", "v1", "statefulsets")
    await sets.create(statefulset())
    await eventually(lambda: has(client, ["web-0", "web-1", "web-2"]))
    await eventually(lambda: sts_status(client, lambda s: s.get("readyReplicas") == 3))
    await sets.patch("web", {"spec": {"replicas": 1}}, namespace="default")
    await eventually(lambda: has(client, ["web-0"]))

    async def deletes():
        # the recorder writes an Event after the delete it reports: wait for both reports
        events, _ = await client.resource("", "v1", "events").list("default")
        got = [e["message"] for e in sorted(events, key=lambda e: int(e["metadata"]["resourceVersion"]))
               if e["reason"] == "SuccessfulDelete"]
        return got if len(got) >= 2 else None
    assert await eventually(deletes) == ["delete Pod web-2 in StatefulSet web successful",
                                         "delete Pod web-1 in StatefulSet web successful"]


async def test_parallel_creates_all_at_once(env):
    client, kubelet = env
    kubelet.hold = {"web-0", "web-1", "web-2", "web-3"}
    await client.resource("apps", "v1", "statefulsets").create(statefulset(replicas=4, podManagementPolicy="Parallel"))
    assert await eventually(lambda: has(client, ["web-0", "web-1", "web-2", "web-3"]))


async def test_partitioned_rolling_update_then_full(env):
    client, _ = env
    sets = client.resource("apps", "v1", "statefulsets")
    await sets.create(statefulset())
    await eventually(lambda: sts_status(client, lambda s: s.get("availableReplicas") == 3))
    first = (await sts_status(client, lambda s: True))["currentRevision"]
    await sets.patch("web", {"spec": {"updateStrategy": {"rollingUpdate": {"partition": 2}},
                                      "template": {"spec": {"containers": [{"name": "c", "image": "web:2"}]}}}},
                     namespace="default")

    async def images():
        return {n: p["spec"]["containers"][0]["image"] for n, p in (await pods(client)).items()}

    async def images_are(want):
        return await images() == want
    await eventually(lambda: images_are({"web-0": "web:1", "web-1": "web:1", "web-2": "web:2"}))
    st = await eventually(lambda: sts_status(client, lambda s: s.get("updatedReplicas") == 1
                                             and s.get("readyReplicas") == 3))
    assert st["currentRevision"] == first and st["updateRevision"] != first and st["currentReplicas"] == 2
    await sets.patch("web", {"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0}}}}, namespace="default")
    await eventually(lambda: images_are({"web-0": "web:2", "web-1": "web:2", "web-2": "web:2"}))
    st = await eventually(lambda: sts_status(client, lambda s: s.get("currentRevision") == s.get("updateRevision")
                                             and s.get("readyReplicas") == 3))
    assert st["currentReplicas"] == 3 and st["updateRevision"] != first


async def test_ordinals_start_and_retention_policy(env):
    client, _ = env
    sets = client.resource("apps", "v1", "statefulsets")
    sts = await sets.create(statefulset(replicas=2, ordinals={"start": 5}, persistentVolumeClaimRetentionPolicy={
        "whenDeleted": "Delete", "whenScaled": "Delete"}))
    await eventually(lambda: has(client, ["web-5", "web-6"]))
    claims = client.resource("", "v1", "persistentvolumeclaims")
    claim = await claims.get("www-web-6", "default")
    assert claim["metadata"]["ownerReferences"] == [
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": sts["metadata"]["uid"],
         "controller": True, "blockOwnerDeletion": True}]
    await eventually(lambda: sts_status(client, lambda s: s.get("readyReplicas") == 2))
    web6 = (await pods(client))["web-6"]
    await sets.patch("web", {"spec": {"replicas": 1}}, namespace="default")
    await eventually(lambda: has(client, ["web-5"]))

    async def owned_by_pod():
        refs = (await claims.get("www-web-6", "default"))["metadata"]["ownerReferences"]
        return refs == [{"apiVersion": "v1", "kind": "Pod", "name": "web-6", "uid": web6["metadata"]["uid"],
                         "controller": True, "blockOwnerDeletion": True}]
    await eventually(owned_by_pod)


async def test_retention_references_respect_another_controller_of_the_claim(env):
    """KEP-1847 (since 1.31): the set's and the pod's references are controller references, a
    non-controller one left by an earlier controller becomes one, and a claim another object
    controls gets none of ours (updateClaimOwnerRefForSetAndPod)."""
    client, _ = env
    claims = client.resource("", "v1", "persistentvolumeclaims")
    other = (await client.resource("", "v1", "configmaps").create(
        {"metadata": {"name": "operator", "namespace": "default"}}))["metadata"]["uid"]
    foreign = {"apiVersion": "v1", "kind": "ConfigMap", "name": "operator", "uid": other, "controller": True}
    await claims.create({"metadata": {"name": "www-web-1", "namespace": "default", "ownerReferences": [foreign]},
                         "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
    sts = await client.resource("apps", "v1", "statefulsets").create(statefulset(
        replicas=2, podManagementPolicy="Parallel", persistentVolumeClaimRetentionPolicy={"whenDeleted": "Delete"}))
    await eventually(lambda: sts_status(client, lambda s: s.get("readyReplicas") == 2))
    ours = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": sts["metadata"]["uid"],
            "controller": True, "blockOwnerDeletion": True}
    await claims.patch("www-web-0", {"metadata": {"ownerReferences": [{k: v for k, v in ours.items()
                                                                       if k not in ("controller", "blockOwnerDeletion")}]}},
                       namespace="default")

    async def refs_are(name, want):
        return (await claims.get(name, "default"))["metadata"].get("ownerReferences") == want
    await eventually(lambda: refs_are("www-web-0", [ours]))
    await client.resource("apps", "v1", "statefulsets").patch("web", {"spec": {"minReadySeconds": 1}},
                                                              namespace="default")
    await eventually(lambda: sts_status(client, lambda s: s.get("observedGeneration") == 2))
    assert await refs_are("www-web-1", [foreign])


async def test_a_stale_claim_holds_back_the_pod_until_it_is_collected(env):
    """PodClaimIsStale: scaled away under whenScaled Delete, a member's claim is owned by its old pod
    until the garbage collector deletes it; scaling up again must not hand that claim (and its data,
    about to be deleted) to the new pod, which waits and gets a fresh claim once the old one is gone."""
    client, _ = env
    sets = client.resource("apps", "v1", "statefulsets")
    claims = client.resource("", "v1", "persistentvolumeclaims")
    await sets.create(statefulset(replicas=2, podManagementPolicy="Parallel",
                                  persistentVolumeClaimRetentionPolicy={"whenScaled": "Delete"}))
    await eventually(lambda: sts_status(client, lambda s: s.get("readyReplicas") == 2))
    old = await claims.get("www-web-1", "default")
    await sets.patch("web", {"spec": {"replicas": 1}}, namespace="default")
    await eventually(lambda: has(client, ["web-0"]))

    async def owned_by_pod():
        refs = (await claims.get("www-web-1", "default"))["metadata"].get("ownerReferences") or []
        return [r["kind"] for r in refs] == ["Pod"]
    await eventually(owned_by_pod)
    await sets.patch("web", {"spec": {"replicas": 2}}, namespace="default")
    await eventually(lambda: sts_status(client, lambda s: s.get("observedGeneration") == 3))
    assert await names(client) == ["web-0"]
    await claims.delete("www-web-1", "default")  # the garbage collector, once the old pod is gone
    await claims.patch("www-web-1", {"metadata": {"finalizers": None}}, namespace="default")  # pvc-protection
    await eventually(lambda: has(client, ["web-0", "web-1"]))
    assert (await claims.get("www-web-1", "default"))["metadata"]["uid"] != old["metadata"]["uid"]


async def test_a_claim_being_deleted_fails_the_pods_creation_until_it_is_gone(env):
    """createPersistentVolumeClaims: a member's claim still being deleted is an error the pod's
    creation reports (FailedCreate on the set), and the pod is made once the claim is gone."""
    client, _ = env
    claims = client.resource("", "v1", "persistentvolumeclaims")
    await claims.create({"metadata": {"name": "www-web-0", "namespace": "default", "finalizers": ["example.com/hold"]},
                         "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
    await claims.delete("www-web-0", "default")
    await client.resource("apps", "v1", "statefulsets").create(statefulset(replicas=1))

    async def failed_create():
        evs, _ = await client.resource("", "v1", "events").list("default")
        return [e["message"] for e in evs if e["reason"] == "FailedCreate"]
    assert await eventually(failed_create) == [
        "create Pod web-0 in StatefulSet web failed error: pvc www-web-0 is being deleted"]
    assert await names(client) == []
    await claims.patch("www-web-0", {"metadata": {"finalizers": None}}, namespace="default")
    await eventually(lambda: has(client, ["web-0"]))


async def test_failed_pod_is_recreated(env):
    client, _ = env
    await client.resource("apps", "v1", "statefulsets").create(statefulset(replicas=1))
    await eventually(lambda: sts_status(client, lambda s: s.get("readyReplicas") == 1))
    podc = client.resource("", "v1", "pods")
    old = await podc.get("web-0", "default")
    await podc.update({**old, "status": {"phase": "Failed"}}, subresource="status")

    async def replaced():
        p = (await pods(client)).get("web-0")
        return p is not None and p["metadata"]["uid"] != old["metadata"]["uid"]
    await eventually(replaced)

    async def recreating():  # the recorder writes the Event beside the delete it announces
        events, _ = await client.resource("", "v1", "events").list("default")
        return any(e["reason"] == "RecreatingFailedPod" and e["message"] ==
                   "StatefulSet default/web is recreating failed Pod web-0" for e in events)
    assert await eventually(recreating)


async def test_adopts_an_orphan_named_as_a_member(env):
    client, _ = env
    podc = client.resource("", "v1", "pods")
    orphan = await podc.create({"metadata": {"name": "web-0", "namespace": "default", "labels": {"app": "web"}},
                                "spec": {"containers": [{"name": "c", "image": "web:1"}]}})
    await podc.create({"metadata": {"name": "stray", "namespace": "default", "labels": {"app": "web"}},
                       "spec": {"containers": [{"name": "c", "image": "web:1"}]}})
    # OnDelete: under RollingUpdate the adopted pod, which has no revision label, is rightly replaced
    # once web-1 is ready (as upstream), so the orphan's uid would be there only for a moment
    await client.resource("apps", "v1", "statefulsets").create(statefulset(replicas=2, updateStrategy={"type": "OnDelete"}))
    await eventually(lambda: has(client, ["stray", "web-0", "web-1"]))
    got = await pods(client)
    assert got["web-0"]["metadata"]["uid"] == orphan["metadata"]["uid"]
    assert got["web-0"]["metadata"]["ownerReferences"][0]["kind"] == "StatefulSet"
    assert "ownerReferences" not in got["stray"]["metadata"], "only pods named <set>-<ordinal> are members"


async def test_max_unavailable_updates_two_at_a_time_from_the_top(env):
    client, kubelet = env
    sets = client.resource("apps", "v1", "statefulsets")
    await sets.create(statefulset(replicas=4, podManagementPolicy="Parallel", updateStrategy={
        "type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 2}}))
    await eventually(lambda: sts_status(client, lambda s: s.get("availableReplicas") == 4))
    kubelet.hold = {"web-0", "web-1", "web-2", "web-3"}
    await sets.patch("web", {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "web:2"}]}}}},
                     namespace="default")

    async def images():
        got = await pods(client)
        return {n: p["spec"]["containers"][0]["image"] for n, p in got.items()} if len(got) == 4 else None

    async def top_two_updated():
        return await images() == {"web-0": "web:1", "web-1": "web:1", "web-2": "web:2", "web-3": "web:2"}
    await eventually(top_two_updated)
    await asyncio.sleep(0.1)
    assert await top_two_updated(), "two unavailable: no more pods go until they are ready"
    kubelet.hold = set()

    async def all_updated():
        return set((await images() or {"x": ""}).values()) == {"web:2"}
    await eventually(all_updated)


async def test_on_delete_keeps_pods_until_deleted(env):
    client, _ = env
    sets = client.resource("apps", "v1", "statefulsets")
    await sets.create(statefulset(replicas=2, updateStrategy={"type": "OnDelete"}))
    await eventually(lambda: sts_status(client, lambda s: s.get("availableReplicas") == 2))
    await sets.patch("web", {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "web:2"}]}}}},
                     namespace="default")
    st = await eventually(lambda: sts_status(client, lambda s: s.get("observedGeneration") == 2))
    assert st["updateRevision"] != st["currentRevision"] and st.get("updatedReplicas", 0) == 0
    await asyncio.sleep(0.1)
    assert {p["spec"]["containers"][0]["image"] for p in (await pods(client)).values()} == {"web:1"}
    await client.resource("", "v1", "pods").delete("web-0", "default")

    async def web0_updated():
        p = (await pods(client)).get("web-0")
        return p is not None and p["spec"]["containers"][0]["image"] == "web:2"
    await eventually(web0_updated)


async def test_identity_labels_are_restored(env):
    client, _ = env
    await client.resource("apps", "v1", "statefulsets").create(statefulset(replicas=1))
    await eventually(lambda: sts_status(client, lambda s: s.get("readyReplicas") == 1))
    podc = client.resource("", "v1", "pods")
    await podc.patch("web-0", {"metadata": {"labels": {"apps.kubernetes.io/pod-index": "7"}}}, namespace="default")

    async def restored():
        pod = await podc.get("web-0", "default")
        return pod["metadata"]["labels"]["apps.kubernetes.io/pod-index"] == "0"
    assert await eventually(restored)


@pytest.mark.parametrize("policy,first", [("Parallel", ["web-1", "web-2", "web-3"]), ("OrderedReady", ["web-3"])])
async def test_scale_down_waits_for_each_pod_unless_parallel(env, policy, first):
    client, kubelet = env
    sets = client.resource("apps", "v1", "statefulsets")
    await sets.create(statefulset(replicas=4, podManagementPolicy=policy))
    await eventually(lambda: sts_status(client, lambda s: s.get("readyReplicas") == 4))
    kubelet.task.cancel()  # no kubelet: deleted pods stay terminating

    async def terminating():
        items, _ = await client.resource("", "v1", "pods").list("default")
        return sorted(p["metadata"]["name"] for p in items if p["metadata"].get("deletionTimestamp")) or None
    await sets.patch("web", {"spec": {"replicas": 1}}, namespace="default")
    await eventually(lambda: _equal(terminating, first))
    await asyncio.sleep(0.1)
    assert await terminating() == first


async def _equal(fn, want):
    return await fn() == want


async def test_history_is_truncated_to_the_limit(env):
    client, _ = env
    sets = client.resource("apps", "v1", "statefulsets")
    await sets.create(statefulset(replicas=1, revisionHistoryLimit=1))
    for generation, image in enumerate(("web:2", "web:3", "web:4"), start=1):
        await eventually(lambda g=generation: sts_status(client, lambda s: s.get("observedGeneration") == g
                                                         and s.get("readyReplicas") == 1
                                                         and s.get("currentRevision") == s.get("updateRevision")))
        await sets.patch("web", {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": image}]}}}},
                         namespace="default")

    async def history():
        items, _ = await client.resource("apps", "v1", "controllerrevisions").list("default")
        return sorted(r["revision"] for r in items)
    assert await eventually(lambda: _equal(history, [3, 4]))


async def test_a_revision_carries_the_sets_annotations_when_made(env):
    """newRevision copies the set's annotations onto the ControllerRevision, so a
    kubernetes.io/change-cause set before a template change is that revision's CHANGE-CAUSE in
    `kubectl rollout history sts`."""
    client, _ = env
    sets = client.resource("apps", "v1", "statefulsets")
    body = statefulset(replicas=1)
    body["metadata"]["annotations"] = {"kubernetes.io/change-cause": "first"}
    await sets.create(body)
    await eventually(lambda: sts_status(client, lambda s: s.get("readyReplicas") == 1))
    await sets.patch("web", {"metadata": {"annotations": {"kubernetes.io/change-cause": "image web:2"}},
                             "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "web:2"}]}}}},
                     namespace="default")

    async def causes():
        items, _ = await client.resource("apps", "v1", "controllerrevisions").list("default")
        return sorted((r["revision"], (r["metadata"].get("annotations") or {}).get("kubernetes.io/change-cause"))
                      for r in items)
    assert await eventually(lambda: _equal(causes, [(1, "first"), (2, "image web:2")]))


async def test_a_member_ready_behind_an_unready_one_is_counted_available_after_min_ready_seconds():
    """OrderedReady stops at web-0 once it is not ready; web-1, ready meanwhile, still becomes
    available minReadySeconds later with no event to say so (virtual time)."""
    s = await make_stack()
    clock = VirtualClock()
    ctrl = StatefulSetController(s.client, clock=clock)
    await ctrl.start()
    podc, sets = s.client.resource("", "v1", "pods"), s.client.resource("apps", "v1", "statefulsets")

    async def ready(name, is_ready=True):
        pod = await podc.get(name, "default")
        await podc.update({**pod, "status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True" if is_ready else "False",
             "lastTransitionTime": format_time(clock.now())}]}}, subresource="status")

    async def status(**want):
        st = (await sets.get("web", "default")).get("status") or {}
        return st if all(st.get(k, 0) == v for k, v in want.items()) else None

    def soon(check):
        return settled(clock, check)
    try:
        await sets.create(statefulset(replicas=2, minReadySeconds=10, volumeClaimTemplates=[]))
        await soon(lambda: has(s.client, ["web-0"]))
        await ready("web-0")
        await soon(lambda: status(readyReplicas=1, availableReplicas=0))
        await clock.advance(11)
        await soon(lambda: has(s.client, ["web-0", "web-1"]))  # web-0 available: web-1 follows
        await ready("web-0", False)
        await soon(lambda: status(readyReplicas=0))
        await ready("web-1")
        await soon(lambda: status(readyReplicas=1, availableReplicas=0))
        await clock.advance(11)
        await soon(lambda: status(readyReplicas=1, availableReplicas=1))
    finally:
        await stop(ctrl)
        await s.close()


async def test_a_pod_naming_a_predecessor_uid_belongs_to_no_set():
    """resolveControllerRef: the set a pod's controller reference names, only with its uid; a pod of a
    deleted predecessor of the same name is no member, and the set is not woken for it."""
    s = await make_stack()
    ctrl = StatefulSetController(s.client)
    await ctrl.start()
    try:
        sts = await s.client.resource("apps", "v1", "statefulsets").create(statefulset(replicas=0))

        async def cached():
            return ctrl.set_inf.get("default/web")
        await eventually(cached)
        pod = {"metadata": {"name": "web-0", "namespace": "default"}}
        ref = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "controller": True}
        assert ctrl._owner_key(pod, {**ref, "uid": sts["metadata"]["uid"]}) == "default/web"
        assert ctrl._owner_key(pod, {**ref, "uid": "0-predecessor"}) is None
    finally:
        await stop(ctrl)
        await s.close()


async def test_parallel_creates_in_slow_start_batches_and_writes_its_status():
    """runForAll for a Parallel set: ordinals in slow-start batches [0], [1, 2], [3..6], [7..9]. Room
    for three pods: the third batch fails whole (four FailedCreate), the fourth is never begun, and
    the status is written all the same, as upstream's performUpdate does."""
    s = await make_stack()
    client = s.client
    ctrl = await informing(StatefulSetController(client))
    sets = client.resource("apps", "v1", "statefulsets")
    try:
        await pod_quota(client, 3)
        await seen(ctrl.set_inf, await sets.create(statefulset(replicas=10, podManagementPolicy="Parallel")))
        with pytest.raises(APIError) as e:
            await ctrl.sync("default/web")
        assert e.value.code == 403 and "exceeded quota: pods" in e.value.message
        assert await names(client) == ["web-0", "web-1", "web-2"]
        async def failed():  # the recorder writes its Events after the sync, as upstream's
            items, _ = await client.resource("", "v1", "events").list("default")
            got = sorted(ev["message"].split()[2] for ev in items if ev["reason"] == "FailedCreate")
            return got if len(got) >= 4 else None
        assert await eventually(failed) == ["web-3", "web-4", "web-5", "web-6"]
        st = (await sets.get("web", "default"))["status"]
        assert st["observedGeneration"] == 1 and st["updateRevision"]
    finally:
        await stopped(ctrl)
        await s.close()
