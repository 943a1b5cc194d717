"""Device-taint eviction: pods on allocated devices with untolerated NoExecute
taints (from slices or DeviceTaintRules) get DisruptionTarget and are deleted
at timeAdded + tolerationSeconds; DeviceTaintRule status reports progress."""

import pytest

from nanokube.machinery.errors import APIError
from nanokube.clock import format_time
from nanokube.controllers.device_taint_eviction import (
    MESSAGE,
    POD_GROUP_INDEX,
    REASON,
    DeviceTaintEvictionController,
    rule_selects,
)
from nanokube.dra.resourceclaim import FINALIZER
from tests.controllers import becomes, eventually, make_stack
from tests.node import ManualClock

R = "resource.k8s.io"
DRIVER = "gpu.example.com"
SPEC = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}


@pytest.fixture
async def env():
    s = await make_stack()
    clock = ManualClock()
    ctrl = DeviceTaintEvictionController(s.client, clock, rule_status_period=10)
    await ctrl.start()
    yield s.client, clock, ctrl
    await ctrl.stop()
    await s.close()


def taint(clock, key="example.com/xid", effect="NoExecute", ago=0):
    return {"key": key, "effect": effect, "timeAdded": format_time(clock.now() - ago)}


async def publish(client, taints_by_device: dict, generation=1, pool="n1"):
    devices = [{"name": d, **({"taints": t} if t else {})} for d, t in taints_by_device.items()]
    body = {"metadata": {"name": f"{pool}-gpu"}, "spec": {
        "driver": DRIVER, "pool": {"name": pool, "generation": generation, "resourceSliceCount": 1},
        "nodeName": pool, "devices": devices}}
    slices = client.resource(R, "v1", "resourceslices")
    try:
        cur = await slices.get(f"{pool}-gpu")
    except APIError:
        return await slices.create(body)
    return await slices.update({**body, "metadata": cur["metadata"]})


async def consumer(client, name, device="gpu-0", tolerations=None, group=None, also=()):
    """A pod and its claim, allocated to `device` of pool n1 (and each (pool, device) of `also`) and
    reserved for the pod (or `group`)."""
    pods, claims = client.resource("", "v1", "pods"), client.resource(R, "v1", "resourceclaims")
    spec = {"nodeName": "n1", "containers": [{"name": "c", "image": "pause"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": name}]}
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    pod = await pods.create({"metadata": {"name": name, "namespace": "default"}, "spec": spec})
    c = await claims.create({"metadata": {"name": name, "namespace": "default", "finalizers": [FINALIZER]}, "spec": SPEC})
    results = [{"request": "gpu", "driver": DRIVER, "pool": pool, "device": d} for pool, d in (("n1", device), *also)]
    if tolerations:
        for result in results:
            result["tolerations"] = tolerations
    ref = {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": group, "uid": "g-uid"} if group else \
        {"resource": "pods", "name": name, "uid": pod["metadata"]["uid"]}
    await claims.update({**c, "status": {"allocation": {"devices": {"results": results}}, "reservedFor": [ref]}},
                        subresource="status")
    return pod


def reserved_in_informer(ctrl, name) -> bool:
    """The controller's informers hold the slices and `consumer`'s claim with its allocation and
    reservation (the status update after the create), so what the controller judges is what the test wrote."""
    claim = ctrl.claims.get(f"default/{name}")
    return bool(ctrl.slices.list() and claim and (claim.get("status") or {}).get("reservedFor"))


async def gone(client, name):
    """Deleted: on a node (and no kubelet here) that leaves it terminating."""
    async def check():
        items, _ = await client.resource("", "v1", "pods").list("default")
        return not any(p["metadata"]["name"] == name and not p["metadata"].get("deletionTimestamp") for p in items)
    return await eventually(check)


async def events_for(client, name):
    items, _ = await client.resource("", "v1", "events").list("default")
    return [(e["reason"], e["message"]) for e in items if e["involvedObject"]["name"] == name]


def test_rule_selector_nil_selects_nothing_and_empty_everything():
    assert not rule_selects({"spec": {}}, DRIVER, "n1", "gpu-0")
    assert rule_selects({"spec": {"deviceSelector": {}}}, DRIVER, "n1", "gpu-0")
    assert rule_selects({"spec": {"deviceSelector": {"pool": "n1", "device": "gpu-0"}}}, DRIVER, "n1", "gpu-0")
    assert not rule_selects({"spec": {"deviceSelector": {"device": "gpu-1"}}}, DRIVER, "n1", "gpu-0")


async def test_untolerated_slice_taint_evicts_at_once_with_condition_and_event(env):
    client, clock, ctrl = env
    await publish(client, {"gpu-0": [taint(clock)], "gpu-1": []})
    await consumer(client, "safe", device="gpu-1")
    pods = client.resource("", "v1", "pods")
    watched = []
    ctrl.pods.add_handlers(on_update=lambda _o, n: watched.append(n))
    await consumer(client, "victim")
    await gone(client, "victim")

    async def disrupted():  # the API shows the deletion before the informer delivers the updates
        return next((c for p in watched if p["metadata"]["name"] == "victim"
                     for c in p["status"].get("conditions") or [] if c["type"] == "DisruptionTarget"), None)
    cond = await eventually(disrupted)
    assert (cond["status"], cond["reason"], cond["message"]) == ("True", REASON, MESSAGE)
    await becomes(lambda: events_for(client, "victim"), [("DeviceTaintManagerEviction", "Marking for deletion")])
    assert (await pods.get("safe", "default"))["metadata"].get("deletionTimestamp") is None


async def test_a_pod_synced_again_before_its_deletion_shows_is_evicted_once(env):
    client, clock, ctrl = env
    await publish(client, {"gpu-0": [taint(clock)]})
    stale = await consumer(client, "victim")
    await gone(client, "victim")
    evicted = [("DeviceTaintManagerEviction", "Marking for deletion")]
    await becomes(lambda: events_for(client, "victim"), evicted)  # the first eviction's, written from a queue
    ctrl.pods.store["default/victim"] = stale
    await ctrl.sync(("pod", "default/victim"))
    assert await events_for(client, "victim") == evicted


async def test_toleration_seconds_count_from_time_added(env):
    client, clock, ctrl = env
    await publish(client, {"gpu-0": [taint(clock, ago=10)]})
    await consumer(client, "p", tolerations=[{"key": "example.com/xid", "operator": "Exists", "effect": "NoExecute",
                                              "tolerationSeconds": 30}])

    async def due_eviction():  # once the informer holds the pod
        pod = ctrl.pods.get("default/p")
        return pod is not None and ctrl.pod_eviction(pod)
    due = await eventually(due_eviction)
    assert due.when == pytest.approx(clock.now() + 20, abs=1)
    await eventually(lambda: _async("default/p" in ctrl._scheduled))
    await clock.advance(19)
    pods = client.resource("", "v1", "pods")
    assert (await pods.get("p", "default"))["metadata"].get("deletionTimestamp") is None
    await clock.advance(2)
    await gone(client, "p")


async def test_toleration_without_seconds_tolerates_forever_and_other_effects_never_evict(env):
    client, clock, ctrl = env
    await publish(client, {"gpu-0": [taint(clock), taint(clock, key="example.com/ecc", effect="NoSchedule")]})
    await consumer(client, "p", tolerations=[{"key": "example.com/xid", "operator": "Exists"}])
    await eventually(lambda: _async(ctrl.pods.get("default/p") and reserved_in_informer(ctrl, "p")))
    assert ctrl.pod_eviction(ctrl.pods.get("default/p")) is None


async def test_removing_the_taint_before_it_is_due_cancels_with_an_event(env):
    client, clock, ctrl = env
    await publish(client, {"gpu-0": [taint(clock)]})
    await consumer(client, "p", tolerations=[{"operator": "Exists", "tolerationSeconds": 60}])
    await eventually(lambda: _async("default/p" in ctrl._scheduled))
    await publish(client, {"gpu-0": []})
    await eventually(lambda: _async("default/p" not in ctrl._scheduled))
    await clock.advance(61)
    await becomes(lambda: events_for(client, "p"), [("DeviceTaintManagerEviction", "Cancelling deletion")])
    assert (await client.resource("", "v1", "pods").get("p", "default"))["metadata"].get("deletionTimestamp") is None


async def test_an_unscheduled_pod_is_not_evicted(env):
    client, clock, ctrl = env
    await publish(client, {"gpu-0": [taint(clock)]})
    pod = await consumer(client, "p")
    unscheduled = {**pod, "spec": {**pod["spec"], "nodeName": ""}}
    await eventually(lambda: _async(reserved_in_informer(ctrl, "p")))
    assert ctrl.pod_eviction(unscheduled) is None and ctrl.pod_eviction(pod) is not None


async def test_pods_of_a_podgroup_that_reserves_the_claim_are_evicted(env):
    client, clock, _ = env
    await publish(client, {"gpu-0": [taint(clock)]})
    await consumer(client, "member", group="gang")
    assert await gone(client, "member")
    await becomes(lambda: events_for(client, "member"), [("DeviceTaintManagerEviction", "Marking for deletion")])


async def test_a_podgroups_members_are_found_through_the_pod_informers_index(env):
    """Upstream's podGroupPerPod index: a claim reserved for a PodGroup reaches its members without a
    walk of the namespace's pods; the same group name elsewhere is another group."""
    client, _, ctrl = env
    await client.resource("", "v1", "namespaces").create({"metadata": {"name": "other"}})
    pods = client.resource("", "v1", "pods")
    for ns, name in (("default", "a"), ("default", "b"), ("other", "c")):
        await pods.create({"metadata": {"name": name, "namespace": ns}, "spec": {
            "containers": [{"name": "c", "image": "pause"}], "schedulingGroup": {"podGroupName": "gang"}}})

    async def indexed():
        return ctrl.pods.get("other/c") is not None and ctrl.pods.get("default/b") is not None
    await eventually(indexed)
    assert sorted(p["metadata"]["name"] for p in ctrl.pods.by_index(POD_GROUP_INDEX, "default/gang")) == ["a", "b"]
    assert [p["metadata"]["name"] for p in ctrl.pods.by_index(POD_GROUP_INDEX, "other/gang")] == ["c"]


async def test_older_pool_generations_are_ignored(env):
    client, clock, ctrl = env
    await publish(client, {"gpu-0": [taint(clock)]}, generation=1)
    await client.resource(R, "v1", "resourceslices").create({"metadata": {"name": "n1-gpu-new"}, "spec": {
        "driver": DRIVER, "pool": {"name": "n1", "generation": 2, "resourceSliceCount": 1}, "nodeName": "n1",
        "devices": [{"name": "gpu-0"}]}})
    await eventually(lambda: _async(len(ctrl.slices.list()) == 2))
    await consumer(client, "p")
    await eventually(lambda: _async(ctrl.pods.get("default/p") and reserved_in_informer(ctrl, "p")))
    assert ctrl.pod_eviction(ctrl.pods.get("default/p")) is None


async def test_rule_evicts_and_reports_pending_then_completed(env):
    client, clock, ctrl = env
    rules = client.resource(R, "v1", "devicetaintrules")
    await publish(client, {"gpu-0": []})
    await consumer(client, "p", tolerations=[{"key": "maint", "operator": "Exists", "tolerationSeconds": 5}])
    await eventually(lambda: _async(reserved_in_informer(ctrl, "p")))
    await rules.create({"metadata": {"name": "maint"}, "spec": {
        "deviceSelector": {"driver": DRIVER, "pool": "n1", "device": "gpu-0"},
        "taint": {"key": "maint", "effect": "NoExecute", "timeAdded": format_time(clock.now())}}})

    async def condition():
        conds = (await rules.get("maint")).get("status", {}).get("conditions") or []
        return conds and conds[0]
    cond = await eventually(condition)
    assert (cond["type"], cond["status"], cond["reason"], cond["message"], cond["observedGeneration"]) == (
        "EvictionInProgress", "True", "PodsPendingEviction", "1 pod needs to be evicted in 1 namespace.", 1)
    await clock.advance(6)
    await gone(client, "p")
    await clock.advance(10)

    async def completed():
        c = await condition()
        return c["status"] == "False" and c
    cond = await eventually(completed)
    assert (cond["reason"], cond["message"]) == ("Completed", "1 pod evicted since starting the controller.")


async def test_rule_with_effect_none_reports_what_noexecute_would_do(env):
    client, _, ctrl = env
    rules = client.resource(R, "v1", "devicetaintrules")
    await publish(client, {"gpu-0": [], "gpu-1": []})
    await consumer(client, "p")
    await eventually(lambda: _async(reserved_in_informer(ctrl, "p")))
    await rules.create({"metadata": {"name": "dry"}, "spec": {"deviceSelector": {"driver": DRIVER},
                                                              "taint": {"key": "maint", "effect": "None"}}})

    async def condition():
        conds = (await rules.get("dry")).get("status", {}).get("conditions") or []
        return conds and conds[0]
    cond = await eventually(condition)
    assert (cond["status"], cond["reason"]) == ("False", "NoEffect")
    assert cond["message"] == ("2 published devices selected. 1 allocated device selected. 1 pod would be evicted "
                               "in 1 namespace if the effect was NoExecute. This information will not be updated "
                               "again. Recreate the DeviceTaintRule to trigger an update.")
    assert (await client.resource("", "v1", "pods").get("p", "default"))["metadata"].get("deletionTimestamp") is None


async def test_a_claim_on_two_devices_is_found_through_its_second_one(env):
    """The claim index files a claim under each allocated device: a rule selecting its device in another
    pool counts its pod, and that device's slice taint evicts it; the same device name in the first
    pool is not the claim's."""
    client, clock, ctrl = env
    await publish(client, {"gpu-0": [], "gpu-1": []})
    await publish(client, {"gpu-1": []}, pool="n2")
    await consumer(client, "p", also=[("n2", "gpu-1")])
    await eventually(lambda: _async(ctrl.pods.get("default/p") and reserved_in_informer(ctrl, "p")
                                    and len(ctrl.slices.list()) == 2))
    rules = client.resource(R, "v1", "devicetaintrules")
    await rules.create({"metadata": {"name": "dry"}, "spec": {
        "deviceSelector": {"driver": DRIVER, "pool": "n2", "device": "gpu-1"}, "taint": {"key": "k", "effect": "None"}}})

    async def condition():
        conds = (await rules.get("dry")).get("status", {}).get("conditions") or []
        return conds and conds[0]
    assert (await eventually(condition))["message"].startswith(
        "1 published device selected. 1 allocated device selected. 1 pod would be evicted in 1 namespace ")

    await publish(client, {"gpu-0": [], "gpu-1": [taint(clock)]})
    await eventually(lambda: _async(ctrl.slices.get("n1-gpu")["spec"]["devices"][1].get("taints")))
    assert ctrl.pod_eviction(ctrl.pods.get("default/p")) is None
    await publish(client, {"gpu-1": [taint(clock)]}, pool="n2")
    assert await gone(client, "p")
    await becomes(lambda: events_for(client, "p"), [("DeviceTaintManagerEviction", "Marking for deletion")])


async def test_slice_and_rule_changes_queue_only_the_pods_on_devices_they_change(env):
    """A slice update queues the consumers of the devices whose NoExecute taints changed (none for a
    NoSchedule taint), a new rule those of the devices it selects, and the rule's status write none."""
    client, clock, ctrl = env
    forever = [{"operator": "Exists"}]
    await publish(client, {"gpu-0": [], "gpu-1": []})
    await consumer(client, "a", device="gpu-0", tolerations=forever)
    await consumer(client, "b", device="gpu-1", tolerations=forever)
    await eventually(lambda: _async(reserved_in_informer(ctrl, "a") and reserved_in_informer(ctrl, "b")))
    queued = []
    add = ctrl.queue.add
    ctrl.queue.add = lambda key: (queued.append(key), add(key))[1]

    async def pods_queued_after(write, seen):
        queued.clear()
        await write
        await eventually(seen)
        return sorted(k for kind, k in queued if kind == "pod")

    def slice_with(effect):
        return lambda: _async(any(t["effect"] == effect for d in ctrl.slices.get("n1-gpu")["spec"]["devices"]
                                  for t in d.get("taints") or []))
    assert await pods_queued_after(publish(client, {"gpu-0": [], "gpu-1": [taint(clock, effect="NoSchedule")]}),
                                   slice_with("NoSchedule")) == []
    assert await pods_queued_after(publish(client, {"gpu-0": [], "gpu-1": [taint(clock)]}),
                                   slice_with("NoExecute")) == ["default/b"]
    rules = client.resource(R, "v1", "devicetaintrules")
    rule = {"metadata": {"name": "maint"}, "spec": {"deviceSelector": {"driver": DRIVER, "pool": "n1", "device": "gpu-0"},
                                                   "taint": {"key": "maint", "effect": "NoExecute"}}}
    assert await pods_queued_after(rules.create(rule), lambda: _async(
        ((ctrl.rules.get("maint") or {}).get("status") or {}).get("conditions"))) == ["default/a"]
    assert queued.count(("rule", "maint")) == 2  # its create and its status write


async def _async(value):
    return value


def _no_full_listing(*_):
    raise AssertionError("a pod check or a rule's claims read every rule or every claim")


async def test_rules_naming_no_driver_find_their_claims_and_pods_read_only_their_rules(env):
    """The claim index files an allocated device under every selector that selects it, and the rule
    index each rule under its selector: a rule naming only a pool or a device reads its claims from
    the index (not every claim), and a pod's check reads the rules selecting its devices (not every
    rule), with the answers a full walk gives. A device-only rule evicts through a pool it does not name."""
    client, clock, ctrl = env
    rules = client.resource(R, "v1", "devicetaintrules")
    await publish(client, {"gpu-0": [], "gpu-1": []})
    await publish(client, {"gpu-1": []}, pool="n2")
    await consumer(client, "a", device="gpu-0")
    await consumer(client, "b", device="gpu-1", tolerations=[{"operator": "Exists"}])
    await eventually(lambda: _async(reserved_in_informer(ctrl, "a") and reserved_in_informer(ctrl, "b")))
    for i in range(20):  # rules on devices no claim has
        await rules.create({"metadata": {"name": f"other-{i}"}, "spec": {
            "deviceSelector": {"driver": DRIVER, "pool": "n2", "device": f"gpu-{i + 10}"},
            "taint": {"key": "k", "effect": "NoExecute"}}})
    await rules.create({"metadata": {"name": "pool-n1"}, "spec": {"deviceSelector": {"pool": "n1"},
                                                                   "taint": {"key": "k", "effect": "None"}}})
    await rules.create({"metadata": {"name": "any-gpu-1"}, "spec": {"deviceSelector": {"device": "gpu-1"},
                                                                     "taint": {"key": "k", "effect": "None"}}})
    await eventually(lambda: _async(len(ctrl.rules.list()) == 22))
    ctrl.claims.list = ctrl.rules.list = _no_full_listing
    assert [c["metadata"]["name"] for c in ctrl._rule_claims(ctrl.rules.get("pool-n1"))] == ["a", "b"]
    assert [c["metadata"]["name"] for c in ctrl._rule_claims(ctrl.rules.get("any-gpu-1"))] == ["b"]
    assert ctrl._rule_claims({"spec": {"deviceSelector": {"pool": "n2", "device": "gpu-0"}}}) == []
    assert sorted(r["metadata"]["name"] for r in ctrl._selecting(DRIVER, "n1", "gpu-1")) == ["any-gpu-1", "pool-n1"]
    assert ctrl.pod_eviction(ctrl.pods.get("default/a")) is None
    await rules.create({"metadata": {"name": "drain-gpu-0"}, "spec": {"deviceSelector": {"device": "gpu-0"},
                                                                       "taint": {"key": "k", "effect": "NoExecute"}}})
    assert await gone(client, "a")
    assert ctrl.pod_eviction(ctrl.pods.get("default/b")) is None  # b tolerates every taint
