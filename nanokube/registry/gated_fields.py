"""dropDisabledFields of the feature gates nanokube switches: while a gate is off a create drops its
fields, and an update too unless the object it updates uses them already (upstream keeps what is
in use, so that turning a gate off never makes a stored object unwritable). A pod's and a Job's
fields here are immutable: an update cannot add them, and keeps them, whatever the gate."""

from __future__ import annotations

from ..machinery.featuregates import enabled

_BINDING_FIELDS = ("bindsToNode", "bindingConditions", "bindingFailureConditions")


def drop_pod_fields(spec: dict) -> None:
    """A created pod's spec.schedulingGroup: GenericWorkload."""
    if "schedulingGroup" in spec and not enabled("GenericWorkload"):
        del spec["schedulingGroup"]


def drop_job_fields(spec: dict) -> None:
    """A created Job's spec.scheduling: WorkloadWithJob."""
    if "scheduling" in spec and not enabled("WorkloadWithJob"):
        del spec["scheduling"]


def drop_podgroup_fields(spec: dict) -> None:
    """A created PodGroup's or CompositePodGroup's spec.parentCompositePodGroupName: CompositePodGroup;
    its schedulingConstraints.topology: TopologyAwareWorkloadScheduling."""
    if "parentCompositePodGroupName" in spec and not enabled("CompositePodGroup"):
        del spec["parentCompositePodGroupName"]
    _drop_topology(spec)


def drop_workload_fields(spec: dict) -> None:
    """A created Workload's spec.compositePodGroupTemplates: CompositePodGroup; its templates'
    schedulingConstraints.topology, at every depth: TopologyAwareWorkloadScheduling."""
    if "compositePodGroupTemplates" in spec and not enabled("CompositePodGroup"):
        del spec["compositePodGroupTemplates"]
    templates = [spec]
    while templates:
        t = templates.pop()
        for key in ("podGroupTemplates", "compositePodGroupTemplates"):
            for inner in t.get(key) or ():
                if type(inner) is dict:
                    _drop_topology(inner)
                    templates.append(inner)


def _drop_topology(spec: dict) -> None:
    constraints = spec.get("schedulingConstraints")
    if type(constraints) is dict and "topology" in constraints and not enabled("TopologyAwareWorkloadScheduling"):
        del constraints["topology"]
        if not constraints:
            del spec["schedulingConstraints"]


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
