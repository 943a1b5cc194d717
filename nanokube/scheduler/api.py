"""What the scheduler writes through the API: bindings, the PodScheduled
condition, and events (events.k8s.io/v1, as kube-scheduler records them)."""

from __future__ import annotations

from ..client.events import EventBroadcaster, EventRecorder
from ..machinery.conditions import find_condition, observed_generation, transition_time

SCHEDULER_FIELD_MANAGER = "kube-scheduler"
#: the action of each reason's Event, as kube-scheduler reports them
ACTIONS = {"Scheduled": "Binding", "Preempted": "Preempting"}


def reference(obj: dict, kind: str = "Pod", api_version: str = "v1") -> dict:
    """An ObjectReference, as client-go's reference.GetReference builds it (a listed object carries
    no kind or apiVersion of its own: the caller names them)."""
    md = obj["metadata"]
    return {"kind": kind, "apiVersion": api_version,
            "namespace": md.get("namespace"), "name": md["name"], "uid": md.get("uid"),
            "resourceVersion": md.get("resourceVersion")}


class SchedulerAPI:
    """Writes over any client (LocalClient or HTTPClient); binding is a
    POST to pods/binding, as kube-scheduler makes it."""

    def __init__(self, client, clock, name: str, event_client=None) -> None:
        self.client = client
        self.clock = clock
        self.name = name
        self.pods = client.resource("", "v1", "pods")
        #: started and stopped with the scheduler; writes through `event_client` when given
        self.broadcaster = EventBroadcaster(event_client or client, clock)
        self._recorders: dict[str, EventRecorder] = {}

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": namespace, "uid": uid},
                "target": {"kind": "Node", "name": node}}
        await self.pods.create_subresource(name, "binding", body, namespace)

    async def nominate(self, pod: dict, node: str | None) -> None:
        """status.nominatedNodeName = node unless the pod names it already (upstream's updatePod
        with a ModeOverride NominatingInfo and no condition); None clears it."""
        if node is not None and (pod.get("status") or {}).get("nominatedNodeName") == node:
            return
        md = pod["metadata"]
        await self.pods.patch(md["name"], {"status": {"nominatedNodeName": node}},
                              "application/strategic-merge-patch+json", namespace=md.get("namespace"),
                              subresource="status", field_manager=SCHEDULER_FIELD_MANAGER)

    async def set_unschedulable(self, pod: dict, reason: str, message: str) -> None:
        """PodScheduled=False, its lastTransitionTime kept when it was False already (upstream's
        updatePod through podutil.UpdatePodCondition: a new message alone moves no time)."""
        md = pod["metadata"]
        old = find_condition((pod.get("status") or {}).get("conditions"), "PodScheduled")
        cond = {"type": "PodScheduled", **observed_generation(pod), "status": "False", "reason": reason,
                "message": message, "lastProbeTime": None,
                "lastTransitionTime": transition_time(old, "False", self.clock.rfc3339())}
        await self.pods.patch(md["name"], {"status": {"conditions": [cond]}}, "application/strategic-merge-patch+json",
                              namespace=md.get("namespace"), subresource="status", field_manager=SCHEDULER_FIELD_MANAGER)

    def record_event(self, pod: dict, type_: str, reason: str, note: str,
                     related: dict | None = None) -> dict | None:
        """An events.k8s.io Event about the pod, reported by its profile (each profile records as
        its schedulerName, as upstream's per-profile recorders do); a repeat of the same report
        about the same pod (resourceVersion included) only counts in its Event's series. `related`
        references what caused it (a victim's preemptor). Returns the Event to `write`, or None."""
        profile = (pod.get("spec") or {}).get("schedulerName") or self.name
        recorder = self._recorders.get(profile)
        if recorder is None:
            recorder = self._recorders[profile] = self.broadcaster.recorder(profile)
        return recorder.record(reference(pod), related, type_, reason, ACTIONS.get(reason, "Scheduling"), note)

    async def event(self, pod: dict, type_: str, reason: str, note: str, related: dict | None = None) -> None:
        """`record_event`, its write queued; a failed write is logged, never raised."""
        await self.write(self.record_event(pod, type_, reason, note, related))

    async def write(self, event: dict | None) -> None:
        """Queues the write of an Event `record_event` returned, if any, for the broadcaster's
        writer task (EventBroadcaster.post): no caller waits for it, as none of kube-scheduler's
        waits for its recorder."""
        if event is not None:
            self.broadcaster.post(event)
