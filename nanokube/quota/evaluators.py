"""What an object charges against a quota (upstream's evaluators in
pkg/quota/v1/evaluator/core and the generic object-count evaluator), which
quotas cover it (scopes), and the constraints quota places on pods."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction

from ..machinery.podphase import pod_is_terminal
from ..machinery.podresize import resize_parts, resources_spec
from ..machinery.podresources import QUANTITIES, pod_limits, pod_requests
from ..machinery.quantity import DECIMAL_SI, Quantity, parse_list
from ..dra.extended_resources import ANNOTATION as EXTENDED_CLAIM_ANNOTATION, class_mapping
from ..volume.classes import claim_class
from .resources import (
    ALLOCATION_RESULTS_MAX,
    IMPLICIT_DEVICE_CLASS_PREFIX,
    OBJECT_COUNTS,
    POD_SCOPES,
    STORAGE_CLASS_SUFFIX,
    count_resource,
    device_class_resource,
    is_extended,
)

Usage = dict[str, Quantity]
ONE = Quantity(Fraction(1), DECIMAL_SI)
#: resources every container must name once a quota holds them (backward compatibility upstream keeps)
CONTAINER_REQUIRED = ("cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory")
_LEGACY = {v: k for k, v in OBJECT_COUNTS.items()}


def compute_usage(requests: dict[str, Quantity], limits: dict[str, Quantity]) -> Usage:
    """podComputeUsageHelper: cpu/memory/ephemeral-storage under their plain and
    requests./limits. names, hugepages, and extended resources as requests.<name>, the
    implicit DRA ones (`deviceclass.resource.kubernetes.io/<class>`) included."""
    out: Usage = {}
    for r in ("cpu", "memory", "ephemeral-storage"):
        if r in requests:
            out[r] = out[f"requests.{r}"] = requests[r]
        if r in limits:
            out[f"limits.{r}"] = limits[r]
    for name, q in requests.items():
        if name.startswith("hugepages-"):
            out[name] = out[f"requests.{name}"] = q
        elif is_extended(name) or name.startswith(IMPLICIT_DEVICE_CLASS_PREFIX):
            out[f"requests.{name}"] = q
    return out


def _time(ts: str) -> float:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def pod_counts(pod: dict, now: float) -> bool:
    """QuotaV1Pod: terminal pods, and pods past their deletion grace, are not charged."""
    if pod_is_terminal(pod):
        return False
    md = pod["metadata"]
    if md.get("deletionTimestamp") and md.get("deletionGracePeriodSeconds") is not None:
        return now <= _time(md["deletionTimestamp"]) + md["deletionGracePeriodSeconds"]
    return True


def pod_usage(pod: dict, now: float) -> Usage:
    """PodUsageFunc: a pod resized in place charges what it holds meanwhile (`resources_spec`)."""
    out: Usage = {"count/pods": ONE}
    if not pod_counts(pod, now):
        return out
    spec = resources_spec(pod)
    out.update(compute_usage(pod_requests(spec, QUANTITIES), pod_limits(spec, QUANTITIES)))
    out["pods"] = ONE
    return out


def service_usage(svc: dict) -> Usage:
    spec = svc.get("spec") or {}
    out: Usage = {"count/services": ONE, "services": ONE}
    typ = spec.get("type") or "ClusterIP"
    if typ in ("NodePort", "LoadBalancer"):
        n = len(spec.get("ports") or [])
        out["services.nodeports"] = Quantity(Fraction(n), DECIMAL_SI)
    if typ == "LoadBalancer":
        out["services.loadbalancers"] = ONE
    return out


def pvc_usage(pvc: dict) -> Usage:
    """A claim's storage is its request, or more while status.allocatedResources says more is being
    expanded to (RecoverVolumeExpansionFailure: shrinking a request back does not free quota early)."""
    out: Usage = {"count/persistentvolumeclaims": ONE, "persistentvolumeclaims": ONE}
    storage = parse_list(((pvc.get("spec") or {}).get("resources") or {}).get("requests")).get("storage")
    allocated = parse_list((pvc.get("status") or {}).get("allocatedResources")).get("storage")
    if storage is not None and allocated is not None and allocated.value > storage.value:
        storage = allocated
    cls = claim_class(pvc)
    if storage is not None:
        out["requests.storage"] = storage
        if cls:
            out[f"{cls}{STORAGE_CLASS_SUFFIX}requests.storage"] = storage
    if cls:
        out[f"{cls}{STORAGE_CLASS_SUFFIX}persistentvolumeclaims"] = ONE
    return out


def _devices(req: dict) -> tuple[str, int]:
    mode = req.get("allocationMode") or "ExactCount"
    if mode == "ExactCount":
        count = req.get("count") or 1
    else:
        count = ALLOCATION_RESULTS_MAX if mode == "All" else 0
    return req.get("deviceClassName", ""), count


@dataclass(frozen=True)
class ClaimLookup:
    """What a ResourceClaim's charge reads besides the claim (upstream's claimEvaluator has a
    DeviceClass mapping and pod and claim listers): each class's explicit extendedResourceName
    as the mapping resolves collisions, a pod by namespace and name, a namespace's claims."""
    extended_names: dict[str, str] = field(default_factory=dict)
    pod: Callable[[str, str], dict | None] = lambda ns, name: None
    claims: Callable[[str], list[dict]] = lambda ns: []


def extended_names(classes: list[dict]) -> dict[str, str]:
    """DeviceClass name -> the extendedResourceName it serves (the one that won any collision)."""
    return {cls: name for name, cls in class_mapping(classes).items() if not name.startswith(IMPLICIT_DEVICE_CLASS_PREFIX)}


def _pod_controller(claim: dict) -> dict | None:
    """The controlling Pod of a claim marked as a pod's extended-resource claim."""
    md = claim.get("metadata") or {}
    if (md.get("annotations") or {}).get(EXTENDED_CLAIM_ANNOTATION) != "true":
        return None
    return next((r for r in md.get("ownerReferences") or [] if r.get("controller")
                 and r.get("kind") == "Pod" and r.get("apiVersion") == "v1"), None)


def _verified_pod_usage(claim: dict, lookup: ClaimLookup, now: float) -> Usage:
    """getVerifiedPodUsage: what the pod that made this extended-resource claim charges itself,
    when the pod exists with the controller's UID and names this claim in
    status.extendedResourceClaimStatus, or, naming none, this is the first claim it controls
    (creation time, then name); else nothing, so no claim escapes quota by only saying it is a
    pod's (kubernetes#135404)."""
    ref = _pod_controller(claim)
    if ref is None:
        return {}
    md = claim["metadata"]
    ns, name = md.get("namespace", ""), md.get("name", "")
    pod = lookup.pod(ns, ref.get("name", ""))
    if pod is None or pod["metadata"].get("uid") != ref.get("uid"):
        return {}
    named = ((pod.get("status") or {}).get("extendedResourceClaimStatus") or {})
    if named:
        if named.get("resourceClaimName") != name:
            return {}
    else:
        mine = (md.get("creationTimestamp") or "", name)
        for other in lookup.claims(ns):
            oref = _pod_controller(other)
            omd = other["metadata"]
            if oref is not None and oref.get("uid") == ref.get("uid") and (omd.get("creationTimestamp") or "", omd.get("name", "")) < mine:
                return {}
    return pod_usage(pod, now)


def claim_usage(claim: dict, lookup: ClaimLookup | None = None, now: float = 0.0) -> Usage:
    """A ResourceClaim charges its devices per DeviceClass; a request with
    alternatives (firstAvailable) charges the most any alternative could take.
    With DRAExtendedResource (GA) the same count is also charged as each class's
    extended resources, requests.deviceclass.resource.kubernetes.io/<class> and
    requests.<extendedResourceName> (kubernetes#134210), so a quota on them holds for
    claims as for pods; a pod's own extended-resource claim charges only what
    exceeds its pod's requests of them, which the pod charges already."""
    lookup = lookup or ClaimLookup()
    out: Usage = {"count/resourceclaims.resource.k8s.io": ONE}
    totals: dict[str, int] = {}
    for req in (((claim.get("spec") or {}).get("devices") or {}).get("requests")) or []:
        if req.get("firstAvailable"):
            most: dict[str, int] = {}
            for sub in req["firstAvailable"]:
                cls, n = _devices(sub)
                most[cls] = max(most.get(cls, 0), n)
        else:
            cls, n = _devices(req.get("exactly") or req)
            most = {cls: n}
        for cls, n in most.items():
            totals[cls] = totals.get(cls, 0) + n
    extended: dict[str, Fraction] = {}
    for cls, n in totals.items():
        out[device_class_resource(cls)] = Quantity(Fraction(n), DECIMAL_SI)
        extended[f"requests.{IMPLICIT_DEVICE_CLASS_PREFIX}{cls}"] = Fraction(n)
        if name := lookup.extended_names.get(cls):
            extended[f"requests.{name}"] = Fraction(n)
    pod = _verified_pod_usage(claim, lookup, now) if extended else {}
    for name, n in extended.items():
        left = n - (pod[name].value if name in pod else 0)
        if left > 0:
            out[name] = Quantity(left, DECIMAL_SI)
    return out


def usage(group: str, plural: str, obj: dict, now: float, claims: ClaimLookup | None = None) -> Usage:
    """Everything the object charges, under every name a quota may use for it (a ResourceClaim's
    extended resources through `claims`)."""
    if group == "" and plural == "pods":
        return pod_usage(obj, now)
    if group == "" and plural == "services":
        return service_usage(obj)
    if group == "" and plural == "persistentvolumeclaims":
        return pvc_usage(obj)
    if group == "resource.k8s.io" and plural == "resourceclaims":
        return claim_usage(obj, claims, now)
    out: Usage = {count_resource(group, plural): ONE}
    if (group, plural) in _LEGACY:
        out[_LEGACY[(group, plural)]] = ONE
    return out


def charge_changed(group: str, plural: str, old: dict, new: dict, now: float) -> bool:
    """Whether an update changes what the object charges (`usage` of both sides differs). A pod
    charges by its spec while it counts: most pod updates are status writes that keep both, and
    working out two usages (quantities added per container) for each was ~1.5% of an API server
    with pending pods; upstream's quota monitor asks only whether the pod stopped counting. The
    node's write of what a resized pod was allocated changes its charge too."""
    if group == "" and plural == "pods":
        counts = pod_counts(new, now)
        if counts != pod_counts(old, now):
            return True
        if not counts or (old.get("spec") == new.get("spec") and resize_parts(old) == resize_parts(new)):
            return False
    return usage(group, plural, old, now) != usage(group, plural, new, now)


def charged_on_update(group: str, plural: str, subresource: str = "") -> bool:
    """Updates that can change what an object charges (a Service's type, a claim's size, a pod's
    resources through pods/resize: upstream's podEvaluator.Handles; a ResourceClaim's metadata,
    which says whose extended-resource claim it is: claimEvaluator.Handles)."""
    if subresource:
        return group == "" and plural == "pods" and subresource == "resize"
    return (group == "" and plural in ("services", "persistentvolumeclaims")) or \
        (group == "resource.k8s.io" and plural == "resourceclaims")


# --- scopes ---------------------------------------------------------------------------


def _best_effort(spec: dict) -> bool:
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        res = c.get("resources") or {}
        for bag in ("requests", "limits"):
            if any(k in ("cpu", "memory") for k in res.get(bag) or {}):
                return False
    return not any(k in ("cpu", "memory") for bag in ("requests", "limits")
                   for k in ((spec.get("resources") or {}).get(bag) or {}))


def _cross_namespace_affinity(spec: dict) -> bool:
    aff = spec.get("affinity") or {}
    for kind in ("podAffinity", "podAntiAffinity"):
        a = aff.get(kind) or {}
        terms = list(a.get("requiredDuringSchedulingIgnoredDuringExecution") or [])
        terms += [w.get("podAffinityTerm") or {} for w in a.get("preferredDuringSchedulingIgnoredDuringExecution") or []]
        if any(t.get("namespaces") or t.get("namespaceSelector") is not None for t in terms):
            return True
    return False


def _selector_matches(value: str, sel: dict) -> bool:
    op, values = sel.get("operator"), sel.get("values") or []
    if op == "Exists":
        return bool(value)
    if op == "DoesNotExist":
        return not value
    if op == "In":
        return value in values
    if op == "NotIn":
        return value not in values
    return False


def _pod_scope(pod: dict, sel: dict) -> bool:
    spec = pod.get("spec") or {}
    scope = sel.get("scopeName")
    deadline = spec.get("activeDeadlineSeconds")
    if scope == "Terminating":
        return deadline is not None and deadline >= 0
    if scope == "NotTerminating":
        return deadline is None or deadline < 0
    if scope == "BestEffort":
        return _best_effort(spec)
    if scope == "NotBestEffort":
        return not _best_effort(spec)
    if scope == "PriorityClass":
        return _selector_matches(spec.get("priorityClassName") or "", sel)
    if scope == "CrossNamespacePodAffinity":
        return _cross_namespace_affinity(spec)
    return False


def scope_selectors(quota: dict) -> list[dict]:
    """spec.scopes as Exists selectors, then spec.scopeSelector's expressions."""
    spec = quota.get("spec") or {}
    sels = [{"scopeName": s, "operator": "Exists"} for s in spec.get("scopes") or []]
    return sels + list((spec.get("scopeSelector") or {}).get("matchExpressions") or [])


def scope_matches(group: str, plural: str, obj: dict, sel: dict) -> bool:
    """Whether the object matches one scope selector (podMatchesScopeFunc, and the claims'
    VolumeAttributesClass); objects other than pods and claims match none."""
    scope = sel.get("scopeName")
    if group == "" and plural == "pods" and scope in POD_SCOPES:
        return _pod_scope(obj, sel)
    if group == "" and plural == "persistentvolumeclaims" and scope == "VolumeAttributesClass":
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        names = {spec.get("volumeAttributesClassName") or "", status.get("currentVolumeAttributesClassName") or ""}
        return any(_selector_matches(n, sel) for n in names if n or sel.get("operator") == "DoesNotExist")
    return False


def quota_covers(quota: dict, group: str, plural: str, obj: dict) -> bool:
    """Every scope of the quota matches the object."""
    return all(scope_matches(group, plural, obj, sel) for sel in scope_selectors(quota))


def matching_scopes(group: str, plural: str, obj: dict, selectors: Iterable[dict]) -> list[dict]:
    """MatchingScopes: the selectors the object matches."""
    return [sel for sel in selectors if scope_matches(group, plural, obj, sel)]


def missing_container_resources(pod: dict, hard: Iterable[str]) -> str:
    """The pods evaluator's constraint: once a quota holds cpu or memory, every
    container must name them (skipped when pod-level resources are set).
    Returns upstream's `must specify ...` text, or ''."""
    spec = pod.get("spec") or {}
    required = set(hard) & set(CONTAINER_REQUIRED)
    if not required or (spec.get("resources") or {}).get("requests") or (spec.get("resources") or {}).get("limits"):
        return ""
    missing: dict[str, set[str]] = {}
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        res = c.get("resources") or {}
        have = set(compute_usage(parse_list(res.get("requests")), parse_list(res.get("limits"))))
        for r in required - have:
            missing.setdefault(r, set()).add(c.get("name", ""))
    if not missing:
        return ""
    return "must specify " + "; ".join(f"{r} for: {','.join(sorted(missing[r]))}" for r in sorted(missing))
