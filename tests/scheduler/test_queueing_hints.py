"""Queueing hints through the scheduler (issue 19): a pod that fits nowhere waits while cluster
events that cannot help it come and go, and is retried and bound when one that can arrives."""

import pytest

from nanokube.controllers.persistentvolume import PersistentVolumeController
from nanokube.controllers.resourceclaim import ResourceClaimController
from nanokube.node.storage import LocalPathProvisioner
from tests.controllers import eventually
from tests.scheduler import node, pod
from tests.scheduler.test_dynamic_resources import R, claim, claim_pod, create_gpu_template, device_class, gpu_slice
from tests.scheduler.test_scheduler import add_node, bound, strip_uid
from tests.scheduler.test_volume_binding import claim_pod as volume_pod, create_rwop_claim


def labelled(name, labels, node_name=None, **spec):
    p = strip_uid(pod(name, **spec))
    p["metadata"]["labels"] = labels
    if node_name:
        p["spec"]["nodeName"] = node_name
    return p


def required(kind, labels, key):
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": labels}, "topologyKey": key}]}}


async def parked(sched, pods, name, plugins):
    """The pod's one failed attempt is over and it waits in the unschedulable pool, turned away by
    `plugins` only; its backoff is cleared, so any move would retry it at once."""
    key = f"default/{name}"

    async def waiting():
        p = await pods.get(name, "default")
        failed = any(c["type"] == "PodScheduled" and c["status"] == "False"
                     for c in (p.get("status") or {}).get("conditions") or [])
        return failed and key not in sched.queue.in_flight and sched.queue.unschedulable.get(key)

    info = await eventually(waiting)
    assert info.unschedulable_plugins == plugins and info.attempts == 1
    info.backoff_expires = 0
    return info


def still_waiting(sched, info):
    assert sched.queue.unschedulable.get(info.key) is info and info.attempts == 1


async def node_labels_seen(sched, name, labels):
    async def seen():
        n = sched.cache.infos.get(name)
        return n is not None and all(n.labels.get(k) == v for k, v in labels.items())
    await eventually(seen)


async def test_pod_affinity_waits_for_a_node_change_in_its_topology_key(stack):
    """The only pod the affinity term selects runs on a node without the term's zone key: no zone
    holds it. A label other than zone and a node arriving without zone cannot help (upstream's
    isSchedulableAfterNodeChange); that node gaining a zone makes a domain with the pod in it."""
    client, sched = stack
    pods, nodes = client.resource("", "v1", "pods"), client.resource("", "v1", "nodes")
    await add_node(client, node("a1", labels={"zone": "a"}))
    await add_node(client, node("lone"))
    await pods.create(labelled("db", {"app": "db"}, "lone"))
    await sched.start()
    await pods.create(labelled("web", {"app": "web"}, affinity=required("podAffinity", {"app": "db"}, "zone")))
    info = await parked(sched, pods, "web", {"InterPodAffinity"})
    await nodes.patch("a1", {"metadata": {"labels": {"rack": "r1"}}})
    await add_node(client, node("c1", labels={"rack": "r2"}))
    await node_labels_seen(sched, "a1", {"rack": "r1"})
    await node_labels_seen(sched, "c1", {"rack": "r2"})
    still_waiting(sched, info)
    await nodes.patch("lone", {"metadata": {"labels": {"zone": "c"}}})
    assert await eventually(bound(pods, "web")) == "lone"


async def test_pod_anti_affinity_waits_for_a_hated_pod_to_go(stack):
    """Another pod it hates arriving, or one it hates relabelled but still hated, cannot help a pod
    its anti-affinity keeps off every host; the deletion of one it hates can."""
    client, sched = stack
    pods = client.resource("", "v1", "pods")
    for h in ("h1", "h2"):
        await add_node(client, node(h, labels={"kubernetes.io/hostname": h}))
    await pods.create(labelled("db1", {"app": "db"}, "h1"))
    await pods.create(labelled("db2", {"app": "db"}, "h2"))
    await sched.start()
    anti = required("podAntiAffinity", {"app": "db"}, "kubernetes.io/hostname")
    await pods.create(labelled("solo", {"app": "solo"}, affinity=anti))
    info = await parked(sched, pods, "solo", {"InterPodAffinity"})
    await pods.create(labelled("db3", {"app": "db"}, "h1"))
    await pods.patch("db1", {"metadata": {"labels": {"version": "2"}}}, namespace="default")

    async def seen():
        db1, db3 = sched.pods.get("default/db1"), sched.pods.get("default/db3")
        return db3 is not None and db1["metadata"]["labels"].get("version") == "2"
    await eventually(seen)
    still_waiting(sched, info)
    await pods.delete("db2", "default", grace_period_seconds=0)
    assert await eventually(bound(pods, "solo")) == "h2"


def _incoming(sched, queue, event) -> float:
    return sched.metrics.registry.get_sample_value("scheduler_queue_incoming_pods_total",
                                                   {"queue": queue, "event": event}) or 0


@pytest.fixture
async def dra(stack):
    client, sched = stack
    await add_node(client, node("gpu-node"))
    await client.resource(R, "v1", "deviceclasses").create(device_class())
    await client.resource(R, "v1", "resourceslices").create(gpu_slice("gpu-node", 1))
    await sched.start()
    return stack


async def test_a_pod_waits_in_pre_enqueue_for_its_generated_claim_alone(dra):
    """Upstream's UpdatePodGeneratedResourceClaim and isSchedulableAfterClaimChange: a pod whose
    ResourceClaimTemplate's claim is not generated yet waits in PreEnqueue; other claims arriving
    or changing do not run its PreEnqueue again, the ResourceClaim controller creating its claim
    (and naming it in the pod's status) lets it in at once."""
    client, sched = dra
    pods, claims = client.resource("", "v1", "pods"), client.resource(R, "v1", "resourceclaims")
    await create_gpu_template(client)
    await pods.create(claim_pod("tp", template="gpu-tmpl"))

    async def gated():
        info = sched.queue.unschedulable.get("default/tp")
        return info is not None and info.gated_by == "DynamicResources" and info
    info = await eventually(gated)
    gated_once = _incoming(sched, "unschedulable", "PodAdd")
    assert gated_once == 1
    await claims.create(claim("unrelated"))
    unrelated = await claims.patch("unrelated", {"metadata": {"labels": {"a": "b"}}}, namespace="default")
    plugin = sched.frameworks["default-scheduler"].plugins["DynamicResources"]

    async def seen():
        return (plugin.dra.claims.get("default/unrelated") or {}).get("metadata", {}).get("labels") == {"a": "b"}
    await eventually(seen)
    assert unrelated and sched.queue.unschedulable.get("default/tp") is info and info.attempts == 0
    assert _incoming(sched, "unschedulable", "ResourceClaimAdd") == 0
    ctrl = ResourceClaimController(client)
    await ctrl.start()
    try:
        assert await eventually(bound(pods, "tp")) == "gpu-node"
    finally:
        await ctrl.stop()
    assert info.attempts == 1


async def test_a_claims_metadata_change_does_not_retry_the_pod_using_it(dra):
    """A pod whose claim finds no free device waits; its claim gaining a label (or a finalizer)
    leaves its status as it was, so the pod is not retried; a new ResourceSlice lets it in."""
    client, sched = dra
    pods, claims = client.resource("", "v1", "pods"), client.resource(R, "v1", "resourceclaims")
    await claims.create(claim("c0"))
    await pods.create(claim_pod("p0", "c0"))
    assert await eventually(bound(pods, "p0")) == "gpu-node"
    await claims.create(claim("c1"))
    await pods.create(claim_pod("p1", "c1"))
    info = await parked(sched, pods, "p1", {"DynamicResources"})
    await claims.patch("c1", {"metadata": {"labels": {"team": "a"}}}, namespace="default")
    plugin = sched.frameworks["default-scheduler"].plugins["DynamicResources"]

    async def seen():
        return (plugin.dra.claims.get("default/c1") or {}).get("metadata", {}).get("labels") == {"team": "a"}
    await eventually(seen)
    still_waiting(sched, info)
    await add_node(client, node("gpu-node-2"))
    await client.resource(R, "v1", "resourceslices").create(gpu_slice("gpu-node-2", 1))
    assert await eventually(bound(pods, "p1")) == "gpu-node-2"


async def test_topology_spread_waits_for_a_change_in_what_its_selector_counts(stack):
    """minDomains 3 over two zones counts the missing domain as empty, so each zone holding one
    selected pod is one too many. A selected pod relabelled but still selected, or a pod of another
    namespace arriving, cannot help (upstream's isSchedulableAfterPodChange); a selected pod leaving
    its zone can."""
    client, sched = stack
    pods = client.resource("", "v1", "pods")
    await add_node(client, node("a1", labels={"zone": "a"}))
    await add_node(client, node("b1", labels={"zone": "b"}))
    await pods.create(labelled("wa", {"app": "web"}, "a1"))
    await pods.create(labelled("wb", {"app": "web"}, "b1"))
    await sched.start()
    spread = [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "minDomains": 3,
               "labelSelector": {"matchLabels": {"app": "web"}}}]
    await pods.create(labelled("new", {"app": "web"}, topologySpreadConstraints=spread))
    info = await parked(sched, pods, "new", {"PodTopologySpread"})
    await pods.patch("wa", {"metadata": {"labels": {"version": "2"}}}, namespace="default")
    await client.resource("", "v1", "namespaces").create({"metadata": {"name": "other"}})
    elsewhere = labelled("we", {"app": "web"}, "b1")
    elsewhere["metadata"]["namespace"] = "other"
    await pods.create(elsewhere)

    async def seen():
        wa = sched.pods.get("default/wa")
        return sched.pods.get("other/we") is not None and wa["metadata"]["labels"].get("version") == "2"
    await eventually(seen)
    still_waiting(sched, info)
    await pods.delete("wa", "default", grace_period_seconds=0)
    assert await eventually(bound(pods, "new")) == "a1"


async def test_a_pod_waiting_for_a_read_write_once_pod_claim_is_retried_only_when_its_user_goes(stack, tmp_path):
    """VolumeRestrictions' hint (upstream's isSchedulableAfterPodDeleted): another pod's deletion
    frees nothing this pod mounts; the deletion of the pod holding its claim does."""
    client, sched = stack
    parts = [PersistentVolumeController(client), LocalPathProvisioner(client, str(tmp_path))]
    for p in parts:
        await p.start()
    try:
        await add_node(client, node("n1", labels={"kubernetes.io/hostname": "n1"}))
        await sched.start()
        await create_rwop_claim(client, "solo")
        pods = client.resource("", "v1", "pods")
        await pods.create(volume_pod("first", "solo"))
        await pods.create(volume_pod("bystander"))
        await eventually(bound(pods, "first"))
        await eventually(bound(pods, "bystander"))
        await pods.create(volume_pod("second", "solo"))
        info = await parked(sched, pods, "second", {"VolumeRestrictions"})
        await pods.delete("bystander", "default", grace_period_seconds=0)

        async def gone():
            return sched.pods.get("default/bystander") is None
        await eventually(gone)
        still_waiting(sched, info)
        await pods.delete("first", "default", grace_period_seconds=0)
        assert await eventually(bound(pods, "second")) == "n1"
    finally:
        for p in reversed(parts):
            await p.stop()


async def test_a_generated_claim_named_in_the_pods_status_before_it_arrives_lets_the_pod_in_on_arrival(dra):
    """The other order of the ResourceClaim controller's two writes as the scheduler may see them: the
    pod's status names its claim first (its PreEnqueue runs again and still finds none), then the
    claim arrives and lets it in."""
    client, sched = dra
    pods, claims = client.resource("", "v1", "pods"), client.resource(R, "v1", "resourceclaims")
    created = await pods.create(claim_pod("tp", template="gpu-tmpl"))

    async def gated():
        info = sched.queue.unschedulable.get("default/tp")
        return info is not None and info.gated_by == "DynamicResources" and info
    info = await eventually(gated)
    await pods.patch("tp", {"status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "tp-gpu-1"}]}},
                     namespace="default", subresource="status")

    async def regated():
        return _incoming(sched, "unschedulable", "ResourceClaimAdd") == 1
    await eventually(regated)
    assert sched.queue.unschedulable.get("default/tp") is info and info.attempts == 0
    generated = claim("tp-gpu-1")
    generated["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "tp",
                                                 "uid": created["metadata"]["uid"], "controller": True}]
    await claims.create(generated)
    assert await eventually(bound(pods, "tp")) == "gpu-node"
    assert info.attempts == 1
