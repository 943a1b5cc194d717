"""Optimistic-concurrency conflicts of the workload controllers, counted in the audit log of the
simulated control plane (every controller, the scheduler and the node agents in process, on a
virtual clock): each 409 is a write wasted and a sync retried, and where it ends the sync a log
line (sim56 saw a dozen for one three-replica Deployment; conflict57)."""

from __future__ import annotations

import logging

import pytest

from nanokube.apiserver.audit import AuditLog
from nanokube.clock import VirtualClock
from nanokube.node.cluster import parse_cluster
from nanokube.sim import driver
from nanokube.sim.stack import SimulatedControlPlane
from nanokube.sim.trace import Trace, TraceEvent
from tests.controllers import audited, conflicts

CLUSTER = parse_cluster("""\
pools:
  - name: n
    count: 2
    capacity: {cpu: "4", memory: 16Gi}
""")


def workload(kind: str, name: str, **spec) -> dict:
    group = "batch/v1" if kind == "Job" else "apps/v1"
    pod = {"metadata": {"labels": {"app": name}}, "spec": {"containers": [
        {"name": "c", "image": "nginx:1", "resources": {"requests": {"cpu": "100m"}}}]}}
    if kind == "Job":
        pod["metadata"]["annotations"] = {"sim.nanokube.io/run-seconds": "30"}
        pod["spec"]["restartPolicy"] = "Never"
    else:
        spec["selector"] = {"matchLabels": {"app": name}}
    return {"apiVersion": group, "kind": kind, "metadata": {"name": name, "namespace": "default"},
            "spec": {**spec, "template": pod}}


@pytest.fixture
def audit_log(tmp_path, monkeypatch):
    """The audit log of the control plane `driver.run` builds, from its start to its stop."""
    path = tmp_path / "audit.log"

    class Audited(SimulatedControlPlane):
        async def start(self) -> None:
            await super().start()
            self.server.rest.audit = AuditLog(str(path))

        async def stop(self) -> None:
            self.server.rest.audit.close()
            self.server.rest.audit = None
            await super().stop()
    monkeypatch.setattr(driver, "SimulatedControlPlane", Audited)
    return path


async def test_workloads_coming_up_write_without_conflicts(audit_log):
    """A Deployment, a Job and a StatefulSet of three come up and the Deployment goes. Nobody but its
    controllers writes a workload here, yet the Deployment, its ReplicaSet and the StatefulSet each
    wrote their status from the copy their own last write had replaced, a sync's later write
    from the copy an earlier one of the same sync had, seven conflicts in all. Their controllers
    read what their writes returned until their informers show it: none conflicts."""
    writes = [(0, workload("Deployment", "web", replicas=3)),
              (10, workload("Job", "pi", completions=3, parallelism=3)),
              (20, workload("StatefulSet", "db", replicas=3, serviceName="db"))]
    events = [TraceEvent(float(t), i, "create", o) for i, (t, o) in enumerate(writes)]
    gone = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"}}
    events.append(TraceEvent(600.0, len(events), "delete", gone))
    result = await driver.run("default", CLUSTER, Trace(events), None, until=700, progress=False)
    assert len(result.placements) == 9
    assert conflicts(audit_log) == {}


async def available(client, name: str, replicas: int) -> bool:
    d = await client.resource("apps", "v1", "deployments").get(name, "default")
    st = d.get("status") or {}
    return st.get("observedGeneration") == d["metadata"]["generation"] and \
        st.get("availableReplicas") == st.get("updatedReplicas") == st.get("replicas") == replicas


async def test_a_deployment_scaled_and_rolled_out_conflicts_only_across_its_controllers(tmp_path, caplog):
    """Scaled from 3 to 10, then rolled out: the Deployment controller resizes a ReplicaSet while the
    ReplicaSet controller writes its status from the copy before, as upstream's do (both write the
    whole set, its resourceVersion the precondition). Only those conflict, and the ReplicaSet
    controller reads the set again and writes once more (upstream's statusUpdateRetries), so no
    sync fails for them; they used to, each a warning."""
    clock = VirtualClock(max_turns=1 << 62)
    plane = SimulatedControlPlane(CLUSTER, clock)
    await plane.start()
    deps = plane.client.resource("apps", "v1", "deployments")

    async def settle(replicas: int) -> None:
        for _ in range(600):
            await clock.advance(1)
            if await available(plane.client, "web", replicas):
                return
        raise AssertionError(f"never {replicas} available")
    caplog.set_level(logging.INFO, logger="nanokube.controllers")
    try:
        await deps.create(workload("Deployment", "web", replicas=3))
        await settle(3)
        with audited(plane.client, tmp_path / "audit.log"):
            await deps.patch("web", {"spec": {"replicas": 10}}, namespace="default")
            await settle(10)
            await deps.patch("web", {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}}},
                             namespace="default")
            await settle(10)
    finally:
        await plane.stop()
    got = conflicts(tmp_path / "audit.log")
    assert set(got) <= {("kube-controller-manager/replicaset-controller", "replicasets", "status"),
                        ("kube-controller-manager/deployment-controller", "replicasets", "")}
    assert not [r for r in caplog.records if "Operation cannot be fulfilled" in r.getMessage()]
