"""Which fields of a built-in definition an Update's field manager reads as unset at their zero.

Upstream's field manager tracks the decoded Go struct, compared with the live one (or the empty
one, on create): a value field (not a pointer) whose JSON is omitempty reads the same sent as its
zero value (false, 0, "") or null as not sent, so nobody owns `hostNetwork: false`; a pointer's
zero is a value (`automountServiceAccountToken: false` is owned). A value field tagged without
omitempty is encoded at its zero: a change to its zero is a change (a PodDisruptionBudget's
`disruptionsAllowed: 0`, a condition's `status`), while on create the empty struct holds the same
zero, so nobody owns it (`kept`), whether the field is optional or required (a ResourceSlice pool's
`generation: 0`, sent so or left out and decoded so). An apply configuration is not decoded into a struct, so an
applier owns the zeros it sends. The field manager's comparison (patch/apply.py) reads these
zeros so as it walks an Update's objects.

A struct held by value (not a pointer) is always encoded, so the empty struct a create is compared
with holds it too, at its zero (`structs`): nobody owns a Node's `spec: {}` or an Event's
`source: {}` that the decoder filled in.

Which fields are which is what the decoder knows too (apiserver/omitempty.py, from
machinery/jsontags.py's reviewed types); a kind outside them keeps every zero as a value."""

from __future__ import annotations

import functools
from typing import Any

from nanokube import schema as sch
from nanokube.apiserver import omitempty


@functools.cache
def _builtin_names() -> dict[int, str]:
    """Built-in definitions' names by the identity of their (never replaced) schema objects."""
    return {id(d): name for name, d in sch.builtin_definitions().items()}


def _name(definition: dict[str, Any]) -> str | None:
    name = _builtin_names().get(id(definition))
    if name is None or sch.builtin_definitions().get(name) is not definition or not name.startswith("io.k8s."):
        return None
    return name


def omitted(definition: dict[str, Any]) -> tuple[str, ...]:
    """The omitempty value fields of a resolved `$defs` definition: none unless it is a built-in one."""
    name = _name(definition)
    return tuple(sorted(omitempty.fields(name))) if name else ()


def kept(definition: dict[str, Any]) -> tuple[str, ...]:
    """The value fields of a resolved built-in `$defs` definition tagged without omitempty: optional
    ones, and required ones, which the decoder fills with their zero where they are left out."""
    name = _name(definition)
    return tuple(sorted(omitempty.kept(name) | omitempty.required(name).keys())) if name else ()


def structs(definition: dict[str, Any]) -> frozenset[str]:
    """The optional fields of a resolved built-in `$defs` definition that are structs held by value."""
    name = _name(definition)
    return omitempty.structs(name) if name else frozenset()
