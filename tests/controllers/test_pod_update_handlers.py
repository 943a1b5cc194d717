"""What the controllers' pod informer handlers queue for a pod update: every change that matters to
a controller still queues its key, and a status write that changes nothing it reads (a pending
pod's PodScheduled=False, which every pod informer is handed) queues nothing. The controllers run
their informers only, no workers, so what a handler queued stays in the queue to be read."""

import pytest

from nanokube.client.informer import key_of
from nanokube.clock import VirtualClock
from nanokube.controllers.daemonset import DaemonSetController
from nanokube.controllers.deployment import DeploymentController
from nanokube.controllers.disruption import DisruptionController
from nanokube.controllers.endpointslice import EndpointSliceController
from nanokube.controllers.ephemeral_volume import EphemeralVolumeController
from nanokube.controllers.garbagecollector import GarbageCollector
from nanokube.controllers.job import SYNC_BATCH_PERIOD, JobController
from nanokube.controllers.pvc_protection import PVCProtectionController
from nanokube.controllers.replicaset import ReplicaSetController
from nanokube.controllers.replicationcontroller import ReplicationControllerController
from nanokube.controllers.resourcequota import ResourceQuotaController
from nanokube.controllers.statefulset import StatefulSetController
from tests.controllers import eventually

NS = "default"
WEB = {"app": "web"}
UNSCHEDULABLE = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/1 nodes"}


async def informing(ctrl):
    """Run the controller's informers, not its workers."""
    ctrl.informer_factory.start(ctrl.informers())
    for inf in ctrl.informers():
        await inf.synced.wait()
    return ctrl


async def stopped(ctrl):
    await ctrl.informer_factory.stop()


async def seen(inf, obj: dict) -> None:
    """Wait until the informer holds `obj`'s write: its handlers have run for it."""
    key, rv = key_of(obj), obj["metadata"]["resourceVersion"]

    async def caught_up():
        held = inf.get(key)
        return held is not None and held["metadata"]["resourceVersion"] == rv
    await eventually(caught_up)


async def drained(ctrl) -> set:
    """The keys queued since the last drain; on a VirtualClock also those a controller asked for after
    its batching delay (the Job controller's pod events), which is let pass first."""
    if isinstance(ctrl.clock, VirtualClock):
        await ctrl.clock.advance(SYNC_BATCH_PERIOD)
    keys = set()
    while len(ctrl.queue):
        key = await ctrl.queue.get()
        ctrl.queue.done(key)
        keys.add(key)
    return keys


def pod(name: str, labels: dict | None = None, **spec) -> dict:
    return {"metadata": {"name": name, "namespace": NS, "labels": dict(labels or WEB)},
            "spec": {"containers": [{"name": "c", "image": "nginx"}], **spec}}


async def status(client, p: dict, **st) -> dict:
    """A status write as the scheduler or kubelet makes it."""
    return await client.resource("", "v1", "pods").patch(
        p["metadata"]["name"], {"status": st}, "application/strategic-merge-patch+json", NS, subresource="status")


async def meta(client, p: dict, **md) -> dict:
    return await client.resource("", "v1", "pods").patch(p["metadata"]["name"], {"metadata": md}, namespace=NS)


@pytest.mark.parametrize("ctrl_class,resource,selector", [
    (ReplicaSetController, ("apps", "v1", "replicasets"), {"matchLabels": WEB}),
    (ReplicationControllerController, ("", "v1", "replicationcontrollers"), WEB)])
async def test_an_orphans_status_write_queues_no_adopter_its_labels_and_an_owners_do(stack, ctrl_class, resource,
                                                                                      selector):
    ctrl = await informing(ctrl_class(stack.client))
    try:
        owner = await stack.client.resource(*resource).create({
            "metadata": {"name": "web", "namespace": NS},
            "spec": {"replicas": 0, "selector": selector,
                     "template": {"metadata": {"labels": WEB}, "spec": pod("t")["spec"]}}}, NS)
        await seen(ctrl.rs_inf, owner)
        pods = stack.client.resource("", "v1", "pods")
        orphan = await pods.create(pod("orphan", {"app": "other"}), NS)
        await seen(ctrl.pod_inf, orphan)
        assert await drained(ctrl) == {"default/web"}  # the owner's own add
        p = await status(stack.client, orphan, conditions=[UNSCHEDULABLE])
        await seen(ctrl.pod_inf, p)
        assert await drained(ctrl) == set()
        p = await meta(stack.client, p, labels=WEB)  # now selected: may be adopted
        await seen(ctrl.pod_inf, p)
        assert await drained(ctrl) == {"default/web"}
        p = await status(stack.client, p, phase="Running")  # still selected, but nothing new to adopt
        await seen(ctrl.pod_inf, p)
        assert await drained(ctrl) == set()
        ref = {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": "web",
               "uid": owner["metadata"]["uid"], "controller": True}
        p = await meta(stack.client, p, ownerReferences=[ref])
        await seen(ctrl.pod_inf, p)
        assert await drained(ctrl) == {"default/web"}
        p = await status(stack.client, p, conditions=[{"type": "Ready", "status": "True"}])  # counts in its status
        await seen(ctrl.pod_inf, p)
        assert await drained(ctrl) == {"default/web"}
    finally:
        await stopped(ctrl)


async def test_daemonset_pod_updates_queue_owners_of_both_sides_and_adopters_only_on_labels(stack):
    ctrl = await informing(DaemonSetController(stack.client))
    try:
        sets = stack.client.resource("apps", "v1", "daemonsets")
        owners = {}
        for name in ("a", "b"):
            owners[name] = await sets.create({
                "metadata": {"name": name, "namespace": NS},
                "spec": {"selector": {"matchLabels": WEB},
                         "template": {"metadata": {"labels": WEB}, "spec": pod("t")["spec"]}}}, NS)
            await seen(ctrl.ds_inf, owners[name])
        pods = stack.client.resource("", "v1", "pods")
        p = await pods.create(pod("orphan"), NS)
        await seen(ctrl.pod_inf, p)
        assert await drained(ctrl) == {"default/a", "default/b"}  # their adds, and the orphan both select
        p = await status(stack.client, p, conditions=[UNSCHEDULABLE])
        await seen(ctrl.pod_inf, p)
        assert await drained(ctrl) == set()

        def ref(name):
            return {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name,
                    "uid": owners[name]["metadata"]["uid"], "controller": True}
        p = await meta(stack.client, p, ownerReferences=[ref("a")])
        await seen(ctrl.pod_inf, p)
        assert await drained(ctrl) == {"default/a"}
        p = await status(stack.client, p, phase="Running")
        await seen(ctrl.pod_inf, p)
        assert await drained(ctrl) == {"default/a"}
        p = await meta(stack.client, p, ownerReferences=[ref("b")])  # upstream syncs the one it left too
        await seen(ctrl.pod_inf, p)
        assert await drained(ctrl) == {"default/a", "default/b"}
    finally:
        await stopped(ctrl)


def _job(name):
    return {"metadata": {"name": name, "namespace": NS},
            "spec": {"template": {"metadata": {"labels": WEB}, "spec": {**pod("t")["spec"], "restartPolicy": "Never"}}}}


def _statefulset(name):
    return {"metadata": {"name": name, "namespace": NS},
            "spec": {"selector": {"matchLabels": WEB}, "serviceName": name, "replicas": 0,
                     "template": {"metadata": {"labels": WEB}, "spec": pod("t")["spec"]}}}


@pytest.mark.parametrize("ctrl_class,resource,kind,body,informer", [
    (JobController, ("batch", "v1", "jobs"), "Job", _job, "job_inf"),
    (StatefulSetController, ("apps", "v1", "statefulsets"), "StatefulSet", _statefulset, "set_inf")])
async def test_a_pods_owner_is_synced_on_its_updates_and_the_one_it_left_too(stack, ctrl_class, resource, kind, body,
                                                                             informer):
    ctrl = await informing(ctrl_class(stack.client, clock=VirtualClock()))  # the Job batches its pods' events
    try:
        owners = {}
        for name in ("a", "b"):
            owners[name] = await stack.client.resource(*resource).create(body(name), NS)
            await seen(getattr(ctrl, informer), owners[name])

        def ref(name):
            return {"apiVersion": owners[name]["apiVersion"], "kind": kind, "name": name,
                    "uid": owners[name]["metadata"]["uid"], "controller": True}
        p = pod("p")
        p["metadata"]["ownerReferences"] = [ref("a")]
        p = await stack.client.resource("", "v1", "pods").create(p, NS)
        await seen(ctrl.pod_inf, p)
        await drained(ctrl)
        p = await status(stack.client, p, conditions=[UNSCHEDULABLE])
        await seen(ctrl.pod_inf, p)
        assert await drained(ctrl) == {"default/a"}
        p = await meta(stack.client, p, ownerReferences=[ref("b")])
        await seen(ctrl.pod_inf, p)
        assert await drained(ctrl) == {"default/a", "default/b"}
    finally:
        await stopped(ctrl)


def _selecting_job(name):
    body = _job(name)
    body["spec"].update(manualSelector=True, selector={"matchLabels": WEB})
    return body


@pytest.mark.parametrize("ctrl_class,resource,body,informer", [
    (JobController, ("batch", "v1", "jobs"), _selecting_job, "job_inf"),
    (StatefulSetController, ("apps", "v1", "statefulsets"), _statefulset, "set_inf")])
async def test_an_orphan_queues_the_owners_selecting_it_on_its_add_and_label_changes_only(stack, ctrl_class, resource,
                                                                                        body, informer):
    ctrl = await informing(ctrl_class(stack.client, clock=VirtualClock()))
    try:
        await stack.client.resource("", "v1", "namespaces").create({"metadata": {"name": "other"}})
        for ns, name in ((NS, "a"), (NS, "b"), ("other", "a")):  # the same selector elsewhere selects none of these
            owner = body(name)
            owner["metadata"]["namespace"] = ns
            await seen(getattr(ctrl, informer), await stack.client.resource(*resource).create(owner, ns))
        await drained(ctrl)
        pods = stack.client.resource("", "v1", "pods")
        p = await pods.create(pod("web-0"), NS)
        await seen(ctrl.pod_inf, p)
        assert await drained(ctrl) == {"default/a", "default/b"}
        p = await status(stack.client, p, conditions=[UNSCHEDULABLE])
        await seen(ctrl.pod_inf, p)
        assert await drained(ctrl) == set()
        q = await pods.create(pod("web-1", {"app": "other"}), NS)
        await seen(ctrl.pod_inf, q)
        assert await drained(ctrl) == set()
        q = await meta(stack.client, q, labels=WEB)  # now selected: may be adopted
        await seen(ctrl.pod_inf, q)
        assert await drained(ctrl) == {"default/a", "default/b"}
    finally:
        await stopped(ctrl)


async def test_deployment_replicaset_updates_queue_owners_of_both_sides_and_adopters_only_on_labels(stack):
    ctrl = await informing(DeploymentController(stack.client))
    try:
        owners = {}
        for name in ("a", "b"):
            owners[name] = await stack.client.resource("apps", "v1", "deployments").create({
                "metadata": {"name": name, "namespace": NS},
                "spec": {"selector": {"matchLabels": WEB},
                         "template": {"metadata": {"labels": WEB}, "spec": pod("t")["spec"]}}}, NS)
            await seen(ctrl.dep_inf, owners[name])
        await drained(ctrl)
        sets = stack.client.resource("apps", "v1", "replicasets")
        rs = await sets.create({"metadata": {"name": "web", "namespace": NS, "labels": WEB},
                                "spec": {"replicas": 0, "selector": {"matchLabels": WEB},
                                         "template": {"metadata": {"labels": WEB}, "spec": pod("t")["spec"]}}}, NS)
        await seen(ctrl.rs_inf, rs)
        assert await drained(ctrl) == {"default/a", "default/b"}  # an orphan both may adopt
        rs = await sets.update({**rs, "status": {"replicas": 0, "observedGeneration": 1}}, subresource="status")
        await seen(ctrl.rs_inf, rs)
        assert await drained(ctrl) == set()

        def ref(name):
            return {"apiVersion": "apps/v1", "kind": "Deployment", "name": name,
                    "uid": owners[name]["metadata"]["uid"], "controller": True}
        rs = await sets.patch("web", {"metadata": {"ownerReferences": [ref("a")]}}, namespace=NS)
        await seen(ctrl.rs_inf, rs)
        assert await drained(ctrl) == {"default/a"}
        rs = await sets.patch("web", {"metadata": {"ownerReferences": [ref("b")]}}, namespace=NS)
        await seen(ctrl.rs_inf, rs)
        assert await drained(ctrl) == {"default/a", "default/b"}
        rs = await sets.patch("web", {"metadata": {"ownerReferences": None}}, namespace=NS)
        await seen(ctrl.rs_inf, rs)
        assert await drained(ctrl) == {"default/a", "default/b"}  # the one it left, and both may adopt it
        await sets.delete("web", NS)

        async def gone():
            return ctrl.rs_inf.get("default/web") is None
        await eventually(gone)
        assert await drained(ctrl) == set()  # no Deployment cares about an orphan going
    finally:
        await stopped(ctrl)


async def test_endpointslice_syncs_a_service_for_what_its_endpoints_show_only(stack):
    ctrl = await informing(EndpointSliceController(stack.client))
    try:
        svc = await stack.client.resource("", "v1", "services").create({
            "metadata": {"name": "web", "namespace": NS},
            "spec": {"selector": WEB, "ports": [{"port": 80}]}}, NS)
        await seen(ctrl.svc_inf, svc)
        pods = stack.client.resource("", "v1", "pods")
        p = await pods.create(pod("p"), NS)
        await seen(ctrl.pod_inf, p)
        await drained(ctrl)
        p = await status(stack.client, p, conditions=[UNSCHEDULABLE])  # no address before or after
        await seen(ctrl.pod_inf, p)
        assert await drained(ctrl) == set()
        p = await status(stack.client, p, podIP="10.0.0.5", podIPs=[{"ip": "10.0.0.5"}], phase="Running")
        await seen(ctrl.pod_inf, p)
        assert await drained(ctrl) == {"default/web"}
        p = await status(stack.client, p, conditions=[{"type": "Initialized", "status": "True"}])
        await seen(ctrl.pod_inf, p)
        assert await drained(ctrl) == set()
        p = await status(stack.client, p, conditions=[{"type": "Ready", "status": "True"}])
        await seen(ctrl.pod_inf, p)
        assert await drained(ctrl) == {"default/web"}
        p = await meta(stack.client, p, labels={"app": "other"})  # leaves the service
        await seen(ctrl.pod_inf, p)
        assert await drained(ctrl) == {"default/web"}
    finally:
        await stopped(ctrl)


async def test_disruption_budget_is_synced_for_a_pod_leaving_its_selector(stack):
    ctrl = await informing(DisruptionController(stack.client))
    try:
        await stack.client.resource("", "v1", "namespaces").create({"metadata": {"name": "other"}})
        for ns in ("other", NS):  # the same selector in another namespace selects none of these pods
            pdb = await stack.client.resource("policy", "v1", "poddisruptionbudgets").create({
                "metadata": {"name": "web", "namespace": ns},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": WEB}}}, ns)
            await seen(ctrl.pdbs, pdb)
        await drained(ctrl)
        p = await stack.client.resource("", "v1", "pods").create(pod("p"), NS)
        await seen(ctrl.pods, p)
        assert await drained(ctrl) == {("pdb", "default/web")}
        p = await status(stack.client, p, conditions=[{"type": "Ready", "status": "True"}])
        await seen(ctrl.pods, p)
        assert await drained(ctrl) == {("pdb", "default/web")}
        p = await meta(stack.client, p, labels={"app": "other"})
        await seen(ctrl.pods, p)
        assert await drained(ctrl) == {("pdb", "default/web")}
        p = await status(stack.client, p, conditions=[{"type": "DisruptionTarget", "status": "True"}])
        await seen(ctrl.pods, p)
        assert await drained(ctrl) == {("pod", "default/p")}
    finally:
        await stopped(ctrl)


async def test_resourcequota_recounts_a_pod_that_stops_counting_only_where_a_quota_is(stack):
    ctrl = await informing(ResourceQuotaController(stack.client))
    try:
        pods_inf = ctrl.watched[("", "pods")]
        pods = stack.client.resource("", "v1", "pods")
        p = await pods.create(pod("p"), NS)
        p = await status(stack.client, p, phase="Succeeded")
        await seen(pods_inf, p)
        assert await drained(ctrl) == set()  # no quota anywhere
        quota = await stack.client.resource("", "v1", "resourcequotas").create(
            {"metadata": {"name": "q", "namespace": NS}, "spec": {"hard": {"pods": "10"}}}, NS)
        await seen(ctrl.quotas, quota)
        await drained(ctrl)
        p = await pods.create(pod("q"), NS)
        p = await status(stack.client, p, conditions=[UNSCHEDULABLE])
        await seen(pods_inf, p)
        assert await drained(ctrl) == set()  # still charged
        p = await status(stack.client, p, phase="Succeeded")
        await seen(pods_inf, p)
        assert await drained(ctrl) == {"default/q"}
    finally:
        await stopped(ctrl)


async def test_ephemeral_volume_pods_are_queued_on_each_update_others_never(stack):
    ctrl = await informing(EphemeralVolumeController(stack.client))
    try:
        template = {"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
        pods = stack.client.resource("", "v1", "pods")
        with_eph = await pods.create(pod("eph", volumes=[
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": template}}]), NS)
        plain = await pods.create(pod("plain", volumes=[{"name": "tmp", "emptyDir": {}}]), NS)
        await seen(ctrl.pods, plain)
        assert await drained(ctrl) == {"default/eph"}
        for p in (with_eph, plain):
            await seen(ctrl.pods, await status(stack.client, p, conditions=[UNSCHEDULABLE]))
        assert await drained(ctrl) == {"default/eph"}
    finally:
        await stopped(ctrl)


async def test_pvc_protection_looks_again_when_a_pod_can_release_its_claim(stack):
    ctrl = await informing(PVCProtectionController(stack.client))
    try:
        claims = stack.client.resource("", "v1", "persistentvolumeclaims")
        pvc = await claims.create({"metadata": {"name": "data", "namespace": NS, "finalizers": ["kubernetes.io/pvc-protection"]},
                                   "spec": {"accessModes": ["ReadWriteOnce"],
                                            "resources": {"requests": {"storage": "1Gi"}}}}, NS)
        pvc = await claims.delete("data", NS)  # held by its finalizer, deleting
        await seen(ctrl.claims, pvc)
        await drained(ctrl)
        p = await stack.client.resource("", "v1", "pods").create(pod("p", nodeName="n1", volumes=[
            {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]), NS)
        p = await status(stack.client, p, phase="Running")  # scheduled and running: it still uses the claim
        await seen(ctrl.pods, p)
        assert await drained(ctrl) == set()
        p = await status(stack.client, p, phase="Succeeded")
        await seen(ctrl.pods, p)
        assert await drained(ctrl) == {"default/data"}
        await claims.patch("data", {"metadata": {"finalizers": None}}, namespace=NS)  # released, the claim goes

        async def gone():
            return ctrl.claims.get("default/data") is None
        await eventually(gone)
        p = await stack.client.resource("", "v1", "pods").create(pod("r", volumes=[
            {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]), NS)
        p = await status(stack.client, p, conditions=[UNSCHEDULABLE])  # its claim is no longer deleting
        await seen(ctrl.pods, p)
        assert await drained(ctrl) == set()
    finally:
        await stopped(ctrl)


async def test_garbage_collector_looks_at_a_dependent_when_its_owners_change_not_its_status(stack):
    ctrl = await informing(GarbageCollector(stack.client))
    try:
        cm = await stack.client.resource("", "v1", "configmaps").create({"metadata": {"name": "owner", "namespace": NS}},
                                                                        NS)
        ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": cm["metadata"]["uid"]}
        pods_inf = next(i for i in ctrl.informers() if i.rc.res.plural == "pods")
        p = await stack.client.resource("", "v1", "pods").create(
            {**pod("p"), "metadata": {**pod("p")["metadata"], "ownerReferences": [ref]}}, NS)
        await seen(pods_inf, p)
        uid = p["metadata"]["uid"]
        assert await drained(ctrl) == {uid}
        p = await status(stack.client, p, conditions=[UNSCHEDULABLE])
        await seen(pods_inf, p)
        assert await drained(ctrl) == set()
        p = await meta(stack.client, p, ownerReferences=[{**ref, "blockOwnerDeletion": True}])
        await seen(pods_inf, p)
        assert await drained(ctrl) == {uid}
    finally:
        await stopped(ctrl)


def _replicaset(name, app):
    return {"metadata": {"name": name, "namespace": NS},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": app}},
                     "template": {"metadata": {"labels": {"app": app}}, "spec": pod("t")["spec"]}}}


def _daemonset(name, app):
    return {"metadata": {"name": name, "namespace": NS},
            "spec": {"selector": {"matchLabels": {"app": app}},
                     "template": {"metadata": {"labels": {"app": app}}, "spec": pod("t")["spec"]}}}


def _selecting_statefulset(name, app):
    return {"metadata": {"name": name, "namespace": NS},
            "spec": {"selector": {"matchLabels": {"app": app}}, "serviceName": name, "replicas": 0,
                     "template": {"metadata": {"labels": {"app": app}}, "spec": pod("t")["spec"]}}}


def _job_selecting(name, app):
    return {"metadata": {"name": name, "namespace": NS},
            "spec": {"manualSelector": True, "selector": {"matchLabels": {"app": app}},
                     "template": {"metadata": {"labels": {"app": app}},
                                  "spec": {**pod("t")["spec"], "restartPolicy": "Never"}}}}


@pytest.mark.parametrize("ctrl_class,resource,body,expects", [
    (JobController, ("batch", "v1", "jobs"), _job_selecting, True),
    (ReplicaSetController, ("apps", "v1", "replicasets"), _replicaset, True),
    (DaemonSetController, ("apps", "v1", "daemonsets"), _daemonset, True),
    (StatefulSetController, ("apps", "v1", "statefulsets"), _selecting_statefulset, False)])
async def test_a_pod_first_seen_terminating_is_a_deletion_not_a_creation(stack, ctrl_class, resource, body, expects):
    """addPod after a restart: an owned pod already being deleted counts as its owner's deletion (its
    expected deletion observed, no creation), and a terminating orphan is no one's to adopt."""
    owner = await stack.client.resource(*resource).create(body("a", "a"), NS)
    await stack.client.resource(*resource).create(body("b", "web"), NS)
    pods = stack.client.resource("", "v1", "pods")
    owned = pod("owned", {"app": "a"})
    owned["metadata"].update(finalizers=["example.com/hold"], ownerReferences=[{
        "apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": "a", "uid": owner["metadata"]["uid"],
        "controller": True}])
    orphan = pod("orphan")
    orphan["metadata"]["finalizers"] = ["example.com/hold"]
    for p in (owned, orphan):
        await pods.create(p, NS)
        await pods.delete(p["metadata"]["name"], NS)  # held by its finalizer: terminating
    ctrl = ctrl_class(stack.client, clock=VirtualClock())  # the Job batches its pods' events
    if expects:
        ctrl.expectations.expect_deletions("default/a", [{"metadata": {"name": "owned", "namespace": NS}}])
    rest = [inf for inf in ctrl.informers() if inf is not ctrl.pod_inf]
    ctrl.informer_factory.start(rest)
    try:
        for inf in rest:
            await inf.synced.wait()
        assert await drained(ctrl) == {"default/a", "default/b"}  # the sets' own adds
        ctrl.informer_factory.start([ctrl.pod_inf])
        await ctrl.pod_inf.synced.wait()
        assert ctrl.pod_inf.get("default/orphan")["metadata"]["deletionTimestamp"]
        assert await drained(ctrl) == {"default/a"}
        if expects:
            assert ctrl.expectations.satisfied("default/a")
    finally:
        await stopped(ctrl)


async def test_a_daemonset_pod_given_its_deletion_timestamp_is_its_deletion_at_once(stack):
    """DaemonSet's updatePod: the owner observes the deletion when the grace period starts, not when the
    pod is finally gone, so a replacement need not wait for it."""
    ctrl = await informing(DaemonSetController(stack.client))
    try:
        owner = await stack.client.resource("apps", "v1", "daemonsets").create(_daemonset("a", "a"), NS)
        await seen(ctrl.ds_inf, owner)
        p = pod("owned", {"app": "a"})
        p["metadata"].update(finalizers=["example.com/hold"], ownerReferences=[{
            "apiVersion": "apps/v1", "kind": "DaemonSet", "name": "a", "uid": owner["metadata"]["uid"],
            "controller": True}])
        pods = stack.client.resource("", "v1", "pods")
        p = await pods.create(p, NS)
        await seen(ctrl.pod_inf, p)
        await drained(ctrl)
        ctrl.expectations.expect("default/a", dels=1)
        p = await pods.delete("owned", NS)  # held by its finalizer: terminating, not gone
        await seen(ctrl.pod_inf, p)
        assert ctrl.expectations.satisfied("default/a")
        assert await drained(ctrl) == {"default/a"}
    finally:
        await stopped(ctrl)
