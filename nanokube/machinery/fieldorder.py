"""Objects in the field order kube-apiserver encodes them (Go struct order):
`kind`, `apiVersion`, `metadata` in ObjectMeta's order, the object's own
fields, `status` last. Clients that compare response text (and people
reading it) see what upstream sends, whatever order a manifest used."""

from __future__ import annotations

OBJECT_META = ("name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
               "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations",
               "ownerReferences", "finalizers", "managedFields")
_HEAD = ("kind", "apiVersion", "metadata")


def in_upstream_order(obj: dict, resource_version: str) -> dict:
    """A stored object as served: upstream's order, with its resourceVersion."""
    md = obj.get("metadata") or {}
    meta = {}
    for k in OBJECT_META:
        if k == "resourceVersion":
            meta[k] = resource_version
        elif k in md:
            meta[k] = md[k]
    if len(meta) < len(md) + ("resourceVersion" not in md):
        meta.update((k, v) for k, v in md.items() if k not in meta)
    out = {k: obj[k] for k in ("kind", "apiVersion") if k in obj}
    out["metadata"] = meta
    out.update((k, v) for k, v in obj.items() if k not in _HEAD and k != "status")
    if "status" in obj:
        out["status"] = obj["status"]
    return out
