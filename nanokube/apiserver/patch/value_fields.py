"""Which fields of a built-in definition an Update's field manager reads as unset at their zero.

Upstream's field manager tracks the decoded Go struct, compared with the live one (or the empty
one, on create): a value field (not a pointer) whose JSON is omitempty reads the same sent as its
zero value (false, 0, "") or null as not sent, so nobody owns `hostNetwork: false`; a pointer's
zero is a value (`automountServiceAccountToken: false` is owned). An apply configuration is not
decoded into a struct, so an applier owns the zeros it sends. The field manager's comparison
(patch/apply.py) leaves these zeros out of an Update's objects as it walks them.

Which fields are omitempty value fields comes from protobuf_fields.json's "o" flag: one the
.proto marks non-nullable (a Go value) and the OpenAPI schema does not require. That is as close
as the shipped data gets: omitempty is a json tag that neither generated.proto nor
kubernetes-validate's OpenAPI carries, so a value field that is optional yet not omitempty
(core/v1 Event's reportingComponent and reportingInstance, PodDisruptionBudgetStatus's counters,
StatefulSetStatus's availableReplicas) reads as omitempty here. Upstream does not own such a zero
either where the live object holds it (any field of an existing struct, every top-level one on
create), only where it is new inside a new list item or pointer struct. The same gap is why
objects are not normalized this way when decoded: upstream serves those zeros. Kinds whose
.proto dropped gogo options, or whose package the table lacks, keep their zeros."""

from __future__ import annotations

import functools
from typing import Any

from nanokube import schema as sch
from nanokube.apiserver import protobuf


@functools.cache
def _builtin_names() -> dict[int, str]:
    """Built-in definitions' names by the identity of their (never replaced) schema objects."""
    return {id(d): name for name, d in sch.builtin_definitions().items()}


def omitted(definition: dict[str, Any]) -> tuple[str, ...]:
    """The omitempty value fields of a resolved `$defs` definition: none unless it is a built-in one."""
    name = _builtin_names().get(id(definition))
    if name is None or sch.builtin_definitions().get(name) is not definition or not name.startswith("io.k8s."):
        return ()
    fields = protobuf.TABLE.get("k8s.io." + name[len("io.k8s."):])
    return tuple(json_name for json_name, _, flags in (fields or {}).values() if flags == "o")
