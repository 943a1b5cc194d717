"""CSI migration as the scheduler's volume limits see it (csi-translation-lib, nodevolumelimits'
isCSIMigrationOn): a PersistentVolume of an in-tree source whose plugin is migrated for good is
its CSI driver's volume, under the handle the translation gives it, and a class of such an in-tree
provisioner provisions for that driver. Of the plugins the library translates, vSphere's and Azure
File's are not counted (the scheduler's switch leaves them out)."""

from __future__ import annotations

from .classes import MIGRATED_PROVISIONERS

#: in-tree source -> its plugin's name, whose CSI driver (MIGRATED_PROVISIONERS) its volumes count for
COUNTED = {"awsElasticBlockStore": "kubernetes.io/aws-ebs", "gcePersistentDisk": "kubernetes.io/gce-pd",
           "azureDisk": "kubernetes.io/azure-disk", "cinder": "kubernetes.io/cinder",
           "portworxVolume": "kubernetes.io/portworx-volume"}
#: the other in-tree plugins the library translates: their volumes count for no driver
UNCOUNTED = set(MIGRATED_PROVISIONERS) - set(COUNTED.values())
_ZONE_LABELS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")


def _gce_handle(pv: dict, pd: str) -> str:
    """The PD's handle: zonal in its one zone label, regional across several (`a__b`), its zone
    UNSPECIFIED without one."""
    labels = (pv.get("metadata") or {}).get("labels") or {}
    zones = next((labels[k] for k in _ZONE_LABELS if labels.get(k)), "").split("__")
    if len(zones) > 1:
        return f"projects/UNSPECIFIED/regions/{zones[0].rsplit('-', 1)[0]}/disks/{pd}"
    return f"projects/UNSPECIFIED/zones/{zones[0] or 'UNSPECIFIED'}/disks/{pd}"


def csi_volume(pv: dict) -> tuple[str, str]:
    """The volume's CSI driver and handle: its own CSI source's, a counted in-tree source's
    translation, or ("", "")."""
    spec = pv.get("spec") or {}
    if csi := spec.get("csi"):
        return csi.get("driver", ""), csi.get("volumeHandle", "")
    source = next((s for s in COUNTED if spec.get(s)), None)
    if source is None:
        return "", ""
    fields = spec[source]
    if source == "awsElasticBlockStore":  # aws://<zone>/vol-1 names vol-1
        volume_id = fields.get("volumeID", "")
        handle = volume_id.rsplit("/", 1)[-1] if volume_id.startswith("aws://") else volume_id
    elif source == "gcePersistentDisk":
        handle = _gce_handle(pv, fields.get("pdName", ""))
    else:
        handle = fields.get("diskURI", "") if source == "azureDisk" else fields.get("volumeID", "")
    return MIGRATED_PROVISIONERS[COUNTED[source]], handle


def provisioner_driver(provisioner: str) -> str:
    """The driver a class's provisioner counts for (getCSIDriverInfoFromSC): a migrated in-tree
    one's CSI driver, '' for an uncounted one, any other as it is named."""
    if provisioner in UNCOUNTED:
        return ""
    return MIGRATED_PROVISIONERS.get(provisioner, provisioner)
