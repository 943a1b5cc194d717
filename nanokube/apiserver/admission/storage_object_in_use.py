"""StorageObjectInUseProtection: every new claim, volume and VolumeAttributesClass
carries the protection finalizer, which the pvc-protection, pv-protection and
vac-protection controllers remove only once no pod uses the claim, no claim is
bound to the volume, or no claim or volume names the class."""

from __future__ import annotations

from ...volume.binding import PV_PROTECTION, PVC_PROTECTION, VAC_PROTECTION

_FINALIZERS = {("", "persistentvolumeclaims"): PVC_PROTECTION, ("", "persistentvolumes"): PV_PROTECTION,
               ("storage.k8s.io", "volumeattributesclasses"): VAC_PROTECTION}


class StorageObjectInUseProtection:
    mutates = frozenset(_FINALIZERS)

    def mutate(self, a) -> None:
        finalizer = _FINALIZERS.get((a.res.group, a.res.plural))
        if finalizer is None or a.operation != "CREATE" or a.subresource:
            return
        finalizers = a.obj["metadata"].setdefault("finalizers", [])
        if finalizer not in finalizers:
            finalizers.append(finalizer)
