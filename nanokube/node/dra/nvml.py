"""Real GPUs: read this machine's NVIDIA GPUs through NVML (`nvidia-ml-py`)
and describe them exactly as a cluster file's simulated GPUs are described,
so the same DRA driver publishes them and CEL selectors written against
simulated GPUs (model, memory, computeCapability, pcieRoot...) match real ones.

NVML is loaded only when discovery is asked for; a machine without the
library, the driver or any GPU gets `NvmlUnavailable` naming the cause,
never an empty or simulated pool in its place.
"""

from __future__ import annotations

import os
import re
from fractions import Fraction

from ...machinery.quantity import BINARY_SI, format_quantity
from ..devices import Device

#: compute capability (major, minor) prefixes to architecture names, the way
#: NVIDIA's own DRA driver derives the architecture; the longest match wins
_ARCHITECTURES = {
    (3,): "Kepler", (5,): "Maxwell", (6,): "Pascal", (7,): "Volta", (7, 5): "Turing",
    (8,): "Ampere", (8, 9): "Ada", (9,): "Hopper", (10,): "Blackwell", (12,): "Blackwell",
}
_HINTS = {
    "NVMLError_LibraryNotFound": "is the NVIDIA driver installed?",
    "NVMLError_DriverNotLoaded": "is the nvidia kernel module loaded?",
    "NVMLError_NoPermission": "can this user open /dev/nvidia*?",
}
_BUS_ID = re.compile(r"([0-9a-fA-F]+):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])")


class NvmlUnavailable(RuntimeError):
    """NVML cannot describe this machine's GPUs; the message says why."""


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def architecture(major: int, minor: int) -> str:
    """The architecture family of a compute capability ("Unknown" past the table)."""
    return _ARCHITECTURES.get((major, minor)) or _ARCHITECTURES.get((major,), "Unknown")


def sysfs_address(bus_id: str) -> str:
    """NVML's "00000000:3B:00.0" as sysfs names the device: "0000:3b:00.0"."""
    m = _BUS_ID.fullmatch(bus_id.strip())
    if not m:
        raise NvmlUnavailable(f"NVML reported an unparsable PCI bus id {bus_id!r}")
    domain, bus, dev, fn = m.groups()
    return f"{int(domain, 16):04x}:{bus.lower()}:{dev.lower()}.{fn}"


def pcie_root(address: str, sysfs: str = "/sys") -> str:
    """The PCIe root complex above a device, as upstream's `pcieRoot` attribute
    names it ("pci0000:00"): the first component of the device's resolved sysfs
    path. Without sysfs, the device's own domain and bus stand in, so it shares
    a root only with functions on the same bus."""
    path = os.path.realpath(os.path.join(sysfs, "bus", "pci", "devices", address))
    for part in path.split(os.sep):
        if re.fullmatch(r"pci[0-9a-f]{4}:[0-9a-f]{2}", part):
            return part
    domain, bus, _ = address.split(":", 2)
    return f"pci{domain}:{bus}"


def numa_node(address: str, sysfs: str = "/sys") -> int:
    """The device's NUMA node from sysfs; -1 (no NUMA) and a missing file are node 0."""
    try:
        with open(os.path.join(sysfs, "bus", "pci", "devices", address, "numa_node"), encoding="ascii") as f:
            return max(int(f.read().strip()), 0)
    except (OSError, ValueError):
        return 0


def _load():
    try:
        import pynvml
    except ImportError:
        raise NvmlUnavailable("nvidia-ml-py is not installed (pip install nvidia-ml-py)") from None
    return pynvml


def _describe(error: Exception) -> str:
    name = type(error).__name__
    hint = _HINTS.get(name)
    return f"NVML: {error}" + (f" ({hint})" if hint else "")


def discover(sysfs: str = "/sys") -> list[Device]:
    """Every GPU NVML sees, as the cluster file's `Device("gpu", ...)` entries.
    A GPU in MIG mode is published as partitionable into as many 1g slices as
    it can hold (`migSlices`), the simulated driver's partition model."""
    nvml = _load()
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as e:
        raise NvmlUnavailable(_describe(e)) from None
    try:
        driver = _text(nvml.nvmlSystemGetDriverVersion())
        cuda = nvml.nvmlSystemGetCudaDriverVersion()
        count = nvml.nvmlDeviceGetCount()
        if count == 0:
            raise NvmlUnavailable("NVML found no GPUs on this machine")
        return [_device(nvml, i, driver, f"{cuda // 1000}.{cuda % 1000 // 10}", sysfs) for i in range(count)]
    except nvml.NVMLError as e:
        raise NvmlUnavailable(_describe(e)) from None
    finally:
        nvml.nvmlShutdown()


def _device(nvml, i: int, driver: str, cuda: str, sysfs: str) -> Device:
    h = nvml.nvmlDeviceGetHandleByIndex(i)
    address = sysfs_address(_text(nvml.nvmlDeviceGetPciInfo(h).busId))
    major, minor = nvml.nvmlDeviceGetCudaComputeCapability(h)
    attrs = {
        "model": "-".join(_text(nvml.nvmlDeviceGetName(h)).split()), "architecture": architecture(major, minor),
        "driverVersion": driver, "cudaVersion": cuda, "computeCapability": f"{major}.{minor}",
        "uuid": _text(nvml.nvmlDeviceGetUUID(h)), "index": i,
        "pcieRoot": pcie_root(address, sysfs), "numaNode": numa_node(address, sysfs),
    }
    if _mig_enabled(nvml, h):
        attrs["migSlices"] = nvml.nvmlDeviceGetMaxMigDeviceCount(h)
    memory = format_quantity(Fraction(nvml.nvmlDeviceGetMemoryInfo(h).total), BINARY_SI)
    return Device("gpu", f"gpu-{i}", attrs, {"memory": memory})


def _mig_enabled(nvml, h) -> bool:
    try:
        current, _pending = nvml.nvmlDeviceGetMigMode(h)
    except nvml.NVMLError_NotSupported:
        return False
    return current == nvml.NVML_DEVICE_MIG_ENABLE
