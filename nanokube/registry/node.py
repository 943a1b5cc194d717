"""node.k8s.io/v1 RuntimeClass: a container runtime configuration pods select
by `runtimeClassName`, with the pod overhead and scheduling constraints that
RuntimeClass admission copies into those pods."""

from __future__ import annotations

from .. import schema
from ..machinery.validation import FieldError, dns1123_label, duplicate, immutable, invalid, validate_labels
from .base import AGE, Column, Resource, Strategy, register
from .core_printing import AGE_DOC, NAME_DOC
from .core_spec import validate_resources, validate_tolerations
from . import kind_warnings


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

    def warnings_on_create(self, obj):
        return kind_warnings.runtime_class_warnings(obj)

    def warnings_on_update(self, new, old):
        return kind_warnings.runtime_class_warnings(new)

    def validate(self, obj):
        """ValidateRuntimeClass: handler a DNS label, overhead as container limits, scheduling's
        node selector as labels and its tolerations valid and unique."""
        handler = obj.get("handler") or ""
        errs: list[FieldError] = [invalid("handler", handler, m) for m in dns1123_label(handler)]
        fixed = (obj.get("overhead") or {}).get("podFixed")
        if fixed:
            errs += validate_resources({"limits": fixed}, "overhead")
        scheduling = obj.get("scheduling") or {}
        errs += validate_labels(scheduling.get("nodeSelector"), "scheduling.nodeSelector")
        tolerations = scheduling.get("tolerations") or []
        errs += validate_tolerations(tolerations, "scheduling.tolerations.tolerations")  # upstream's doubled path
        seen = set()
        for i, t in enumerate(tolerations):
            key = (t.get("key", ""), t.get("operator", ""), t.get("value", ""), t.get("effect", ""))
            if key in seen:
                errs.append(duplicate(f"scheduling.tolerations[{i}]", t))
            seen.add(key)
        return errs

    def validate_update(self, new, old):
        errs = self.validate(new)
        if new.get("handler") != old.get("handler"):
            errs.append(immutable("handler", new.get("handler")))
        return errs


register(
    Resource("node.k8s.io", "runtimeclasses", "RuntimeClass", ["v1"], namespaced=False, strategy=RuntimeClassStrategy()),
)
