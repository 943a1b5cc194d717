"""The kubelet's pod admission (upstream's predicate admit handler, pkg/kubelet/lifecycle/predicate.go):
before a pod bound to this node runs, the node checks on its own view what the scheduler checked
on its: the pod's OS, its requests against the node's allocatable less what the pods admitted
before hold, its node selector and required node affinity, its host ports and the node's NoExecute
taints. A pod that fails is rejected (Failed, the first failure's reason and message) instead of
overcommitting the node: it matters for pods bound with spec.nodeName, which no scheduler checked.

Requests are counted as the scheduler counts them (`machinery.podresources.pod_requests` in
INTEGERS: milli-CPU, bytes, the integer value of the rest), with init containers, sidecars,
pod-level resources and overhead."""

from __future__ import annotations

from dataclasses import dataclass

from ..machinery.podresize import resources_spec
from ..machinery.podresources import INTEGERS, amounts, pod_requests
from ..machinery.scheduling import NodeMatcher, host_ports, ports_conflict, untolerated
from ..quota.resources import IMPLICIT_DEVICE_CLASS_PREFIX, is_extended
from .inplace import requests_with

#: the simulated nodes' operating system (the kubelet's runtime.GOOS)
OS = "linux"
OS_LABEL = "kubernetes.io/os"
#: a static pod's source annotation: anything but "api" (types.IsStaticPod)
CONFIG_SOURCE = "kubernetes.io/config.source"

NODE_AFFINITY = "NodeAffinity"
NODE_PORTS = "NodePorts"
TAINT_TOLERATION = "TaintToleration"
#: the scheduler plugins' Filter reasons, which the kubelet's PredicateFailureError repeats
AFFINITY_MISMATCH = "node(s) didn't match Pod's node affinity/selector"
PORTS_IN_USE = "node(s) didn't have free ports for the requested pod ports"
TAINTS_NOT_TOLERATED = "node(s) had taints that the pod didn't tolerate"
#: InsufficientResourcePrefix, and the reasons of the resources upstream names (OutOfCPU, ...)
OUT_OF = "OutOf"
_NATIVE = ("cpu", "memory", "ephemeral-storage")


#: the reasons kubelet_admission_rejections_total names as they are (upstream's admissionRejectionReasons:
#: others are OutOfExtendedResources or Other; TaintToleration is not among them, the Filter's reason is)
METRIC_REASONS = frozenset({
    "AppArmor", "PodOSSelectorNodeLabelDoesNotMatch", "PodOSNotSupported", "InvalidNodeInfo",
    "InitContainerRestartPolicyForbidden", "SupplementalGroupsPolicyNotSupported", "UnexpectedAdmissionError",
    "UnknownReason", "UnexpectedPredicateFailureType", "OutOfcpu", "OutOfmemory", "OutOfephemeral-storage",
    "OutOfpods", TAINTS_NOT_TOLERATED, "Evicted", "SysctlForbidden", "TopologyAffinityError", "NodeShutdown"})


def metric_reason(reason: str) -> str:
    """The `reason` label kubelet_admission_rejections_total counts a rejection under (recordAdmissionRejection:
    a short list as they are, so the label stays of few values)."""
    if reason in METRIC_REASONS:
        return reason
    return "OutOfExtendedResources" if reason.startswith(OUT_OF) else "Other"


@dataclass(frozen=True, slots=True)
class Rejection:
    """Why a pod is not admitted: the pod's status.reason (and the event's) and the message."""

    reason: str
    message: str


def _out_of(name: str, requested: int, used: int, capacity: int) -> Rejection:
    """An InsufficientResourceError: OutOf<resource> and upstream's message."""
    return Rejection(OUT_OF + name, f"Node didn't have enough resource: {name}, requested: {requested}, "
                                    f"used: {used}, capacity: {capacity}")


def _predicate(name: str, reason: str) -> Rejection:
    """A PredicateFailureError."""
    return Rejection(name, f"Predicate {name} failed: {reason}")


def os_rejection(pod: dict, node: dict) -> Rejection | None:
    """The checks no eviction could help, made first: a `kubernetes.io/os` pod label other than
    the node's OS (the node's label, or the kubelet's own where that is missing or differs), and a
    spec.os.name other than the kubelet's."""
    want = ((pod.get("metadata") or {}).get("labels") or {}).get(OS_LABEL)
    if want is not None:
        have = ((node.get("metadata") or {}).get("labels") or {}).get(OS_LABEL)
        if want != (have if have == OS else OS):
            return Rejection("PodOSSelectorNodeLabelDoesNotMatch",
                             "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label")
    os_name = ((pod.get("spec") or {}).get("os") or {}).get("name")
    if os_name is not None and os_name != OS:
        return Rejection("PodOSNotSupported", "Failed to admit pod as the OS field doesn't match node OS")
    return None


def requests(pod: dict, allocatable: dict[str, int] | None = None) -> dict[str, int]:
    """What the pod asks of the node (PodRequests): a pod the node ran before (a restarted node
    admits it again) counts what its status says it was allocated, as the scheduler counts it
    (`resources_spec`: a resize the node found infeasible is not asked for). With `allocatable`,
    the containers' extended resources the node does not have are left out, and those a DRA claim
    backs (status.extendedResourceClaimStatus), as removeMissingExtendedResources does: the node
    cannot tell a cluster-level or DRA-backed resource from a missing one."""
    spec = resources_spec(pod)
    if allocatable is None:
        return pod_requests(spec, INTEGERS)
    backed = {(m.get("containerName"), m.get("resourceName")) for m in
              (((pod.get("status") or {}).get("extendedResourceClaimStatus") or {}).get("requestMappings") or ())}

    def dra_named(r: str) -> bool:
        return is_extended(r) or r.startswith(IMPLICIT_DEVICE_CLASS_PREFIX)

    def kept(c: dict) -> dict:
        asked = (c.get("resources") or {}).get("requests") or {}
        if not any(dra_named(r) for r in asked):
            return c
        left = {r: q for r, q in asked.items() if not (dra_named(r) and (c.get("name"), r) in backed)
                and not (is_extended(r) and r not in allocatable)}
        return {**c, "resources": {**c["resources"], "requests": left}}

    filtered = dict(spec)
    for key in ("containers", "initContainers"):
        if spec.get(key):
            filtered[key] = [kept(c) for c in spec[key]]
    return pod_requests(filtered, INTEGERS)


@dataclass(slots=True)
class Admitted:
    """What an admitted pod holds of the node: its requests (as allocated) and host ports."""

    requests: dict[str, int]
    ports: list[tuple[str, str, int]]


def holding(pod: dict, allocation: dict[str, dict]) -> Admitted:
    """What an admitted pod holds: its requests with its containers' `allocation` (a pod resized
    in place holds what was allocated), and its host ports."""
    return Admitted(requests_with(pod, allocation, INTEGERS), host_ports(pod))


def node_allocatable(node: dict, own: dict[str, str], allocated_devices: dict[str, int]) -> dict[str, int]:
    """The node's allocatable in integers: the Node's status (extended resources a client
    advertised there included) under the kubelet's own, each device plugin resource at least what
    the admitted pods were allocated (the device manager's sanitizeNodeAllocatable: a plugin
    restarting reports fewer devices for a while). `pods` is the number of pod slots."""
    listed = {**((node.get("status") or {}).get("allocatable") or {}), **own}
    out = amounts(listed, INTEGERS)
    try:
        out["pods"] = int(str(listed.get("pods", "0")))
    except ValueError:
        out["pods"] = 0
    for resource, n in allocated_devices.items():
        if out.get(resource, 0) < n:
            out[resource] = n
    return out


def _insufficient(want: dict[str, int], allocatable: dict[str, int], others: list[Admitted]) -> list[Rejection]:
    """noderesources.Fits: a pod slot, then cpu, memory, ephemeral storage and each other resource
    the pod requests, against the allocatable less the other pods' requests."""
    out = []
    if len(others) + 1 > allocatable["pods"]:
        out.append(_out_of("pods", 1, len(others), allocatable["pods"]))
    if not any(want.values()):
        return out
    for name in (*_NATIVE, *[n for n in want if n not in _NATIVE]):
        asked = want.get(name, 0)
        if not asked:
            continue
        used = sum(o.requests.get(name, 0) for o in others)
        if asked > allocatable.get(name, 0) - used:
            out.append(_out_of(name, asked, used, allocatable.get(name, 0)))
    return out


def general_filter(pod: dict, node: dict, allocatable: dict[str, int], others: list[Admitted]) -> list[Rejection]:
    """Every GeneralPredicates failure, in upstream's order (the scheduler's AdmissionCheck with
    all failures: resources, NodeAffinity, NodePorts), then an untolerated NoExecute taint, which
    a static pod is not checked for."""
    out = _insufficient(requests(pod, allocatable), allocatable, others)
    spec = pod.get("spec") or {}
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    md = node.get("metadata") or {}
    if not NodeMatcher(spec.get("nodeSelector") or {}, required).matches(md.get("labels") or {}, md.get("name", "")):
        out.append(_predicate(NODE_AFFINITY, AFFINITY_MISMATCH))
    want = host_ports(pod)
    if want and ports_conflict(want, [p for o in others for p in o.ports]):
        out.append(_predicate(NODE_PORTS, PORTS_IN_USE))
    if ((pod.get("metadata") or {}).get("annotations") or {}).get(CONFIG_SOURCE, "api") == "api" and \
            untolerated((node.get("spec") or {}).get("taints") or [], spec.get("tolerations") or [], ("NoExecute",)):
        out.append(_predicate(TAINT_TOLERATION, TAINTS_NOT_TOLERATED))
    return out


def only_affinity(reasons: list[Rejection]) -> bool:
    """Whether node affinity alone failed: the kubelet then reads the Node again, as its labels may
    have changed after the copy it checked against."""
    return bool(reasons) and all(r.reason == NODE_AFFINITY for r in reasons)
