"""The kubelet's pod admission (upstream's predicate admit handler, pkg/kubelet/lifecycle/predicate.go):
before a pod bound to this node runs, the node checks on its own view what the scheduler checked
on its: the pod's OS, its requests against the node's allocatable less what the pods admitted
before hold, its node selector and required node affinity, its host ports and the node's NoExecute
taints. A pod that fails is rejected (Failed, the first failure's reason and message) instead of
overcommitting the node: it matters for pods bound with spec.nodeName, which no scheduler checked.
A critical pod that fails for resources alone makes room instead: the node preempts the fewest,
least important pods that free enough (upstream's CriticalPodAdmissionHandler, pkg/kubelet/preemption).
Before all that, the eviction manager refuses pods a node under resource pressure cannot take
(pkg/kubelet/eviction), then the pod's sysctls are checked against the kubelet's allowlist
(pkg/kubelet/sysctl); after it, that the node can enforce the AppArmor profiles the pod asks for,
and last that the node is not shutting down (pkg/kubelet/nodeshutdown).

Requests are counted as the scheduler counts them (`machinery.podresources.pod_requests` in
INTEGERS: milli-CPU, bytes, the integer value of the rest), with init containers, sidecars,
pod-level resources and overhead."""

from __future__ import annotations

from dataclasses import dataclass, field

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
    """Why a pod is not admitted: the pod's status.reason (and the event's) and the message; for a
    resource the node lacks, how much more it would need (GetInsufficientAmount)."""

    reason: str
    message: str
    shortfall: int = field(default=0, compare=False)


def _out_of(name: str, requested: int, used: int, capacity: int) -> Rejection:
    """An InsufficientResourceError: OutOf<resource> and upstream's message."""
    return Rejection(OUT_OF + name, f"Node didn't have enough resource: {name}, requested: {requested}, "
                                    f"used: {used}, capacity: {capacity}", requested - (capacity - used))


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


# --- the critical pod admission handler (pkg/kubelet/preemption) ---------------------------------

#: SystemCriticalPriority: a pod of this priority or more is critical (system-cluster-critical, system-node-critical)
CRITICAL_PRIORITY = 2_000_000_000
#: a mirror pod's annotation (types.IsMirrorPod)
CONFIG_MIRROR = "kubernetes.io/config.mirror"
#: a preempted pod's status.reason and message, and its Warning event's (events.PreemptContainer)
PREEMPTING = "Preempting"
PREEMPTED = "Preempted in order to admit critical pod"
#: the DisruptionTarget condition a preempted pod gets (PodDisruptionConditions, GA in 1.31)
DISRUPTION_TARGET = ("DisruptionTarget", "TerminationByKubelet", "Pod was preempted by Kubelet to accommodate a "
                                                                 "critical pod.")
#: the reason a pod is rejected under when no set of pods frees what it needs
UNEXPECTED = "UnexpectedAdmissionError"
RECOVERY_FAILED = "Unexpected error while attempting to recover from admission failure: "


def is_critical(pod: dict) -> bool:
    """IsCriticalPod: a static or mirror pod, or one of at least CRITICAL_PRIORITY."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    if annotations.get(CONFIG_SOURCE, "api") != "api" or CONFIG_MIRROR in annotations:
        return True
    priority = (pod.get("spec") or {}).get("priority")
    return priority is not None and priority >= CRITICAL_PRIORITY


def preemptable(preemptor: dict, preemptee: dict) -> bool:
    """types.Preemptable: a critical pod may preempt any pod that is not, and a pod one of lower priority."""
    if is_critical(preemptor) and not is_critical(preemptee):
        return True
    mine, theirs = ((p.get("spec") or {}).get("priority") for p in (preemptor, preemptee))
    return mine is not None and theirs is not None and mine > theirs


@dataclass(frozen=True, slots=True)
class Candidate:
    """A pod admitted here that preemption may stop: `key` names it to the caller; `requests` is
    what it holds (GetResourceRequest: a pod slot is 1 of `pods`)."""

    key: object
    pod: dict
    requests: dict[str, int]

    def request(self, resource: str) -> int:
        return 1 if resource == "pods" else self.requests.get(resource, 0)


#: what the pod still needs freed: (resource, amount), in the order the predicates found them short
Requirements = list[tuple[str, int]]


class NoVictims(Exception):
    """No set of the pods admitted here frees enough."""


def _left(needs: Requirements, victims: list[Candidate]) -> Requirements:
    """What is still needed once `victims` are stopped (admissionRequirementList.subtract)."""
    out = []
    for name, amount in needs:
        for v in victims:
            amount -= v.request(name)
            if amount <= 0:
                break
        if amount > 0:
            out.append((name, amount))
    return out


def _no_set(needs: Requirements) -> NoVictims:
    listed = "".join(f"(res: {name}, q: {amount}), " for name, amount in needs)
    return NoVictims(f"no set of running pods found to reclaim resources: [{listed}]")


def _distance(needs: Requirements, c: Candidate) -> float:
    """How far stopping `c` leaves each need from met, each as a fraction of itself, squared and summed."""
    return sum(((amount - c.request(name)) / amount) ** 2 for name, amount in needs if amount > c.request(name))


def _smaller(a: Candidate, b: Candidate) -> bool:
    """smallerResourceRequest: memory first, then CPU; equal counts as smaller."""
    for name in ("memory", "cpu"):
        if a.request(name) != b.request(name):
            return a.request(name) < b.request(name)
    return True


def _by_distance(pods: list[Candidate], needs: Requirements) -> list[Candidate]:
    """getPodsToPreemptByDistance: the closest pod to what is still needed (the smaller one of equals)
    until it is met, so that few pods are stopped; the pool is kept as upstream keeps it (the last
    pod takes the place of the one taken), which decides among pods asking the same."""
    pods, out = list(pods), []
    while needs:
        if not pods:
            raise _no_set(needs)
        best, best_distance = 0, float(len(needs) + 1)
        for i, p in enumerate(pods):
            d = _distance(needs, p)
            if d < best_distance or (d == best_distance and _smaller(p, pods[best])):
                best, best_distance = i, d
        needs = _left(needs, [pods[best]])
        out.append(pods[best])
        pods[best] = pods[-1]
        pods.pop()
    return out


def pods_to_preempt(pod: dict, candidates: list[Candidate], needs: Requirements) -> list[Candidate]:
    """getPodsToPreempt: of the pods `pod` may preempt, the guaranteed ones needed were every
    burstable and best-effort pod stopped, then the burstable ones needed beside those and every
    best-effort pod, then the best-effort ones needed beside both: the fewest of the most
    important classes. Best-effort first in the result, the order they are stopped in."""
    classes: dict[str, list[Candidate]] = {"BestEffort": [], "Burstable": [], "Guaranteed": []}
    for c in candidates:
        if preemptable(pod, c.pod):
            classes.get((c.pod.get("status") or {}).get("qosClass", ""), []).append(c)
    best_effort, burstable, guaranteed = classes["BestEffort"], classes["Burstable"], classes["Guaranteed"]
    if left := _left(needs, best_effort + burstable + guaranteed):
        raise _no_set(left)
    guaranteed_out = _by_distance(guaranteed, _left(needs, best_effort + burstable))
    burstable_out = _by_distance(burstable, _left(needs, best_effort + guaranteed_out))
    best_effort_out = _by_distance(best_effort, _left(needs, burstable_out + guaranteed_out))
    return best_effort_out + burstable_out + guaranteed_out


@dataclass(frozen=True, slots=True)
class Preemption:
    """The pods to stop for a critical pod, in order, and the first resource it is short of (the
    `preemption_signal` kubelet_preemptions_total counts each stopped pod under)."""

    victims: list[Candidate]
    signal: str


def handle_failure(pod: dict, reasons: list[Rejection],
                   candidates: list[Candidate]) -> tuple[list[Rejection], Preemption | None]:
    """HandleAdmissionFailure: a critical pod short of resources alone is admitted once the pods
    `pods_to_preempt` picks are stopped: no reasons are left, and those are returned to stop. A
    critical pod that fails for other reasons is rejected for those; one no set of pods makes
    room for is rejected as UnexpectedAdmissionError; any other pod for its reasons."""
    if not reasons or not is_critical(pod):
        return reasons, None
    if other := [r for r in reasons if not r.reason.startswith(OUT_OF)]:
        return other, None
    needs = [(r.reason[len(OUT_OF):], r.shortfall) for r in reasons]
    try:
        return [], Preemption(pods_to_preempt(pod, candidates, needs), needs[0][0])
    except NoVictims as e:
        return [Rejection(UNEXPECTED, f"{RECOVERY_FAILED}preemption: error finding a set of pods to preempt: {e}")], None


# --- the eviction manager's admit handler (pkg/kubelet/eviction) -----------------------------------

EVICTED = "Evicted"
#: the node conditions the eviction manager reports, in the order its rejection lists them
PRESSURE_CONDITIONS = ("MemoryPressure", "DiskPressure", "PIDPressure")
#: the taint a best-effort pod must tolerate to be admitted under memory pressure alone
MEMORY_PRESSURE_TAINT = {"key": "node.kubernetes.io/memory-pressure", "effect": "NoSchedule"}


def eviction_rejection(pod: dict, conditions: list[str]) -> Rejection | None:
    """The eviction manager's Admit while the node has pressure `conditions`: a critical pod is
    admitted anyway, as is, under memory pressure alone, a pod that is not best-effort or one that
    tolerates the memory-pressure taint; any other pod is refused, as reclaiming would evict it."""
    if not conditions or is_critical(pod):
        return None
    if conditions == ["MemoryPressure"] and (
            (pod.get("status") or {}).get("qosClass") != "BestEffort" or
            not untolerated([MEMORY_PRESSURE_TAINT], (pod.get("spec") or {}).get("tolerations") or [], ("NoSchedule",))):
        return None
    return Rejection(EVICTED, f"The node had condition: [{' '.join(conditions)}]. ")


# --- the node shutdown manager's admit handler (pkg/kubelet/nodeshutdown) --------------------------

NODE_SHUTDOWN = "NodeShutdown"
NODE_SHUTDOWN_MESSAGE = "Pod was rejected as the node is shutting down."


# --- the sysctl allowlist (pkg/kubelet/sysctl) ----------------------------------------------------

SYSCTL_FORBIDDEN = "SysctlForbidden"
#: SafeSysctlAllowlist: namespaced sysctls that affect no other pod on the node (the newest of them
#: needs kernel 4.6; a simulated node runs 6.8). The kubelet allows no unsafe ones by default.
SAFE_SYSCTLS = frozenset({
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start", "net.ipv4.ip_local_reserved_ports", "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes", "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem"})


def _dotted(name: str) -> str:
    """A sysctl written with slashes (net/ipv4/tcp_rmem, where a dot may be part of a name) in dots."""
    first = next((ch for ch in name if ch in "./"), ".")
    return name if first == "." else name.translate(str.maketrans("./", "/."))


def _namespace(name: str) -> str:
    """The kernel namespace that isolates the sysctl (NamespacedBy)."""
    if name == "kernel.sem" or name.startswith(("kernel.shm", "kernel.msg", "fs.mqueue.")):
        return "ipc"
    return "net" if name.startswith("net.") else ""


def sysctl_rejection(pod: dict) -> Rejection | None:
    """The allowlist's Admit: each of spec.securityContext.sysctls must be on it, and not in a
    namespace the pod shares with the host (hostNetwork, hostIPC)."""
    spec = pod.get("spec") or {}
    for s in (spec.get("securityContext") or {}).get("sysctls") or ():
        name = _dotted(s.get("name", ""))
        if name not in SAFE_SYSCTLS:
            why = f'"{name}" not allowlisted'
        elif (ns := _namespace(name)) == "ipc" and spec.get("hostIPC") or ns == "net" and spec.get("hostNetwork"):
            why = f'"{name}" not allowed with host {ns} enabled'
        else:
            continue
        return Rejection(SYSCTL_FORBIDDEN, f"forbidden sysctl: {why}")
    return None


# --- AppArmor (pkg/kubelet/lifecycle's AppArmor admit handler, pkg/security/apparmor) ---------------

APPARMOR = "AppArmor"
#: the deprecated per-container annotations' prefix, and the value that asks for no profile
APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"
APPARMOR_UNCONFINED = "unconfined"


def _confined(security_context: dict | None) -> bool:
    return ((security_context or {}).get("appArmorProfile") or {}).get("type", "Unconfined") != "Unconfined"


def apparmor_required(pod: dict) -> bool:
    """isRequired: the pod's or a container's appArmorProfile, or a deprecated annotation, asks for
    a profile other than Unconfined."""
    spec = pod.get("spec") or {}
    containers = [*(spec.get("initContainers") or ()), *(spec.get("containers") or ()),
                  *(spec.get("ephemeralContainers") or ())]
    if _confined(spec.get("securityContext")) or any(_confined(c.get("securityContext")) for c in containers):
        return True
    return any(k.startswith(APPARMOR_ANNOTATION) and v != APPARMOR_UNCONFINED
               for k, v in ((pod.get("metadata") or {}).get("annotations") or {}).items())


def apparmor_rejection(pod: dict, enabled: bool) -> Rejection | None:
    """A pending pod that asks for an AppArmor profile on a node that cannot enforce one (a running
    pod admitted again is not checked)."""
    if (pod.get("status") or {}).get("phase") != "Pending" or enabled or not apparmor_required(pod):
        return None
    return Rejection(APPARMOR, "Cannot enforce AppArmor: AppArmor is not enabled on the host")
