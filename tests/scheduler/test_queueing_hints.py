"""Queueing hints through the scheduler (issue 19): a pod that fits nowhere waits while cluster
events that cannot help it come and go, and is retried and bound when one that can arrives."""

import pytest

from nanokube.scheduler.scheduler import Scheduler
from tests.controllers import eventually, make_stack
from tests.scheduler import node, pod
from tests.scheduler.test_scheduler import add_node, bound, strip_uid


@pytest.fixture
async def stack():
    s = await make_stack()
    sched = Scheduler(s.client, seed=1)
    yield s.client, sched
    await sched.stop()
    await s.close()


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
