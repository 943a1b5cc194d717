"""Built-in objects as the field manager of an Update sees them.

Upstream's field manager tracks the decoded Go struct, compared with the live one (or the empty
one, on create): a value field (not a pointer) whose JSON is omitempty reads the same sent as its
zero value (false, 0, "") or null as not sent, so nobody owns `hostNetwork: false`; a pointer's
zero is a value (`automountServiceAccountToken: false` is owned). An apply configuration is not
decoded into a struct, so an applier owns the zeros it sends; this view is for Updates only.

Which fields are omitempty value fields comes from protobuf_fields.json's "o" flag: one the
.proto marks non-nullable (a Go value) and the OpenAPI schema does not require. That is as close
as the shipped data gets: omitempty is a json tag that neither generated.proto nor
kubernetes-validate's OpenAPI carries, so a value field that is optional yet not omitempty
(core/v1 Event's reportingInstance, PodDisruptionBudgetStatus's counters) reads as omitempty
here. Upstream does not own such a zero either where the live object holds it (any field of an
existing struct, every top-level one on create), only where it is new inside a new list item or
pointer struct. Kinds whose .proto dropped gogo options, or whose package the table lacks, keep
their zeros."""

from __future__ import annotations

from itertools import repeat
from typing import Any

from nanokube import schema as sch
from nanokube.apiserver import protobuf

_SCALARS = (bool, int, float, str)
#: an absent field's stand-in when looking for a zero: not one
_PRESENT = repeat(True)
#: what the field manager never tracks, so never walks
_MANAGED_FIELDS = ("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "managedFields")


class _Node:
    """A definition's omitempty value fields, and its fields that hold (a list or map of) a
    definition with some at or below it: field -> ("s" struct, "l" list or "m" map, its node)."""

    __slots__ = ("omit", "children")

    def __init__(self, omit: tuple[str, ...]) -> None:
        self.omit = omit
        self.children: dict[str, tuple[str, _Node]] = {}


def _omitted(name: str) -> tuple[str, ...]:
    fields = protobuf.TABLE.get("k8s.io." + name[len("io.k8s."):]) if name.startswith("io.k8s.") else None
    return tuple(json_name for json_name, _, flags in (fields or {}).values() if flags == "o")


def _ref(node: dict[str, Any]) -> str | None:
    ref = node.get("$ref")
    return ref[len(sch.REF_PREFIX):] if isinstance(ref, str) else None


def _holds(prop: dict[str, Any]) -> tuple[str, str] | None:
    """What definition a property holds, and how."""
    if (name := _ref(prop)) is not None:
        return "s", name
    items, values = prop.get("items"), prop.get("additionalProperties")
    if isinstance(items, dict) and (name := _ref(items)) is not None:
        return "l", name
    if isinstance(values, dict) and (name := _ref(values)) is not None:
        return "m", name
    return None


#: nodes by definition, worked out as writes first need them; None: nothing to leave out below
_NODES: dict[str, _Node | None] = {}


def _node(name: str) -> _Node | None:
    """The node of a built-in definition, or None where no omitempty value field is at or below it
    (a recursive definition's own node stands for itself while its fields are worked out)."""
    if name in _NODES:
        return _NODES[name]
    props = (sch.builtin_definitions().get(name) or {}).get("properties")
    # (one without properties is a scalar in JSON, a Time or an IntOrString, whatever its .proto holds)
    node = _NODES[name] = _Node(_omitted(name)) if props else None
    if node is None:
        return None
    for k, prop in props.items():
        held = _holds(prop)
        if held is not None and (name, k) != _MANAGED_FIELDS and (child := _node(held[1])) is not None:
            node.children[k] = (held[0], child)
    if not node.omit and not node.children:
        _NODES[name] = None
    return _NODES[name]


def typed_views(old: dict[str, Any] | None, new: dict[str, Any], definition: str | None,
                skip: str = "") -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """`old` (None on create) and `new`, objects of `$defs` definition `definition`, less their
    omitempty value fields at their zero value, at any depth but under the top-level field `skip`
    (one the write's managedFields leave out: status, or spec through /status). Parts equal on
    both sides are left as they are: the field manager finds no change there either way. Each is
    itself where it has nothing to leave out (a copy shares what it does not change)."""
    node = _node(definition) if definition else None
    if node is None:
        return old, new
    if old is None:
        return None, _view(new, node, skip)
    return _pair(old, new, node, skip)


def _pair(old: dict[str, Any], new: dict[str, Any], node: _Node, skip: str = "") -> tuple[dict[str, Any], dict[str, Any]]:
    """`_view` of both sides of an update, walking only into a struct field that differs."""
    old_out, new_out = _view(old, node, skip, shallow=True), _view(new, node, skip, shallow=True)
    children = node.children
    if not children:
        return old_out, new_out
    for k in children.keys() & new.keys():
        nv = new[k]
        if k == skip or (k in old and ((ov := old[k]) is nv or ov == nv)):
            continue
        how, child = children[k]
        if k not in old:
            if (nv2 := _held(nv, how, child)) is not nv:
                new_out = _with(new, new_out, k, nv2)
            continue
        if how == "s" and type(ov) is dict and type(nv) is dict:
            ov2, nv2 = _pair(ov, nv, child)
        else:
            ov2, nv2 = _held(ov, how, child), _held(nv, how, child)
        if ov2 is not ov:
            old_out = _with(old, old_out, k, ov2)
        if nv2 is not nv:
            new_out = _with(new, new_out, k, nv2)
    if not old.keys() <= new.keys():  # fields the update drops
        for k in children.keys() & (old.keys() - new.keys()):
            ov = old[k]
            how, child = children[k]
            if k != skip and (ov2 := _held(ov, how, child)) is not ov:
                old_out = _with(old, old_out, k, ov2)
    return old_out, new_out


def _with(obj: dict[str, Any], out: dict[str, Any], k: str, v: Any) -> dict[str, Any]:
    """`out` (`obj` or its copy) with `k` set to `v`, copying `obj` first where it is `obj`."""
    if out is obj:
        out = obj.copy()
    out[k] = v
    return out


def _view(obj: dict[str, Any], node: _Node, skip: str = "", shallow: bool = False) -> dict[str, Any]:
    """`obj` less its omitempty value fields at zero, below too unless `shallow`."""
    out = obj
    if (omit := node.omit) and not all(map(obj.get, omit, _PRESENT)):  # the common case, no zero, stays in C
        for k in omit:
            v = obj.get(k, True)
            if v is None or (not v and type(v) in _SCALARS):
                if out is obj:
                    out = obj.copy()
                del out[k]
    children = node.children
    if shallow or not children:
        return out
    for k in children.keys() & obj.keys():
        v = obj[k]
        t = type(v)
        if k == skip or (t is not dict and t is not list):  # a null: nothing below
            continue
        how, child = children[k]
        v2 = _view(v, child) if how == "s" and t is dict else _held(v, how, child)  # (a struct: one call less)
        if v2 is not v:
            out = _with(obj, out, k, v2)
    return out


def _held(v: Any, how: str, child: _Node) -> Any:
    """`_view` of what a field holds: a struct, or each struct of a list or map."""
    t = type(v)
    if t is dict and how == "s":
        return _view(v, child)
    if t is dict and how == "m":
        out = None
        for mk, x in v.items():
            if type(x) is dict and (y := _view(x, child)) is not x:
                if out is None:
                    out = v.copy()
                out[mk] = y
        return v if out is None else out
    if t is list and how == "l":
        items = None
        for i, x in enumerate(v):
            if type(x) is dict and (y := _view(x, child)) is not x:
                if items is None:
                    items = list(v)
                items[i] = y
        return v if items is None else items
    return v
