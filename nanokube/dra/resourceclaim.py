"""How a pod names its ResourceClaims and when a claim is reserved for it,
as upstream's dynamic-resource-allocation/resourceclaim package answers them
for kube-scheduler, kube-controller-manager and the kubelet alike."""

from __future__ import annotations

PODGROUP_API = "scheduling.k8s.io"
GROUP, VERSION = "resource.k8s.io", "v1"
#: the finalizer that keeps an allocated or reserved claim from being deleted
FINALIZER = "resource.kubernetes.io/delete-protection"


class ClaimError(Exception):
    """A claim the pod needs is missing, being deleted or not the pod's own."""


def claim_name(pod: dict, pod_claim: dict) -> tuple[str | None, bool]:
    """(name of the ResourceClaim a pod.spec.resourceClaims entry resolves
    to, whether the pod must own it); None when no claim is needed. Raises
    ClaimError while a template's claim has not been generated yet."""
    if pod_claim.get("resourceClaimName"):
        return pod_claim["resourceClaimName"], False
    if pod_claim.get("resourceClaimTemplateName"):
        for st in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
            if st.get("name") == pod_claim.get("name"):
                return st.get("resourceClaimName") or None, True
        md = pod["metadata"]
        raise ClaimError(f'pod "{md.get("namespace", "")}/{md["name"]}": ResourceClaim not created yet')
    return None, False


#: what pod_claims calls the claim the scheduler made for the pod's DRA-backed extended resources
EXTENDED_CLAIM_REF = "<extended-resources>"


def pod_claims(pod: dict) -> list[tuple[str, str | None]]:
    """(pod claim name, ResourceClaim name, or None while not generated yet) of every entry, and
    the pod's extended resource claim once the scheduler recorded it (EXTENDED_CLAIM_REF)."""
    status = pod.get("status") or {}
    generated = {s["name"]: s.get("resourceClaimName") for s in status.get("resourceClaimStatuses") or []}
    out = [(ref["name"], ref.get("resourceClaimName") or generated.get(ref["name"]))
           for ref in (pod.get("spec") or {}).get("resourceClaims") or []]
    if extended := (status.get("extendedResourceClaimStatus") or {}).get("resourceClaimName"):
        out.append((EXTENDED_CLAIM_REF, extended))
    return out


def claim_names(pod: dict) -> set[str]:
    """The names of the claims a pod references that are known so far."""
    return {name for _, name in pod_claims(pod) if name}


def reserved_for_pod(claim: dict, pod: dict) -> bool:
    """True if `reservedFor` names the pod, or the PodGroup it belongs to."""
    uid = pod["metadata"]["uid"]
    group = ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
    for r in (claim.get("status") or {}).get("reservedFor") or []:
        if r.get("resource") == "pods" and not r.get("apiGroup") and r.get("uid") == uid:
            return True
        if group and r.get("resource") == "podgroups" and r.get("apiGroup") == PODGROUP_API and r.get("name") == group:
            return True
    return False
