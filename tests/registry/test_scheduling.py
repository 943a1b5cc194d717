"""scheduling.k8s.io registry: PriorityClass, Workload, PodGroup, CompositePodGroup."""

import asyncio
import copy
import json

import pytest

from nanokube.registry.base import all_resources
from nanokube.registry.scheduling import (
    CompositePodGroupStrategy,
    PodGroupStrategy,
    PriorityClassStrategy,
    WorkloadStrategy,
)


def by_plural(plural):
    return next(r for r in all_resources() if r.group == "scheduling.k8s.io" and r.plural == plural)


def errors(errs):
    return [(e.field, e.reason) for e in errs]


def test_registration():
    pc = by_plural("priorityclasses")
    assert (pc.namespaced, pc.versions, pc.short_names) == (False, ["v1"], ("pc",))
    pg = by_plural("podgroups")
    assert pg.versions == ["v1beta1", "v1alpha3"] and pg.storage_version == "v1beta1" and pg.subresources == ("status",)
    assert by_plural("workloads").subresources == ()
    cpg = by_plural("compositepodgroups")
    assert cpg.versions == ["v1alpha3"] and cpg.namespaced


# --- PriorityClass ---------------------------------------------------------------

def pc(name="high", value=1000, **extra):
    return {"metadata": {"name": name}, "value": value, **extra}


def test_priority_class_defaults_and_valid():
    s = PriorityClassStrategy()
    obj = pc()
    s.default(obj, "v1")
    assert obj["preemptionPolicy"] == "PreemptLowerPriority"
    assert s.validate(obj) == []
    assert s.validate(pc("system-node-critical", 2000001000)) == []


def test_priority_class_rules():
    s = PriorityClassStrategy()
    [e] = s.validate(pc("system-foo"))
    assert (e.field, e.reason) == ("metadata.name", "FieldValueForbidden")
    assert "system-foo is not a known system priority class" in e.detail
    [e] = s.validate(pc(value=1_000_000_001))
    assert (e.field, e.detail) == ("value", "maximum allowed value of a user defined priority is 1000000000")
    [e] = s.validate(pc(preemptionPolicy="Sometimes"))
    assert (e.field, e.reason) == ("preemptionPolicy", "FieldValueNotSupported")


def test_priority_class_update_immutability():
    s = PriorityClassStrategy()
    old = pc(preemptionPolicy="Never")
    new = pc(value=5, preemptionPolicy="PreemptLowerPriority")
    assert errors(s.validate_update(new, old)) == [("value", "FieldValueForbidden"), ("preemptionPolicy", "FieldValueInvalid")]


def test_priority_class_columns():
    cols = PriorityClassStrategy.columns
    assert [c.name for c in cols] == ["Name", "Value", "Global-Default", "Age", "PreemptionPolicy"]
    assert cols[2].fn(pc(globalDefault=True)) is True


# --- PodGroup ----------------------------------------------------------------------------

def pod_group(**spec):
    base = {"schedulingPolicy": {"gang": {"minCount": 3}}, "workloadRef": {"workloadName": "train", "templateName": "workers"}}
    base.update(spec)
    return {"metadata": {"name": "train-workers", "namespace": "ml"}, "spec": base}


def test_pod_group_valid_and_defaulted():
    s = PodGroupStrategy()
    obj = pod_group(
        schedulingConstraints={"topology": [{"key": "topology.kubernetes.io/rack"}]},
        resourceClaims=[{"name": "gpus", "resourceClaimTemplateName": "gpu-template"}],
        preemptionPolicy="Never",
    )
    s.default(obj, "v1beta1")
    assert obj["spec"]["disruptionMode"] == {"single": {}}
    assert s.validate(obj) == []


def test_pod_group_policy_union():
    s = PodGroupStrategy()
    [e] = s.validate(pod_group(schedulingPolicy={}))
    assert e.field == "spec.schedulingPolicy" and e.message == 'Invalid value: "": must specify one of: `basic`, `gang`'
    [e] = s.validate(pod_group(schedulingPolicy={"basic": {}, "gang": {"minCount": 1}}))
    assert e.detail == "exactly one of `basic`, `gang` is required, but multiple fields are set"
    [e] = s.validate(pod_group(schedulingPolicy={"gang": {"minCount": 0}}))
    assert (e.field, e.reason) == ("spec.schedulingPolicy.gang.minCount", "FieldValueRequired")
    [e] = s.validate(pod_group(schedulingPolicy={"gang": {"minCount": -1}}))
    assert e.message == "Invalid value: -1: must be greater than zero"


@pytest.mark.parametrize(
    "spec, field, reason",
    [
        ({"schedulingConstraints": {"topology": [{"key": "a"}, {"key": "b"}]}}, "spec.schedulingConstraints.topology", "FieldValueTooMany"),
        ({"resourceClaims": [{"name": f"c{i}", "resourceClaimName": "x"} for i in range(5)]}, "spec.resourceClaims", "FieldValueTooMany"),
        ({"resourceClaims": [{"name": "c"}]}, "spec.resourceClaims[0]", "FieldValueInvalid"),
        ({"resourceClaims": [{"name": "c", "resourceClaimName": "a"}, {"name": "c", "resourceClaimName": "b"}]}, "spec.resourceClaims[1]", "FieldValueDuplicate"),
        ({"schedulingPolicy": {"basic": {}}, "disruptionMode": {"all": {}}}, "spec.disruptionMode", "FieldValueInvalid"),
        ({"disruptionMode": {}}, "spec.disruptionMode", "FieldValueInvalid"),
        ({"preemptionPolicy": "Always"}, "spec.preemptionPolicy", "FieldValueNotSupported"),
        ({"workloadRef": {"workloadName": "train", "templateName": "Bad_Name"}}, "spec.workloadRef.templateName", "FieldValueInvalid"),
        ({"workloadRef": None, "parentCompositePodGroupName": "root"}, "spec.workloadRef", "FieldValueRequired"),
    ],
)
def test_pod_group_rules(spec, field, reason):
    assert (field, reason) in errors(PodGroupStrategy().validate(pod_group(**spec)))


def test_pod_group_update_immutability():
    s = PodGroupStrategy()
    old = pod_group(disruptionMode={"single": {}})
    scaled = copy.deepcopy(old)
    scaled["spec"]["schedulingPolicy"]["gang"]["minCount"] = 5
    assert s.validate_update(scaled, old) == []
    switched = pod_group(schedulingPolicy={"basic": {}}, disruptionMode={"single": {}})
    assert ("spec.schedulingPolicy", "FieldValueInvalid") in errors(s.validate_update(switched, old))
    moved = pod_group(disruptionMode={"all": {}}, priority=5)
    assert {("spec.disruptionMode", "FieldValueInvalid"), ("spec.priority", "FieldValueInvalid")} <= set(errors(s.validate_update(moved, old)))


def test_pod_group_status_and_columns():
    s = PodGroupStrategy()
    obj = pod_group()
    obj["status"] = {"conditions": [{"type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled", "lastTransitionTime": "2026-07-01T00:00:00Z"}]}
    assert s.validate_status_update(obj, pod_group()) == []
    # upstream's printPodGroup: Name, Policy, Workload, Status (then Age)
    assert [c.name for c in s.columns] == ["Name", "Policy", "Workload", "Status", "Age"]
    assert [c.fn(obj) for c in s.columns if c.name != "Age"] == ["train-workers", "Gang", "train", "Scheduled"]
    basic = pod_group(schedulingPolicy={"basic": {}}, workloadRef=None)
    assert [c.fn(basic) for c in s.columns[1:4]] == ["Basic", "<none>", "Pending"]
    failed = {**pod_group(), "status": {"conditions": [
        {"type": "PodGroupInitiallyScheduled", "status": "False", "reason": "SchedulerError"}]}}
    assert s.columns[3].fn(failed) == "Unschedulable"  # whatever the reason
    preempted = {**pod_group(), "status": {"conditions": [
        *obj["status"]["conditions"], {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]}}
    assert s.columns[3].fn(preempted) == "PreemptionByScheduler"
    obj["status"]["conditions"][0]["status"] = "Maybe"
    assert ("status.conditions[0].status", "FieldValueNotSupported") in errors(s.validate_status_update(obj, pod_group()))


# --- CompositePodGroup ---------------------------------------------------------------------

def test_composite_pod_group():
    s = CompositePodGroupStrategy()
    obj = {"metadata": {"name": "root", "namespace": "ml"}, "spec": {
        "workloadRef": {"workloadName": "train", "templateName": "root"},
        "schedulingPolicy": {"gang": {"minGroupCount": 2}}, "disruptionMode": {"all": {}}}}
    assert s.validate(obj) == []
    assert [c.fn(obj) for c in s.columns[1:4]] == ["Gang", "train", "Pending"]
    no_ref = copy.deepcopy(obj)
    del no_ref["spec"]["workloadRef"]
    assert errors(s.validate(no_ref)) == [("spec.workloadRef", "FieldValueRequired")]
    changed = copy.deepcopy(obj)
    changed["spec"]["parentCompositePodGroupName"] = "other"
    assert errors(s.validate_update(changed, obj)) == [("spec.parentCompositePodGroupName", "FieldValueInvalid")]


# --- Workload -----------------------------------------------------------------------------

def template(name, **extra):
    return {"name": name, "schedulingPolicy": {"gang": {"minCount": 2}}, **extra}


def workload(**spec):
    return {"metadata": {"name": "train", "namespace": "ml"}, "spec": spec}


def test_workload_valid():
    s = WorkloadStrategy()
    obj = workload(controllerRef={"apiGroup": "batch", "kind": "Job", "name": "train"}, podGroupTemplates=[template("workers"), template("ps")])
    assert s.validate(obj) == []
    assert [c.name for c in s.columns] == ["Name", "Age"]  # upstream's printWorkload
    nested = workload(compositePodGroupTemplates=[{
        "name": "root", "schedulingPolicy": {"basic": {}}, "disruptionMode": {"single": {}},
        "podGroupTemplates": [template("leaf", disruptionMode={"all": {}})]}])
    assert s.validate(nested) == []


@pytest.mark.parametrize(
    "spec, field, reason",
    [
        ({}, "spec", "FieldValueInvalid"),
        ({"podGroupTemplates": [template(f"t{i}") for i in range(9)]}, "spec.podGroupTemplates", "FieldValueTooMany"),
        ({"podGroupTemplates": [template("a"), template("a")]}, "spec.podGroupTemplates[1].name", "FieldValueInvalid"),
        ({"podGroupTemplates": [template("a", schedulingPolicy={})]}, "spec.podGroupTemplates[0].schedulingPolicy", "FieldValueInvalid"),
        ({"controllerRef": {"kind": "Job", "name": "a/b"}, "podGroupTemplates": [template("a")]}, "spec.controllerRef.name", "FieldValueInvalid"),
        ({"compositePodGroupTemplates": [{"name": "root", "schedulingPolicy": {"basic": {}}}]}, "spec.compositePodGroupTemplates[0]", "FieldValueRequired"),
        (
            {"compositePodGroupTemplates": [{"name": "root", "schedulingPolicy": {"gang": {"minGroupCount": 1}}, "disruptionMode": {"all": {}},
                                             "podGroupTemplates": [template("leaf", disruptionMode={"single": {}})]}]},
            "spec.compositePodGroupTemplates[0].podGroupTemplates[0].disruptionMode", "FieldValueInvalid",
        ),
    ],
)
def test_workload_rules(spec, field, reason):
    assert (field, reason) in errors(WorkloadStrategy().validate(workload(**spec)))


def test_workload_depth_limit():
    leaf = {"name": "l4", "schedulingPolicy": {"basic": {}}, "podGroupTemplates": [template("pods")]}
    for depth in (3, 2, 1):
        leaf = {"name": f"l{depth}", "schedulingPolicy": {"basic": {}}, "compositePodGroupTemplates": [leaf]}
    errs = errors(WorkloadStrategy().validate(workload(compositePodGroupTemplates=[leaf])))
    assert ("spec.compositePodGroupTemplates[0].compositePodGroupTemplates[0].compositePodGroupTemplates[0].compositePodGroupTemplates[0]", "FieldValueInvalid") in errs


def test_workload_update_rules():
    s = WorkloadStrategy()
    old = workload(controllerRef={"kind": "Job", "name": "train"}, podGroupTemplates=[template("workers")])
    scaled = copy.deepcopy(old)
    scaled["spec"]["podGroupTemplates"][0]["schedulingPolicy"]["gang"]["minCount"] = 4
    assert s.validate_update(scaled, old) == []
    added = workload(controllerRef={"kind": "Job", "name": "train"}, podGroupTemplates=[template("workers"), template("more")])
    assert errors(s.validate_update(added, old)) == [("spec.podGroupTemplates", "FieldValueInvalid")]
    retuned = workload(controllerRef={"kind": "Job", "name": "other"}, podGroupTemplates=[template("workers", priorityClassName="high")])
    assert errors(s.validate_update(retuned, old)) == [("spec.controllerRef", "FieldValueInvalid"), ("spec.podGroupTemplates[0]", "FieldValueInvalid")]
    unowned = workload(podGroupTemplates=[template("workers")])
    assert s.validate_update(old, unowned) == []


async def test_system_priority_classes_cannot_be_deleted(tmp_path):
    """The PriorityClass REST Delete refuses the two system classes by name (even in a dry run);
    a deletecollection deletes items past it, as upstream's store does; other classes delete."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    from tests.served import served

    async with served(tmp_path) as (_, api_client):
        sched = client.SchedulingV1Api(api_client)
        for name in ("system-node-critical", "system-cluster-critical"):
            for dry_run in (None, "All"):
                with pytest.raises(ApiException) as e:
                    await asyncio.to_thread(sched.delete_priority_class, name, dry_run=dry_run)
                status = json.loads(e.value.body)
                assert (e.value.status, status["reason"], status["message"]) == (
                    403, "Forbidden", f'priorityclasses.scheduling.k8s.io "{name}" is forbidden: '
                                      "this is a system priority class and cannot be deleted")
            assert (await asyncio.to_thread(sched.read_priority_class, name)).value >= 2_000_000_000
        await asyncio.to_thread(sched.create_priority_class, {"metadata": {"name": "batch"}, "value": 10})
        await asyncio.to_thread(sched.delete_priority_class, "batch")
        swept = await asyncio.to_thread(sched.delete_collection_priority_class,
                                        field_selector="metadata.name=system-node-critical")
        assert swept.metadata is not None
        names = [pc.metadata.name for pc in (await asyncio.to_thread(sched.list_priority_class)).items]
        assert names == ["system-cluster-critical"]
