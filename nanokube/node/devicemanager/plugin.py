"""What the device manager holds of a device plugin (device plugin API v1beta1), and the
simulated plugin a node runs for the extended resources its cluster file advertises.

A plugin serves one resource. ListAndWatch is `watch(send)`: the plugin calls `send` with its
whole device list at once and again whenever a device's health changes, as the stream sends
whole lists, and with None if the stream ends. GetPreferredAllocation, where a plugin offers it, picks among the devices
available. PreStartContainer, where a plugin asks for it, is called before each start of a
container holding its devices. Allocate takes the device IDs the manager picked for one container and answers
what the runtime adds to it (a ContainerAllocateResponse: envs, mounts, devices, annotations).
An external plugin registered over gRPC is the same to the manager (endpoint.py).

The simulated plugin is NVIDIA's k8s-device-plugin for `nvidia.com/*` resources: device IDs
are the GPUs' UUIDs (`GPU-<uuid>`, the node's GPUs' own when its cluster file describes them,
with their NUMA node as ListAndWatch's topology) and Allocate sets NVIDIA_VISIBLE_DEVICES to
them (its default envvar device-list strategy). For `nvidia.com/gpu` it offers
GetPreferredAllocation and answers as NVIDIA's does for whole GPUs (besteffort.py: GPUs
grouped by NUMA node, the kubelet's order where there is no topology); its other resources
(MIG devices, replicas) would take its distributed policy, whose answer for devices with no
parent GPU in common is arbitrary, so they offer none. Another vendor's resource gets IDs
`<name>-<i>`, no preference and no edits.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Callable, Protocol

from ...machinery.quantity import parse_quantity
from ..cluster import CAPACITY_KEYS, NodeSpec
from . import besteffort

HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"
_NAMESPACE = uuid.UUID("0c1d7f5e-3a52-4d0e-8f61-646576706c67")


class PluginError(Exception):
    """A plugin's call failed (an external plugin's gRPC error, its connection gone)."""


@dataclass(frozen=True)
class PluginDevice:
    """v1beta1.Device: its ID, health and NUMA nodes (none: no topology)."""

    id: str
    health: str = HEALTHY
    numa: tuple[int, ...] = ()


@dataclass(frozen=True)
class Allocation:
    """v1beta1.ContainerAllocateResponse (the parts a simulated container uses)."""

    envs: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"envs": self.envs, "annotations": self.annotations}

    @classmethod
    def from_json(cls, data: dict) -> Allocation:
        return cls(dict(data.get("envs") or {}), dict(data.get("annotations") or {}))


class Plugin(Protocol):
    """What the device manager calls of a registered plugin."""

    resource: str
    #: PreStartContainer is called before each start of a container holding its devices
    pre_start_required: bool

    def watch(self, send: Callable[[list[PluginDevice] | None], None]) -> None: ...

    async def preferred(self, available: list[str], must_include: list[str], size: int) -> list[str] | None: ...

    async def allocate(self, device_ids: list[str]) -> Allocation: ...

    async def pre_start(self, device_ids: list[str]) -> None: ...


class SimulatedPlugin:
    """A device plugin for `count` devices of `resource` on node `node`; `gpus` are the node's
    GPUs (cluster.Device) whose UUIDs and NUMA nodes an `nvidia.com/gpu` plugin reports."""

    def __init__(self, node: str, resource: str, count: int, gpus=()):
        self.resource = resource
        self.nvidia = resource.startswith("nvidia.com/")
        gpus = list(gpus) if resource == "nvidia.com/gpu" else []
        devices = []
        for i in range(count):
            if i < len(gpus):
                a = gpus[i].attributes
                devices.append(PluginDevice(a["uuid"], numa=(a["numaNode"],) if "numaNode" in a else ()))
            elif self.nvidia:
                devices.append(PluginDevice(f"GPU-{uuid.uuid5(_NAMESPACE, f'{node}/{resource}/{i}')}"))
            else:
                devices.append(PluginDevice(f"{resource.rpartition('/')[2]}-{i}"))
        self.devices = {d.id: d for d in devices}
        self._watchers: list[Callable[[list[PluginDevice]], None]] = []

    def watch(self, send: Callable[[list[PluginDevice]], None]) -> None:
        """ListAndWatch: the list now, and again on every change."""
        self._watchers.append(send)
        send(list(self.devices.values()))

    def set_health(self, device_id: str, healthy: bool) -> None:
        """The device's health as the plugin's health check finds it (NVML's XID events, for
        NVIDIA's); KeyError for a device it does not have."""
        d = self.devices[device_id]
        health = HEALTHY if healthy else UNHEALTHY
        if d.health == health:
            return
        self.devices[device_id] = PluginDevice(d.id, health, d.numa)
        for send in self._watchers:
            send(list(self.devices.values()))

    async def preferred(self, available: list[str], must_include: list[str], size: int) -> list[str] | None:
        """GetPreferredAllocation, offered for whole NVIDIA GPUs (None: not offered)."""
        if self.resource != "nvidia.com/gpu":
            return None
        numa = {i: d.numa[0] if d.numa else None for i, d in self.devices.items()}
        return besteffort.allocate(available, must_include, size, numa)

    pre_start_required = False

    async def pre_start(self, device_ids: list[str]) -> None:
        """PreStartContainer: not asked for."""

    async def allocate(self, device_ids: list[str]) -> Allocation:
        """Allocate for one container: NVIDIA's plugin names the devices in NVIDIA_VISIBLE_DEVICES."""
        if self.nvidia:
            return Allocation(envs={"NVIDIA_VISIBLE_DEVICES": ",".join(device_ids)})
        return Allocation()


def simulated_plugins(spec: NodeSpec) -> list[SimulatedPlugin]:
    """A plugin for each extended resource the node's cluster file gives it."""
    gpus = [d for d in spec.devices if d.kind == "gpu"]
    return [SimulatedPlugin(spec.name, resource, int(parse_quantity(str(count))), gpus)
            for resource, count in sorted(spec.capacity.items()) if resource not in CAPACITY_KEYS]
