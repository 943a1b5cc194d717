"""dropDisabledFields of the feature gates nanokube switches: while a gate is off a create drops its
fields, and an update too unless the object it updates uses them already (upstream keeps what is
in use, so that turning a gate off never makes a stored object unwritable, and an update that adds
a field of a disabled feature loses it instead of being refused). `old` is the stored object's
part matching the first argument, None on create."""

from __future__ import annotations

from ..machinery.featuregates import enabled

_BINDING_FIELDS = ("bindsToNode", "bindingConditions", "bindingFailureConditions")
_RESULT_BINDING_FIELDS = ("bindingConditions", "bindingFailureConditions")

#: a PodGroup's or CompositePodGroup's gated spec fields, with their gates
_GROUP_FIELDS = (("parentCompositePodGroupName", "CompositePodGroup"),
                 ("schedulingConstraints", "TopologyAwareWorkloadScheduling"),
                 ("resourceClaims", "DRAWorkloadResourceClaims"))


def _used(old: dict | None, field: str) -> bool:
    """Whether the stored object sets `field` (a nil pointer or an empty list is unset)."""
    value = (old or {}).get(field)
    return value is not None and value != []


def drop_pod_fields(spec: dict, old: dict | None = None) -> None:
    """A pod's or a pod template's spec.schedulingGroup: GenericWorkload (upstream's
    dropDisabledFields, shared by pods and every kind's template)."""
    if "schedulingGroup" in spec and not _used(old, "schedulingGroup") and not enabled("GenericWorkload"):
        del spec["schedulingGroup"]


def drop_template_fields(holder: dict, old_holder: dict | None = None, key: str = "template") -> None:
    """DropDisabledTemplateFields: the pod template at holder[key] (a workload's spec, a PodTemplate)
    against the stored object's."""
    template = holder.get(key)
    if type(template) is dict and type(spec := template.get("spec")) is dict:
        drop_pod_fields(spec, ((old_holder or {}).get(key) or {}).get("spec"))


def drop_job_fields(spec: dict, old: dict | None = None) -> None:
    """A Job's (or a CronJob's job template's) spec.scheduling: WorkloadWithJob; and its pod
    template's fields."""
    if "scheduling" in spec and not _used(old, "scheduling") and not enabled("WorkloadWithJob"):
        del spec["scheduling"]
    drop_template_fields(spec, old)


def drop_podgroup_fields(spec: dict, old: dict | None = None) -> None:
    """A PodGroup's or CompositePodGroup's spec.parentCompositePodGroupName (CompositePodGroup),
    schedulingConstraints (TopologyAwareWorkloadScheduling) and resourceClaims
    (DRAWorkloadResourceClaims)."""
    for field, gate in _GROUP_FIELDS:
        if field in spec and not _used(old, field) and not enabled(gate):
            del spec[field]


def drop_podgroup_status_fields(status: dict, old_spec: dict | None) -> None:
    """A PodGroup's status.resourceClaimStatuses, unless its spec has claims: DRAWorkloadResourceClaims."""
    if "resourceClaimStatuses" in status and not _used(old_spec, "resourceClaims") \
            and not enabled("DRAWorkloadResourceClaims"):
        del status["resourceClaimStatuses"]


def drop_workload_fields(spec: dict, old: dict | None = None) -> None:
    """A Workload's spec.compositePodGroupTemplates (CompositePodGroup); its templates'
    schedulingConstraints, at every depth (TopologyAwareWorkloadScheduling), unless any stored
    template has them; its pod group templates' resourceClaims (DRAWorkloadResourceClaims), unless
    any stored one has them."""
    if "compositePodGroupTemplates" in spec and not _used(old, "compositePodGroupTemplates") \
            and not enabled("CompositePodGroup"):
        del spec["compositePodGroupTemplates"]
    topology = enabled("TopologyAwareWorkloadScheduling") or \
        any(_used(t, "schedulingConstraints") for _, t in _templates(old or {}))
    claims = enabled("DRAWorkloadResourceClaims") or \
        any(_used(t, "resourceClaims") for kind, t in _templates(old or {}) if kind == "podGroupTemplates")
    if topology and claims:
        return
    for kind, t in _templates(spec):
        if not topology and "schedulingConstraints" in t:
            if kind == "podGroupTemplates":  # a pointer without omitempty: nil is served null, as stored
                t["schedulingConstraints"] = None
            else:
                del t["schedulingConstraints"]
        if not claims and kind == "podGroupTemplates":
            t.pop("resourceClaims", None)


def _templates(spec: dict):
    """(list key, template) of every template of a Workload's tree."""
    pending = [spec]
    while pending:
        t = pending.pop()
        for key in ("podGroupTemplates", "compositePodGroupTemplates"):
            for inner in t.get(key) or ():
                if type(inner) is dict:
                    yield key, inner
                    pending.append(inner)


def drop_slice_fields(spec: dict, old: dict | None = None) -> None:
    """A ResourceSlice's devices' bindsToNode, bindingConditions and bindingFailureConditions:
    DRADeviceBindingConditions (which needs DRAResourceClaimDeviceStatus, GA and locked on)."""
    if enabled("DRADeviceBindingConditions") or _binds(old):
        return
    for device in spec.get("devices") or ():
        for field in _BINDING_FIELDS:
            device.pop(field, None)


def _binds(spec: dict | None) -> bool:
    return any(d.get(f) for d in (spec or {}).get("devices") or () for f in _BINDING_FIELDS)


def drop_claim_status_fields(status: dict, old_status: dict | None) -> None:
    """A ResourceClaim's allocation results' bindingConditions and bindingFailureConditions:
    DRADeviceBindingConditions, unless a stored result has them (dropDeviceBindingConditionsFields)."""
    results = _results(status)
    if not results or enabled("DRADeviceBindingConditions") or \
            any(r.get(f) for r in _results(old_status) for f in _RESULT_BINDING_FIELDS):
        return
    for r in results:
        for field in _RESULT_BINDING_FIELDS:
            r.pop(field, None)


def _results(status: dict | None) -> list:
    results = (((status or {}).get("allocation") or {}).get("devices") or {}).get("results")
    return [r for r in results if type(r) is dict] if type(results) is list else []
