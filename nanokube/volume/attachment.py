"""How a CSI volume's attachment to a node is named, shared by the attach/detach controller, the
kubelet and the drivers' attachers: the VolumeAttachment `csi-<sha256(handle, driver, node)>`
(csi_attacher's getAttachmentName), the volume's unique name in a Node's
status.volumesAttached and volumesInUse (`kubernetes.io/csi/<driver>^<handle>`), whether a
driver needs attaching at all (its CSIDriver's attachRequired; a driver without one does), and
the finalizer an external-attacher puts on what it attached."""

from __future__ import annotations

import hashlib
import re

def attachment_name(handle: str, driver: str, node: str) -> str:
    return "csi-" + hashlib.sha256(f"{handle}{driver}{node}".encode()).hexdigest()


def unique_name(driver: str, handle: str) -> str:
    return f"kubernetes.io/csi/{driver}^{handle}"


def attach_required(csidriver: dict | None) -> bool:
    """csiPlugin's skipAttach, negated: attach unless the driver's CSIDriver says attachRequired false."""
    return csidriver is None or (csidriver.get("spec") or {}).get("attachRequired") is not False


def attacher_finalizer(driver: str) -> str:
    """`external-attacher/<driver>`, the driver name's other characters than letters, digits and
    `-` made `-`."""
    return "external-attacher/" + re.sub(r"[^a-zA-Z0-9-]", "-", driver)


def uses_claims(pod: dict) -> bool:
    """Whether any volume of the pod is a claim's: the one test that lets every other pod by (the
    attach/detach controller's pod events, the scheduler's volume plugins), a loop, not any()
    over a generator, at half the instructions."""
    for v in (pod.get("spec") or {}).get("volumes") or ():
        if "persistentVolumeClaim" in v or "ephemeral" in v:
            return True
    return False
