"""The NVIDIA personality of the simulated GPU driver: a node pool with
`gpus: {driver: nvidia, ...}` publishes its GPUs as NVIDIA's DRA driver
(k8s-dra-driver-gpu) does, so its quickstart manifests run unchanged.

- Driver `gpu.nvidia.com`, devices `gpu-<minor>` with its attribute names
  and types (productName, brand, architecture, cudaComputeCapability,
  driverVersion, cudaDriverVersion as versions, uuid, index, minor,
  pcieBusID, resource.kubernetes.io/pcieRoot) and `memory` capacity.
- A GPU with `mig: true` is published as the driver's DynamicMIG mode does
  (KEP-4815 partitionable devices): one counter set per GPU
  (`gpu-<minor>-counter-set`) with a counter per MIG capacity dimension and
  one per memory slice; the full GPU consumes all of it and each MIG
  profile at each placement (`gpu-<minor>-mig-<profile>-<profileID>-<start>`)
  its own share and slices, so the scheduler packs MIG devices exactly as
  the hardware allows.
- Prepare validates the opaque `GpuConfig` / `MigDeviceConfig` parameters
  (resource.nvidia.com/v1beta1) with the driver's defaults and messages.

MIG profile tables are NVIDIA's (`nvidia-smi mig -lgip`): memory in MiB,
SMs, copy engines, decoders, encoders, JPEG and OFA engines, and the
placements each profile can start at.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from fractions import Fraction

from ...machinery.quantity import BINARY_SI, QuantityError, format_quantity, parse_quantity

NVIDIA_DRIVER = "gpu.nvidia.com"
CONFIG_API = "resource.nvidia.com/v1beta1"
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
MEMORY_SLICES = 8
#: the DeviceClasses the driver's Helm chart installs for GPUs
DEVICE_CLASSES = {
    "gpu.nvidia.com": f"device.driver == '{NVIDIA_DRIVER}' && device.attributes['{NVIDIA_DRIVER}'].type == 'gpu'",
    "mig.nvidia.com": f"device.driver == '{NVIDIA_DRIVER}' && device.attributes['{NVIDIA_DRIVER}'].type == 'mig'",
    "vfio.gpu.nvidia.com": f"device.driver == '{NVIDIA_DRIVER}' && device.attributes['{NVIDIA_DRIVER}'].type == 'vfio'",
}
#: MIG capacity names and the counter each one is counted by
_DIMENSIONS = (("multiprocessors", "multiprocessors"), ("copyEngines", "copy-engines"), ("decoders", "decoders"),
               ("encoders", "encoders"), ("jpegEngines", "jpeg-engines"), ("ofaEngines", "ofa-engines"),
               ("memory", "memory"))


@dataclass(frozen=True)
class MigProfile:
    name: str
    id: int  # the GPU instance profile ID
    size: int  # memory slices a placement spans
    starts: tuple[int, ...]
    memory_mib: int
    sm: int
    ce: int
    dec: int
    enc: int = 0
    jpeg: int = 0
    ofa: int = 0

    def capacity(self) -> dict[str, int]:
        return {"multiprocessors": self.sm, "copyEngines": self.ce, "decoders": self.dec, "encoders": self.enc,
                "jpegEngines": self.jpeg, "ofaEngines": self.ofa, "memory": self.memory_mib * 2**20}


@dataclass(frozen=True)
class Product:
    model: str  # as the cluster file names it
    memory: str
    architecture: str
    compute_capability: str
    mig: tuple[MigProfile, ...] = ()

    @property
    def product_name(self) -> str:
        return f"NVIDIA {self.model}"


_ALL7 = tuple(range(7))
A100_40GB_MIG = (
    MigProfile("1g.5gb", 19, 1, _ALL7, 4864, 14, 1, 0),
    MigProfile("1g.5gb+me", 20, 1, _ALL7, 4864, 14, 1, 1, 0, 1, 1),
    MigProfile("1g.10gb", 15, 2, (0, 2, 4, 6), 9984, 14, 1, 1),
    MigProfile("2g.10gb", 14, 2, (0, 2, 4), 9984, 28, 2, 1),
    MigProfile("3g.20gb", 9, 4, (0, 4), 20096, 42, 3, 2),
    MigProfile("4g.20gb", 5, 4, (0,), 20096, 56, 4, 2),
    MigProfile("7g.40gb", 0, 8, (0,), 40448, 98, 7, 5, 0, 1, 1),
)
H100_80GB_MIG = (
    MigProfile("1g.10gb", 19, 1, _ALL7, 9984, 16, 1, 1, 0, 1, 0),
    MigProfile("1g.10gb+me", 20, 1, _ALL7, 9984, 16, 1, 1, 0, 1, 1),
    MigProfile("1g.20gb", 15, 2, (0, 2, 4, 6), 20096, 26, 1, 1, 0, 1, 0),
    MigProfile("2g.20gb", 14, 2, (0, 2, 4), 20096, 32, 2, 2, 0, 2, 0),
    MigProfile("3g.40gb", 9, 4, (0, 4), 40448, 60, 3, 3, 0, 3, 0),
    MigProfile("4g.40gb", 5, 4, (0,), 40448, 64, 4, 4, 0, 4, 0),
    MigProfile("7g.80gb", 0, 8, (0,), 81152, 132, 8, 7, 0, 7, 1),
)
PRODUCTS = {p.model: p for p in (
    Product("A100-SXM4-40GB", "40Gi", "Ampere", "8.0", A100_40GB_MIG),
    Product("A100-PCIE-40GB", "40Gi", "Ampere", "8.0", A100_40GB_MIG),
    Product("H100-SXM5-80GB", "80Gi", "Hopper", "9.0", H100_80GB_MIG),
    Product("H100-80GB-HBM3", "80Gi", "Hopper", "9.0", H100_80GB_MIG),
    Product("L4", "23034Mi", "Ada Lovelace", "8.9"),
    Product("A10", "23028Mi", "Ampere", "8.6"),
)}


def _s(v: str) -> dict:
    return {"string": v}


def _int(v: int) -> dict:
    return {"int": v}


def _version(v: str) -> dict:
    parts = [str(int(p)) for p in re.findall(r"\d+", v)[:3]]
    return {"version": ".".join(parts + ["0"] * (3 - len(parts)))}


def _q(n: int) -> dict:
    return {"value": format_quantity(Fraction(n), BINARY_SI)}


def counter_set_name(minor: int) -> str:
    return f"gpu-{minor}-counter-set"


def mig_device_name(minor: int, profile: MigProfile, start: int) -> str:
    """The driver's canonical MIG device name: dots dropped, anything else
    outside [a-z0-9-] turned into '-' ("1g.5gb+me" -> "1g5gb-me")."""
    pname = re.sub(r"[^a-z0-9-]", "-", profile.name.replace(".", "").lower()).strip("-")
    return f"gpu-{minor}-mig-{pname}-{profile.id}-{start}"


def mig_uuid(parent_uuid: str, device: str) -> str:
    """The UUID a MIG device gets when prepare creates it (stable per placement here)."""
    return f"MIG-{uuid.uuid5(uuid.UUID(parent_uuid[4:]), device)}"


def gpu_attributes(a: dict) -> dict:
    """The attributes a whole GPU is published with."""
    return {
        "type": _s("gpu"), "uuid": _s(a["uuid"]), "minor": _int(a["minor"]), "index": _int(a["index"]),
        "productName": _s(a["productName"]), "brand": _s("Nvidia"), "architecture": _s(a["architecture"]),
        "cudaComputeCapability": _version(a["computeCapability"]), "driverVersion": _version(a["driverVersion"]),
        "cudaDriverVersion": _version(a["cudaVersion"]), "pcieBusID": _s(a["pcieBusID"]), PCIE_ROOT: _s(a["pcieRoot"]),
    }


def _mig_attributes(a: dict, profile: MigProfile) -> dict:
    g = gpu_attributes(a)
    keep = ("productName", "brand", "architecture", "cudaComputeCapability", "driverVersion", "cudaDriverVersion",
            "pcieBusID", PCIE_ROOT)
    return {"type": _s("mig"), "parentUUID": g["uuid"], "profile": _s(profile.name), **{k: g[k] for k in keep}}


def _counters(capacity: dict[str, int], start: int, size: int) -> dict:
    out = {counter: _q(capacity[cap]) for cap, counter in _DIMENSIONS}
    out.update({f"memory-slice-{i}": _q(1) for i in range(start, start + size)})
    return out


def gpu_entries(devices: list) -> tuple[list[dict], list[dict]]:
    """Slice devices and counter sets for NVIDIA GPUs (cluster `Device`s)."""
    out: list[dict] = []
    sets: list[dict] = []
    for d in devices:
        a = d.attributes
        minor = a["minor"]
        entry = {"name": f"gpu-{minor}", "attributes": gpu_attributes(a)}
        product = PRODUCTS[a["model"]]
        if not a.get("mig"):
            out.append({**entry, "capacity": {"memory": {"value": d.capacity["memory"]}}})
            continue
        top = {cap: max(p.capacity()[cap] for p in product.mig) for cap, _ in _DIMENSIONS}
        whole = _counters(top, 0, MEMORY_SLICES)
        cs = counter_set_name(minor)
        sets.append({"name": cs, "counters": whole})
        out.append({**entry, "capacity": {cap: _q(v) for cap, v in top.items()},
                    "consumesCounters": [{"counterSet": cs, "counters": whole}]})
        for p in product.mig:
            cap = p.capacity()
            for start in p.starts:
                out.append({
                    "name": mig_device_name(minor, p, start), "attributes": _mig_attributes(a, p),
                    "capacity": {c: _q(v) for c, v in cap.items()},
                    "consumesCounters": [{"counterSet": cs, "counters": _counters(cap, start, p.size)}],
                })
    return out, sets


# --- opaque configuration -------------------------------------------------------------

class ConfigError(Exception):
    """An opaque config the driver refuses; the message is the driver's."""


_STRATEGIES = ("TimeSlicing", "MPS")
_INTERVALS = ("Default", "Short", "Medium", "Long")


def _check_fields(obj: dict, allowed: tuple[str, ...], path: str) -> None:
    for k in obj:
        if k not in allowed:
            raise ConfigError(f'error decoding config parameters: strict decoding error: unknown field "{path}{k}"')


def _mps(cfg: dict | None) -> dict:
    cfg = cfg or {}
    _check_fields(cfg, ("defaultActiveThreadPercentage", "defaultPinnedDeviceMemoryLimit",
                        "defaultPerDevicePinnedMemoryLimit"), "sharing.mpsConfig.")
    pct = cfg.get("defaultActiveThreadPercentage")
    if pct is not None:
        if pct < 0:
            raise ConfigError("error validating GPU config: active thread percentage must not be negative")
        if pct > 100:
            raise ConfigError("error validating GPU config: active thread percentage must not be greater than 100")
    for key in ("defaultPinnedDeviceMemoryLimit",):
        if cfg.get(key) is not None:
            try:
                parse_quantity(str(cfg[key]))
            except QuantityError as e:
                raise ConfigError(f"error decoding config parameters: {key}: {e}") from None
    return cfg


def normalize(params: dict) -> dict:
    """Validate one opaque parameter object (GpuConfig or MigDeviceConfig)
    with the driver's defaults applied; the normalized config, or ConfigError."""
    if not isinstance(params, dict):
        raise ConfigError("error decoding config parameters: not an object")
    api, kind = params.get("apiVersion"), params.get("kind")
    if api != CONFIG_API or kind not in ("GpuConfig", "MigDeviceConfig"):
        raise ConfigError(f'error decoding config parameters: no kind "{kind}" is registered for version '
                          f'"{api}" in scheme')
    _check_fields(params, ("apiVersion", "kind", "sharing"), "")
    sharing = params.get("sharing")
    if sharing is None:
        sharing = {"strategy": "TimeSlicing"} if kind == "GpuConfig" else None
    if sharing is None:
        return {"apiVersion": api, "kind": kind}
    _check_fields(sharing, ("strategy", "timeSlicingConfig", "mpsConfig"), "sharing.")
    strategy = sharing.get("strategy")
    if strategy not in _STRATEGIES:
        msg = "fabric GPU sharing strategy is not enabled" if strategy == "Fabric" else \
            f"unknown GPU sharing strategy: {strategy}"
        raise ConfigError(f"error validating GPU config: {msg}")
    out = {"strategy": strategy}
    if strategy == "TimeSlicing":
        if sharing.get("mpsConfig") is not None:
            raise ConfigError("error applying GPU config: cannot use MpsConfig with the 'TimeSlicing' strategy")
        if kind == "GpuConfig":
            ts = sharing.get("timeSlicingConfig") or {}
            _check_fields(ts, ("interval",), "sharing.timeSlicingConfig.")
            interval = ts.get("interval", "Default")
            if interval not in _INTERVALS:
                raise ConfigError(f"error validating GPU config: unknown time-slice interval: {interval}")
            out["timeSlicingConfig"] = {"interval": interval}
    else:
        if sharing.get("timeSlicingConfig") is not None:
            raise ConfigError("error applying GPU config: cannot use TimeSlicingConfig with the 'MPS' strategy")
        out["mpsConfig"] = _mps(sharing.get("mpsConfig"))
    return {"apiVersion": api, "kind": kind, "sharing": out}


def configs_for(claim: dict, request: str) -> dict | None:
    """The config that applies to a result of `request`: the last matching
    gpu.nvidia.com opaque config (claim configs after class configs)."""
    configs = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("config") or []
    top = request.split("/", 1)[0]
    chosen = None
    for c in configs:
        opaque = c.get("opaque") or {}
        if opaque.get("driver") != NVIDIA_DRIVER:
            continue
        reqs = c.get("requests") or []
        if not reqs or request in reqs or top in reqs:
            chosen = opaque.get("parameters")
    return chosen


# --- what a container sees ------------------------------------------------------------

def smi_list(devices: list[dict]) -> str:
    """`nvidia-smi -L` for the devices a container was given: each parent GPU
    once, numbered as the container sees them, its MIG devices under it."""
    lines: list[str] = []
    seen: dict[str, list[dict]] = {}
    for d in devices:
        seen.setdefault(d["parentUUID"] or d["uuid"], []).append(d)
    for i, (gpu_uuid, devs) in enumerate(seen.items()):
        lines.append(f"GPU {i}: {devs[0]['productName']} (UUID: {gpu_uuid})")
        for j, d in enumerate(x for x in devs if x["type"] == "mig"):
            lines.append(f"  MIG {d['profile']:<11} Device {j:>2}: (UUID: {d['uuid']})")
    return "".join(line + "\n" for line in lines)
