"""The node's device manager (upstream's ManagerImpl): the devices each device plugin reports,
their allocation to containers at pod admission, and the node's capacity of their resources.

- A registered plugin's ListAndWatch sets its resource's devices; capacity counts them all,
  allocatable only the healthy ones (an unhealthy device leaves allocatable, not capacity).
- `allocate` admits a pod: for each container (init containers first) and each limit of a
  registered resource, devices the pod's init containers used are reused first (not a
  sidecar's, which runs on beside the app containers), then healthy ones no other container
  holds, those the plugin prefers first (GetPreferredAllocation, where it offers it) then in
  sorted order; the plugin's Allocate answer is kept with them. A container that
  holds devices already keeps them (an agent restarted, a container restarted). Devices of
  pods no longer active are freed first, as upstream frees them lazily (UpdateAllocatedDevices).
- A container's start first calls PreStartContainer of its plugins that ask for it (a failure
  fails the start as upstream's GetDeviceRunContainerOptions does: CreateContainerConfigError).
- A container's `allocatedResourcesStatus` (KEP-4680, beta and on by default since 1.36) lists
  its devices by resource with their health; when a listed device's health changes (or it comes
  back), `on_health` is told the pods holding it, whose statuses are written again, as upstream's
  device manager sends their UIDs on its updates channel.
- Every change is checkpointed, and a new manager on the same directory starts from it, so a
  restarted node agent gives its running pods the same devices.
- A plugin whose ListAndWatch ends leaves its devices unhealthy; unless it registers again
  within STOP_GRACE_PERIOD its resource goes (0 on the Node). Resources the checkpoint names
  start so too, with no devices, until their plugins register again.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
from collections.abc import Callable

from prometheus_client import CollectorRegistry

from ...clock import REAL, Clock
from ...machinery.metrics import Family
from ...machinery.quantity import whole_count
from ...metrics.exposition import render
from ..dra.metrics import DEF_BUCKETS
from . import checkpoint
from .plugin import HEALTHY, UNHEALTHY, Allocation, Plugin, PluginDevice, PluginError, SimulatedPlugin

log = logging.getLogger(__name__)

#: under the kubelet's root directory, as upstream's /var/lib/kubelet/device-plugins
DEVICE_PLUGINS_DIR = "device-plugins"
#: DevicesPerNUMA's key for a device without topology (upstream's nodeWithoutTopology)
NO_TOPOLOGY = -1
#: how long a stopped plugin's resource stays (upstream's endpointStopGracePeriod)
STOP_GRACE_PERIOD = 300.0
#: a pod rejected at admission for its devices (upstream's lifecycle.UnexpectedAdmissionError)
REJECT_REASON = "UnexpectedAdmissionError"


class AllocationError(Exception):
    """The pod's devices cannot be allocated; the message is upstream's."""


class DeviceManager:
    """Device plugins' resources on one node; `node_dir` (the node's root, none: no checkpoint)
    holds the checkpoint."""

    def __init__(self, node_dir: str = "", clock: Clock = REAL):
        self.path = os.path.join(node_dir, DEVICE_PLUGINS_DIR, checkpoint.NAME) if node_dir else ""
        self.clock = clock
        #: resource -> when its plugin stopped (or this manager started without it): its resource
        #: goes once STOP_GRACE_PERIOD passes, unless a plugin registers it again
        self._stopped: dict[str, float] = {}
        #: resources whose plugin went: capacity and allocatable 0, as upstream keeps them on the Node
        self.removed: set[str] = set()
        self.plugins: dict[str, Plugin] = {}
        #: resource -> device ID -> the device as its plugin last listed it
        self.devices: dict[str, dict[str, PluginDevice]] = {}
        #: (pod UID, container) -> resource -> (device IDs, the plugin's Allocate answer)
        self.pod_devices: dict[tuple[str, str], dict[str, tuple[list[str], Allocation]]] = {}
        #: resource -> device ID -> its health as its plugin last listed it (a plugin that went
        #: leaves it: upstream's allDevices, which allocatedResourcesStatus reports)
        self.listed_health: dict[str, dict[str, str]] = {}
        #: told the UIDs of the pods holding devices whose health changed (allocatedResourcesStatus)
        self.on_health: Callable[[set[str]], None] = lambda uids: None
        #: device ID -> the fault kinds on it (`fault`)
        self._faults: dict[str, set[str]] = {}
        #: the kubelet's device plugin metrics (pkg/kubelet/metrics), on the node's /metrics
        self.registry = CollectorRegistry(auto_describe=False)
        self._registrations = Family("counter", "kubelet_device_plugin_registration_total",
                                     "[ALPHA] Cumulative number of device plugin registrations. Broken down by "
                                     "resource name.", ["resource_name"], self.registry)
        self._alloc_duration = Family("histogram", "kubelet_device_plugin_alloc_duration_seconds",
                                      "[ALPHA] Duration in seconds to serve a device plugin Allocation request. "
                                      "Broken down by resource name.", ["resource_name"], self.registry, DEF_BUCKETS)
        #: one pod is admitted at a time, as the kubelet's sync loop admits them
        self._admission = asyncio.Lock()
        self._restore()

    # --- plugins and capacity -----------------------------------------------------------------

    def register(self, plugin: Plugin, counted: bool = False) -> Plugin | None:
        """A plugin registers its resource, in place of the one registered for it before (which
        is returned, for its owner to close); its ListAndWatch starts. `counted`: the request
        was counted already (`registration_requested`)."""
        old = self.plugins.get(plugin.resource)
        self.plugins[plugin.resource] = plugin
        self._stopped.pop(plugin.resource, None)
        self.removed.discard(plugin.resource)
        if not counted:
            self.registration_requested(plugin.resource)
        plugin.watch(lambda devices: self._listed(plugin, devices))
        return old

    def registration_requested(self, resource: str) -> None:
        """Count a Register call, as upstream counts each before checking it (a refused one too)."""
        self._registrations.labels(resource).inc()

    def _listed(self, plugin: Plugin, devices: list[PluginDevice] | None) -> None:
        """A ListAndWatch list; None: the stream ended, every device turns unhealthy
        (PluginDisconnected) and the grace period starts."""
        resource = plugin.resource
        if self.plugins.get(resource) is not plugin:  # replaced since
            return
        plugin_listed = devices is not None
        if devices is None:
            self._stopped[resource] = self.clock.monotonic()
            devices = [PluginDevice(d.id, UNHEALTHY, d.numa) for d in self.devices.get(resource, {}).values()]
        new = {d.id: d for d in devices}
        if self.devices.get(resource) != new:
            self.devices[resource] = new
            self._checkpoint()
        if plugin_listed:
            self._health_listed(resource, {d.id: d.health for d in devices})

    def _health_listed(self, resource: str, health: dict[str, str]) -> None:
        """Tell `on_health` the pods holding a device whose listed health changed, or that is
        listed again (genericDeviceUpdateCallback)."""
        old = self.listed_health.get(resource, {})
        self.listed_health[resource] = health
        changed = {i for i, h in health.items() if old.get(i) != h}
        uids = {uid for (uid, _), held in self.pod_devices.items()
                if resource in held and not changed.isdisjoint(held[resource][0])}
        if uids:
            self.on_health(uids)

    def capacity(self) -> tuple[dict[str, str], dict[str, str]]:
        """Each resource's capacity (all its devices) and allocatable (its healthy ones); a
        resource whose plugin stopped STOP_GRACE_PERIOD ago goes, with 0 of each (GetCapacity's
        deleted resources, which the kubelet sets to 0)."""
        now = self.clock.monotonic()
        for resource, since in list(self._stopped.items()):
            if now - since >= STOP_GRACE_PERIOD:
                del self._stopped[resource]
                self.devices.pop(resource, None)
                self.removed.add(resource)
                self._checkpoint()
        gone = dict.fromkeys(self.removed, "0")
        return ({**gone, **{r: str(len(ds)) for r, ds in self.devices.items()}},
                {**gone, **{r: str(len(self._healthy(r))) for r in self.devices}})

    def _healthy(self, resource: str) -> set[str]:
        return {i for i, d in self.devices.get(resource, {}).items() if d.health == HEALTHY}

    def fault(self, device_id: str, kind: str, on: bool) -> bool:
        """A fault (faults.py's `gpu:<device>:<kind>`) put on or taken off a simulated plugin's
        device: unhealthy while any kind is on it, as that plugin's health check would find it.
        False if no simulated plugin has the device."""
        for plugin in self.plugins.values():
            if isinstance(plugin, SimulatedPlugin) and device_id in plugin.devices:
                kinds = self._faults.setdefault(device_id, set())
                (kinds.add if on else kinds.discard)(kind)
                plugin.set_health(device_id, not kinds)
                return True
        return False

    def allocatable_devices(self) -> list[tuple[str, str, tuple[int, ...]]]:
        """(resource, device ID, NUMA nodes) of every healthy device (GetAllocatableDevices)."""
        return [(r, i, self.devices[r][i].numa) for r in sorted(self.devices) for i in sorted(self._healthy(r))]

    # --- admission -----------------------------------------------------------------------------

    def needs_devices(self, pod: dict) -> bool:
        """Whether a container of the pod limits a registered resource."""
        spec = pod.get("spec") or {}
        return any(r in self.devices for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
                   for r in (c.get("resources") or {}).get("limits") or {})

    async def allocate(self, pod: dict, active: set[str]) -> None:
        """Allocate the devices of `pod`'s containers (`active`: the UIDs of the node's pods
        still running or being admitted, this one included); AllocationError leaves the pod
        holding none."""
        async with self._admission:
            await self._allocate(pod, active)

    async def _allocate(self, pod: dict, active: set[str]) -> None:
        uid = pod["metadata"]["uid"]
        self._free_inactive(active | {uid})
        spec = pod.get("spec") or {}
        reuse: dict[str, list[str]] = {}
        before = {k: v for k, v in self.pod_devices.items() if k[0] == uid}
        try:
            for c in spec.get("initContainers") or []:
                held = await self._allocate_container(uid, c, reuse)
                sidecar = c.get("restartPolicy") == "Always"
                for resource, ids in held.items():
                    reuse[resource] = [i for i in reuse.get(resource, []) if i not in ids] if sidecar else \
                        sorted({*reuse.get(resource, []), *ids})
            for c in spec.get("containers") or []:
                held = await self._allocate_container(uid, c, reuse)
                for resource, ids in held.items():
                    reuse[resource] = [i for i in reuse.get(resource, []) if i not in ids]
        except AllocationError:
            for key in [k for k in self.pod_devices if k[0] == uid and k not in before]:
                del self.pod_devices[key]
            raise
        if {k: v for k, v in self.pod_devices.items() if k[0] == uid} != before:
            self._checkpoint()

    async def _allocate_container(self, uid: str, c: dict, reuse: dict[str, list[str]]) -> dict[str, list[str]]:
        """Container `c`'s devices by resource (those it held already, or new ones); a failed
        call to the plugin is the pod's AllocationError."""
        held: dict[str, list[str]] = {}
        limits = (c.get("resources") or {}).get("limits") or {}
        for resource in sorted(limits):
            if resource not in self.devices:  # not a device plugin's resource
                continue
            needed = whole_count(limits[resource])
            if not needed:
                continue
            have = self.pod_devices.get((uid, c["name"]), {}).get(resource)
            if have is not None:
                if len(have[0]) != needed:
                    raise AllocationError(f"pod {uid!r} container {c['name']!r} changed request for resource "
                                          f"{resource!r} from {len(have[0])} to {needed}")
                held[resource] = have[0]
                continue
            healthy = self._healthy(resource)
            ids = [i for i in reuse.get(resource, []) if i in healthy][:needed]
            plugin = self.plugins.get(resource)
            try:
                if len(ids) < needed:
                    available = sorted(healthy - self._in_use(resource))
                    if len(available) < needed - len(ids):
                        raise AllocationError(f"requested number of devices unavailable for {resource}. Requested: "
                                              f"{needed - len(ids)}, Available: {len(available)}")
                    # the plugin's preference first (no NUMA alignment asked: the topology manager's
                    # `none` policy), then the rest in order
                    if plugin is None:  # registered before a restart, not since: no healthy devices either
                        raise AllocationError(f"unknown Device Plugin {resource}")
                    preferred = await plugin.preferred(sorted({*available, *ids}), ids, needed) or []
                    for i in [*preferred, *available]:
                        if len(ids) < needed and i in available and i not in ids:
                            ids.append(i)
                if plugin is None:
                    raise AllocationError(f"unknown Device Plugin {resource}")
                started = self.clock.monotonic()
                try:
                    answer = await plugin.allocate(ids)
                finally:
                    self._alloc_duration.labels(resource).observe(self.clock.monotonic() - started)
            except PluginError as e:
                raise AllocationError(str(e)) from None
            self.pod_devices.setdefault((uid, c["name"]), {})[resource] = (ids, answer)
            held[resource] = ids
        return held

    def _in_use(self, resource: str) -> set[str]:
        return {i for held in self.pod_devices.values() if resource in held for i in held[resource][0]}

    def _free_inactive(self, active: set[str]) -> None:
        gone = [k for k in self.pod_devices if k[0] not in active]
        for key in gone:
            del self.pod_devices[key]
        if gone:
            self._checkpoint()

    # --- what a container gets ------------------------------------------------------------------

    def environment(self, uid: str, container: str) -> dict[str, str]:
        """The env its plugins' Allocate answers set, by resource name."""
        env: dict[str, str] = {}
        for _, (_, answer) in sorted(self.pod_devices.get((uid, container), {}).items()):
            env |= answer.envs
        return env

    async def pre_start(self, uid: str, container: str) -> str:
        """Call PreStartContainer of the container's plugins that ask for it, before it starts;
        upstream's error if one fails (the container's start then fails), else ""."""
        for resource, (ids, _) in sorted(self.pod_devices.get((uid, container), {}).items()):
            plugin = self.plugins.get(resource)
            if plugin is not None and plugin.pre_start_required:
                try:
                    await plugin.pre_start(ids)
                except PluginError as e:
                    return f"device plugin PreStartContainer rpc failed with err: {e}"
        return ""

    def resource_health(self, uid: str, container: str) -> list[dict]:
        """The container's `allocatedResourcesStatus` entries for its device plugin resources
        (UpdateAllocatedResourcesStatus): one per resource, each device by its ID, Healthy or
        Unhealthy as its plugin last listed it; as upstream, Healthy if it does not list it (or
        not since a restart), and a plugin that went leaves its last list, not Unknown."""
        out = []
        for resource, (ids, _) in sorted(self.pod_devices.get((uid, container), {}).items()):
            listed = self.listed_health.get(resource, {})
            out.append({"name": resource, "resources": [
                {"resourceID": i, "health": HEALTHY if listed.get(i, HEALTHY) == HEALTHY else UNHEALTHY}
                for i in ids]})
        return out

    def container_devices(self, uid: str, container: str) -> list[tuple[str, list[str], int]]:
        """(resource, device IDs, NUMA node or NO_TOPOLOGY) per resource and NUMA node, as
        upstream's DevicesPerNUMA groups a container's devices."""
        out = []
        for resource, (ids, _) in sorted(self.pod_devices.get((uid, container), {}).items()):
            by_numa: dict[int, list[str]] = {}
            for i in ids:
                d = self.devices.get(resource, {}).get(i)
                for n in (d.numa if d and d.numa else (NO_TOPOLOGY,)):
                    by_numa.setdefault(n, []).append(i)
            out += [(resource, by_numa[n], n) for n in sorted(by_numa)]
        return out

    def metrics(self) -> list[str]:
        """The families in the text format, by name (none before a plugin registers)."""
        return render(self.registry).decode().splitlines()

    # --- checkpoint -----------------------------------------------------------------------------

    def _checkpoint(self) -> None:
        if not self.path:
            return
        entries = []
        for (uid, container), held in sorted(self.pod_devices.items()):
            for resource, (ids, answer) in sorted(held.items()):
                by_numa: dict[str, list[str]] = {}
                for resource_, ids_, n in self.container_devices(uid, container):
                    if resource_ == resource:
                        by_numa[str(n)] = ids_
                entries.append({"PodUID": uid, "ContainerName": container, "ResourceName": resource,
                                "DeviceIDs": by_numa or {str(NO_TOPOLOGY): ids},
                                "AllocResp": base64.b64encode(json.dumps(answer.to_json()).encode()).decode()})
        registered = {r: sorted(ds) for r, ds in sorted(self.devices.items())}
        try:
            checkpoint.write(self.path, {"PodDeviceEntries": entries, "RegisteredDevices": registered})
        except OSError as e:
            log.error("device manager: cannot write checkpoint %s: %s", self.path, e)

    def _restore(self) -> None:
        if not self.path:
            return
        try:
            data = checkpoint.read(self.path)
        except checkpoint.CorruptCheckpoint as e:
            log.warning("device manager: %s; starting without allocations", e)
            return
        # resources registered before: 0 devices until their plugin registers again, gone if it
        # does not within the grace period (upstream's stopped endpoints)
        for resource in (data or {}).get("RegisteredDevices") or {}:
            self.devices[resource] = {}
            self._stopped[resource] = self.clock.monotonic()
        for e in (data or {}).get("PodDeviceEntries") or []:
            ids = list(dict.fromkeys(i for n in sorted(e["DeviceIDs"], key=int) for i in e["DeviceIDs"][n]))
            answer = Allocation.from_json(json.loads(base64.b64decode(e["AllocResp"])))
            self.pod_devices.setdefault((e["PodUID"], e["ContainerName"]), {})[e["ResourceName"]] = (ids, answer)
