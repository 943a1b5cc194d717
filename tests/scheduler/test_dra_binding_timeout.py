"""DRA binding conditions and DynamicResourcesArgs.bindingTimeout (KEP-5007), in virtual time:
a pod whose device never reports its binding conditions True is not bound; once bindingTimeout
has passed since the claim's allocationTimestamp, the pod is taken out of reservedFor, the
claim is deallocated, and the next attempt allocates it anew (binding once the driver reports
the condition)."""

import asyncio

import pytest

from nanokube.clock import VirtualClock, parse_time
from nanokube.scheduler.config import ConfigError, load, parse
from nanokube.scheduler.scheduler import Scheduler
from tests.controllers import eventually, make_stack
from tests.scheduler import node
from tests.scheduler.test_dynamic_resources import R, claim_pod
from tests.scheduler.test_scheduler import add_node

DRIVER = "fpga.example.com"


async def until(clock: VirtualClock, check, step: float = 1.0, limit: float = 2000.0):
    """Advance virtual time `step` seconds at a time (letting the in-process API server's real
    work run in between) until `check()` holds; its value. At most `limit` virtual seconds."""
    end = clock.monotonic() + limit
    while clock.monotonic() < end:
        if got := await check():
            return got
        await clock.advance(step)
        await asyncio.sleep(0.005)
    raise AssertionError(f"condition never held in {limit:g} virtual seconds")


@pytest.fixture
async def fpgas():
    async for env in _fpgas():
        yield env


@pytest.fixture
async def fpgas_without_preemption():
    """As `fpgas`, with DefaultPreemption disabled: its PostFilter clears a nomination too."""
    async for env in _fpgas(parse({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                                   "profiles": [{"schedulerName": "default-scheduler", "plugins": {
                                       "multiPoint": {"disabled": [{"name": "DefaultPreemption"}]}}}]})):
        yield env


async def _fpgas(config=None):
    s = await make_stack()
    await add_node(s.client, node("n"))
    await s.client.resource(R, "v1", "deviceclasses").create({
        "apiVersion": f"{R}/v1", "kind": "DeviceClass", "metadata": {"name": "fpga"},
        "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]}})
    await s.client.resource(R, "v1", "resourceslices").create({
        "apiVersion": f"{R}/v1", "kind": "ResourceSlice", "metadata": {"name": "n-fpgas"},
        "spec": {"driver": DRIVER, "nodeName": "n", "pool": {"name": "n", "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": f"fpga-{i}", "bindingConditions": ["attached"],
                              "bindingFailureConditions": ["attach-failed"]} for i in range(2)]}})
    clock = VirtualClock()
    sched = Scheduler(s.client, clock=clock, seed=1, config=config)
    await sched.start()
    yield s.client, clock
    await sched.stop()
    await s.close()


async def _claim_and_pod(client):
    """The claim `f` for one fpga and the pod `p` that uses it; the clients and the pod as created."""
    pods, claims = client.resource("", "v1", "pods"), client.resource(R, "v1", "resourceclaims")
    await claims.create({"apiVersion": f"{R}/v1", "kind": "ResourceClaim", "metadata": {"name": "f", "namespace": "default"},
                         "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "fpga"}}]}}})
    return pods, claims, await pods.create(claim_pod("p", "f"))


async def _reserved_allocation(claims):
    c = await claims.get("f", "default")
    return (c.get("status") or {}).get("reservedFor") and c["status"]["allocation"]


async def _report(claims, clock, result: dict, type_: str, reason: str, message: str) -> None:
    """The driver reports a True device condition on the claim's allocated device."""
    await claims.patch("f", {"status": {"devices": [{
        "driver": result["driver"], "pool": result["pool"], "device": result["device"], "conditions": [{
            "type": type_, "status": "True", "reason": reason, "message": message, "observedGeneration": 1,
            "lastTransitionTime": clock.rfc3339()}]}]}}, namespace="default", subresource="status")


async def test_an_attachment_that_never_happens_is_given_up_after_the_binding_timeout(fpgas):
    client, clock = fpgas
    pods, claims, _ = await _claim_and_pod(client)

    first = await until(clock, lambda: _reserved_allocation(claims))
    allocated_at = parse_time(first["allocationTimestamp"])

    async def events(fragment):
        items, _ = await client.resource("", "v1", "events").list(namespace="default")
        return [e for e in items if e["involvedObject"]["name"] == "p" and fragment in e["message"]]
    assert await until(clock, lambda: events("waiting for binding conditions for device on node n"))
    # 599 virtual seconds on the pod still waits, unbound, in reservedFor
    await clock.advance(allocated_at + 599 - clock.now())
    assert not (await pods.get("p", "default"))["spec"].get("nodeName")
    assert (await claims.get("f", "default"))["status"]["allocation"] == first

    async def reallocated():
        c = await claims.get("f", "default")
        alloc = (c.get("status") or {}).get("allocation")
        return alloc is not None and alloc != first and c["status"].get("reservedFor") and alloc
    again = await until(clock, reallocated)
    assert parse_time(again["allocationTimestamp"]) > allocated_at + 600
    # the broadcaster writes its Events from its queue, maybe after the claim's new allocation
    assert await eventually(lambda: events("device binding timeout"))
    assert await eventually(lambda: events("resourceclaim not available on the node. deallocation of ResourceClaim "
                                           "completed"))
    assert not (await pods.get("p", "default"))["spec"].get("nodeName")

    [r] = again["devices"]["results"]
    await _report(claims, clock, r, "attached", "Attached", "")

    async def bound():
        return (await pods.get("p", "default"))["spec"].get("nodeName")
    assert await until(clock, bound, limit=30) == "n"


async def test_a_true_binding_failure_condition_gets_the_claim_deallocated_at_once(fpgas):
    """A failure condition needs no timeout: the failed binding's retry finds the claim unusable,
    deallocates it (its device status with it), and allocates again, well before 600 s."""
    client, clock = fpgas
    pods, claims, _ = await _claim_and_pod(client)

    first = await until(clock, lambda: _reserved_allocation(claims))
    [r] = first["devices"]["results"]
    await _report(claims, clock, r, "attach-failed", "NoPath", "no PCIe path")

    async def reallocated():
        c = await claims.get("f", "default")
        st = c.get("status") or {}
        return st.get("allocation") not in (None, first) and st.get("reservedFor") and c
    again = await until(clock, reallocated, limit=60)
    assert "devices" not in again["status"]
    assert not (await pods.get("p", "default"))["spec"].get("nodeName")


@pytest.mark.parametrize(("timeout", "message"), [
    ("500ms", 'profiles[0].pluginConfig[0].args.bindingTimeout: Invalid value: "500ms": must be at least 1 second'),
    # (a metav1.Duration parses itself as the args decode)
    ("soon", 'decoding .profiles[0].pluginConfig[0]: decoding args for plugin DynamicResources: time: invalid duration '
             '"soon"'),
])
def test_a_binding_timeout_under_a_second_or_not_a_duration_is_refused(tmp_path, timeout, message):
    path = tmp_path / "config.yaml"
    path.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n"
                    f"- pluginConfig:\n  - name: DynamicResources\n    args: {{bindingTimeout: {timeout}}}\n")
    with pytest.raises(ConfigError) as e:
        load(path)
    assert message in str(e.value)


def test_the_binding_timeout_defaults_to_ten_minutes_and_takes_a_duration(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n"
                    "- schedulerName: default-scheduler\n  pluginConfig:\n  - name: DynamicResources\n    args: {filterTimeout: 5s}\n"
                    "- schedulerName: quick\n  pluginConfig:\n  - name: DynamicResources\n    args: {bindingTimeout: 1m30s}\n")
    cfg = load(path)
    assert [p.args["DynamicResources"]["bindingTimeout"] for p in cfg.profiles] == ["10m0s", "1m30s"]


async def test_a_pod_waiting_for_binding_conditions_is_nominated_to_its_node(fpgas):
    """NominatedNodeNameForExpectation: a pod whose PreBind has work (it has a claim) carries
    status.nominatedNodeName while its binding conditions are pending, so other components see
    where it is going; the binding clears it (ClearingNominatedNodeNameAfterBinding). A pod
    without claims, whose PreBind has nothing to do, is bound without a nomination."""
    client, clock = fpgas
    pods, claims, _ = await _claim_and_pod(client)

    async def nominated():
        p = await pods.get("p", "default")
        return p["status"].get("nominatedNodeName") and p
    p = await until(clock, nominated)
    assert p["status"]["nominatedNodeName"] == "n" and not p["spec"].get("nodeName")
    managers = {m["manager"] for m in p["metadata"]["managedFields"] if m.get("subresource") == "status"}
    assert "kube-scheduler" in managers

    [r] = (await claims.get("f", "default"))["status"]["allocation"]["devices"]["results"]
    await _report(claims, clock, r, "attached", "Attached", "")

    async def bound():
        return (await pods.get("p", "default"))["spec"].get("nodeName") and await pods.get("p", "default")
    p = await until(clock, bound, limit=30)
    assert p["spec"]["nodeName"] == "n" and "nominatedNodeName" not in p["status"]

    plain = claim_pod("plain", "f")
    plain["spec"].pop("resourceClaims")
    for c in plain["spec"]["containers"]:
        c.get("resources", {}).pop("claims", None)
    await pods.create(plain)

    async def plain_bound():
        return (await pods.get("plain", "default"))["spec"].get("nodeName") and await pods.get("plain", "default")
    p = await until(clock, plain_bound, limit=30)
    assert not [m for m in p["metadata"]["managedFields"] if m.get("subresource") == "status"
                and "f:nominatedNodeName" in (m.get("fieldsV1") or {}).get("f:status", {})]


async def test_a_failed_binding_cycle_clears_the_nomination(fpgas_without_preemption):
    """Upstream's failure handler clears a binding cycle's nomination (clearNominatedNode): a true
    binding failure condition fails PreBind, and the pod's nominatedNodeName goes away before the
    retry nominates it again."""
    client, clock = fpgas_without_preemption
    pods, claims, created = await _claim_and_pod(client)
    seen: list = []

    async def follow(stream):
        async for typ, obj in stream:
            if obj["metadata"]["name"] == "p":
                seen.append(obj["status"].get("nominatedNodeName"))
    follower = asyncio.create_task(follow(await pods.watch("default", created["metadata"]["resourceVersion"])))
    try:
        first = await until(clock, lambda: _reserved_allocation(claims))
        [r] = first["devices"]["results"]
        await _report(claims, clock, r, "attach-failed", "NoPath", "")

        async def renominated():
            got = [n for i, n in enumerate(seen) if i == 0 or n != seen[i - 1]]
            return got[:3] == ["n", None, "n"] and got
        assert await until(clock, renominated, limit=60)
    finally:
        follower.cancel()
