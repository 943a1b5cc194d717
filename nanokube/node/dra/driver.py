"""The simulated DRA drivers of one node: turn the cluster file's GPUs and
NICs into ResourceSlices (GPUs as gpu.nanokube.io, or as gpu.nvidia.com
for a pool with `driver: nvidia`, see nvidia.py), keep that pool
published, and taint devices that a fault made unhealthy.

Each driver publishes one pool per node, named after the node. A pool's
`generation` goes up whenever its device list changes (consumers ignore
slices of older generations); a taint change edits the slice in place.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import re
import uuid
from collections.abc import Callable
from fractions import Fraction

from ...machinery.errors import APIError
from ...clock import REAL, Clock
from ...machinery.quantity import BINARY_SI, format_quantity, parse_quantity
from ..cluster import NodeSpec
from ..devices import Device
from .nvidia import NVIDIA_DRIVER
from .nvidia import gpu_entries as nvidia_gpu_entries

log = logging.getLogger(__name__)

GPU_DRIVER = "gpu.nanokube.io"
NIC_DRIVER = "nic.nanokube.io"
#: the attribute name upstream standardised for PCIe topology alignment
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
#: the per-slice device cap once any device has taints or counters
DEVICES_PER_SLICE = 64
COUNTER_SETS_PER_SLICE = 8
#: fault kinds and the taint effect each one gets
FAULT_EFFECTS = {"xid": "NoExecute", "ecc": "NoSchedule", "link-down": "NoExecute"}
_RAIL_BASE = int(ipaddress.IPv4Address("100.64.0.0"))


@functools.lru_cache(maxsize=256)
def semver(v: str) -> str:
    """A dotted version as semver: three parts, no leading zeros ("12.4" -> "12.4.0")."""
    parts = [str(int(p)) for p in re.findall(r"\d+", v)[:3]]
    return ".".join(parts + ["0"] * (3 - len(parts)))


def nic_address(node_index: int, nic_index: int) -> str:
    """The NIC's address on its rail network: rail i is 100.(64+i).0.0/16."""
    host = _RAIL_BASE + (nic_index << 16) + node_index + 1
    return f"{ipaddress.IPv4Address(host)}/16"


def _s(v: str) -> dict:
    return {"string": v}


def _i(v: int) -> dict:
    return {"int": v}


def _gpu_attributes(a: dict) -> dict:
    return {
        "type": _s("gpu"), "model": _s(a["model"]), "uuid": _s(a["uuid"]), "architecture": _s(a["architecture"]),
        "driverVersion": {"version": semver(a["driverVersion"])}, "cudaVersion": {"version": semver(a["cudaVersion"])},
        "computeCapability": {"version": semver(a["computeCapability"])}, "index": _i(a["index"]),
        "numaNode": _i(a["numaNode"]), PCIE_ROOT: _s(a["pcieRoot"]),
    }


def _counters(memory: str, slices: int) -> dict:
    return {"memory": {"value": memory}, "slices": {"value": str(slices)}}


#: a shared GPU's compute, in thousandths, that claims consume a share of
GPU_MILLI = "milli"


def gpu_entries(devices: list[Device]) -> tuple[list[dict], list[dict]]:
    """Slice devices and shared counter sets for GPUs. A GPU with `migSlices`
    gets a counter set; the whole GPU consumes all of it and each 1g
    partition one slice and its share of memory, so they exclude each other.
    A GPU with `sharing` is one device several claims share through
    consumable capacity (1.37's allowMultipleAllocations): each takes the
    `milli` compute and memory it requests, a claim that requests none the whole GPU."""
    out: list[dict] = []
    sets: list[dict] = []
    for d in devices:
        attrs = _gpu_attributes(d.attributes)
        memory = d.capacity["memory"]
        entry = {"name": d.name, "attributes": attrs, "capacity": {"memory": {"value": memory}}}
        if d.attributes.get("sharing"):
            entry["allowMultipleAllocations"] = True
            entry["capacity"][GPU_MILLI] = {"value": "1000"}
        n = d.attributes.get("migSlices")
        if not n:
            out.append(entry)
            continue
        set_name = f"{d.name}-counters"
        share = format_quantity(Fraction(int(parse_quantity(memory) / n) // 2**20 * 2**20), BINARY_SI)
        sets.append({"name": set_name, "counters": _counters(memory, n)})
        entry["consumesCounters"] = [{"counterSet": set_name, "counters": _counters(memory, n)}]
        out.append(entry)
        gib = int(parse_quantity(share) / 2**30)
        for j in range(n):
            mig = uuid.uuid5(uuid.UUID(d.attributes["uuid"][4:]), f"mig-{j}")
            out.append({
                "name": f"{d.name}-mig-{j}",
                "attributes": {**attrs, "type": _s("mig"), "uuid": _s(f"MIG-{mig}"), "parentUUID": _s(d.attributes["uuid"]),
                               "profile": _s(f"1g.{gib}gb")},
                "capacity": {"memory": {"value": share}},
                "consumesCounters": [{"counterSet": set_name, "counters": _counters(share, 1)}],
            })
    return out, sets


def nic_entries(devices: list[Device]) -> list[dict]:
    out = []
    for d in devices:
        a = d.attributes
        attrs = {"type": _s("nic"), "model": _s(a["model"]), "rdma": {"bool": a["rdma"]},
                 "interfaceName": _s(a["interfaceName"]), "macAddress": _s(a["hardwareAddress"]),
                 "numaNode": _i(a["numaNode"])}
        if "pcieRoot" in a:
            attrs[PCIE_ROOT] = _s(a["pcieRoot"])
        out.append({"name": d.name, "attributes": attrs, "capacity": {"bandwidth": {"value": d.capacity["bandwidth"]}}})
    return out


def _chunks(items: list, size: int) -> list[list]:
    return [items[i:i + size] for i in range(0, len(items), size)]


class PoolPublisher:
    """Keeps one driver's pool on one node published as ResourceSlices."""

    def __init__(self, slices, node: str, driver: str, clock: Clock = REAL):
        self.slices = slices
        self.node = node
        self.driver = driver
        self.clock = clock
        self.devices: list[dict] = []
        self.counter_sets: list[dict] = []
        self.taints: dict[str, list[dict]] = {}
        self.generation = 0
        self.owner: dict | None = None
        self.published: dict[str, dict] = {}

    def slice_name(self, i: int) -> str:
        return f"{self.node}-{self.driver}-{i}"

    def specs(self) -> dict[str, dict]:
        """Desired slices by name: counter sets first, then devices."""
        bodies = [{"sharedCounters": c} for c in _chunks(self.counter_sets, COUNTER_SETS_PER_SLICE)]
        devices = [{**d, "taints": self.taints[d["name"]]} if self.taints.get(d["name"]) else d for d in self.devices]
        bodies += [{"devices": c} for c in _chunks(devices, DEVICES_PER_SLICE)]
        pool = {"name": self.node, "generation": self.generation, "resourceSliceCount": len(bodies)}
        return {self.slice_name(i): {"driver": self.driver, "pool": pool, "nodeName": self.node, **b}
                for i, b in enumerate(bodies)}

    async def start(self, existing: list[dict], owner: dict | None = None) -> None:
        """Adopt the slices a previous run left: keep their generation if
        they already say what this run would publish, otherwise go past it."""
        self.owner = owner
        self.published = {s["metadata"]["name"]: s for s in existing}
        self.generation = max((s["spec"]["pool"].get("generation", 0) for s in existing), default=0)
        if not existing or {n: s["spec"] for n, s in self.published.items()} != self.specs():
            self.generation += 1
        await self.sync()

    async def set_devices(self, devices: list[dict], counter_sets: list[dict] | None = None) -> None:
        """Replace the device list; a change is a new pool generation."""
        counter_sets = counter_sets or []
        if devices == self.devices and counter_sets == self.counter_sets:
            return
        self.devices, self.counter_sets = devices, counter_sets
        self.generation += 1
        await self.sync()

    async def sync(self) -> None:
        """Create or update every desired slice, then delete the leftovers."""
        desired = self.specs()
        for name, spec in desired.items():
            cur = self.published.get(name)
            if cur is None or cur.get("spec") != spec:
                self.published[name] = await self._put(name, spec, cur)
        for name in [n for n in self.published if n not in desired]:
            try:
                await self.slices.delete(name)
            except APIError as e:
                if e.code != 404:
                    raise
            del self.published[name]

    async def _put(self, name: str, spec: dict, cur: dict | None) -> dict:
        meta: dict = {"name": name}
        if self.owner:
            meta["ownerReferences"] = [self.owner]
        for _ in range(5):
            try:
                if cur is None:
                    return await self.slices.create({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                                                     "metadata": meta, "spec": spec})
                return await self.slices.update({**cur, "spec": spec})
            except APIError as e:
                if e.code not in (404, 409):
                    raise
                try:
                    cur = await self.slices.get(name)
                except APIError as e2:
                    if e2.code != 404:
                        raise
                    cur = None
        raise RuntimeError(f"resourceslice {name}: gave up after repeated conflicts")

    async def delete_all(self) -> None:
        for name in list(self.published):
            try:
                await self.slices.delete(name)
            except APIError as e:
                if e.code != 404:
                    raise
        self.published.clear()


class NodeDriver:
    """Both simulated drivers of one node, with the health hook faults use."""

    def __init__(self, client, spec: NodeSpec, clock: Clock = REAL):
        self.spec = spec
        self.clock = clock
        slices = client.resource("resource.k8s.io", "v1", "resourceslices")
        gpus = [d for d in spec.devices if d.kind == "gpu"]
        nvidia = any(d.attributes.get("driver") == "nvidia" for d in gpus)
        self.gpu = PoolPublisher(slices, spec.name, NVIDIA_DRIVER if nvidia else GPU_DRIVER, clock)
        self.nic = PoolPublisher(slices, spec.name, NIC_DRIVER, clock)
        self.gpu.devices, self.gpu.counter_sets = (nvidia_gpu_entries if nvidia else gpu_entries)(gpus)
        self.nic.devices = nic_entries([d for d in spec.devices if d.kind == "nic"])
        self.hardware = {d.name: d for d in spec.devices}
        self.faults: dict[str, dict[str, dict]] = {}  # device -> kind -> taint
        #: called with a driver whose devices' health changed (a fault came or went)
        self.on_health: Callable[[str], None] | None = None

    @property
    def publishers(self) -> list[PoolPublisher]:
        """Only drivers with devices on this node run there."""
        return [p for p in (self.gpu, self.nic) if p.devices]

    def publisher(self, driver: str) -> PoolPublisher | None:
        return next((p for p in self.publishers if p.driver == driver), None)

    async def start(self, node_uid: str, existing: dict[str, list[dict]]) -> None:
        """Publish each pool; `existing` holds this node's slices by driver."""
        owner = {"apiVersion": "v1", "kind": "Node", "name": self.spec.name, "uid": node_uid, "controller": True}
        for p in self.publishers:
            await p.start(existing.get(p.driver, []), owner)

    async def stop(self, delete_slices: bool = False) -> None:
        if delete_slices:
            for p in self.publishers:
                await p.delete_all()

    def _owner_of(self, device: str) -> PoolPublisher:
        """The pool publishing `device`, or its MIG devices when only they are (a GPU in static MIG mode)."""
        for p in self.publishers:
            if any(d["name"] == device or d["name"].startswith(f"{device}-mig-") for d in p.devices):
                return p
        raise KeyError(f"node {self.spec.name} has no device {device!r}")

    async def inject_fault(self, device: str, kind: str = "xid", value: str = "") -> dict:
        """Mark a device unhealthy: its slice entry (and those of its
        partitions) get a `<driver>/<kind>` taint with the kind's effect."""
        if kind not in FAULT_EFFECTS:
            raise ValueError(f"unknown fault kind {kind!r}; expected one of {', '.join(FAULT_EFFECTS)}")
        p = self._owner_of(device)
        taint = {"key": f"{p.driver}/{kind}", "effect": FAULT_EFFECTS[kind], "timeAdded": self.clock.rfc3339()}
        if value:
            taint["value"] = value
        self.faults.setdefault(device, {})[kind] = taint
        await self._retaint(p, device)
        return taint

    async def clear_fault(self, device: str, kind: str | None = None) -> None:
        """Recovery: drop one fault kind, or all of them, and its taints."""
        p = self._owner_of(device)
        kinds = self.faults.get(device, {})
        for k in [kind] if kind else list(kinds):
            kinds.pop(k, None)
        if not kinds:
            self.faults.pop(device, None)
        await self._retaint(p, device)

    def health(self, device: str) -> str:
        """A device's health as its driver's kubelet plugin reports it (KEP-4680): Unhealthy while
        a fault is on it or on the GPU a MIG device of it is part of, else Healthy."""
        return "Unhealthy" if self.faults.get(device) or self.faults.get(device.split("-mig-", 1)[0]) else "Healthy"

    async def _retaint(self, p: PoolPublisher, device: str) -> None:
        taints = list(self.faults.get(device, {}).values())
        for d in p.devices:
            if d["name"] == device or d["name"].startswith(f"{device}-mig-"):
                if taints:
                    p.taints[d["name"]] = taints
                else:
                    p.taints.pop(d["name"], None)
        if self.on_health:
            self.on_health(p.driver)
        await p.sync()
