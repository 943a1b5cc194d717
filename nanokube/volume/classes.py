"""StorageClasses: which one is the default, and the class a PV or PVC names."""

from __future__ import annotations

IS_DEFAULT = "storageclass.kubernetes.io/is-default-class"
IS_DEFAULT_BETA = "storageclass.beta.kubernetes.io/is-default-class"
#: the class before spec.storageClassName existed; still honoured when the field is unset
BETA_CLASS = "volume.beta.kubernetes.io/storage-class"
IMMEDIATE, WAIT_FOR_FIRST_CONSUMER = "Immediate", "WaitForFirstConsumer"
#: in-tree provisioners whose volumes CSI migration hands to these drivers (GetCSINameFromInTreeName)
MIGRATED_PROVISIONERS = {
    "kubernetes.io/aws-ebs": "ebs.csi.aws.com", "kubernetes.io/gce-pd": "pd.csi.storage.gke.io",
    "kubernetes.io/azure-disk": "disk.csi.azure.com", "kubernetes.io/azure-file": "file.csi.azure.com",
    "kubernetes.io/cinder": "cinder.csi.openstack.org", "kubernetes.io/vsphere-volume": "csi.vsphere.vmware.com",
    "kubernetes.io/portworx-volume": "pxd.portworx.com",
}


def is_default(sc: dict) -> bool:
    ann = (sc.get("metadata") or {}).get("annotations") or {}
    return ann.get(IS_DEFAULT) == "true" or ann.get(IS_DEFAULT_BETA) == "true"


def default_class(classes: list[dict]) -> dict | None:
    """GetDefaultClass: the newest default class, of those made in the same second the first by
    name; None without one."""
    defaults = sorted((c for c in classes if is_default(c)), key=lambda c: c["metadata"]["name"])
    if not defaults:
        return None
    return max(defaults, key=lambda c: c["metadata"].get("creationTimestamp", ""))


def claim_class(pvc: dict) -> str:
    """GetPersistentVolumeClaimClass: the beta annotation wins, then the field."""
    ann = (pvc.get("metadata") or {}).get("annotations") or {}
    if BETA_CLASS in ann:
        return ann[BETA_CLASS]
    return (pvc.get("spec") or {}).get("storageClassName") or ""


def volume_class(pv: dict) -> str:
    ann = (pv.get("metadata") or {}).get("annotations") or {}
    if BETA_CLASS in ann:
        return ann[BETA_CLASS]
    return (pv.get("spec") or {}).get("storageClassName") or ""


def binding_mode(sc: dict | None) -> str:
    return (sc or {}).get("volumeBindingMode") or IMMEDIATE


def external_provisioner(sc: dict) -> str | None:
    """The provisioner the PV controller asks for a class's volumes (provisionClaimOperationExternal):
    a migrated in-tree one by its CSI driver's name; None for any other `kubernetes.io/` name, a
    plugin kube-controller-manager no longer has (kubernetes.io/no-provisioner among them)."""
    name = MIGRATED_PROVISIONERS.get(sc.get("provisioner") or "", sc.get("provisioner") or "")
    return None if name.startswith("kubernetes.io/") else name
