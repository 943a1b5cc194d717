"""The DeviceClasses users select the simulated devices by: `gpu.nanokube.io`
(whole GPUs and MIG-like partitions) and `rdma.nanokube.io` (RDMA NICs);
with NVIDIA-personality pools also those NVIDIA's Helm chart installs
(`gpu.nvidia.com`, `mig.nvidia.com`, `vfio.gpu.nvidia.com`)."""

from __future__ import annotations

from ...machinery.errors import APIError
from .driver import GPU_DRIVER, NIC_DRIVER
from .nvidia import DEVICE_CLASSES as NVIDIA_CLASSES
from .nvidia import EXTENDED_RESOURCES

CLASSES = {
    "gpu.nanokube.io": f"device.driver == '{GPU_DRIVER}'",
    "rdma.nanokube.io": f"device.driver == '{NIC_DRIVER}' && device.attributes['{NIC_DRIVER}'].rdma == true",
}


def device_class(name: str, expression: str) -> dict:
    spec: dict = {"selectors": [{"cel": {"expression": expression}}]}
    if name in EXTENDED_RESOURCES:
        spec["extendedResourceName"] = EXTENDED_RESOURCES[name]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}


async def ensure_device_classes(client, nvidia: bool = False) -> None:
    """Create the classes that are missing; leave ones an admin edited alone."""
    classes = client.resource("resource.k8s.io", "v1", "deviceclasses")
    for name, expression in {**CLASSES, **(NVIDIA_CLASSES if nvidia else {})}.items():
        try:
            await classes.create(device_class(name, expression))
        except APIError as e:
            if e.code != 409:
                raise
