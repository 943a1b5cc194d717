"""One simulated node: registers its Node, keeps its Lease fresh, reports
status like a kubelet and hands each bound pod to a lifecycle worker.

Thousands of agents share one event loop, so an agent owns no informer: the
node manager's single pod informer dispatches to `sync_pod`/`forget_pod`, its
node informer to `node_seen` and `apply_faults`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import ipaddress
import logging
import math
import os
import uuid
from collections import deque

from ..machinery.errors import APIError
from ..client.http import EXPECTED
from ..client.ratelimit import limited
from ..client.record import CoreEventRecorder
from ..clock import REAL, Clock
from . import admission, csinode
from .cluster import NodeSpec
from .devicemanager.manager import REJECT_REASON, AllocationError, DeviceManager
from .devicemanager.plugin import simulated_plugins
from .dra import checkpoint
from .dra.driver import NodeDriver
from .dra.grpc_api import DRA_PLUGIN_TYPE
from .dra.plugin_manager import DRAPluginManager
from .dra.plugin_watcher import PluginWatcher
from .dra.prepare import ClaimPreparer
from .eviction import EvictionManager
from .faults import Faults, Plan
from .faults import parse as parse_faults
from .inplace import desired
from .lifecycle import (SMP, SYNC_RETRY, Eviction, PodWorker, SimulatedRuntime, image_id, image_ref, image_size,
                        resource_version)
from .simulated_cluster import WatchedCluster
from .simulated_host import apparmor_enabled, system_info
from .static_pods import MIRROR
from .streaming import NodeStreamingServer
from .volumes import VolumeManager
from .volumes.stats import quantity_or_none

log = logging.getLogger(__name__)

KUBELET_VERSION = "v1.37.0"
#: the runtime's handlers as containerd's default configuration reports them: runc, then the
#: default handler ("") again as itself; a RuntimeClass's handler runs as the default's does
RUNTIME_HANDLERS = ("runc", "")
#: how the kubelet stops a pod it preempts for a critical one
PREEMPTION = Eviction(admission.PREEMPTING, admission.PREEMPTED, (admission.DISRUPTION_TARGET,))
#: graceful node shutdown (pkg/kubelet/nodeshutdown) as the simulated kubelets are configured for it:
#: shutdownGracePeriod, of which shutdownGracePeriodCriticalPods is kept for system-critical pods
SHUTDOWN_GRACE_PERIOD = 30
SHUTDOWN_GRACE_PERIOD_CRITICAL_PODS = 10
#: how a pod the shutdown stops ends, and the Ready condition's message meanwhile
SHUTDOWN_MESSAGE = "Pod was terminated in response to imminent node shutdown."
SHUTDOWN_NOT_READY = "node is shutting down"
LEASE_NAMESPACE = "kube-node-lease"
#: the most images status.images lists, the largest first (the kubelet's nodeStatusMaxImages)
NODE_STATUS_MAX_IMAGES = 50
#: the most names one image lists there (MaxNamesPerImageInNodeStatus)
MAX_NAMES_PER_IMAGE = 5
_POD_NET = int(ipaddress.IPv4Address("10.244.0.0"))
_NODE_NET = int(ipaddress.IPv4Address("172.18.0.0"))
_DNS_NAMESPACE = uuid.NAMESPACE_DNS.bytes


def pod_cidr(index: int) -> str:
    """10.244.N.0/24 for node N, wrapping inside 10.0.0.0/8 past 10.255."""
    base = 0x0A000000 | ((_POD_NET + index * 256) & 0xFFFFFF)
    return f"{ipaddress.IPv4Address(base)}/24"


def node_ip(index: int) -> str:
    return str(ipaddress.IPv4Address(_NODE_NET + 2 + index))


class IPPool:
    """Pod IPs from a /24: .1 is the node's gateway, the rest go to pods.

    Addresses are handed out from a counter and a list of released ones, so
    an idle node keeps no per-address state (thousands of nodes share a process)."""

    def __init__(self, cidr: str):
        net = ipaddress.IPv4Network(cidr)
        self._base = int(net.network_address)
        self._first, self._last = 2, net.num_addresses - 2
        self._next = self._first
        self._released: list[int] = []
        self._by_uid: dict[str, int] = {}
        self._used: set[int] = set()

    def _take(self, want: str | None) -> int:
        if want:
            try:
                offset = int(ipaddress.IPv4Address(want)) - self._base
            except ValueError:
                offset = -1
            if self._first <= offset <= self._last and offset not in self._used:
                if offset in self._released:
                    self._released.remove(offset)
                return offset
        if self._released:
            return self._released.pop()
        while self._next <= self._last and self._next in self._used:
            self._next += 1
        if self._next > self._last:
            raise RuntimeError("pod CIDR exhausted")
        self._next += 1
        return self._next - 1

    def allocate(self, uid: str, want: str | None = None) -> str:
        offset = self._by_uid.get(uid)
        if offset is None:
            offset = self._by_uid[uid] = self._take(want)
            self._used.add(offset)
        return str(ipaddress.IPv4Address(self._base + offset))

    def release(self, uid: str) -> None:
        offset = self._by_uid.pop(uid, None)
        if offset is not None:
            self._used.discard(offset)
            self._released.append(offset)


class Throttle:
    """Bounds the API calls the agents of one process have in flight: the
    API server shares their event loop, so more at once only queue inside
    it. Waiting heartbeats go before waiting registrations, since a late
    Lease costs a node its Ready while a late registration costs start-up
    time, but at most HEARTBEAT_RUN of them in a row while a registration
    waits: once the renewals of the nodes registered so far fill a starved
    process on their own, strict priority would stop registration, and
    start-up would never end (a loaded run took 1,472 s, registering 3.4
    nodes/s between 486,328 renewals)."""

    HEARTBEAT, REGISTRATION = 0, 1
    HEARTBEAT_RUN = 4

    def __init__(self, limit: int):
        self._free = limit
        self._waiting: tuple[deque, deque] = (deque(), deque())
        self._run = 0  # heartbeats handed a slot since the last registration

    @contextlib.asynccontextmanager
    async def slot(self, priority: int):
        if self._free > 0 and not any(self._waiting):
            self._free -= 1
        else:
            fut = asyncio.get_running_loop().create_future()
            self._waiting[priority].append(fut)
            try:
                await fut
            except asyncio.CancelledError:
                if not fut.cancelled():
                    self._release()
                raise
        try:
            yield
        finally:
            self._release()

    def _release(self) -> None:
        """Hand the slot to the first waiter by priority, a registration first
        after a run of heartbeats (cancelled waiters are dropped here), or free it."""
        beats, registrations = self._waiting
        for queue in (registrations, beats) if self._run >= self.HEARTBEAT_RUN else self._waiting:
            while queue:
                fut = queue.popleft()
                if not fut.done():
                    fut.set_result(None)
                    self._run = self._run + 1 if queue is beats else 0
                    return
        self._free += 1


def _machine_id(name: str) -> str:
    """uuid.uuid5(uuid.NAMESPACE_DNS, f"{name}.nanokube").hex, without UUID
    objects (three per node registration, 5000 registrations at start-up)."""
    h = bytearray(hashlib.sha1(_DNS_NAMESPACE + f"{name}.nanokube".encode()).digest()[:16])
    h[6] = (h[6] & 0x0F) | 0x50
    h[8] = (h[8] & 0x3F) | 0x80
    return h.hex()


def _dashed(hex32: str) -> str:
    """str(uuid.UUID(hex32))."""
    return f"{hex32[:8]}-{hex32[8:12]}-{hex32[12:16]}-{hex32[16:20]}-{hex32[20:]}"


#: the event a node condition's status announces when it changes (the kubelet's nodestatus setters)
_CONDITION_EVENTS = {
    "MemoryPressure": {"True": "NodeHasInsufficientMemory", "False": "NodeHasSufficientMemory"},
    "DiskPressure": {"True": "NodeHasDiskPressure", "False": "NodeHasNoDiskPressure"},
    "PIDPressure": {"True": "NodeHasInsufficientPID", "False": "NodeHasSufficientPID"},
    "Ready": {"True": "NodeReady", "False": "NodeNotReady"},
}


#: each pressure condition's (reason, message) when False and when True (the kubelet's setters)
_PRESSURE_ROWS = {
    "MemoryPressure": (("KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                       ("KubeletHasInsufficientMemory", "kubelet has insufficient memory available")),
    "DiskPressure": (("KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                     ("KubeletHasDiskPressure", "kubelet has disk pressure")),
    "PIDPressure": (("KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                    ("KubeletHasInsufficientPID", "kubelet has insufficient PID available")),
}


def _conditions(now: str) -> list[dict]:
    rows = [(t, "False", *no) for t, (no, _) in _PRESSURE_ROWS.items()]
    rows.append(("Ready", "True", "KubeletReady", "kubelet is posting ready status"))
    return [{"type": t, "status": s, "lastHeartbeatTime": now, "lastTransitionTime": now, "reason": r, "message": m}
            for t, s, r, m in rows]


def image_list(images) -> list[dict]:
    """status.images as the kubelet's images setter lists the runtime's: each image's names (its
    digest reference, then its tag), its size; the largest first, at most NODE_STATUS_MAX_IMAGES."""
    out = [{"names": ([ref] if "@" in ref else [image_id(ref), ref])[:MAX_NAMES_PER_IMAGE],
            "sizeBytes": image_size(ref)} for ref in images]
    out.sort(key=lambda i: (-i["sizeBytes"], i["names"][0]))
    return out[:NODE_STATUS_MAX_IMAGES]


class _WhileUp:
    """A client the kubelet writes pods through: while it is down (lease-stop) a write waits
    for it to come back, so its pods' statuses stay as they were and a deleted pod stays
    Terminating (deletionTimestamp set, not removed), as upstream's pods on a node whose kubelet
    is gone, until the node returns, is deleted, or is tainted out-of-service (podgc). Reads pass."""

    _WRITES = ("create", "update", "patch", "delete", "emit")

    def __init__(self, target, up: asyncio.Event):
        self._target, self._up = target, up

    def __getattr__(self, name: str):
        attr = getattr(self._target, name)
        if name not in self._WRITES:
            return attr

        async def write(*args, **kwargs):
            await self._up.wait()
            return await attr(*args, **kwargs)
        return write


class NodeAgent:
    def __init__(self, client, spec: NodeSpec, clock: Clock = REAL, *, renew_interval: float = 10.0,
                 lease_duration: int = 40, status_interval: float = 300.0,
                 pods_dir: str = "", runtime=None, throttle: Throttle | None = None, watched: dict | None = None,
                 plugin_registry: bool = True, sync_retry: float = SYNC_RETRY,
                 max_container_restart_period: float | None = None, cluster: WatchedCluster | None = None,
                 api_limit: tuple[float, int] | None = None, event_limit: tuple[float, int] | None = None,
                 pod_pids_limit: int = -1, node_dir: str = "", cdi_spec_dirs: tuple[str, ...] = ()):
        """`runtime` runs the containers (lifecycle.SimulatedRuntime by default);
        `throttle`, `watched` (the ConfigMap and Secret watches volumes read, see
        volumes/watch_based_manager.py) and `cluster` (what simulated pods' network commands reach,
        simulated_cluster) are shared by the agents of one process.
        `plugin_registry=False`: no plugin watcher nor pod resources socket, for agents no external
        kubelet plugin or monitoring agent can reach (a simulation's), and no CSINode, which lists the
        CSI drivers registered there (one without drivers leaves the scheduler's volume limits as
        none does; 1000 nodes' start-up took ~8% more CPU with it). `sync_retry`: how soon a pod whose
        sync failed is synced again (lifecycle.SYNC_RETRY; tests on real time shorten it).
        `max_container_restart_period`: the longest crash-loop back-off (KubeletConfiguration's
        crashLoopBackOff.maxContainerRestartPeriod; None: 5 min, lifecycle.crash_backoff).
        `api_limit` (kubeAPIQPS, kubeAPIBurst) and `event_limit` (eventRecordQPS, eventBurst): the
        token buckets of the kubelet's client and of its events' (None: none); its Lease and Node
        writes go unlimited, as the kubelet's heartbeat client (QPS -1) sends them.
        `pod_pids_limit`: the most processes each pod may have (podPidsLimit, --pod-max-pids; -1, the
        default, or 0: none of the pod's own), where its runtime's pods are processes.
        `cdi_spec_dirs`: where the runtime also reads CDI specs, as containerd's cdi_spec_dirs (a joined
        kubelet's host /etc/cdi, /var/run/cdi), the node's own `cdi_dir` taking precedence over them."""
        heartbeat = client
        self.api_limit, self.event_limit = api_limit, event_limit
        client = limited(client, *api_limit, clock) if api_limit else client
        self.client = client
        self._csi_node = plugin_registry
        self.runtime = runtime or SimulatedRuntime()
        self.spec = spec
        self.name = spec.name
        self.clock = clock
        self.booted = clock.now()  # a simulated node's machine boots as its agent starts: its uptime's
        self.renew_interval = renew_interval
        self.sync_retry = sync_retry
        self.max_container_restart_period = max_container_restart_period
        self.pod_pids_limit = pod_pids_limit
        self.lease_duration = lease_duration
        self.status_interval = status_interval
        self.pod_cidr = pod_cidr(spec.index)
        self.host_ip = node_ip(spec.index)
        #: the Hostname address and kubelet port the Node reports, where the API server dials its
        #: kubelet (a standalone kubelet's --hostname-override and --port)
        self.hostname, self.kubelet_port = spec.name, 10250
        #: a standalone kubelet's --rotate-certificates and --rotate-server-certificates (serverTLSBootstrap)
        self.rotate_certificates = self.server_tls_bootstrap = False
        #: registerNode: False where an admin creates the Node (a standalone kubelet's --register-node=false)
        self.register_node = True
        self.ips = IPPool(self.pod_cidr)
        self.nodes = heartbeat.resource("", "v1", "nodes")
        self.leases = heartbeat.resource("coordination.k8s.io", "v1", "leases")
        #: clear while the kubelet is down (lease-stop): its pod writes and events wait (`_WhileUp`)
        self.up = asyncio.Event()
        self.up.set()
        self.pods = _WhileUp(client.resource("", "v1", "pods"), self.up)
        #: the kubelet's Node events, on its nodeRef: no apiVersion, and the node's name for a uid
        events = limited(heartbeat, *event_limit, clock) if event_limit else heartbeat
        self.recorder = _WhileUp(CoreEventRecorder(events, "kubelet", clock, host=spec.name), self.up)
        self._node_ref = {"kind": "Node", "metadata": {"name": spec.name, "uid": spec.name}}
        #: each condition's status as the events last announced it, or as the server's copy has it
        #: otherwise (then the next post announces ours again, as the setters compare with that copy)
        self._announced: dict[str, str] = {}
        #: spec.unschedulable as the last NodeSchedulable/NodeNotSchedulable event had it
        self._unschedulable = False
        self._posted_rv = 0  # the Node's resourceVersion our last status write returned
        self._event_tasks: set[asyncio.Task] = set()
        self.dra = NodeDriver(client, spec, clock)
        #: external DRA drivers' kubelet plugins register through sockets in `plugins_registry` (with a
        #: node directory only) and write CDI specs into `cdi_dir`, both under the node's directory
        node_dir = node_dir or (os.path.join(pods_dir, spec.name) if pods_dir else "")
        self.plugins_registry = os.path.join(node_dir, "plugins_registry") if node_dir else ""
        self.cdi_dir = os.path.join(node_dir, "cdi") if node_dir else ""
        self.dra_plugins = DRAPluginManager(client, spec.name, clock)
        self.plugin_watcher = PluginWatcher(self.plugins_registry, {DRA_PLUGIN_TYPE: self.dra_plugins}, clock,
                                            spec.name) if node_dir and plugin_registry else None
        self.claims = ClaimPreparer(client, spec, [p.driver for p in self.dra.publishers], clock,
                                    plugins=self.dra_plugins, cdi_dirs=(*cdi_spec_dirs, self.cdi_dir),
                                    device_health=self.dra.health,
                                    checkpoint_path=os.path.join(node_dir, checkpoint.FILE) if node_dir else "")
        self.dra_plugins.on_health = self.dra.on_health = self._device_health_changed
        if self.plugin_watcher is not None:
            self.claims.metrics.watch(self.plugin_watcher)
        #: device plugins' extended resources: a simulated plugin for each the cluster file gives the node
        self.devices = DeviceManager(node_dir, clock)
        for plugin in simulated_plugins(spec):
            self.devices.register(plugin)
        if node_dir and plugin_registry:  # (both import grpc, which `nanokube simulate`'s kubelets never load)
            from .devicemanager.registration import RegistrationServer
            from .podresources.server import PodResourcesServer
        #: external device plugins register on `<node dir>/device-plugins/kubelet.sock`
        self.device_registration = RegistrationServer(node_dir, self.devices, spec.name) \
            if node_dir and plugin_registry else None
        self._posted_devices = self.devices.capacity()
        #: status.volumesInUse as last posted: the attach/detach controller detaches none of them
        self._posted_in_use: list[str] = []
        #: pods being admitted (their latest copies: the Node read again, their devices allocated),
        #: and those refused at admission: no worker runs them
        self._admitting: dict[str, dict] = {}
        self._rejected: set[str] = set()
        #: what each admitted pod holds, by UID, with the allocation it was worked out for
        self._holds: dict[str, tuple[dict, admission.Admitted]] = {}
        #: the Node as the server last showed it (its labels, taints and status for admission)
        self.node: dict = self.node_object()
        #: the pod resources API on `<node dir>/pod-resources/kubelet.sock`, for monitoring agents and DRA drivers
        self.pod_resources = PodResourcesServer(node_dir, lambda: [w.pod for w in self.workers.values()], self.claims,
                                                clock, spec.name, devices=self.devices) \
            if node_dir and plugin_registry else None
        self.volumes = VolumeManager(client, spec.name, node_dir or os.path.join(pods_dir, spec.name), clock, self.recorder,
                                     watched, node=lambda: self.node)
        self.volumes.host_paths = self.runtime.name == "process"
        memory = quantity_or_none(spec.allocatable.get("memory"))
        self.volumes.allocatable_memory = int(memory.value) if memory is not None else 0
        #: the osImage and kernelVersion it reports: the host's where its containers run on it
        self.os_image, self.kernel_version = system_info(self.volumes.host_paths)
        #: whether it can enforce AppArmor profiles (the host's kernel, for containers run on it)
        self.apparmor = apparmor_enabled(self.volumes.host_paths)
        self.node_uid = ""
        self.workers: dict[str, PodWorker] = {}
        #: the config hashes of the static pods this node's file source holds (static_pods.py; None:
        #: no source), the workers of those whose mirror pod another deleted, by hash, until the
        #: source makes the next one, and the UID each worker that adopted one is known by, by its UID
        self.static_hashes: frozenset[str] | None = None
        self._orphans: dict[str, PodWorker] = {}
        self._mirrors: dict[str, str] = {}
        self._cluster, self._own_cluster = cluster, cluster is None
        self.devices.on_health = self._plugin_device_health_changed
        #: kubelet_lifecycle_handler_http_fallbacks_total: HTTPS hooks that passed over HTTP (hooks.py)
        self.lifecycle_http_fallbacks = 0
        #: kubelet_sleep_action_terminated_early_total: sleep hooks cut off before their end (hooks.py)
        self.lifecycle_sleeps_cut = 0
        #: kubelet_admission_rejections_total: pods rejected at admission, by the metric's reason
        self.admission_rejections: dict[str, int] = {}
        #: kubelet_preemptions_total: pods stopped to admit critical ones, by the first resource short
        self.preemptions: dict[str, int] = {}
        #: shutdownGracePeriod and shutdownGracePeriodCriticalPods, in seconds
        self.shutdown_grace_period = (SHUTDOWN_GRACE_PERIOD, SHUTDOWN_GRACE_PERIOD_CRITICAL_PODS)
        #: prober_probe_total: (probe_type, result, container, pod, namespace, pod_uid) -> probes run
        self.probe_results: dict[tuple[str, str, str, str, str, str], int] = {}
        #: the images on this node (their fully qualified references): the pool's preloaded ones and
        #: those pulled here; IfNotPresent pulls once, Never finds only these
        self.images: set[str] = {image_ref(i) for i in spec.images}
        #: the images the last post of status.images listed (a pull since makes the next heartbeat post)
        self._posted_images: frozenset[str] = frozenset()
        self.streaming = NodeStreamingServer(self)
        self._lease: dict | None = None
        self._conditions: list[dict] = []
        #: the server's status of each condition of ours its copy of the Node has otherwise (see `node_seen`)
        self._theirs: dict[str, str | None] = {}
        self._last_status = 0.0
        self._renewed_at = 0.0
        #: when the heartbeat loop last went round with the kubelet not silent (its syncLoopMonitor:
        #: the kubelet's /healthz/syncloop fails once it is 5 minutes old); None before the first
        self.sync_loop_at: float | None = None
        self.throttle = throttle or Throttle(1)
        self._task: asyncio.Task | None = None
        self.faults = Faults()
        self._faults_at = 0.0  # the instant `faults` was worked out for
        self._fault_plan = Plan()
        self._fault_lock = asyncio.Lock()
        self._fault_timer: asyncio.Task | None = None
        #: node-pressure eviction (eviction.py); its conditions join the pressure faults'
        self.eviction = EvictionManager(self)

    # --- registration and heartbeats ----------------------------------------------

    def node_object(self) -> dict:
        labels = {"kubernetes.io/hostname": self.name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                  "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64", **self.spec.labels}
        spec: dict = {"podCIDR": self.pod_cidr, "podCIDRs": [self.pod_cidr]}
        if self.spec.taints:
            spec["taints"] = [dict(t) for t in self.spec.taints]
        return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": self.name, "labels": labels}, "spec": spec}

    def addresses(self) -> list[dict]:
        """The Node's status.addresses (a kubelet's serving certificate names them)."""
        return [{"type": "InternalIP", "address": self.host_ip}, {"type": "Hostname", "address": self.hostname}]

    def status(self) -> dict:
        ident = _machine_id(self.name)
        capacity, allocatable = self.devices.capacity()
        return {
            "capacity": {**self.spec.capacity, **capacity},
            "allocatable": {**self.spec.allocatable, **allocatable},
            "conditions": self._conditions,
            "addresses": self.addresses(),
            "daemonEndpoints": {"kubeletEndpoint": {"Port": self.kubelet_port}},
            "images": image_list(self.images),
            "nodeInfo": {
                "machineID": ident, "systemUUID": _dashed(ident), "bootID": _dashed(ident[::-1]),
                "kernelVersion": self.kernel_version, "osImage": self.os_image,
                "containerRuntimeVersion": "nanokube-sim://1.37.0", "kubeletVersion": KUBELET_VERSION,
                "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64",
            },
            # the RuntimeHandlers and NodeFeatures setters, from the runtime's status: both runtimes
            # give a container exactly its declared groups (run_as), so Strict is honoured
            "runtimeHandlers": [{"name": h, "features": dict(self.runtime.handler_features)} for h in RUNTIME_HANDLERS],
            "features": {"supplementalGroupsPolicy": True},
        }

    async def register(self) -> None:
        """Create the Node with its status, as a kubelet registers (or adopt the
        one a previous run left and post its full status), then take the Lease.
        A starting kubelet records Starting, its conditions' events (its initial
        Node's setters see no conditions yet, also when it adopts one) and
        NodeAllocatableEnforced."""
        await self.record("Starting", "Starting kubelet.")
        self._conditions = _conditions(self.clock.rfc3339())
        self._announced = {}
        try:
            if not self.register_node:
                node = await self._registered_by_another()
                await self.post_status(full=True)
            else:
                images = frozenset(self.images)
                node = await self.nodes.create({**self.node_object(), "status": self.status()})
                self._posted_images = images
                self._last_status = self.clock.monotonic()
                self._posted_rv = resource_version(node)
                await self._announce_conditions()
        except APIError as e:
            if e.code != 409:
                raise
            node = await self.nodes.get(self.name)
            await self.post_status(full=True)
        self.node_uid = node["metadata"]["uid"]
        self.node = node
        if self._csi_node:
            await csinode.ensure(self.client, node)
        await self.record("NodeAllocatableEnforced", "Updated Node Allocatable limit across pods")
        await self.renew_lease()

    async def _registered_by_another(self) -> dict:
        """registerNode false: the Node an admin creates, read again each renew interval until there
        is one, its absence logged as the kubelet's status updates log it."""
        while True:
            try:
                return await self.nodes.get(self.name)
            except APIError as e:
                if e.code != 404:
                    raise
            log.error('Error updating node status, will retry: error getting node "%s": nodes "%s" not found',
                      self.name, self.name)
            await self.clock.sleep(self.renew_interval)

    async def record(self, reason: str, message: str, type_: str = "Normal") -> None:
        """An event on this Node from its kubelet (recordEvent)."""
        await self.recorder.emit(self._node_ref, type_, reason, message)

    async def _announce_conditions(self) -> None:
        """recordNodeStatusEvent for each condition whose status changed since last announced
        ('Node NAME status is now: NodeReady')."""
        for c in self._conditions:
            if self._announced.get(c["type"]) != c["status"]:
                self._announced[c["type"]] = c["status"]
                reason = _CONDITION_EVENTS.get(c["type"], {}).get(c["status"])
                if reason:
                    await self.record(reason, f"Node {self.name} status is now: {reason}")

    async def post_status(self, full: bool = False) -> None:
        """Fresh heartbeat times on the conditions, and a fresh transition time on
        those whose status the server's copy has otherwise (Unknown back to True is
        a transition, as the kubelet's setters compute it). Like the kubelet, only
        registration sends the whole status; later posts carry the
        conditions alone, since capacity, addresses and nodeInfo do not change,
        and the images when one was pulled since.
        A strategic merge patch, as the kubelet sends: conditions merge by type,
        so other writers' (NetworkUnavailable, a node problem detector's) stay."""
        now = self.clock.rfc3339()
        theirs = self._theirs
        for c in self._conditions:
            c["lastHeartbeatTime"] = now
            if theirs.get(c["type"], c["status"]) != c["status"]:
                c["lastTransitionTime"] = now
        status = self.status() if full else {"conditions": self._conditions}
        images = frozenset(self.images)
        if images != self._posted_images:
            status["images"] = image_list(images)
        in_use = self.volumes.volumes_in_use()
        if in_use != self._posted_in_use:  # the kubelet's setVolumesInUse
            status["volumesInUse"] = in_use or None
        devices = self.devices.capacity()
        if devices != self._posted_devices:  # a device plugin's devices or their health changed
            full_status = self.status()
            status.update(capacity=full_status["capacity"], allocatable=full_status["allocatable"])
        node = await self.nodes.patch(self.name, {"status": status}, SMP, subresource="status")
        self._posted_images = images
        self._posted_devices = devices
        self._posted_in_use = in_use
        self._posted_rv = resource_version(node)
        self._last_status = self.clock.monotonic()
        if self._theirs is theirs:  # else a copy seen meanwhile decides
            self._theirs = {}
        await self._announce_conditions()

    def node_seen(self, node: dict) -> None:
        """The server's copy of this Node, from the node manager's informer. When
        a condition of ours differs there (the node lifecycle controller marked it
        Unknown while this agent's Lease was late, or a client patched it), the
        next heartbeat posts the agent's own conditions, as upstream's kubelet
        patches its status whenever it differs from its lister's Node
        (nodeStatusHasChanged), not only every status_interval. Only the copy
        is compared: no request per heartbeat, and nothing at all while in sync. The volume
        manager hears of it too (its mounts waiting for an attachment)."""
        self.volumes.node_seen(self.node or {}, node)
        self.node = node
        have = {c.get("type"): c for c in (node.get("status") or {}).get("conditions") or ()}
        theirs = {}
        for c in self._conditions:
            h = have.get(c["type"])
            if h is None or h.get("status") != c["status"] or h.get("reason") != c["reason"] or \
                    h.get("message") != c["message"]:
                theirs[c["type"]] = None if h is None else h.get("status")
                if h is not None and h.get("status") != c["status"] and c["type"] in self._announced and \
                        resource_version(node) > self._posted_rv:  # not a copy from before our last write
                    self._announced[c["type"]] = h.get("status")
        self._theirs = theirs
        unschedulable = bool((node.get("spec") or {}).get("unschedulable"))
        if unschedulable != self._unschedulable:
            self._unschedulable = unschedulable
            reason = "NodeNotSchedulable" if unschedulable else "NodeSchedulable"
            self._in_background(self.record(reason, f"Node {self.name} status is now: {reason}"))

    def _in_background(self, coro) -> None:
        """Run `coro` (an event's write) without holding up an informer's handler."""
        task = asyncio.ensure_future(coro)
        self._event_tasks.add(task)
        task.add_done_callback(self._event_tasks.discard)

    async def renew_lease(self) -> None:
        """One update of the Lease this agent last wrote; it is read back
        only after a conflict, and created only when missing."""
        spec = {"holderIdentity": self.name, "leaseDurationSeconds": self.lease_duration,
                "renewTime": self.clock.rfc3339_micro()}
        taken = self.clock.monotonic()
        cur = self._lease
        for _ in range(3):
            try:
                if cur is None:
                    owner = {"apiVersion": "v1", "kind": "Node", "name": self.name, "uid": self.node_uid}
                    self._lease = await self.leases.create({
                        "metadata": {"name": self.name, "namespace": LEASE_NAMESPACE, "ownerReferences": [owner]},
                        "spec": spec})
                else:
                    self._lease = await self.leases.update({**cur, "spec": {**cur.get("spec", {}), **spec}})
                self._renewed_at = taken
                return
            except APIError as e:
                if e.code == 409:
                    cur = await self._read_lease()
                elif e.code == 404 and cur is not None:
                    cur = None
                else:
                    raise
        raise RuntimeError(f"lease {self.name}: gave up after repeated conflicts")

    async def _read_lease(self) -> dict | None:
        try:
            return await self.leases.get(self.name, LEASE_NAMESPACE)
        except APIError as e:
            if e.code != 404:
                raise
            return None

    async def _heartbeat(self) -> None:
        """Renew the Lease `renew_interval` after the previous renewal
        finished, as upstream's lease controller (JitterUntil, sliding), and
        post status once per `status_interval` or when the server's copy of a
        condition differs (`node_seen`). Counting from the finish
        means a slow or queued renewal delays the next one instead of
        sending it at once: renewals that fall behind a starved process
        stop asking for more than it serves, and never come in bursts."""
        due = self._renewed_at
        while True:
            due = max(due + self.renew_interval, self.clock.monotonic())
            await self.clock.sleep(due - self.clock.monotonic())
            if self.faults.lease_stop:
                continue
            self.sync_loop_at = self.clock.monotonic()
            try:
                async with self.throttle.slot(Throttle.HEARTBEAT):
                    await self.renew_lease()
                    if self._theirs or self.images != self._posted_images or \
                            self.devices.capacity() != self._posted_devices or \
                            self.volumes.volumes_in_use() != self._posted_in_use or \
                            self.clock.monotonic() - self._last_status >= self.status_interval:
                        async with self._fault_lock:  # in order with a fault's post
                            await self.post_status()
            except asyncio.CancelledError:
                raise
            except EXPECTED as e:
                log.warning("node %s: heartbeat failed: %s", self.name, str(e) or repr(e))
            except Exception:
                log.exception("node %s: heartbeat failed", self.name)
            due = self.clock.monotonic()

    async def start(self, slices: dict[str, list[dict]] | None = None) -> None:
        """Register, publish the DRA pools (`slices`: this node's existing
        ResourceSlices by driver, to adopt), then heartbeat."""
        await self.register()
        await self.dra.start(self.node_uid, slices or {})
        if self.plugin_watcher:
            # as a starting kubelet: no external DRA driver is registered yet, so none advertises devices
            await self.dra_plugins.wipe_at_start(slices or {}, [p.driver for p in self.dra.publishers])
            await self.plugin_watcher.start()
        if self.device_registration:
            await self.device_registration.start()
        if self.pod_resources:
            await self.pod_resources.start()
            # one node says where (thousands would flood the log); the others' paths differ only in the name
            (log.info if self.spec.index == 0 else log.debug)(
                "node %s: DRA kubelet plugins register in %s, CDI specs in %s, pod resources API on %s, device "
                "plugins register on %s (each node: its own)", self.name, self.plugins_registry, self.cdi_dir,
                self.pod_resources.path, self.device_registration.path)
        self._task = asyncio.create_task(self._heartbeat())
        self.eviction.start()

    # --- injected faults (see faults.py) -------------------------------------------

    async def apply_faults(self, value: str | None) -> None:
        """Converge on the faults the Node's annotation names, and keep
        converging as timed or flapping ones change; a malformed value changes nothing."""
        try:
            plan = parse_faults(value)
        except ValueError as e:
            log.warning("node %s: %s", self.name, e)
            return
        self._fault_plan = plan
        if self._fault_timer:
            self._fault_timer.cancel()
        timed = plan.next_change(self.clock.now()) is not None
        self._fault_timer = asyncio.create_task(self._follow_plan(plan)) if timed else None
        await self._converge()

    async def _follow_plan(self, plan: Plan) -> None:
        """Wake at each instant the plan's set of faults may change after the
        faults in effect were worked out, not after now: `apply_faults`
        converges before this task first runs, and a busy loop can pass a
        change in between (a `--for 2s` NotReady then never healed). A newer
        annotation cancels this timer, but never half-way through converging."""
        while (at := plan.next_change(self._faults_at)) is not None:
            await self.clock.sleep(at - self.clock.now())
            await asyncio.shield(self._converge())

    async def _converge(self) -> None:
        async with self._fault_lock:
            self._faults_at = self.clock.now()
            old, want = self.faults, self._fault_plan.at(self._faults_at)
            if want == old:
                return
            self.faults = want
            self.eviction.notify()
            if want.lease_stop:
                self.up.clear()
            else:
                self.up.set()
            if old.lease_stop and not want.lease_stop:  # the pods' statuses others changed meanwhile
                for w in self.workers.values():
                    w.resync()
            for device, kind, heal in sorted([(*f, True) for f in old.devices - want.devices] +
                                             [(*f, False) for f in want.devices - old.devices]):
                if self.devices.fault(device, kind, not heal):  # a simulated device plugin's device
                    continue
                try:
                    await (self.dra.clear_fault(device, kind) if heal else self.dra.inject_fault(device, kind))
                except (KeyError, APIError) as e:
                    log.warning("node %s: fault on %s: %s", self.name, device, e)
            if (want.not_ready, want.shutdown) != (old.not_ready, old.shutdown):
                self._set_ready(want)
            if want.pressure != old.pressure:
                self._set_pressure(want.pressure | self.eviction.conditions)
            if want.shutdown and not old.shutdown:
                await self.record("NodeShutdown", "Shutdown manager detected shutdown event")
                self._in_background(self._shut_down())
            if not want.lease_stop and (old.lease_stop or want.not_ready != old.not_ready or
                                        want.pressure != old.pressure or want.shutdown != old.shutdown):
                try:
                    await self.post_status()
                    await self.renew_lease()
                except Exception as e:
                    # raised, it would end the fault timer unseen, and the change would wait
                    # status_interval for its post: the next heartbeat posts it, as a kubelet retries.
                    # The API's refusals and a connection's failures are expected; anything else is a
                    # bug, logged with its traceback at ERROR as upstream's HandleError does
                    if isinstance(e, EXPECTED):
                        log.warning("node %s: status post failed, the next heartbeat posts it: %r", self.name, e)
                    else:
                        log.exception("node %s: status post failed, the next heartbeat posts it", self.name)
                    self._last_status = -math.inf

    def _set_ready(self, faults: Faults) -> None:
        """The Ready condition as the kubelet's setter writes it: False with each error that makes
        it so (a simulated network fault, the node shutting down), aggregated as Go's errors are."""
        errors = ["container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady "
                  "message:simulated fault"] if faults.not_ready else []
        if faults.shutdown:
            errors.append(SHUTDOWN_NOT_READY)
        row = {"status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"} \
            if not errors else {"status": "False", "reason": "KubeletNotReady",
                                "message": errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]"}
        for c in self._conditions:
            if c["type"] == "Ready":
                c.update(row, lastTransitionTime=self.clock.rfc3339())

    def _set_pressure(self, pressure: frozenset[str]) -> None:
        """The pressure conditions as the kubelet's setters write them, True for those in `pressure`."""
        for c in self._conditions:
            if c["type"] in _PRESSURE_ROWS and (c["status"] == "True") != (c["type"] in pressure):
                reason, message = _PRESSURE_ROWS[c["type"]][c["type"] in pressure]
                c.update(status=str(c["type"] in pressure), reason=reason, message=message,
                         lastTransitionTime=self.clock.rfc3339())

    async def eviction_conditions_changed(self) -> None:
        """The eviction manager's own observations crossed thresholds or stopped crossing them: the
        pressure conditions are those and the faults', posted at once as a fault's change is."""
        async with self._fault_lock:
            before = self.pressure()
            self._set_pressure(self.faults.pressure | self.eviction.conditions)
            if self.pressure() == before or self.faults.lease_stop:
                return
            try:
                await self.post_status()
            except EXPECTED as e:
                log.warning("node %s: status post failed, the next heartbeat posts it: %r", self.name, e)
                self._last_status = -math.inf

    def pressure(self) -> list[str]:
        """The eviction manager's node conditions: those of ours under pressure, in its order."""
        on = {c["type"] for c in self._conditions if c["status"] == "True"}
        return [t for t in admission.PRESSURE_CONDITIONS if t in on]

    async def _shut_down(self) -> None:
        """processShutdownEvent: the pods running here stopped in two groups, those under system-critical
        priority first, each with the group's grace period (its own where shorter) and the group
        waited for as long, then the critical ones; each ends Failed, Terminated, with a
        DisruptionTarget condition."""
        total, critical = self.shutdown_grace_period
        for group, grace in ((False, total - critical), (True, critical)):
            workers = [w for w in self.workers.values() if (w.pod.get("status") or {}).get("phase") not in
                       ("Succeeded", "Failed") and
                       (((w.pod.get("spec") or {}).get("priority") or 0) >= admission.CRITICAL_PRIORITY) == group]
            for w in workers:
                own = (w.pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
                w.evict(Eviction("Terminated", SHUTDOWN_MESSAGE,
                                 (("DisruptionTarget", "TerminationByKubelet", SHUTDOWN_MESSAGE),), min(own, grace)))
            if workers:
                await asyncio.wait([asyncio.ensure_future(w.ends_within(grace)) for w in workers])

    async def stop(self) -> None:
        tasks = [w.stop() for w in self.workers.values()]
        self.workers.clear()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.eviction.stop()
        for t in (self._task, self._fault_timer, *self._event_tasks):
            if t:
                t.cancel()
                await asyncio.gather(t, return_exceptions=True)
        if self.plugin_watcher:
            await self.plugin_watcher.stop()
        if self.pod_resources:
            await self.pod_resources.stop()
        if self.device_registration:
            await self.device_registration.stop()
        await self.claims.close()
        await self.dra_plugins.stop()
        await self.volumes.close()
        await self.recorder.close()
        if self._own_cluster and self._cluster is not None:
            await self._cluster.close()

    def watched_cluster(self) -> WatchedCluster:
        """What simulated pods' network commands reach: the process's, else the agent's own, made
        at the first such command."""
        if self._cluster is None:
            self._cluster = WatchedCluster(self.client, self.clock)
        return self._cluster

    # --- pods -----------------------------------------------------------------------

    def runs_static(self, pod: dict) -> bool:
        """Whether `pod` is the mirror pod of a static pod this node's file source still holds: its
        deletion by another removes the mirror pod alone, as upstream's kubelet runs the static pod
        itself: it runs on, and reports to the mirror pod the source makes next."""
        digest = ((pod.get("metadata") or {}).get("annotations") or {}).get(MIRROR)
        return digest is not None and self.static_hashes is not None and digest in self.static_hashes

    def worker(self, uid: str) -> PodWorker | None:
        """The worker running the pod of `uid`: a static pod's, by the UID of its mirror pod now."""
        return self.workers.get(self._mirrors.get(uid, uid))

    def static_pods_read(self, hashes) -> None:
        """The file source read its manifests: the static pods of `hashes` are wanted; one whose
        mirror pod is gone and whose manifest is too stops, as a removed manifest's static pod does."""
        self.static_hashes = frozenset(hashes)
        for digest in [d for d in self._orphans if d not in self.static_hashes]:
            self._drop(self._orphans.pop(digest).uid)

    def sync_pod(self, pod: dict) -> None:
        uid = self._mirrors.get(pod["metadata"]["uid"], pod["metadata"]["uid"])
        self.eviction.notify()
        w = self.workers.get(uid)
        if w is None and (orphan := self._orphans.pop((pod["metadata"].get("annotations") or {}).get(MIRROR), None)):
            self._mirrors[pod["metadata"]["uid"]] = orphan.uid  # the static pod's next mirror pod: its status goes there
            w = orphan
        if w is not None:
            w.update(pod)
        elif uid in self._admitting:
            self._admitting[uid] = pod  # the copy its worker starts from
        elif uid in self._rejected and (pod.get("status") or {}).get("phase") != "Failed":
            pass  # its Failed status is on its way
        elif (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            self._admit_new(pod)
        else:  # a rejected one too, once Failed: its worker ends it like any ended pod
            self._start(pod)

    def _start(self, pod: dict) -> None:
        w = self.workers[pod["metadata"]["uid"]] = self.runtime.worker(self, pod)
        w.start()

    def _active(self) -> list[str]:
        """The UIDs of the pods admitted here and not ended, and of those being admitted."""
        return [u for u, w in self.workers.items() if (w.pod.get("status") or {}).get("phase")
                not in ("Succeeded", "Failed")] + list(self._admitting)

    def _holding(self, uid: str) -> admission.Admitted:
        """What an admitted pod holds: a running pod's allocation, or the spec of one being admitted."""
        w = self.workers.get(uid)
        pod, allocation = (w.pod, w.allocated) if w is not None else (self._admitting[uid], {})
        cached = self._holds.get(uid)
        if cached is None or cached[0] is not allocation:
            cached = self._holds[uid] = (allocation, admission.holding(pod, allocation or desired(pod)))
        return cached[1]

    def _predicates(self, pod: dict, node: dict) -> list[admission.Rejection]:
        """The predicate admit handler's failures for `pod` against `node` and the pods admitted
        before it (upstream's order: the OS checks, then GeneralPredicates)."""
        if (rejected := admission.os_rejection(pod, node)) is not None:
            return [rejected]
        uid = pod["metadata"]["uid"]
        others = [u for u in self._active() if u != uid]
        allocated: dict[str, int] = {}
        if self.devices.pod_devices:
            live = set(others)
            for (owner, _), by_resource in self.devices.pod_devices.items():
                if owner in live:
                    for resource, (ids, _) in by_resource.items():
                        allocated[resource] = allocated.get(resource, 0) + len(ids)
        allocatable = admission.node_allocatable(node, self.status_allocatable(), allocated)
        return admission.general_filter(pod, node, allocatable, [self._holding(u) for u in others])

    def _admission(self, pod: dict, node: dict) -> tuple[list[admission.Rejection], admission.Preemption | None]:
        """The kubelet's admit handlers in upstream's order: the eviction manager's, the sysctl
        allowlist, the predicates with the critical pod's failure handler, AppArmor, the shutdown
        manager's. The reasons `pod` is refused for, or, for a critical pod short of resources
        alone, the running pods to stop for it instead (each candidate's key its worker). Unlike
        upstream, a pod AppArmor or the shutdown refuses stops no pod first."""
        if (refused := admission.eviction_rejection(pod, self.pressure())) is not None:
            return [refused], None
        if (forbidden := admission.sysctl_rejection(pod)) is not None:
            return [forbidden], None
        reasons, preemption = self._predicates(pod, node), None
        if reasons and admission.is_critical(pod):
            uid = pod["metadata"]["uid"]
            reasons, preemption = admission.handle_failure(pod, reasons, [
                admission.Candidate(w, w.pod, self._holding(u).requests) for u, w in self.workers.items()
                if u != uid and (w.pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")])
        if not reasons and (blocked := admission.apparmor_rejection(pod, self.apparmor)) is not None:
            return [blocked], None
        if not reasons and self.faults.shutdown:
            return [admission.Rejection(admission.NODE_SHUTDOWN, admission.NODE_SHUTDOWN_MESSAGE)], None
        return reasons, preemption

    def status_allocatable(self) -> dict[str, str]:
        """The node's allocatable as this kubelet reports it (its devices' included)."""
        return {**self.spec.allocatable, **self.devices.capacity()[1]}

    def _admit_new(self, pod: dict) -> None:
        """Admit a new pod as the kubelet's HandlePodAdditions does, one at a time in the order they
        come: the admit handlers first (`_admission`), then the device manager's allocation. A pod
        that fails only node affinity is checked again against the Node read afresh; a critical one
        makes room; one that needs devices is allocated them; each in the background, the pod
        counted as held meanwhile."""
        uid = pod["metadata"]["uid"]
        reasons, preemption = self._admission(pod, self.node)
        if reasons and not admission.only_affinity(reasons):
            self._rejected.add(uid)
            self._in_background(self._reject(pod, reasons[0]))
        elif reasons or preemption or self.devices.needs_devices(pod):
            self._admitting[uid] = pod
            self._in_background(self._admit(pod, recheck=bool(reasons), preemption=preemption))
        else:
            self._start(pod)

    async def _admit(self, pod: dict, recheck: bool, preemption: admission.Preemption | None) -> None:
        """The rest of a pod's admission: with `recheck`, the admit handlers again against the Node
        as the server has it now; then the pods a critical one preempts stopped (`_preempt`), its
        device plugin devices allocated, and it runs. One the predicates still refuse, or whose
        devices are unavailable (or whose plugin's Allocate failed), is rejected: Failed with
        upstream's reason and message, and an event."""
        uid = pod["metadata"]["uid"]
        if recheck:
            try:
                self.node = await self.nodes.get(self.name)
            except APIError as e:
                log.warning("node %s: reading the Node to admit pod %s: %s", self.name, pod["metadata"]["name"], e)
            reasons, preemption = self._admission(self._admitting.get(uid, pod), self.node)
            if reasons:
                if self._admitting.pop(uid, None) is not None:
                    self._rejected.add(uid)
                    await self._reject(pod, reasons[0])
                return
        if preemption and uid in self._admitting:
            await self._preempt(preemption)
        if uid in self._admitting and self.devices.needs_devices(pod):
            try:
                await self.devices.allocate(pod, set(self._active()))
            except AllocationError as e:
                if self._admitting.pop(uid, None) is not None:
                    self._rejected.add(uid)
                    await self._reject(pod, admission.Rejection(
                        REJECT_REASON, f"Allocate failed due to {e}, which is unexpected"))
                return
        if (pod := self._admitting.pop(uid, None)) is not None:  # else deleted meanwhile
            self._start(pod)

    async def _preempt(self, preemption: admission.Preemption) -> None:
        """evictPodsToFreeRequests: each pod in turn gets a Warning Preempting event, is stopped as
        PREEMPTION says and waited for, as long as its grace period and half again (at least
        10 s); each that stopped is counted. The critical pod is admitted even if one has not."""
        for w in (v.key for v in preemption.victims):
            await self.recorder.emit({"kind": "Pod", "apiVersion": "v1", "metadata": w.pod["metadata"]}, "Warning",
                                     admission.PREEMPTING, admission.PREEMPTED)
            grace = (w.pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
            w.evict(PREEMPTION)
            if not await w.ends_within(max(grace + grace // 2, 10)):
                log.warning("node %s: pod %s/%s preempted for a critical pod has not stopped yet", self.name,
                            w.namespace, w.name)
                continue
            self.preemptions[preemption.signal] = self.preemptions.get(preemption.signal, 0) + 1

    async def _reject(self, pod: dict, why: admission.Rejection) -> None:
        """upstream's rejectPod: a Warning event, and the pod Failed without running."""
        md = pod["metadata"]
        log.info("node %s: pod %s/%s rejected: %s: %s", self.name, md.get("namespace"), md["name"], why.reason,
                 why.message)
        label = admission.metric_reason(why.reason)
        self.admission_rejections[label] = self.admission_rejections.get(label, 0) + 1
        await self.recorder.emit({"kind": "Pod", "apiVersion": "v1", "metadata": md}, "Warning", why.reason,
                                 why.message)
        try:
            await self.pods.patch(md["name"], {"metadata": {"uid": md["uid"]}, "status": {
                "phase": "Failed", "reason": why.reason, "message": "Pod was rejected: " + why.message}}, SMP,
                namespace=md.get("namespace"), subresource="status")
        except APIError as e:
            log.warning("node %s: rejecting pod %s/%s: %s", self.name, md.get("namespace"), md["name"], e)

    def forget_pod(self, pod: dict) -> None:
        self.eviction.notify()
        uid = self._mirrors.pop(pod["metadata"]["uid"], pod["metadata"]["uid"])
        if self.runs_static(pod) and (w := self.workers.get(uid)) is not None:
            self._orphans[pod["metadata"]["annotations"][MIRROR]] = w  # it runs on, for the next mirror pod
            return
        self._drop(uid)

    def _drop(self, uid: str) -> None:
        """The pod of `uid` is gone: what runs of it stops, what it held is freed."""
        self._rejected.discard(uid)
        self._holds.pop(uid, None)
        self._admitting.pop(uid, None)
        w = self.workers.pop(uid, None)
        if w is not None:
            self._in_background(self._release(w))
            self.retry_resizes()

    def retry_resizes(self) -> None:
        """Room was freed on the node: the pods whose resize is pending try it again (the kubelet's
        retryPendingResizes)."""
        for w in self.workers.values():
            if w.resize_conditions:
                w.changed.set()

    def _device_health_changed(self, driver: str) -> None:
        """A DRA driver reported its devices' health: the pods using them write their statuses
        again (allocatedResourcesStatus)."""
        for w in self.workers.values():
            if self.claims.uses_driver(w.uid, driver):
                w.reconcile = True
                w.changed.set()

    def _plugin_device_health_changed(self, uids: set[str]) -> None:
        """A device plugin's devices changed health: the pods holding them write their statuses
        again (allocatedResourcesStatus)."""
        for uid in uids:
            if (w := self.workers.get(uid)) is not None:
                w.reconcile = True
                w.changed.set()

    def count_probe(self, kind: str, result: str, container: str, pod: dict) -> None:
        md = pod["metadata"]
        key = (kind, result, container, md["name"], md.get("namespace", ""), md.get("uid", ""))
        self.probe_results[key] = self.probe_results.get(key, 0) + 1

    async def _release(self, w: PodWorker) -> None:
        """A deleted pod's worker stops (what runs of a force-deleted one stopped gracefully first),
        then its claims are unprepared, its volumes removed and its probes' series dropped (the
        prober's workers delete theirs)."""
        await w.removed()
        for key in [k for k in self.probe_results if k[5] == w.uid]:
            del self.probe_results[key]
        await self.claims.unprepare(w.uid)
        self.volumes.unmount(w.uid)
