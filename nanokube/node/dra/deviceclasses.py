"""The DeviceClasses users select the simulated devices by: `gpu.nanokube.io`
(whole GPUs and MIG-like partitions) and `rdma.nanokube.io` (RDMA NICs);
with NVIDIA-personality pools also those NVIDIA's Helm chart installs
(`gpu.nvidia.com`, `mig.nvidia.com`, `vfio.gpu.nvidia.com`).

One class serves `nvidia.com/gpu` (DRAExtendedResource), so that the limit most GPU
users write first schedules: `gpu.nvidia.com` where the NVIDIA personality runs, else
`gpu.nanokube.io` when every GPU it selects is an NVIDIA model."""

from __future__ import annotations

from ...machinery.errors import APIError
from .driver import GPU_DRIVER, NIC_DRIVER
from .nvidia import DEVICE_CLASSES as NVIDIA_CLASSES
from .nvidia import EXTENDED_RESOURCES, PRODUCTS

CLASSES = {
    "gpu.nanokube.io": f"device.driver == '{GPU_DRIVER}'",
    "rdma.nanokube.io": f"device.driver == '{NIC_DRIVER}' && device.attributes['{NIC_DRIVER}'].rdma == true",
}


def nvidia_models(models) -> bool:
    """Whether GPU models are all NVIDIA's (one of the personality's products, or named
    `NVIDIA-...` as the example clusters and NVML name them); none is not."""
    models = list(models)
    return bool(models) and all(m in PRODUCTS or m.upper().startswith("NVIDIA") for m in models)


def device_class(name: str, expression: str, extended: dict[str, str] = EXTENDED_RESOURCES) -> dict:
    spec: dict = {"selectors": [{"cel": {"expression": expression}}]}
    if name in extended:
        spec["extendedResourceName"] = extended[name]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}


async def ensure_device_classes(client, nvidia: bool = False, nvidia_gpus: bool = False) -> None:
    """Create the classes that are missing; leave ones an admin edited alone. `nvidia`: a pool
    runs the NVIDIA personality; `nvidia_gpus`: the nanokube driver's GPUs are all NVIDIA models."""
    classes = client.resource("resource.k8s.io", "v1", "deviceclasses")
    extended = dict(EXTENDED_RESOURCES)
    if nvidia_gpus and not nvidia:
        extended["gpu.nanokube.io"] = EXTENDED_RESOURCES["gpu.nvidia.com"]
    for name, expression in {**CLASSES, **(NVIDIA_CLASSES if nvidia else {})}.items():
        try:
            await classes.create(device_class(name, expression, extended))
        except APIError as e:
            if e.code != 409:
                raise
