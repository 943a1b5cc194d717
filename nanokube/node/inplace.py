"""What the kubelet does in place for a running pod whose spec changes through pods/resize:
it allocates the containers' new requests and limits when the node has room for them (the
pod's resize is otherwise pending, Infeasible beyond the node's allocatable, Deferred beyond
what other pods leave), then actuates them; containerStatuses report both (allocatedResources,
resources). The conditions are upstream's PodResizePending and PodResizeInProgress; the events
(ResizeStarted, ResizeCompleted, ResizeDeferred, ResizeInfeasible) carry the spec's resources as
the kubelet's podResizeMessage writes them. A container whose resizePolicy asks for it is restarted
to take a new cpu, or memory limit (computeContainerResizeActions)."""

from __future__ import annotations

from ..machinery.gofmt import Struct, marshal
from ..machinery.podresources import QUANTITIES, Arithmetic, amounts, pod_requests
from ..machinery.quantity import Quantity, canonical

#: the allocation's key of the pod-level resources (spec.resources; no container has an empty name),
#: resized in place as containers' are (InPlacePodLevelResourcesVerticalScaling, beta since 1.36)
POD = ""
PENDING = "PodResizePending"
IN_PROGRESS = "PodResizeInProgress"
#: the resources a container's status reports of what runs (convertContainerStatusResources)
_REPORTED = ("cpu", "memory", "ephemeral-storage")


def requirements(c: dict) -> dict:
    """A container's requests and limits (copies), those it sets."""
    res = c.get("resources") or {}
    return {bag: dict(res[bag]) for bag in ("limits", "requests") if res.get(bag)}


def desired(pod: dict) -> dict[str, dict]:
    """What the spec asks for each container and init container, by name, and at pod level (POD)
    where the spec sets it."""
    spec = pod.get("spec") or {}
    out = {c["name"]: requirements(c) for c in (spec.get("initContainers") or []) + (spec.get("containers") or [])}
    if spec.get("resources"):
        out[POD] = requirements(spec)
    return out


def status_resources(actuated: dict) -> dict:
    """A running container's `resources`: of the requests and limits it runs with, cpu, memory and
    ephemeral storage (empty lists left out, as upstream's omitempty maps)."""
    out = {}
    for bag in ("limits", "requests"):
        if kept := {k: v for k, v in (actuated.get(bag) or {}).items() if k in _REPORTED}:
            out[bag] = kept
    return out


def requests_with(pod: dict, allocation: dict[str, dict], arith: Arithmetic = QUANTITIES) -> dict:
    """The pod's requests (PodRequests) with each container's `allocation`, in `arith`'s numbers."""
    spec = pod.get("spec") or {}
    with_alloc = {**spec}
    if POD in allocation:
        with_alloc["resources"] = allocation[POD]
    for key in ("initContainers", "containers"):
        if spec.get(key):
            with_alloc[key] = [{**c, "resources": allocation.get(c["name"], {})} for c in spec[key]]
    return pod_requests(with_alloc, arith)


def _cpu_memory(rl: dict[str, Quantity]) -> tuple[int, int]:
    """Milli-CPU and bytes of memory, as the kubelet's canResizePod compares them."""
    cpu, memory = rl.get("cpu"), rl.get("memory")
    return (cpu.milli() if cpu else 0), (memory.ceil() if memory else 0)


def refusal(wanted: dict[str, Quantity], allocatable: dict,
            others: list[dict[str, Quantity]]) -> tuple[str, str] | None:
    """(reason, message) when a resize to `wanted` cannot be allocated now beside the `others` pods'
    allocations, as the kubelet's canResizePod words it; None when it fits."""
    cap_cpu, cap_memory = _cpu_memory(amounts(allocatable, QUANTITIES))
    want_cpu, want_memory = _cpu_memory(wanted)
    used = [_cpu_memory(r) for r in others]
    used_cpu, used_memory = sum(u[0] for u in used), sum(u[1] for u in used)
    if want_memory > cap_memory:
        return "Infeasible", f"Node didn't have enough capacity: memory, requested: {want_memory}, capacity: {cap_memory}"
    if want_cpu > cap_cpu:
        return "Infeasible", f"Node didn't have enough capacity: cpu, requested: {want_cpu}, capacity: {cap_cpu}"
    for name, want, have, cap in (("cpu", want_cpu, used_cpu, cap_cpu), ("memory", want_memory, used_memory, cap_memory)):
        if want + have > cap:
            return "Deferred", f"Node didn't have enough resource: {name}, requested: {want}, used: {have}, capacity: {cap}"
    return None


def condition(ctype: str, live: dict | None, now: str, generation: int | None, reason: str = "",
              message: str = "") -> dict:
    """A resize condition (status True) for the pod's `generation`; its lastTransitionTime stays the
    live one's while its reason does not change (updatedPodResizeCondition)."""
    since = live.get("lastTransitionTime") if live and live.get("reason", "") == reason else None
    c = {"type": ctype, "status": "True", "lastProbeTime": now, "lastTransitionTime": since or now}
    if generation:
        c["observedGeneration"] = generation
    if reason:
        c["reason"] = reason
    if message:
        c["message"] = message
    return c


def message(prefix: str, pod: dict, generation: int | None, error: str = "") -> str:
    """'<prefix>: <JSON>', the spec's containers and init containers with their resources, the
    generation and the error if any, as Go marshals upstream's podResourceSummary."""
    spec = pod.get("spec") or {}
    summary = Struct()
    for key in ("initContainers", "containers"):
        if spec.get(key):
            summary[key] = [Struct(name=c["name"], resources=_requirements(c.get("resources") or {}))
                            for c in spec[key]]
    summary["generation"] = generation or 0
    if error:
        summary["error"] = error
    return f"{prefix}: {marshal(summary)}"


def _requirements(res: dict) -> Struct:
    """v1.ResourceRequirements' JSON: limits, requests and claims, each left out when empty."""
    out = Struct()
    for bag in ("limits", "requests"):
        if res.get(bag):
            out[bag] = {k: canonical(v) for k, v in res[bag].items()}
    if res.get("claims"):
        out["claims"] = res["claims"]
    return out


def restarts(pod: dict, before: dict[str, dict], after: dict[str, dict]) -> list[str]:
    """The running containers (regular and sidecar) that actuating `after` over `before` restarts:
    those whose cpu limit or request, or memory limit, changes under a RestartContainer resizePolicy
    for that resource (a memory request is not actuated)."""
    spec = pod.get("spec") or {}
    out = []
    for c in [c for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"] + \
            list(spec.get("containers") or ()):
        policy = {p.get("resourceName"): p.get("restartPolicy") for p in c.get("resizePolicy") or ()}
        was, now = before.get(c["name"]) or {}, after.get(c["name"]) or {}
        for resource, bags in (("cpu", ("limits", "requests")), ("memory", ("limits",))):
            if policy.get(resource) == "RestartContainer" and any(
                    _amount(was, bag, resource) != _amount(now, bag, resource) for bag in bags):
                out.append(c["name"])
                break
    return out


def _amount(requirements: dict, bag: str, resource: str) -> str | None:
    value = (requirements.get(bag) or {}).get(resource)
    return None if value is None else canonical(value)
