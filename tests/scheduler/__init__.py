"""Builders of nodes, pods and node infos for the scheduler tests."""

from __future__ import annotations

from nanokube.scheduler.cache import NodeInfo
from nanokube.scheduler.framework import CycleState, PodInfo


class FakeClock:
    """Time that moves only when a test says so."""

    def __init__(self) -> None:
        self.t = 1000.0

    def now(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        import asyncio

        await asyncio.Event().wait()

    def rfc3339(self, t=None) -> str:
        return "2026-01-01T00:00:00Z"

    def rfc3339_micro(self, t=None) -> str:
        return "2026-01-01T00:00:00.000000Z"


def node(name: str, cpu: str = "4", memory: str = "32Gi", pods: str = "110", labels=None, taints=None,
         unschedulable: bool = False, extra=None) -> dict:
    alloc = {"cpu": cpu, "memory": memory, "pods": pods, **(extra or {})}
    spec = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels or {}},
            "spec": spec, "status": {"allocatable": alloc, "capacity": alloc}}


#: the priorities the API-driven preemption tests run pods and PodGroups at, each with its PriorityClass
PRIORITIES = (1, 2, 5, 8, 10, 50, 100, 1000)


def at_priority(value: int, policy: str = "PreemptLowerPriority") -> dict:
    """Spec fields of a pod or PodGroup of that priority: its PriorityClass (`p<value>`, `-never` for
    preemptionPolicy Never) and the priority and policy Priority admission computes from it (a create
    may carry them only where they agree); the values too, for tests that build PodInfos directly."""
    fields = {"priority": value, "preemptionPolicy": policy}
    if value or policy != "PreemptLowerPriority":
        fields["priorityClassName"] = f"p{value}" + ("-never" if policy == "Never" else "")
    return fields


async def add_priority_classes(client) -> None:
    """The PriorityClasses `at_priority` names, for PRIORITIES under both policies."""
    classes = client.resource("scheduling.k8s.io", "v1", "priorityclasses")
    for value in PRIORITIES:
        for suffix, policy in (("", "PreemptLowerPriority"), ("-never", "Never")):
            await classes.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                  "metadata": {"name": f"p{value}{suffix}"}, "value": value,
                                  "preemptionPolicy": policy})


def pod(name: str, cpu: str | None = None, memory: str | None = None, **spec) -> dict:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    container = {"name": "c", "image": "pause"}
    if requests:
        container["resources"] = {"requests": requests}
    if "ports" in spec:
        container["ports"] = spec.pop("ports")
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": {"containers": [container], **spec}}


def info(p: dict) -> PodInfo:
    return PodInfo(p, 0.0)


def node_info(n: dict, *pods: dict) -> NodeInfo:
    ni = NodeInfo(n["metadata"]["name"])
    ni.set_node(n)
    for p in pods:
        ni.add_pod(info(p))
    return ni


def scores(plugin, p: dict, nodes: list) -> list | None:
    """A score plugin's normalized scores of `nodes` for pod `p`; None when its PreScore skips."""
    st = CycleState()
    if plugin.pre_score(st, info(p), nodes) is not None:
        return None
    out = plugin.score_nodes(st, info(p), nodes)
    plugin.normalize_score(st, info(p), out)
    return out


def unschedulable(pods, name: str):
    """A check for `eventually`: the message of the pod's PodScheduled=False condition, once written."""
    async def check():
        for c in (await pods.get(name, "default")).get("status", {}).get("conditions", []):
            if c["type"] == "PodScheduled" and c["status"] == "False":
                return c["message"]
        return None
    return check
