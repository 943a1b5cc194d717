"""StorageObjectInUseProtection: every new claim and volume carries the
protection finalizer, which the pvc-protection and pv-protection controllers
remove only once no pod uses the claim, or no claim is bound to the volume."""

from __future__ import annotations

from ...volume.binding import PV_PROTECTION, PVC_PROTECTION

_FINALIZERS = {"persistentvolumeclaims": PVC_PROTECTION, "persistentvolumes": PV_PROTECTION}


class StorageObjectInUseProtection:
    mutates = frozenset({("", "persistentvolumeclaims"), ("", "persistentvolumes")})

    def mutate(self, a) -> None:
        finalizer = _FINALIZERS.get(a.res.plural) if not a.res.group else None
        if finalizer is None or a.operation != "CREATE" or a.subresource:
            return
        finalizers = a.obj["metadata"].setdefault("finalizers", [])
        if finalizer not in finalizers:
            finalizers.append(finalizer)
