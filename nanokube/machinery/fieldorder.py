"""Objects in the field order kube-apiserver encodes them (Go struct order):
`kind`, `apiVersion`, `metadata` in ObjectMeta's order, the object's own
fields, `status` last. Clients that compare response text (and people
reading it) see what upstream sends, whatever order a manifest used."""

from __future__ import annotations

OBJECT_META = ("name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
               "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations",
               "ownerReferences", "finalizers", "managedFields")
_BEFORE_RV = OBJECT_META[:OBJECT_META.index("resourceVersion")]
_AFTER_RV = OBJECT_META[OBJECT_META.index("resourceVersion") + 1:]
_KNOWN = frozenset(OBJECT_META)
_HEAD = ("kind", "apiVersion", "metadata")


def in_upstream_order(obj: dict, resource_version: str) -> dict:
    """A freshly decoded stored object as served: upstream's order, with its
    resourceVersion (rearranged in place where its top level already is)."""
    md = obj.get("metadata") or {}
    meta = {k: md[k] for k in _BEFORE_RV if k in md}
    meta["resourceVersion"] = resource_version
    meta.update({k: md[k] for k in _AFTER_RV if k in md})
    if len(meta) < len(md) + ("resourceVersion" not in md):
        meta.update((k, v) for k, v in md.items() if k not in _KNOWN)
    keys = list(obj)
    if _ordered(obj, keys):
        obj["metadata"] = meta
        return obj
    out = {k: obj[k] for k in ("kind", "apiVersion") if k in obj}
    out["metadata"] = meta
    out.update((k, v) for k, v in obj.items() if k not in _HEAD and k != "status")
    if "status" in obj:
        out["status"] = obj["status"]
    return out


def _ordered(obj: dict, keys: list[str]) -> bool:
    """Whether the top level is in upstream's order already: the kind and apiVersion it has, then
    metadata, and status last (core Events are stored without kind and apiVersion)."""
    heads = ("kind" in obj) + ("apiVersion" in obj)
    if heads == 2:
        first = keys[:3] == ["kind", "apiVersion", "metadata"]
    elif heads:
        first = keys[1:2] == ["metadata"] and keys[0] in ("kind", "apiVersion")
    else:
        first = keys[:1] == ["metadata"]
    return first and ("status" not in obj or keys[-1] == "status")
