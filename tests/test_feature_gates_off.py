"""What each feature gate nanokube honours switches off: the API server drops the gate's fields on
create (and on update unless the object uses them already), the scheduler and the controller
manager leave the feature's objects alone. The process's gates are swapped for each test."""

import copy

import pytest

from nanokube.controllers.manager import ControllerManager
from nanokube.machinery import featuregates
from nanokube.machinery.errors import APIError
from nanokube.machinery.featuregates import NANOKUBE_DEFAULTS, FeatureGates
from nanokube.scheduler.scheduler import Scheduler
from tests.controllers import eventually, make_stack
from tests.scheduler import node, pod
from tests.scheduler.test_gang import member, node_of, podgroup
from tests.scheduler.test_scheduler import add_node


@pytest.fixture
def gates(monkeypatch):
    """`gates("Name=false,...")`: nanokube's defaults with those set, until the test ends."""
    def set_gates(value: str) -> None:
        monkeypatch.setattr(featuregates, "GATES", FeatureGates(NANOKUBE_DEFAULTS))
        featuregates.set_flag(value)
    return set_gates


@pytest.fixture
async def stack():
    s = await make_stack()
    yield s
    await s.close()


SLICE = {"metadata": {"name": "s"}, "spec": {"driver": "gpu.example.com", "nodeName": "n1",
         "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
         "devices": [{"name": "d0", "bindsToNode": True, "bindingConditions": ["Ready"],
                      "bindingFailureConditions": ["Failed"]}]}}


async def test_a_disabled_gates_fields_are_dropped_on_create(stack, gates):
    gates("GenericWorkload=false,WorkloadWithJob=false,CompositePodGroup=false,DRADeviceBindingConditions=false")
    c = stack.client
    member = {"metadata": {"name": "m"}, "spec": {"schedulingGroup": {"podGroupName": "g"},
                                                 "containers": [{"name": "c", "image": "busybox"}]}}
    assert "schedulingGroup" not in (await c.resource("", "v1", "pods").create(member, "default"))["spec"]
    job = {"metadata": {"name": "j"}, "spec": {"scheduling": {}, "template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}
    assert "scheduling" not in (await c.resource("batch", "v1", "jobs").create(job, "default"))["spec"]
    group = {"metadata": {"name": "g"}, "spec": {"parentCompositePodGroupName": "fleet",
                                                "schedulingPolicy": {"basic": {}}}}
    created = await c.resource("scheduling.k8s.io", "v1beta1", "podgroups").create(group, "default")
    assert "parentCompositePodGroupName" not in created["spec"]
    device = (await c.resource("resource.k8s.io", "v1", "resourceslices").create(copy.deepcopy(SLICE)))["spec"]["devices"][0]
    assert device == {"name": "d0"}


async def test_topology_constraints_are_dropped_from_groups_and_workload_templates(stack, gates):
    gates("TopologyAwareWorkloadScheduling=false")
    c = stack.client
    rack = {"topology": [{"key": "example.com/rack"}]}
    created = await c.resource("scheduling.k8s.io", "v1beta1", "podgroups").create(
        podgroup("g", 2, topology="example.com/rack"), "default")
    assert "schedulingConstraints" not in created["spec"]
    workload = {"metadata": {"name": "w"}, "spec": {"compositePodGroupTemplates": [{
        "name": "fleet", "schedulingPolicy": {"basic": {}}, "schedulingConstraints": rack,
        "podGroupTemplates": [{"name": "g", "schedulingPolicy": {"basic": {}}, "schedulingConstraints": rack}]}]}}
    spec = (await c.resource("scheduling.k8s.io", "v1alpha3", "workloads").create(workload, "default"))["spec"]
    [fleet] = spec["compositePodGroupTemplates"]
    assert "schedulingConstraints" not in fleet and fleet["podGroupTemplates"][0]["schedulingConstraints"] is None


async def test_with_topology_aware_scheduling_off_a_gang_spans_racks(stack, gates):
    """Two racks of one 2-CPU node each, a gang of two 2-CPU pods kept to one rack: it fits only
    with the constraint ignored (the group was created while the gate was on)."""
    c = stack.client
    for i in range(2):
        await add_node(c, node(f"n{i}", "2", labels={"example.com/rack": f"rack-{i}"}))
    await c.resource("scheduling.k8s.io", "v1beta1", "podgroups").create(podgroup("g", 2, topology="example.com/rack"))
    pods = c.resource("", "v1", "pods")
    for n in ("w-0", "w-1"):
        await pods.create(member(n, "g", cpu="2"))
    gates("TopologyAwareWorkloadScheduling=false")
    sched = Scheduler(c, seed=1)
    await sched.start()
    try:
        for n in ("w-0", "w-1"):
            await eventually(node_of(pods, n))
        assert sorted([(await pods.get(n, "default"))["spec"]["nodeName"] for n in ("w-0", "w-1")]) == ["n0", "n1"]
    finally:
        await sched.stop()


async def test_an_update_keeps_the_fields_the_object_uses_already(stack, gates):
    slices = stack.client.resource("resource.k8s.io", "v1", "resourceslices")
    created = copy.deepcopy(await slices.create(copy.deepcopy(SLICE)))
    gates("DRADeviceBindingConditions=false")
    created["spec"]["devices"][0]["bindingConditions"] = ["Ready", "Attached"]
    updated = await slices.update(created)
    assert updated["spec"]["devices"][0]["bindingConditions"] == ["Ready", "Attached"]
    assert updated["spec"]["devices"][0]["bindsToNode"] is True


async def test_with_hpa_scale_to_zero_off_min_replicas_0_is_refused_unless_stored_already(stack, gates):
    hpas = stack.client.resource("autoscaling", "v2", "horizontalpodautoscalers")

    def hpa(name: str) -> dict:
        return {"metadata": {"name": name}, "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 0, "maxReplicas": 3, "metrics": [{"type": "External", "external": {
                "metric": {"name": "queue"}, "target": {"type": "AverageValue", "averageValue": "5"}}}]}}
    kept = copy.deepcopy(await hpas.create(hpa("kept"), "default"))
    gates("HPAScaleToZero=false")
    with pytest.raises(APIError) as refused:
        await hpas.create(hpa("new"), "default")
    assert refused.value.code == 422
    assert refused.value.message.endswith("spec.minReplicas: Invalid value: 0: must be greater than or equal to 1")
    kept["spec"]["maxReplicas"] = 4
    assert (await hpas.update(kept))["spec"]["minReplicas"] == 0


async def test_with_generic_workload_off_the_scheduler_schedules_a_group_member_alone(stack, gates):
    """The pod was created while the gate was on; its PodGroup never comes. With the gate on it
    would wait for the group; off, the scheduler reads no PodGroup (none is served either)."""
    c = stack.client
    p = pod("member")
    del p["metadata"]["uid"]
    p["spec"]["schedulingGroup"] = {"podGroupName": "never"}
    await c.resource("", "v1", "pods").create(p)
    await add_node(c, node("n1", "4", "8Gi"))
    gates("GenericWorkload=false")
    sched = Scheduler(c, seed=1)
    await sched.start()
    try:
        async def bound():
            return (await c.resource("", "v1", "pods").get("member", "default"))["spec"].get("nodeName")
        assert await eventually(bound) == "n1"
        assert "GangScheduling" not in sched.frameworks["default-scheduler"].profile.plugins
    finally:
        await sched.stop()


async def test_the_controller_manager_skips_controllers_whose_gates_are_off(stack, gates):
    names = {c.name for c in ControllerManager(stack.client).controllers}
    assert {"podgroup-protection-controller", "resourcepoolstatusrequest-controller"} <= names
    gates("GenericWorkload=false,DRAResourcePoolStatus=false")
    names = {c.name for c in ControllerManager(stack.client).controllers}
    assert not {"podgroup-protection-controller", "resourcepoolstatusrequest-controller"} & names
    assert "resourceclaim-controller" in names and "job-controller" in names


async def test_an_update_drops_a_disabled_gates_field_the_object_did_not_use(stack, gates):
    """Upstream's dropDisabledFields on update: a field the stored object lacks is dropped, so the
    write goes through without it (before, the immutable pod field was refused)."""
    c = stack.client
    pods = c.resource("", "v1", "pods")
    plain = copy.deepcopy(await pods.create({"metadata": {"name": "p"}, "spec": {
        "containers": [{"name": "c", "image": "busybox"}]}}, "default"))
    groups = c.resource("scheduling.k8s.io", "v1beta1", "podgroups")
    group = copy.deepcopy(await groups.create(podgroup("g", 2), "default"))
    gates("GenericWorkload=false,DRAWorkloadResourceClaims=false,TopologyAwareWorkloadScheduling=false")
    plain["spec"]["schedulingGroup"] = {"podGroupName": "g"}
    assert "schedulingGroup" not in (await pods.update(plain))["spec"]
    group["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "shared"}]
    group["spec"]["schedulingConstraints"] = {"topology": [{"key": "example.com/rack"}]}
    group["spec"]["schedulingPolicy"]["gang"]["minCount"] = 3
    spec = (await groups.update(group))["spec"]
    assert "resourceClaims" not in spec and "schedulingConstraints" not in spec
    assert spec["schedulingPolicy"]["gang"]["minCount"] == 3


async def test_pod_templates_drop_scheduling_group_unless_the_stored_template_has_it(stack, gates):
    c = stack.client
    deployments = c.resource("apps", "v1", "deployments")

    def deployment(name: str) -> dict:
        return {"metadata": {"name": name}, "spec": {"selector": {"matchLabels": {"app": name}}, "template": {
            "metadata": {"labels": {"app": name}}, "spec": {"schedulingGroup": {"podGroupName": "g"},
                                                          "containers": [{"name": "c", "image": "busybox"}]}}}}
    kept = copy.deepcopy(await deployments.create(deployment("kept"), "default"))
    gates("GenericWorkload=false,WorkloadWithJob=false")
    created = await deployments.create(deployment("new"), "default")
    assert "schedulingGroup" not in created["spec"]["template"]["spec"]
    kept["spec"]["replicas"] = 2
    updated = await deployments.update(kept)
    assert updated["spec"]["template"]["spec"]["schedulingGroup"] == {"podGroupName": "g"}
    assert updated["metadata"]["generation"] == 2
    template = {"metadata": {"name": "t"}, "template": deployment("t")["spec"]["template"]}
    assert "schedulingGroup" not in (await c.resource("", "v1", "podtemplates").create(template, "default"))["template"]["spec"]
    cronjob = {"metadata": {"name": "cj"}, "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {
        "scheduling": {}, "template": {"spec": {"restartPolicy": "Never", "schedulingGroup": {"podGroupName": "g"},
                                                "containers": [{"name": "c", "image": "busybox"}]}}}}}}
    job_spec = (await c.resource("batch", "v1", "cronjobs").create(cronjob, "default"))["spec"]["jobTemplate"]["spec"]
    assert "scheduling" not in job_spec and "schedulingGroup" not in job_spec["template"]["spec"]


async def test_workload_resource_claims_are_dropped_with_their_gate_off(stack, gates):
    gates("DRAWorkloadResourceClaims=false")
    c = stack.client
    claims = [{"name": "gpu", "resourceClaimName": "shared"}]
    group = await c.resource("scheduling.k8s.io", "v1beta1", "podgroups").create(
        podgroup("g", 2, resourceClaims=claims), "default")
    assert "resourceClaims" not in group["spec"]
    workload = {"metadata": {"name": "w"}, "spec": {"podGroupTemplates": [{
        "name": "g", "schedulingPolicy": {"basic": {}}, "resourceClaims": claims}]}}
    spec = (await c.resource("scheduling.k8s.io", "v1beta1", "workloads").create(workload, "default"))["spec"]
    assert "resourceClaims" not in spec["podGroupTemplates"][0]
    group = copy.deepcopy(group)
    group["status"] = {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "shared"}]}
    status = (await c.resource("scheduling.k8s.io", "v1beta1", "podgroups").update(group, "status"))["status"]
    assert "resourceClaimStatuses" not in status


async def test_a_claims_allocation_loses_binding_conditions_with_their_gate_off(stack, gates):
    claims = stack.client.resource("resource.k8s.io", "v1", "resourceclaims")
    claim = copy.deepcopy(await claims.create({"metadata": {"name": "c"}, "spec": {"devices": {"requests": [
        {"name": "fpga", "exactly": {"deviceClassName": "fpga.example.com"}}]}}}, "default"))
    gates("DRADeviceBindingConditions=false")
    result = {"request": "fpga", "driver": "fpga.example.com", "pool": "n1", "device": "fpga-0",
              "bindingConditions": ["attached"], "bindingFailureConditions": ["attach-failed"]}
    claim["status"] = {"allocation": {"devices": {"results": [result]}, "nodeSelector": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}
    status = (await claims.update(claim, "status"))["status"]
    assert status["allocation"]["devices"]["results"] == [
        {"request": "fpga", "driver": "fpga.example.com", "pool": "n1", "device": "fpga-0"}]


async def test_a_workload_stored_with_the_topology_gate_on_is_writable_with_it_off(stack, gates):
    """PodGroupTemplate.schedulingConstraints is a pointer without omitempty: a template without
    constraints is served with `schedulingConstraints: null`, and dropping the disabled field sets it to
    nil, which the immutable template still equals. Dropping the key instead made every Workload written
    while the gate was on refused on update with it off ("field is immutable", fuzz60's restart)."""
    workloads = stack.client.resource("scheduling.k8s.io", "v1beta1", "workloads")
    template = {"name": "g", "schedulingPolicy": {"gang": {"minCount": 2}}}
    stored = copy.deepcopy(await workloads.create({"metadata": {"name": "w"}, "spec": {
        "podGroupTemplates": [template]}}, "default"))
    assert stored["spec"]["podGroupTemplates"][0]["schedulingConstraints"] is None
    gates("TopologyAwareWorkloadScheduling=false")
    stored["metadata"]["labels"] = {"a": "b"}
    updated = await workloads.update(stored)
    assert updated["spec"]["podGroupTemplates"] == [{**template, "schedulingConstraints": None}]
    created = await workloads.create({"metadata": {"name": "v"}, "spec": {"podGroupTemplates": [
        {**template, "schedulingConstraints": {"topology": [{"key": "example.com/rack"}]}}]}}, "default")
    assert created["spec"]["podGroupTemplates"] == [{**template, "schedulingConstraints": None}]
