"""The scheduler's Events are written by its broadcaster's own task, as kube-scheduler's recorder
hands them to its broadcaster and goes on: an API server slow to take Events (or refusing them)
delays neither bindings nor the PodScheduled=False conditions of pods that fit nowhere."""

import asyncio

from nanokube.scheduler.scheduler import Scheduler
from tests.controllers import eventually, make_stack
from tests.scheduler import node, pod
from tests.scheduler.test_scheduler import add_node, bound, strip_uid


class _HeldEvents:
    """An events.k8s.io resource whose writes wait until `gate` is set, then go through."""

    def __init__(self, inner, gate: asyncio.Event) -> None:
        self.inner, self.gate, self.waiting = inner, gate, 0

    async def create(self, *args, **kwargs):
        self.waiting += 1
        await self.gate.wait()
        return await self.inner.create(*args, **kwargs)

    async def patch(self, *args, **kwargs):
        self.waiting += 1
        await self.gate.wait()
        return await self.inner.patch(*args, **kwargs)


class _EventClient:
    """The API server's client, with its Events held (`_HeldEvents`)."""

    def __init__(self, client, gate: asyncio.Event) -> None:
        self.client = client
        self.events = _HeldEvents(client.resource("events.k8s.io", "v1", "events"), gate)

    def resource(self, group, version, plural):
        if (group, plural) == ("events.k8s.io", "events"):
            return self.events
        return self.client.resource(group, version, plural)


def _unschedulable(pods, name):
    async def check():
        conds = (await pods.get(name, "default")).get("status", {}).get("conditions", [])
        return any(c["type"] == "PodScheduled" and c["status"] == "False" for c in conds)
    return check


async def test_pods_are_bound_and_marked_unschedulable_while_event_writes_wait():
    s = await make_stack()
    gate = asyncio.Event()
    event_client = _EventClient(s.client, gate)
    sched = Scheduler(s.client, seed=1, event_client=event_client)
    try:
        await add_node(s.client, node("n", "2", "4Gi"))
        await sched.start()
        pods = s.client.resource("", "v1", "pods")
        for i in range(12):
            await pods.create(strip_uid(pod(f"huge-{i}", "8")))
        for i in range(4):
            await pods.create(strip_uid(pod(f"small-{i}", "100m")))
        for i in range(12):
            assert await eventually(_unschedulable(pods, f"huge-{i}"))
        for i in range(4):
            assert await eventually(bound(pods, f"small-{i}")) == "n"
        assert event_client.events.waiting >= 1
        events = s.client.resource("events.k8s.io", "v1", "events")
        assert (await events.list("default"))[0] == []
        gate.set()

        async def written():
            items, _ = await events.list("default")
            about = {(e["reason"], e["regarding"]["name"]) for e in items}
            return about >= {("FailedScheduling", f"huge-{i}") for i in range(12)} | \
                {("Scheduled", f"small-{i}") for i in range(4)}
        assert await eventually(written)
    finally:
        gate.set()
        await sched.stop()
        await s.close()
