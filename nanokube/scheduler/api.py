"""What the scheduler writes through the API: bindings, the PodScheduled
condition, and events (events.k8s.io/v1, as kube-scheduler records them)."""

from __future__ import annotations

import socket

SCHEDULER_FIELD_MANAGER = "kube-scheduler"


class SchedulerAPI:
    """Writes over any client (LocalClient or HTTPClient); binding is a
    POST to pods/binding, as kube-scheduler makes it."""

    def __init__(self, client, clock, name: str) -> None:
        self.client = client
        self.clock = clock
        self.name = name
        self.host = socket.gethostname()
        self.pods = client.resource("", "v1", "pods")
        self.events = client.resource("events.k8s.io", "v1", "events")

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": namespace, "uid": uid},
                "target": {"kind": "Node", "name": node}}
        await self.pods.create_subresource(name, "binding", body, namespace)

    async def set_unschedulable(self, pod: dict, reason: str, message: str) -> None:
        md = pod["metadata"]
        cond = {"type": "PodScheduled", "status": "False", "reason": reason, "message": message,
                "lastProbeTime": None, "lastTransitionTime": self.clock.rfc3339()}
        await self.pods.patch(md["name"], {"status": {"conditions": [cond]}}, "application/strategic-merge-patch+json",
                              namespace=md.get("namespace"), subresource="status", field_manager=SCHEDULER_FIELD_MANAGER)

    async def event(self, pod: dict, type_: str, reason: str, note: str) -> None:
        """An events.k8s.io Event about the pod, reported by its profile (each
        profile records as its schedulerName, as upstream's per-profile recorders do)."""
        md = pod["metadata"]
        now = self.clock.now()
        profile = (pod.get("spec") or {}).get("schedulerName") or self.name
        await self.events.create({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": f"{md['name']}.{int(now * 1e9):x}", "namespace": md.get("namespace")},
            "eventTime": self.clock.rfc3339_micro(now), "reportingController": profile,
            "reportingInstance": f"{profile}-{self.host}", "action": "Scheduling", "reason": reason, "type": type_, "note": note,
            "regarding": {"kind": "Pod", "apiVersion": "v1", "namespace": md.get("namespace"), "name": md["name"],
                          "uid": md.get("uid"), "resourceVersion": md.get("resourceVersion")},
        })
