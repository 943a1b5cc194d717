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
    keys = tuple(md)
    order = _META_ORDERS.get(keys)
    if order is None:
        order = _meta_order(keys)
    if order == keys:  # in order already, resourceVersion included: copied as it is
        meta = md.copy()
    else:
        meta = dict.fromkeys(order)
        meta.update(md)
    meta["resourceVersion"] = resource_version
    top = tuple(obj)
    ordered = _TOP_ORDERED.get(top)
    if ordered is None:
        if len(_TOP_ORDERED) >= _ORDERS_MAX:
            _TOP_ORDERED.clear()
        ordered = _TOP_ORDERED[top] = _ordered(obj, list(top))
    if ordered:
        obj["metadata"] = meta
        return obj
    out = {k: obj[k] for k in ("kind", "apiVersion") if k in obj}
    out["metadata"] = meta
    out.update((k, v) for k, v in obj.items() if k not in _HEAD and k != "status")
    if "status" in obj:
        out["status"] = obj["status"]
    return out


def _meta_order(keys: tuple[str, ...]) -> tuple[str, ...]:
    """Metadata fields `keys` in upstream's order, resourceVersion among them: the known fields in
    ObjectMeta's order, then any others as they came. Remembered by the fields and their order
    (every write and decode reorders its metadata; an object's fields rarely change)."""
    present = set(keys)
    order = (*(k for k in _BEFORE_RV if k in present), "resourceVersion", *(k for k in _AFTER_RV if k in present),
             *(k for k in keys if k not in _KNOWN))
    if len(_META_ORDERS) >= _ORDERS_MAX:
        _META_ORDERS.clear()
    _META_ORDERS[keys] = order
    return order


#: `_meta_order` by the metadata's fields in their order, and `_ordered` by the top level's
_META_ORDERS: dict[tuple[str, ...], tuple[str, ...]] = {}
_TOP_ORDERED: dict[tuple[str, ...], bool] = {}
_ORDERS_MAX = 1024


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


def go_sorted(v):
    """`v` as Go's encoder writes an unstructured value (a custom resource is a map[string]interface{}
    all the way down): every map's keys sorted. `v` itself where it is so already, else a copy of
    what is not (the maps and lists that hold a map out of order), so values shared with cached
    objects are never changed."""
    if type(v) is dict:
        prev, ordered, copied = "", True, None
        for k, x in v.items():
            if k < prev:
                ordered = False
            prev = k
            if type(x) is dict or type(x) is list:
                y = go_sorted(x)
                if y is not x:
                    if copied is None:
                        copied = dict(v)
                    copied[k] = y
        if ordered:
            return v if copied is None else copied
        src = v if copied is None else copied
        return {k: src[k] for k in sorted(src)}
    if type(v) is list:
        out = None
        for i, x in enumerate(v):
            if type(x) is dict or type(x) is list:
                y = go_sorted(x)
                if y is not x:
                    if out is None:
                        out = list(v)
                    out[i] = y
        return v if out is None else out
    return v


def in_unstructured_order(obj: dict, resource_version: str) -> dict:
    """A custom resource as stored and served (`go_sorted`), with its resourceVersion in its place
    among metadata's sorted keys."""
    md = obj.get("metadata")
    if type(md) is dict:
        obj = {**obj, "metadata": {**md, "resourceVersion": resource_version}}
    return go_sorted(obj)
