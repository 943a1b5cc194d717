"""Defaulting and pruning of custom objects by their structural schema.

Upstream (apiextensions-apiserver `schema/defaulting`, `schema/pruning`) runs both
when a request body is decoded and again when an object is read from storage, so
a default added to a CRD shows up on objects written before it, and a field
removed from the schema disappears from what clients read.

Pruning treats the root and every `x-kubernetes-embedded-resource` object as a
resource: `apiVersion`, `kind` and `metadata` are kept there. Under
`x-kubernetes-preserve-unknown-fields: true` nothing is dropped, but declared
properties below are still walked. Unknown-field paths read `spec.a[0].b`, the
form the strict decoder reports (`unknown field "spec.foo"`).
"""

from __future__ import annotations

import copy
from typing import Any

_RESOURCE_FIELDS = ("apiVersion", "kind", "metadata")


def has_defaults(node: dict[str, Any] | None) -> bool:
    """Does any node of the schema declare a default? (read paths skip the walk when not)"""
    if not isinstance(node, dict):
        return False
    if "default" in node:
        return True
    return (any(has_defaults(p) for p in (node.get("properties") or {}).values())
            or has_defaults(node.get("items")) or has_defaults(node.get("additionalProperties")))


def default(obj: Any, node: dict[str, Any] | None, drop_nulls: bool = True) -> Any:
    """Fill absent properties that have a default (deep copies), then recurse into
    every present key, so defaults nested in a freshly defaulted object apply too.
    A null in a non-nullable field with a default becomes the default; other
    non-nullable nulls are dropped (`drop_nulls`, as a decoder does before it
    defaults: prune_nulls). Mutates and returns `obj`."""
    if not isinstance(node, dict):
        return obj
    if isinstance(obj, dict):
        props = node.get("properties") or {}
        for name, sub in props.items():
            if not isinstance(sub, dict):
                continue
            if "default" in sub and (name not in obj or (obj[name] is None and not sub.get("nullable"))):
                obj[name] = copy.deepcopy(sub["default"])
        ap = node.get("additionalProperties")
        for k in list(obj):
            v = obj[k]
            sub = props.get(k) if k in props else (ap if isinstance(ap, dict) else None)
            if v is None:
                if isinstance(sub, dict) and not sub.get("nullable"):
                    if "default" in sub:
                        obj[k] = copy.deepcopy(sub["default"])
                    elif sub and drop_nulls:
                        del obj[k]
                continue
            default(v, sub, drop_nulls)
    elif isinstance(obj, list):
        items = node.get("items")
        if isinstance(items, dict):
            for i, v in enumerate(obj):
                if v is None and not items.get("nullable") and "default" in items:
                    obj[i] = copy.deepcopy(items["default"])
                else:
                    default(v, items, drop_nulls)
    return obj


def prune_nulls(obj: Any, node: dict[str, Any] | None) -> None:
    """PruneNonNullableNullsWithoutDefaults, which a custom resource's decoder runs after pruning:
    a null in a declared, non-nullable field without a default is dropped, in place (list items
    are kept)."""
    if not isinstance(node, dict):
        return
    if isinstance(obj, dict):
        props = node.get("properties") or {}
        ap = node.get("additionalProperties")
        for k in list(obj):
            sub = props.get(k) if k in props else (ap if isinstance(ap, dict) else None)
            if not isinstance(sub, dict):
                continue
            if obj[k] is None:
                if sub and not sub.get("nullable") and "default" not in sub:
                    del obj[k]
            else:
                prune_nulls(obj[k], sub)
    elif isinstance(obj, list):
        for v in obj:
            prune_nulls(v, node.get("items"))


def lacks_defaults(obj: Any, node: dict[str, Any] | None) -> bool:
    """Would `default` change `obj`? (a read copies an object only when it would: objects
    written since the schema got its defaults already carry them)"""
    if not isinstance(node, dict):
        return False
    if isinstance(obj, dict):
        props = node.get("properties") or {}
        for name, sub in props.items():
            if isinstance(sub, dict) and "default" in sub and (
                    name not in obj or (obj[name] is None and not sub.get("nullable"))):
                return True
        ap = node.get("additionalProperties")
        for k, v in obj.items():
            sub = props.get(k) if k in props else (ap if isinstance(ap, dict) else None)
            if v is None:
                if isinstance(sub, dict) and sub and not sub.get("nullable"):
                    return True
            elif lacks_defaults(v, sub):
                return True
    elif isinstance(obj, list):
        items = node.get("items")
        if isinstance(items, dict):
            return any((v is None and not items.get("nullable") and "default" in items) or lacks_defaults(v, items)
                       for v in obj)
    return False


def prune(obj: Any, node: dict[str, Any] | None, root: bool = True, drop: bool = True) -> list[str]:
    """Drop fields the schema does not declare, in place; returns their paths (`drop=False`:
    only finds them, for a read that copies an object only when pruning changes it)."""
    out: list[str] = []
    _prune(obj, node, "", root, out, drop)
    return out


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def prune_embedded_metadata(obj: Any, node: dict[str, Any] | None, known: frozenset[str], path: str = "") -> list[str]:
    """objectmeta.Coerce: the metadata of each `x-kubernetes-embedded-resource` object below the
    root keeps only ObjectMeta's fields (`known`), as its round trip through an ObjectMeta leaves
    them, in place; returns the dropped fields' paths (`spec.template.metadata.foo`), which
    upstream reports after the schema's unknown fields. Walks the declared schema only."""
    out: list[str] = []
    if not isinstance(node, dict):
        return out
    if isinstance(obj, dict):
        md = obj.get("metadata")
        if path and node.get("x-kubernetes-embedded-resource") is True and isinstance(md, dict):
            for k in [k for k in md if k not in known]:
                out.append(f"{path}.metadata.{k}")
                del md[k]
        props, ap = node.get("properties") or {}, node.get("additionalProperties")
        for k, v in obj.items():
            if k in props:
                out += prune_embedded_metadata(v, props[k], known, _join(path, k))
            elif isinstance(ap, dict):
                out += prune_embedded_metadata(v, ap, known, f"{path}[{k}]")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += prune_embedded_metadata(v, node.get("items"), known, f"{path}[{i}]")
    return out


def _prune(obj: Any, node: dict[str, Any] | None, path: str, resource: bool, out: list[str], drop: bool) -> None:
    if not isinstance(node, dict):
        return
    if isinstance(obj, dict):
        props = node.get("properties") or {}
        ap = node.get("additionalProperties")
        preserve = node.get("x-kubernetes-preserve-unknown-fields") is True
        embedded = resource or node.get("x-kubernetes-embedded-resource") is True
        for k in list(obj):
            if embedded and k in _RESOURCE_FIELDS:
                continue  # ObjectMeta's own rules apply to metadata, not the schema's
            if k in props:
                _prune(obj[k], props[k], _join(path, k), False, out, drop)
            elif isinstance(ap, dict):
                _prune(obj[k], ap, _join(path, k), False, out, drop)
            elif ap is True or preserve:
                continue
            else:
                out.append(_join(path, k))
                if drop:
                    del obj[k]
    elif isinstance(obj, list):
        items = node.get("items")
        if isinstance(items, dict):
            for i, v in enumerate(obj):
                _prune(v, items, f"{path}[{i}]", False, out, drop)
