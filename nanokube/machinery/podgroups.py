"""PodGroup vocabulary shared by the API server's admission, the scheduler and the controllers:
how a pod names its group, group keys, a gang's minCount and priority, and the protection finalizer."""

from __future__ import annotations

#: the finalizer PodGroup admission adds and the podgroup-protection controller removes
PODGROUP_PROTECTION = "scheduling.k8s.io/podgroup-protection"
#: the pod informer's index of pods by `group_key` (upstream's podGroupPerPod), shared by the
#: controllers that read a group's members from one informer
POD_GROUP_INDEX = "podGroupPerPod"


def group_name(pod: dict) -> str | None:
    return ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")


def group_key(pod: dict) -> str | None:
    """`namespace/podGroupName` of the group a pod belongs to, or None (group_name inline: the
    scheduler asks it of every pod event)."""
    name = ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
    return f"{pod['metadata'].get('namespace', '')}/{name}" if name else None


def min_count(pg: dict) -> int | None:
    """The gang's minCount; None for a basic group."""
    gang = ((pg.get("spec") or {}).get("schedulingPolicy") or {}).get("gang")
    return None if gang is None else int(gang.get("minCount") or 0)


def group_priority(pg: dict) -> int:
    return (pg.get("spec") or {}).get("priority") or 0


def topology_keys(pg: dict) -> list[str]:
    constraints = (pg.get("spec") or {}).get("schedulingConstraints") or {}
    return [t["key"] for t in constraints.get("topology") or [] if t.get("key")]
