"""One simulated node: registers its Node, keeps its Lease fresh, reports
status like a kubelet and hands each bound pod to a lifecycle worker.

Thousands of agents share one event loop, so an agent owns no informer: the
node manager's single pod informer dispatches to `sync_pod`/`forget_pod`.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import uuid

from ..apiserver.errors import APIError
from ..clock import REAL, Clock
from .cluster import NodeSpec
from .dra.driver import NodeDriver
from .dra.prepare import ClaimPreparer
from .faults import Faults
from .faults import parse as parse_faults
from .lifecycle import PodWorker, SimulatedRuntime
from .volumes import VolumeManager

log = logging.getLogger(__name__)

KUBELET_VERSION = "v1.37.0"
LEASE_NAMESPACE = "kube-node-lease"
_POD_NET = int(ipaddress.IPv4Address("10.244.0.0"))
_NODE_NET = int(ipaddress.IPv4Address("172.18.0.0"))


def pod_cidr(index: int) -> str:
    """10.244.N.0/24 for node N, wrapping inside 10.0.0.0/8 past 10.255."""
    base = 0x0A000000 | ((_POD_NET + index * 256) & 0xFFFFFF)
    return f"{ipaddress.IPv4Address(base)}/24"


def node_ip(index: int) -> str:
    return str(ipaddress.IPv4Address(_NODE_NET + 2 + index))


class IPPool:
    """Pod IPs from a /24: .1 is the node's gateway, the rest go to pods."""

    def __init__(self, cidr: str):
        net = ipaddress.IPv4Network(cidr)
        self._free = [str(a) for a in list(net.hosts())[1:]]
        self._free.reverse()
        self._by_uid: dict[str, str] = {}

    def allocate(self, uid: str, want: str | None = None) -> str:
        if uid in self._by_uid:
            return self._by_uid[uid]
        if want and want in self._free:
            self._free.remove(want)
            ip = want
        elif self._free:
            ip = self._free.pop()
        else:
            raise RuntimeError("pod CIDR exhausted")
        self._by_uid[uid] = ip
        return ip

    def release(self, uid: str) -> None:
        ip = self._by_uid.pop(uid, None)
        if ip:
            self._free.append(ip)


def _conditions(now: str) -> list[dict]:
    rows = [
        ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
    ]
    return [{"type": t, "status": s, "lastHeartbeatTime": now, "lastTransitionTime": now, "reason": r, "message": m}
            for t, s, r, m in rows]


class NodeAgent:
    def __init__(self, client, spec: NodeSpec, clock: Clock = REAL, *, renew_interval: float = 10.0,
                 lease_duration: int = 40, status_interval: float = 300.0, start_offset: float = 0.0,
                 pods_dir: str = "", runtime=None):
        """`runtime` runs the containers (lifecycle.SimulatedRuntime by default)."""
        self.client = client
        self.runtime = runtime or SimulatedRuntime()
        self.spec = spec
        self.name = spec.name
        self.clock = clock
        self.renew_interval = renew_interval
        self.lease_duration = lease_duration
        self.status_interval = status_interval
        self.start_offset = start_offset
        self.pod_cidr = pod_cidr(spec.index)
        self.host_ip = node_ip(spec.index)
        self.ips = IPPool(self.pod_cidr)
        self.nodes = client.resource("", "v1", "nodes")
        self.leases = client.resource("coordination.k8s.io", "v1", "leases")
        self.pods = client.resource("", "v1", "pods")
        self.events = client.resource("", "v1", "events")
        self.dra = NodeDriver(client, spec, clock)
        self.claims = ClaimPreparer(client, spec, clock)
        self.volumes = VolumeManager(client, spec.name, os.path.join(pods_dir, spec.name), clock)
        self.node_uid = ""
        self.workers: dict[str, PodWorker] = {}
        self._lease: dict | None = None
        self._conditions: list[dict] = []
        self._last_status = 0.0
        self._task: asyncio.Task | None = None
        self.faults = Faults()
        self._fault_lock = asyncio.Lock()

    # --- registration and heartbeats ----------------------------------------------

    def node_object(self) -> dict:
        labels = {"kubernetes.io/hostname": self.name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                  "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64", **self.spec.labels}
        spec: dict = {"podCIDR": self.pod_cidr, "podCIDRs": [self.pod_cidr]}
        if self.spec.taints:
            spec["taints"] = [dict(t) for t in self.spec.taints]
        return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": self.name, "labels": labels}, "spec": spec}

    def status(self) -> dict:
        ident = uuid.uuid5(uuid.NAMESPACE_DNS, f"{self.name}.nanokube").hex
        return {
            "capacity": dict(self.spec.capacity),
            "allocatable": dict(self.spec.allocatable),
            "conditions": self._conditions,
            "addresses": [{"type": "InternalIP", "address": self.host_ip}, {"type": "Hostname", "address": self.name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": ident, "systemUUID": str(uuid.UUID(ident)), "bootID": str(uuid.UUID(ident[::-1])),
                "kernelVersion": "6.8.0-nanokube", "osImage": "nanokube simulated node",
                "containerRuntimeVersion": "nanokube-sim://1.37.0", "kubeletVersion": KUBELET_VERSION,
                "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64",
            },
        }

    async def register(self) -> None:
        """Create the Node (or adopt the one a previous run left), then post status."""
        try:
            node = await self.nodes.create(self.node_object())
        except APIError as e:
            if e.code != 409:
                raise
            node = await self.nodes.get(self.name)
        self.node_uid = node["metadata"]["uid"]
        self._conditions = _conditions(self.clock.rfc3339())
        await self.post_status()
        await self.renew_lease()

    async def post_status(self) -> None:
        now = self.clock.rfc3339()
        for c in self._conditions:
            c["lastHeartbeatTime"] = now
        await self.nodes.patch(self.name, {"status": self.status()}, subresource="status")
        self._last_status = self.clock.monotonic()

    async def renew_lease(self) -> None:
        spec = {"holderIdentity": self.name, "leaseDurationSeconds": self.lease_duration,
                "renewTime": self.clock.rfc3339_micro()}
        if self._lease is not None:
            try:
                self._lease = await self.leases.update({**self._lease, "spec": {**self._lease["spec"], **spec}})
                return
            except APIError as e:
                if e.code not in (404, 409):
                    raise
        try:
            cur = await self.leases.get(self.name, LEASE_NAMESPACE)
            self._lease = await self.leases.update({**cur, "spec": {**cur.get("spec", {}), **spec}})
        except APIError as e:
            if e.code != 404:
                raise
            owner = {"apiVersion": "v1", "kind": "Node", "name": self.name, "uid": self.node_uid}
            self._lease = await self.leases.create({
                "metadata": {"name": self.name, "namespace": LEASE_NAMESPACE, "ownerReferences": [owner]},
                "spec": spec})

    async def _heartbeat(self) -> None:
        await self.clock.sleep(self.start_offset)
        while True:
            await self.clock.sleep(self.renew_interval)
            if self.faults.lease_stop:
                continue
            try:
                await self.renew_lease()
                if self.clock.monotonic() - self._last_status >= self.status_interval:
                    await self.post_status()
            except asyncio.CancelledError:
                raise
            except APIError as e:
                log.warning("node %s: heartbeat failed: %s", self.name, e.message)
            except Exception:
                log.exception("node %s: heartbeat failed", self.name)

    async def start(self, slices: dict[str, list[dict]] | None = None) -> None:
        """Register, publish the DRA pools (`slices`: this node's existing
        ResourceSlices by driver, to adopt), then heartbeat."""
        await self.register()
        await self.dra.start(self.node_uid, slices or {})
        self._task = asyncio.create_task(self._heartbeat())

    # --- injected faults (see faults.py) -------------------------------------------

    async def apply_faults(self, value: str | None) -> None:
        """Converge on the faults the Node's annotation names; a malformed value changes nothing."""
        try:
            want = parse_faults(value)
        except ValueError as e:
            log.warning("node %s: %s", self.name, e)
            return
        async with self._fault_lock:
            old, self.faults = self.faults, want
            for device, kind, heal in sorted([(*f, True) for f in old.devices - want.devices] +
                                             [(*f, False) for f in want.devices - old.devices]):
                try:
                    await (self.dra.clear_fault(device, kind) if heal else self.dra.inject_fault(device, kind))
                except (KeyError, APIError) as e:
                    log.warning("node %s: fault on %s: %s", self.name, device, e)
            if want.not_ready != old.not_ready:
                self._set_ready(not want.not_ready)
            if not want.lease_stop and (old.lease_stop or want.not_ready != old.not_ready):
                await self.post_status()
                await self.renew_lease()

    def _set_ready(self, ready: bool) -> None:
        row = {"status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"} if ready else {
            "status": "False", "reason": "KubeletNotReady",
            "message": "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady "
                       "message:simulated fault"}
        for c in self._conditions:
            if c["type"] == "Ready":
                c.update(row, lastTransitionTime=self.clock.rfc3339())

    async def stop(self) -> None:
        tasks = [w.stop() for w in self.workers.values()]
        self.workers.clear()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._task:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    # --- pods -----------------------------------------------------------------------

    def sync_pod(self, pod: dict) -> None:
        uid = pod["metadata"]["uid"]
        w = self.workers.get(uid)
        if w is None:
            w = self.workers[uid] = self.runtime.worker(self, pod)
            w.start()
        else:
            w.update(pod)

    def forget_pod(self, pod: dict) -> None:
        w = self.workers.pop(pod["metadata"]["uid"], None)
        if w is not None:
            asyncio.ensure_future(self._release(w))

    async def _release(self, w: PodWorker) -> None:
        """A deleted pod's worker stops, then its claims are unprepared and its volumes removed."""
        await w.stop()
        await self.claims.unprepare(w.uid)
        self.volumes.unmount(w.uid)
