import asyncio
import gc
import uuid

import pytest

from nanokube.apiserver.loopback import connector
from nanokube.node.agent import IPPool, Throttle, _dashed, _machine_id, pod_cidr
from nanokube.node.cluster import default_cluster, parse_cluster
from nanokube.node.manager import GC_FREEZE_NODES, NodeManager, _full_collections_deferred
from tests.controllers import becomes, eventually, make_stack
from tests.node import ManualClock

#: csi-translation-lib's in-tree plugins, all migrated in 1.37, as setMigrationAnnotation joins them
MIGRATED = ("kubernetes.io/aws-ebs,kubernetes.io/azure-disk,kubernetes.io/azure-file,kubernetes.io/cinder,"
            "kubernetes.io/gce-pd,kubernetes.io/portworx-volume,kubernetes.io/vsphere-volume")


def test_pod_cidrs_follow_the_node_index_and_stay_in_10_8():
    assert pod_cidr(0) == "10.244.0.0/24" and pod_cidr(7) == "10.244.7.0/24"
    assert pod_cidr(12) == "10.244.12.0/24"
    assert len({pod_cidr(i) for i in range(5000)}) == 5000
    assert all(pod_cidr(i).startswith("10.") for i in range(5000))


def test_machine_ids_are_the_uuid5_of_the_node_name():
    for name in ("gpu-0", "cpu-4999", "w-12"):
        ident = uuid.uuid5(uuid.NAMESPACE_DNS, f"{name}.nanokube").hex
        assert _machine_id(name) == ident
        assert _dashed(ident) == str(uuid.UUID(ident)) and _dashed(ident[::-1]) == str(uuid.UUID(ident[::-1]))


def test_ip_pool_reuses_released_addresses_and_keeps_requested_ones():
    pool = IPPool("10.244.3.0/24")
    a = pool.allocate("a")
    assert a == "10.244.3.2" and pool.allocate("a") == a
    assert pool.allocate("b", want="10.244.3.77") == "10.244.3.77"
    pool.release("a")
    assert pool.allocate("c") == a


def test_large_clusters_register_without_full_collections_and_restore_the_threshold():
    before = gc.get_threshold()
    with _full_collections_deferred(GC_FREEZE_NODES - 1):
        assert gc.get_threshold() == before
    with pytest.raises(RuntimeError), _full_collections_deferred(GC_FREEZE_NODES):
        assert gc.get_threshold()[:2] == before[:2] and gc.get_threshold()[2] >= 1 << 30
        raise RuntimeError("registration failed")
    assert gc.get_threshold() == before


@pytest.fixture
async def env():
    s = await make_stack()
    for ns in ("kube-node-lease",):
        await s.client.resource("", "v1", "namespaces").create({"metadata": {"name": ns}})
    clock = ManualClock()
    mgr = NodeManager(connector(s.rest), default_cluster(), clock)
    await mgr.start()
    yield s.client, clock, mgr
    await mgr.stop()
    await s.close()


async def test_nodes_register_ready_with_capacity_and_identity(env):
    client, _, _ = env
    nodes, _ = await client.resource("", "v1", "nodes").list()
    assert sorted(n["metadata"]["name"] for n in nodes) == ["gpu-0", "gpu-1"]
    n = next(n for n in nodes if n["metadata"]["name"] == "gpu-1")
    assert n["spec"]["podCIDR"] == "10.244.1.0/24" and n["spec"]["podCIDRs"] == ["10.244.1.0/24"]
    st = n["status"]
    assert st["capacity"] == {"cpu": "64", "memory": "512Gi", "pods": "110", "ephemeral-storage": "1Ti"}
    assert st["allocatable"] == st["capacity"]
    assert st["nodeInfo"]["kubeletVersion"] == "v1.37.0"
    assert {a["type"] for a in st["addresses"]} == {"InternalIP", "Hostname"}
    conds = {c["type"]: c for c in st["conditions"]}
    assert conds["Ready"]["status"] == "True" and conds["Ready"]["reason"] == "KubeletReady"
    assert all(conds[t]["status"] == "False" for t in ("MemoryPressure", "DiskPressure", "PIDPressure"))
    assert conds["Ready"]["lastHeartbeatTime"]
    assert n["metadata"]["labels"]["kubernetes.io/hostname"] == "gpu-1"
    assert n["metadata"]["labels"]["topology.kubernetes.io/zone"] == "zone-a"


async def test_leases_are_renewed_every_ten_seconds(env):
    client, clock, _ = env
    leases = client.resource("coordination.k8s.io", "v1", "leases")
    first = await leases.get("gpu-0", "kube-node-lease")
    assert first["spec"]["holderIdentity"] == "gpu-0" and first["spec"]["leaseDurationSeconds"] == 40
    assert first["metadata"]["ownerReferences"][0]["kind"] == "Node"
    await clock.advance(10)
    await clock.advance(10)
    later = await leases.get("gpu-0", "kube-node-lease")
    assert later["spec"]["renewTime"] > first["spec"]["renewTime"]


async def test_node_status_is_reposted_after_the_report_interval(env):
    client, clock, _ = env
    nodes = client.resource("", "v1", "nodes")
    before = {c["type"]: c for c in (await nodes.get("gpu-0"))["status"]["conditions"]}["Ready"]
    await clock.advance(310)
    after = {c["type"]: c for c in (await nodes.get("gpu-0"))["status"]["conditions"]}["Ready"]
    assert after["lastHeartbeatTime"] > before["lastHeartbeatTime"]
    assert after["lastTransitionTime"] == before["lastTransitionTime"]


async def test_a_restarted_manager_adopts_existing_nodes():
    s = await make_stack()
    await s.client.resource("", "v1", "namespaces").create({"metadata": {"name": "kube-node-lease"}})
    cluster = parse_cluster("pools:\n  - {name: w, count: 3, capacity: {cpu: '4', memory: 8Gi}}\n")
    for _ in range(2):
        mgr = NodeManager(connector(s.rest), cluster, ManualClock())
        await mgr.start()
        await mgr.stop()
    nodes, _ = await s.client.resource("", "v1", "nodes").list()
    assert sorted(n["metadata"]["name"] for n in nodes) == ["w-0", "w-1", "w-2"]
    await s.close()


async def test_each_node_gets_a_csinode_it_owns_and_a_restarted_agent_keeps_it():
    """As the kubelet's CSI plugin at start-up: a storage.k8s.io/v1 CSINode named after the Node,
    owned by it, with no drivers, annotated with the in-tree plugins migrated to CSI; a restarted
    agent keeps the one there (a driver a registrar added included) rather than writing it again,
    unless its annotation lacks a migrated plugin (an older kubelet's), which it then sets."""
    s = await make_stack()
    await s.client.resource("", "v1", "namespaces").create({"metadata": {"name": "kube-node-lease"}})
    csinodes = s.client.resource("storage.k8s.io", "v1", "csinodes")
    cluster = parse_cluster("pools:\n  - {name: w, count: 2, capacity: {cpu: '4', memory: 8Gi}}\n")
    mgr = NodeManager(connector(s.rest), cluster, ManualClock())
    await mgr.start()
    await mgr.stop()
    nodes = {n["metadata"]["name"]: n for n in (await s.client.resource("", "v1", "nodes").list())[0]}
    items, _ = await csinodes.list()
    assert sorted(c["metadata"]["name"] for c in items) == ["w-0", "w-1"]
    for c in items:
        node = nodes[c["metadata"]["name"]]
        assert c["metadata"]["ownerReferences"] == [
            {"apiVersion": "v1", "kind": "Node", "name": node["metadata"]["name"], "uid": node["metadata"]["uid"]}]
        assert c["spec"] == {"drivers": None}  # sent `[]`: stored nil, as protobuf reads it back
        assert c["metadata"]["annotations"] == {"storage.alpha.kubernetes.io/migrated-plugins": MIGRATED}
    w0 = await csinodes.get("w-0")
    w0 = await csinodes.update({**w0, "spec": {"drivers": [{"name": "csi.example.com", "nodeID": "w-0"}]}})
    # an older kubelet's w-1: its annotation names fewer plugins, beside one of another writer
    w1 = await csinodes.get("w-1")
    w1 = await csinodes.update({**w1, "metadata": {**w1["metadata"], "annotations": {
        "storage.alpha.kubernetes.io/migrated-plugins": "kubernetes.io/gce-pd", "example.com/keep": "yes"}}})
    mgr = NodeManager(connector(s.rest), cluster, ManualClock())
    await mgr.start()
    await mgr.stop()
    kept = await csinodes.get("w-0")
    assert kept["metadata"]["uid"] == w0["metadata"]["uid"]
    assert kept["metadata"]["resourceVersion"] == w0["metadata"]["resourceVersion"]
    assert [d["name"] for d in kept["spec"]["drivers"]] == ["csi.example.com"]
    updated = await csinodes.get("w-1")
    assert updated["metadata"]["uid"] == w1["metadata"]["uid"]
    assert updated["metadata"]["annotations"] == {"storage.alpha.kubernetes.io/migrated-plugins": MIGRATED,
                                                  "example.com/keep": "yes"}
    # a simulation's agents (no plugin registry, so no CSI driver to list) make none
    sim = NodeManager(connector(s.rest), parse_cluster("pools:\n  - {name: sim, count: 1, capacity: {cpu: '4', memory: 8Gi}}\n"),
                      ManualClock(), plugin_registry=False)
    await sim.start()
    await sim.stop()
    assert await s.client.resource("", "v1", "nodes").get("sim-0")
    assert sorted(c["metadata"]["name"] for c in (await csinodes.list())[0]) == ["w-0", "w-1"]
    await s.close()


class _Calls:
    """The REST layer, counting writes and reads by (verb, plural, subresource)."""

    def __init__(self, rest):
        self._rest = rest
        self.calls: list[tuple[str, str, str]] = []

    def __getattr__(self, name):
        attr = getattr(self._rest, name)
        if name not in ("get", "create", "update", "patch"):
            return attr

        async def counted(res, *a, **kw):
            self.calls.append((name, res.plural, kw.get("subresource", "")))
            return await attr(res, *a, **kw)
        return counted


async def test_heartbeats_are_single_lease_updates_and_recover_from_conflicts_and_deletion():
    s = await make_stack()
    await s.client.resource("", "v1", "namespaces").create({"metadata": {"name": "kube-node-lease"}})
    rest, clock = _Calls(s.rest), ManualClock()
    cluster = parse_cluster("pools:\n  - {name: w, count: 1, capacity: {cpu: '4', memory: 8Gi}}\n")
    mgr = NodeManager(connector(rest), cluster, clock, status_interval=60)
    await mgr.start()
    leases = s.client.resource("coordination.k8s.io", "v1", "leases")
    rest.calls.clear()
    for _ in range(5):
        await clock.advance(10)
    assert rest.calls == [("update", "leases", "")] * 5
    theirs = await leases.get("w-0", "kube-node-lease")
    await leases.update({**theirs, "spec": {**theirs["spec"], "holderIdentity": "someone"}})
    rest.calls.clear()
    await clock.advance(10)
    assert rest.calls == [("update", "leases", ""), ("get", "leases", ""), ("update", "leases", ""),
                          ("patch", "nodes", "status")]
    assert (await leases.get("w-0", "kube-node-lease"))["spec"]["holderIdentity"] == "w-0"
    await leases.delete("w-0", "kube-node-lease")
    await clock.advance(10)
    assert (await leases.get("w-0", "kube-node-lease"))["spec"]["renewTime"] == clock.rfc3339_micro()
    await mgr.stop()
    await s.close()


async def test_the_next_renewal_is_due_one_interval_after_the_last_one_finished():
    """Upstream's lease controller counts its period from the end of a renewal (sliding):
    a renewal that took 3 s moves every later one by 3 s, and none is sent at once to catch up."""
    s = await make_stack()
    await s.client.resource("", "v1", "namespaces").create({"metadata": {"name": "kube-node-lease"}})
    clock = ManualClock()
    cluster = parse_cluster("pools:\n  - {name: w, count: 1, capacity: {cpu: '4', memory: 8Gi}}\n")
    mgr = NodeManager(connector(s.rest), cluster, clock)
    await mgr.start()
    agent, started = mgr.agents["w-0"], []
    real = agent.leases.update

    async def slow(obj, *a, **kw):
        started.append(clock.monotonic())
        if len(started) == 1:
            await clock.sleep(3)
        return await real(obj, *a, **kw)
    agent.leases.update = slow
    for _ in range(5):
        await clock.advance(10)
    assert started == [10, 23, 33, 43]
    await mgr.stop()
    await s.close()


async def test_registrations_get_a_slot_between_runs_of_heartbeats():
    """Renewals that keep every slot busy still let a waiting registration in
    after HEARTBEAT_RUN of them, so start-up ends on a starved process."""
    throttle, order, gate = Throttle(1), [], asyncio.Event()
    beat, reg = Throttle.HEARTBEAT, Throttle.REGISTRATION

    async def call(name: str, priority: int) -> None:
        async with throttle.slot(priority):
            order.append(name)
            await gate.wait()

    tasks = [asyncio.create_task(call("h0", beat)), asyncio.create_task(call("r1", reg)),
             *(asyncio.create_task(call(f"h{i}", beat)) for i in range(1, 2 * Throttle.HEARTBEAT_RUN + 1))]
    for _ in range(3):
        await asyncio.sleep(0)
    assert order == ["h0"]
    gate.set()
    await asyncio.gather(*tasks)
    run = Throttle.HEARTBEAT_RUN
    # h0 held the slot; then HEARTBEAT_RUN waiting heartbeats, the registration, the rest
    assert order == [f"h{i}" for i in range(run + 1)] + ["r1"] + [f"h{i}" for i in range(run + 1, 2 * run + 1)]


async def test_status_posts_after_registration_carry_only_the_conditions(env):
    client, clock, mgr = env
    sent = []
    nodes = mgr.agents["gpu-0"].nodes
    real = nodes.patch

    async def spy(name, body, *a, **kw):
        sent.append(body)
        return await real(name, body, *a, **kw)
    nodes.patch = spy
    await clock.advance(310)
    assert [list(b["status"]) for b in sent] == [["conditions"]]
    node = await client.resource("", "v1", "nodes").get("gpu-0")
    assert node["status"]["capacity"]["cpu"] == "64" and node["status"]["nodeInfo"]["kubeletVersion"] == "v1.37.0"


async def test_throttle_bounds_calls_in_flight_and_serves_waiting_heartbeats_first():
    throttle, order, gate = Throttle(2), [], asyncio.Event()

    async def call(name: str, priority: int) -> None:
        async with throttle.slot(priority):
            order.append(name)
            await gate.wait()

    reg, beat = Throttle.REGISTRATION, Throttle.HEARTBEAT
    tasks = [asyncio.create_task(call(n, p)) for n, p in
             (("r1", reg), ("r2", reg), ("r3", reg), ("gone", beat), ("h1", beat), ("h2", beat))]
    for _ in range(5):
        await asyncio.sleep(0)
    assert order == ["r1", "r2"]
    tasks[3].cancel()
    gate.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    assert order == ["r1", "r2", "h1", "h2", "r3"]
    async with throttle.slot(reg), throttle.slot(reg):
        assert order[-1] == "r3"


async def _conditions(client, name: str) -> dict[str, dict]:
    node = await client.resource("", "v1", "nodes").get(name)
    return {c["type"]: c for c in node["status"]["conditions"]}


async def test_conditions_another_client_changed_are_posted_again_by_the_next_heartbeat(env):
    """As upstream's kubelet patches its status when the server's differs, not only every 5 minutes."""
    client, clock, _ = env
    nodes = client.resource("", "v1", "nodes")
    other = await _conditions(client, "gpu-1")
    await nodes.patch("gpu-0", {"status": {"conditions": [
        {"type": t, "status": "Unknown", "reason": "NodeStatusUnknown", "message": "Kubelet stopped posting node status."}
        for t in ("Ready", "MemoryPressure")]}}, "application/strategic-merge-patch+json", subresource="status")
    await clock.advance(9)
    assert (await _conditions(client, "gpu-0"))["Ready"]["status"] == "Unknown"
    await clock.advance(1)
    conds = await _conditions(client, "gpu-0")
    assert {t: (c["status"], c["reason"]) for t, c in conds.items()} == {
        "Ready": ("True", "KubeletReady"), "MemoryPressure": ("False", "KubeletHasSufficientMemory"),
        "DiskPressure": ("False", "KubeletHasNoDiskPressure"), "PIDPressure": ("False", "KubeletHasSufficientPID")}
    assert conds["Ready"]["lastTransitionTime"] == conds["MemoryPressure"]["lastTransitionTime"] == clock.rfc3339()
    assert conds["DiskPressure"]["lastTransitionTime"] < clock.rfc3339()
    assert await _conditions(client, "gpu-1") == other

    async def counts():  # the setters saw Unknown
        got = {e["reason"]: e["count"] for e in await _node_events(client, "gpu-0")}
        return tuple(got.get(r) for r in ("NodeReady", "NodeHasSufficientMemory", "NodeHasNoDiskPressure"))
    await becomes(counts, (2, 2, 1))


async def test_a_node_marked_unknown_while_its_renewal_stalled_is_ready_again_once_it_renews():
    """A starved agent's Lease is late past the grace period: the node lifecycle controller marks
    the node Unknown and taints it; the renewal that finishes posts Ready again, without
    waiting for the 5-minute status report."""
    from nanokube.controllers.nodelifecycle import NodeLifecycleController, ready_status

    s = await make_stack()
    await s.client.resource("", "v1", "namespaces").create({"metadata": {"name": "kube-node-lease"}})
    clock = ManualClock()
    mgr = NodeManager(connector(s.rest), default_cluster(), clock)
    await mgr.start()
    ctl = NodeLifecycleController(s.client, clock, grace_period=50, monitor_period=5)
    await ctl.start()
    agent, nodes = mgr.agents["gpu-0"], s.client.resource("", "v1", "nodes")
    real = agent.leases.update

    async def stalled(obj, *a, **kw):
        agent.leases.update = real
        await clock.sleep(60)
        return await real(obj, *a, **kw)
    agent.leases.update = stalled
    seen = []
    for _ in range(16):
        await clock.advance(5)
        node = await nodes.get("gpu-0")
        seen.append((clock.monotonic(), ready_status(node), bool(node["spec"].get("taints"))))
    assert (60, "Unknown", True) in seen
    assert seen[-3:] == [(70, "True", False), (75, "True", False), (80, "True", False)]
    await ctl.stop()
    await mgr.stop()
    await s.close()


async def test_status_posts_keep_the_conditions_other_writers_own(env):
    """The kubelet's strategic merge patch merges conditions by type: a network plugin's
    NetworkUnavailable survives the heartbeat's status report."""
    client, clock, _ = env
    nodes = client.resource("", "v1", "nodes")
    await nodes.patch("gpu-0", {"status": {"conditions": [
        {"type": "NetworkUnavailable", "status": "False", "reason": "RouteCreated", "message": "routes set up"}]}},
        "application/strategic-merge-patch+json", subresource="status")
    before = (await _conditions(client, "gpu-0"))["Ready"]["lastHeartbeatTime"]
    await clock.advance(310)
    conds = await _conditions(client, "gpu-0")
    assert conds["Ready"]["lastHeartbeatTime"] > before
    assert conds["NetworkUnavailable"]["reason"] == "RouteCreated"



async def _node_events(client, name: str) -> list[dict]:
    """The events on Node `name` (by its involvedObject's kind and name), in the order they were
    first recorded (their names end in the time and a sequence number)."""
    items, _ = await client.resource("", "v1", "events").list(
        namespace="default", field_selector=f"involvedObject.kind=Node,involvedObject.name={name}")
    return sorted(items, key=lambda e: e["metadata"]["name"])


async def _started(client, name: str) -> list[dict]:
    """The six Events of node `name`'s start-up, once all are written: its recorder writes them from a queue."""
    async def written():
        events = await _node_events(client, name)
        return len(events) >= 6 and events
    return await eventually(written)


async def test_a_starting_kubelet_records_its_node_events(env):
    """Starting, each condition's status, NodeReady and NodeAllocatableEnforced, on the kubelet's
    nodeRef (uid: the node's name; no apiVersion) from kubelet on the node's host."""
    client, _, _ = env
    events = await _started(client, "gpu-0")
    assert [(e["reason"], e["message"]) for e in events] == [
        ("Starting", "Starting kubelet."),
        ("NodeHasSufficientMemory", "Node gpu-0 status is now: NodeHasSufficientMemory"),
        ("NodeHasNoDiskPressure", "Node gpu-0 status is now: NodeHasNoDiskPressure"),
        ("NodeHasSufficientPID", "Node gpu-0 status is now: NodeHasSufficientPID"),
        ("NodeReady", "Node gpu-0 status is now: NodeReady"),
        ("NodeAllocatableEnforced", "Updated Node Allocatable limit across pods"),
    ]
    e = events[0]
    assert e["involvedObject"] == {"kind": "Node", "name": "gpu-0", "uid": "gpu-0"}
    assert e["source"] == {"component": "kubelet", "host": "gpu-0"}
    assert (e["reportingComponent"], e["reportingInstance"], e["type"], e["count"]) == ("kubelet", "gpu-0", "Normal", 1)
    assert e["metadata"]["namespace"] == "default"


async def test_ready_transitions_and_cordoning_are_recorded_on_the_node(env):
    """NodeNotReady then NodeReady as a fault flips the Ready condition (the repeat counts on the
    first NodeReady Event), NodeNotSchedulable and NodeSchedulable as spec.unschedulable flips."""
    from nanokube.node.faults import ANNOTATION

    client, _, _ = env
    nodes = client.resource("", "v1", "nodes")
    merge = "application/merge-patch+json"
    other = await _started(client, "gpu-1")

    def recorded(want):
        async def check():
            return [(e["reason"], e["count"]) for e in await _node_events(client, "gpu-0")] == want
        return check

    started = [("Starting", 1), ("NodeHasSufficientMemory", 1), ("NodeHasNoDiskPressure", 1),
               ("NodeHasSufficientPID", 1)]
    await nodes.patch("gpu-0", {"metadata": {"annotations": {ANNOTATION: "not-ready"}}}, merge)
    await eventually(recorded(started + [("NodeReady", 1), ("NodeAllocatableEnforced", 1), ("NodeNotReady", 1)]))
    await nodes.patch("gpu-0", {"metadata": {"annotations": {ANNOTATION: None}}}, merge)
    healed = started + [("NodeReady", 2), ("NodeAllocatableEnforced", 1), ("NodeNotReady", 1)]
    await eventually(recorded(healed))
    await nodes.patch("gpu-0", {"spec": {"unschedulable": True}}, merge)
    await eventually(recorded(healed + [("NodeNotSchedulable", 1)]))
    await nodes.patch("gpu-0", {"spec": {"unschedulable": False}}, merge)
    await eventually(recorded(healed + [("NodeNotSchedulable", 1), ("NodeSchedulable", 1)]))
    assert await _node_events(client, "gpu-1") == other


async def test_node_status_lists_the_images_pulled_largest_first_at_most_fifty():
    """status.images as the kubelet's setter lists them: each image's digest reference and tag
    and its size, posted at the next heartbeat after a pull; of a node holding more than
    nodeStatusMaxImages (50), the 50 largest."""
    from nanokube.node.lifecycle import image_id, image_size
    s = await make_stack()
    await s.client.resource("", "v1", "namespaces").create({"metadata": {"name": "kube-node-lease"}})
    preloaded = [f"registry.example/app-{i}:v1" for i in range(60)]
    cluster = parse_cluster("pools:\n  - {name: big, count: 1, capacity: {cpu: '4', memory: 8Gi}, images: ["
                            + ", ".join(preloaded) + "]}\n  - {name: w, count: 1, capacity: {cpu: '4', memory: 8Gi}}\n")
    clock = ManualClock()
    mgr = NodeManager(connector(s.rest), cluster, clock)
    await mgr.start()
    try:
        nodes, pods = s.client.resource("", "v1", "nodes"), s.client.resource("", "v1", "pods")
        listed = (await nodes.get("big-0"))["status"]["images"]
        largest = sorted(preloaded, key=lambda i: -image_size(i))[:50]
        assert listed == [{"names": [image_id(i), i], "sizeBytes": image_size(i)} for i in largest]
        assert "images" not in (await nodes.get("w-0"))["status"]  # omitempty
        await pods.create({"metadata": {"name": "web", "namespace": "default"}, "spec": {
            "nodeName": "w-0", "containers": [{"name": "app", "image": "nginx:1.27"}]}})

        async def pulled():
            await clock.advance(1)
            return (await nodes.get("w-0"))["status"].get("images")
        want = {"names": [image_id("nginx:1.27"), "docker.io/library/nginx:1.27"], "sizeBytes": image_size("nginx:1.27")}
        assert await eventually(pulled) == [want]
    finally:
        await mgr.stop()
        await s.close()
