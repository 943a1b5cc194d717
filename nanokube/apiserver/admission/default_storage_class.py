"""DefaultStorageClass: a claim created without a class gets the cluster's
default StorageClass (the newest, when several are marked default)."""

from __future__ import annotations

from ...volume.classes import BETA_CLASS, default_class
from .lookup import list_objects


class DefaultStorageClass:
    mutates = frozenset({("", "persistentvolumeclaims")})

    def __init__(self, rest) -> None:
        self.rest = rest

    def mutate(self, a) -> None:
        if a.res.group or a.res.plural != "persistentvolumeclaims" or a.operation != "CREATE" or a.subresource:
            return
        spec = a.obj.setdefault("spec", {})
        if spec.get("storageClassName") is not None or BETA_CLASS in (a.obj["metadata"].get("annotations") or {}):
            return
        sc = default_class(list_objects(self.rest, "storage.k8s.io", "storageclasses"))
        if sc is not None:
            spec["storageClassName"] = sc["metadata"]["name"]
