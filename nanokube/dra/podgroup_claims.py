"""PodGroup resourceClaims (DRAWorkloadResourceClaims): claims a whole group
shares. A pod claim whose name and source match an entry of its PodGroup's
`spec.resourceClaims` exactly resolves to the group's claim (by name, or
the one the ResourceClaim controller generated for the group, which it
also records in the pod's `resourceClaimStatuses`). Such a claim is
allocated once and reserved for the PodGroup, not for each pod."""

from __future__ import annotations

API_GROUP = "scheduling.k8s.io"
PODGROUP_CLAIM_ANNOTATION = "resource.kubernetes.io/podgroup-claim-name"
_SOURCE = ("name", "resourceClaimName", "resourceClaimTemplateName")


def _source(claim: dict) -> tuple:
    return tuple(claim.get(k) or None for k in _SOURCE)


def group_entry(pg: dict | None, pod_claim: dict) -> dict | None:
    """The PodGroup's `resourceClaims` entry the pod claim names exactly, if any."""
    for entry in ((pg or {}).get("spec") or {}).get("resourceClaims") or []:
        if _source(entry) == _source(pod_claim):
            return entry
    return None


def generated_claim(pg: dict, name: str) -> str | None:
    """The claim generated for the group's entry `name`, from the PodGroup status."""
    for st in (pg.get("status") or {}).get("resourceClaimStatuses") or []:
        if st.get("name") == name:
            return st.get("resourceClaimName")
    return None


def owned_by_group(claim: dict, pod: dict) -> bool:
    """Whether the claim's controller is the PodGroup the pod belongs to."""
    group = ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
    return bool(group) and any(
        r.get("controller") and r.get("kind") == "PodGroup" and r.get("name") == group
        and (r.get("apiVersion") or "").startswith(f"{API_GROUP}/")
        for r in claim["metadata"].get("ownerReferences") or [])


def consumer(pod: dict, pg: dict | None) -> dict:
    """The `reservedFor` entry for a pod using a claim: its PodGroup when
    `pg` is given (a shared claim), else the pod itself."""
    if pg is not None:
        md = pg["metadata"]
        return {"apiGroup": API_GROUP, "resource": "podgroups", "name": md["name"], "uid": md.get("uid", "")}
    md = pod["metadata"]
    return {"resource": "pods", "name": md["name"], "uid": md.get("uid", "")}
