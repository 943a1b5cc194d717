"""Node.spec.podPreemptionPolicy belongs to InPlacePodVerticalScalingSchedulerPreemption, alpha and off
in 1.37: dropDisabledFields drops it from a create, and from an update of a node that has none."""

from __future__ import annotations

import asyncio

POLICY = {"disableResizePreemption": ["acme.io/autoscaler"]}


async def test_pod_preemption_policy_is_dropped_while_its_gate_is_off(core):
    node = {"metadata": {"name": "n1"}, "spec": {"unschedulable": True, "podPreemptionPolicy": POLICY}}
    created = await asyncio.to_thread(core.create_node, node)
    assert created.spec.unschedulable is True and created.spec.pod_preemption_policy is None
    patched = await asyncio.to_thread(core.patch_node, "n1", {"spec": {"podPreemptionPolicy": POLICY}})
    assert patched.spec.pod_preemption_policy is None
