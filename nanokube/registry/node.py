"""node.k8s.io/v1 RuntimeClass: a container runtime configuration pods select
by `runtimeClassName`, with the pod overhead and scheduling constraints that
RuntimeClass admission copies into those pods."""

from __future__ import annotations

from .. import schema
from ..machinery.quantity import QuantityError, parse_quantity
from ..machinery.validation import FieldError, dns1123_label, immutable, invalid, validate_labels
from .base import AGE, Column, Resource, Strategy, register
from .core_printing import AGE_DOC, NAME_DOC


def _doc(field: str) -> str:
    return ((schema.definitions()["io.k8s.api.node.v1.RuntimeClass"].get("properties") or {}).get(field) or {}) \
        .get("description", "")


class RuntimeClassStrategy(Strategy):
    track_generation = False
    columns = [
        Column("Name", "string", lambda o: o["metadata"]["name"], NAME_DOC, format="name"),
        Column("Handler", "string", lambda o: o.get("handler", ""), _doc("handler")),
        Column("Age", "string", AGE, AGE_DOC),
    ]

    def validate(self, obj):
        handler = obj.get("handler") or ""
        errs: list[FieldError] = [invalid("handler", handler, m) for m in dns1123_label(handler)]
        for name, value in (((obj.get("overhead") or {}).get("podFixed")) or {}).items():
            p = f"overhead.podFixed[{name}]"
            try:
                if parse_quantity(str(value)) < 0:
                    errs.append(invalid(p, value, "must be greater than or equal to 0"))
            except QuantityError as e:
                errs.append(invalid(p, value, str(e)))
        scheduling = obj.get("scheduling") or {}
        errs += validate_labels(scheduling.get("nodeSelector"), "scheduling.nodeSelector")
        for i, t in enumerate(scheduling.get("tolerations") or []):
            op = t.get("operator") or "Equal"
            if op == "Exists" and t.get("value"):
                errs.append(invalid(f"scheduling.tolerations[{i}].operator", t.get("value"),
                                    "value must be empty when `operator` is 'Exists'"))
            if not t.get("key") and op != "Exists":
                errs.append(invalid(f"scheduling.tolerations[{i}].operator", op,
                                    "operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
        return errs

    def validate_update(self, new, old):
        errs = self.validate(new)
        if new.get("handler") != old.get("handler"):
            errs.append(immutable("handler", new.get("handler")))
        return errs


register(
    Resource("node.k8s.io", "runtimeclasses", "RuntimeClass", ["v1"], namespaced=False, strategy=RuntimeClassStrategy()),
)
