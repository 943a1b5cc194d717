"""The NVIDIA personality of the simulated GPU driver: a node pool with
`gpus: {driver: nvidia, ...}` publishes its GPUs as NVIDIA's DRA driver
(k8s-dra-driver-gpu) does, so its quickstart manifests run unchanged.

- Driver `gpu.nvidia.com`, devices `gpu-<minor>` with its attribute names
  and types (productName, brand, architecture, cudaComputeCapability,
  driverVersion, cudaDriverVersion as versions, uuid, index, minor,
  pcieBusID, resource.kubernetes.io/pcieRoot) and `memory` capacity.
- MIG devices created up front (`mig: [profiles]`, as mig-parted would)
  are published as they exist, each with its UUID; the GPU is not offered
  whole.
- A GPU with `mig: true` is published as the driver's DynamicMIG mode does
  (KEP-4815 partitionable devices): one counter set per GPU
  (`gpu-<minor>-counter-set`) with a counter per MIG capacity dimension and
  one per memory slice; the full GPU consumes all of it and each MIG
  profile at each placement (`gpu-<minor>-mig-<profile>-<profileID>-<start>`)
  its own share and slices, so the scheduler packs MIG devices exactly as
  the hardware allows.
- Prepare decodes, validates and applies the opaque `GpuConfig` /
  `MigDeviceConfig` parameters (resource.nvidia.com/v1beta1) with the
  driver's defaults, precedence and messages.

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
#: the chart's gpu.nvidia.com class also serves pods asking for the extended resource (DRAExtendedResource)
EXTENDED_RESOURCES = {"gpu.nvidia.com": "nvidia.com/gpu"}
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
    #: the name NVML gives it (nvidia-smi's, the productName attribute), where it is not "NVIDIA <model>"
    nvml_name: str = ""
    #: its board's power limit and what it draws idle, in watts (nvidia-smi's Pwr:Usage/Cap)
    power_cap: int = 700
    idle_power: int = 70
    #: the NVLinks an SXM board bonds to each peer through the NVSwitches (none: a PCIe card)
    nvlinks: int = 0

    @property
    def product_name(self) -> str:
        return self.nvml_name or f"NVIDIA {self.model}"


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
    Product("A100-SXM4-40GB", "40Gi", "Ampere", "8.0", A100_40GB_MIG, power_cap=400, idle_power=52, nvlinks=12),
    Product("A100-PCIE-40GB", "40Gi", "Ampere", "8.0", A100_40GB_MIG, power_cap=250, idle_power=35),
    Product("H100-SXM5-80GB", "80Gi", "Hopper", "9.0", H100_80GB_MIG, "NVIDIA H100 80GB HBM3", nvlinks=18),
    Product("H100-80GB-HBM3", "80Gi", "Hopper", "9.0", H100_80GB_MIG, "NVIDIA H100 80GB HBM3", nvlinks=18),
    Product("L4", "23034Mi", "Ada Lovelace", "8.9", power_cap=72, idle_power=16),
    Product("A10", "23028Mi", "Ampere", "8.6", power_cap=150, idle_power=21),
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
    """A MIG device's UUID, derived from its parent and placement (a real one is new each time it is created)."""
    return f"MIG-{uuid.uuid5(uuid.UUID(parent_uuid[4:]), device)}"


def mig_device_names(a: dict) -> set[str]:
    """The MIG devices a GPU (cluster attributes) publishes: those created up
    front, or in DynamicMIG mode every placement of every profile."""
    product = PRODUCTS[a["model"]]
    if a.get("migDevices"):
        by_name = {p.name: p for p in product.mig}
        return {mig_device_name(a["minor"], by_name[n], start) for n, start in a["migDevices"]}
    if a.get("mig"):
        return {mig_device_name(a["minor"], p, start) for p in product.mig for start in p.starts}
    return set()


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


def place(product: Product, names: list[str]) -> list[tuple[str, int]]:
    """MIG devices created in this order on one GPU, each at the lowest start
    its profile allows whose memory slices are free, within the GPU's SMs;
    ValueError naming what does not fit."""
    by_name = {p.name: p for p in product.mig}
    free = [True] * MEMORY_SLICES
    sms = max(p.sm for p in product.mig)
    out = []
    for name in names:
        p = by_name.get(name)
        if p is None:
            raise ValueError(f"unknown MIG profile {name!r} for {product.model}; known: {', '.join(by_name)}")
        start = next((s for s in p.starts if all(free[s:s + p.size])), None)
        if start is None or p.sm > sms:
            raise ValueError(f"{', '.join(names)}: {name} does not fit one {product.model} after the devices before it")
        free[start:start + p.size] = [False] * p.size
        sms -= p.sm
        out.append((name, start))
    return out


def _static_mig(a: dict, product: Product) -> list[dict]:
    """MIG devices that exist already (static MIG): each with its UUID and the
    memory slices it holds as capacity, no counters; the GPU is not offered whole."""
    by_name = {p.name: p for p in product.mig}
    out = []
    for name, start in a["migDevices"]:
        p = by_name[name]
        device = mig_device_name(a["minor"], p, start)
        capacity = {c: _q(v) for c, v in p.capacity().items()}
        capacity.update({f"memorySlice{i}": _q(1) for i in range(start, start + p.size)})
        out.append({"name": device, "attributes": {**_mig_attributes(a, p), "uuid": _s(mig_uuid(a["uuid"], device))},
                    "capacity": capacity})
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
        if a.get("migDevices"):
            out.extend(_static_mig(a, product))
            continue
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
#
# The plugin's prepare, in its order: decode every gpu.nvidia.com opaque
# config of the allocation (strictly), pick each result's config (the last
# one naming its request, else the last one without requests whose kind
# fits the device: GpuConfig for GPUs, MigDeviceConfig for MIG devices,
# defaults first), then normalize, validate and apply each config.

class PrepareError(Exception):
    """Why the kubelet plugin refuses to prepare a claim, in its words."""


_INTERVALS = ("Default", "Short", "Medium", "Long")
_KIND_FOR = {"gpu": "GpuConfig", "mig": "MigDeviceConfig"}
_SHARING_FIELDS = {"GpuConfig": ("strategy", "timeSlicingConfig", "mpsConfig"),
                   "MigDeviceConfig": ("strategy", "mpsConfig")}
_MPS_FIELDS = ("defaultActiveThreadPercentage", "defaultPinnedDeviceMemoryLimit", "defaultPerDevicePinnedMemoryLimit")


def _decode_error(msg: str) -> PrepareError:
    return PrepareError(f"error getting opaque device configs: error decoding config parameters: {msg}")


def _strict(obj, allowed: tuple[str, ...], path: str) -> dict:
    if not isinstance(obj, dict):
        raise _decode_error(f"json: cannot unmarshal {type(obj).__name__} into Go struct field {path or 'GpuConfig'}")
    for k in obj:
        if k not in allowed:
            raise _decode_error(f'strict decoding error: unknown field "{path}{k}"')
    return obj


def _quantity(v, path: str) -> Fraction:
    try:
        return parse_quantity(str(v))
    except QuantityError as e:
        raise _decode_error(f"{path}: {e}") from None


def decode(params) -> dict:
    """Decode one opaque parameter object as the driver's strict decoder does."""
    if not isinstance(params, dict):
        raise _decode_error("Object 'Kind' is missing in parameters")
    api, kind = params.get("apiVersion"), params.get("kind")
    if not kind:
        raise _decode_error(f"Object 'Kind' is missing in '{params}'")
    if api != CONFIG_API or kind not in _SHARING_FIELDS:
        raise _decode_error(f'no kind "{kind}" is registered for version "{api}"')
    _strict(params, ("apiVersion", "kind", "sharing"), "")
    sharing = params.get("sharing")
    if sharing is not None:
        _strict(sharing, _SHARING_FIELDS[kind], "sharing.")
        if sharing.get("timeSlicingConfig") is not None:
            _strict(sharing["timeSlicingConfig"], ("interval",), "sharing.timeSlicingConfig.")
        mps = sharing.get("mpsConfig")
        if mps is not None:
            _strict(mps, _MPS_FIELDS, "sharing.mpsConfig.")
            for k in ("defaultPinnedDeviceMemoryLimit",):
                if mps.get(k) is not None:
                    _quantity(mps[k], f"sharing.mpsConfig.{k}")
            per = mps.get("defaultPerDevicePinnedMemoryLimit") or {}
            for k, v in _strict(per, tuple(per), "sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit.").items():
                _quantity(v, f"sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit.{k}")
    return params


def normalize(params: dict) -> dict:
    """Decode, apply the driver's defaults (time-slicing with the Default
    interval; an empty MPS config) and validate one config."""
    params = decode(params)
    kind = params["kind"]
    sharing = dict(params.get("sharing") or {"strategy": "TimeSlicing"})
    strategy = sharing.get("strategy")
    if strategy not in ("TimeSlicing", "MPS"):
        msg = "fabric GPU sharing strategy is not enabled" if strategy == "Fabric" else \
            f"unknown GPU sharing strategy: {strategy or ''}"
        raise PrepareError(f"error validating GPU config: {msg}")
    if strategy == "TimeSlicing" and kind == "GpuConfig":
        sharing.setdefault("timeSlicingConfig", None)
        if sharing["timeSlicingConfig"] is None:
            sharing["timeSlicingConfig"] = {"interval": "Default"}
        interval = sharing["timeSlicingConfig"].get("interval")
        if interval not in _INTERVALS:
            raise PrepareError(f"error validating GPU config: unknown time-slice interval: {interval or ''}")
    if strategy == "MPS":
        if sharing.get("mpsConfig") is None:
            sharing["mpsConfig"] = {}
        pct = sharing["mpsConfig"].get("defaultActiveThreadPercentage")
        if pct is not None and pct < 0:
            raise PrepareError("error validating GPU config: active thread percentage must not be negative")
        if pct is not None and pct > 100:
            raise PrepareError("error validating GPU config: active thread percentage must not be greater than 100")
    return {"apiVersion": CONFIG_API, "kind": kind, "sharing": sharing}


def _apply(config: dict, uuids: list[str]) -> None:
    """What applying a config checks that validation does not: the other
    strategy's settings, and MPS memory limits (at least 1Mi, per-device
    keys naming one of the config's devices by UUID or index)."""
    sharing = config["sharing"]
    strategy = sharing["strategy"]
    if strategy == "TimeSlicing" and sharing.get("mpsConfig") is not None:
        raise PrepareError("error applying GPU config: cannot use MpsConfig with the 'TimeSlicing' strategy")
    if strategy != "MPS":
        return
    if sharing.get("timeSlicingConfig") is not None:
        raise PrepareError("error applying GPU config: cannot use TimeSlicingConfig with the 'MPS' strategy")
    mps = sharing["mpsConfig"]
    default = mps.get("defaultPinnedDeviceMemoryLimit")
    if default is not None and parse_quantity(str(default)) < 2**20:
        raise PrepareError(f"error applying GPU config: invalid limit: default value set too low: {default}")
    for key, v in (mps.get("defaultPerDevicePinnedMemoryLimit") or {}).items():
        if key not in uuids:
            if not key.isdigit() and not (key.startswith("-") and key[1:].isdigit()):
                raise PrepareError(f"error applying GPU config: invalid device: unable to parse key as an integer: {key}")
            if not 0 <= int(key) < len(uuids):
                raise PrepareError(f"error applying GPU config: invalid device: invalid device index: {int(key)}")
        if parse_quantity(str(v)) < 2**20:
            raise PrepareError(f"error applying GPU config: invalid limit: value set too low: {key}: {v}")


def prepare_configs(claim: dict, results: list[dict]) -> list[dict]:
    """The normalized config of each NVIDIA result (dicts with `request`,
    `device`, `type` and `uuid`), in order; PrepareError as the driver fails."""
    entries = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("config") or []
    configs: list[tuple[list[str], dict]] = [([], {"apiVersion": CONFIG_API, "kind": "GpuConfig"}),
                                             ([], {"apiVersion": CONFIG_API, "kind": "MigDeviceConfig"})]
    for c in entries:
        opaque = c.get("opaque")
        if opaque is None:
            raise PrepareError("error getting opaque device configs: only opaque parameters are supported by this driver")
        if opaque.get("driver") == NVIDIA_DRIVER:
            configs.append((list(c.get("requests") or []), decode(opaque.get("parameters"))))
    chosen: list[int] = []
    for r in results:
        want = _KIND_FOR[r["type"]]
        for i in range(len(configs) - 1, -1, -1):
            reqs, params = configs[i]
            if r["request"] in reqs:
                if params["kind"] != want:
                    raise PrepareError(f'cannot apply {params["kind"]} to device "{r["device"]}" of type '
                                      f'"{r["type"]}" (request: {r["request"]})')
                break
            if not reqs and params["kind"] == want:
                break
        chosen.append(i)
    normalized: dict[int, dict] = {}
    for i in dict.fromkeys(chosen):
        normalized[i] = normalize(configs[i][1])
        _apply(normalized[i], [r["uuid"] for r, j in zip(results, chosen) if j == i])
    return [normalized[i] for i in chosen]

