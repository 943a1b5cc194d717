"""PersistentVolumeClaimResize: a claim may grow only once bound, and only
when its StorageClass says `allowVolumeExpansion: true` (upstream's messages)."""

from __future__ import annotations

from ...machinery import errors
from ...machinery.quantity import QuantityError, parse_quantity
from ...volume.classes import claim_class
from .lookup import get, object_name


def _size(pvc: dict):
    value = ((((pvc.get("spec") or {}).get("resources") or {}).get("requests")) or {}).get("storage")
    try:
        return parse_quantity(str(value)) if value is not None else None
    except QuantityError:
        return None


class PersistentVolumeClaimResize:
    validates = frozenset({("", "persistentvolumeclaims")})

    def __init__(self, rest) -> None:
        self.rest = rest

    def validate(self, a) -> None:
        if a.res.group or a.res.plural != "persistentvolumeclaims" or a.operation != "UPDATE" or a.subresource:
            return
        old_size, new_size = _size(a.old), _size(a.obj)
        if old_size is None or new_size is None or new_size <= old_size:
            return
        if (a.old.get("status") or {}).get("phase") != "Bound":
            raise errors.forbidden("", a.res.plural, object_name(a), "Only bound persistent volume claims can be expanded")
        cls, old_cls = claim_class(a.obj), claim_class(a.old)
        sc = get(self.rest, "storage.k8s.io", "storageclasses", None, cls) if cls and cls == old_cls else None
        if not (sc or {}).get("allowVolumeExpansion"):
            raise errors.forbidden("", a.res.plural, object_name(a), "only dynamically provisioned pvc can be resized "
                                   "and the storageclass that provisions the pvc must support resize")
