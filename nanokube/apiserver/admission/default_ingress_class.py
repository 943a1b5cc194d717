"""DefaultIngressClass: an Ingress created without `spec.ingressClassName`
(and without the legacy `kubernetes.io/ingress.class` annotation) gets the
IngressClass annotated `ingressclass.kubernetes.io/is-default-class: "true"`
(the newest, then the first by name, when several are)."""

from __future__ import annotations

from ...clock import parse_time
from .lookup import list_objects

DEFAULT_ANNOTATION = "ingressclass.kubernetes.io/is-default-class"
LEGACY_ANNOTATION = "kubernetes.io/ingress.class"


def default_class(classes: list[dict]) -> dict | None:
    defaults = [c for c in classes if (c["metadata"].get("annotations") or {}).get(DEFAULT_ANNOTATION) == "true"]
    if not defaults:
        return None
    return min(defaults, key=lambda c: (-parse_time(c["metadata"].get("creationTimestamp") or "1970-01-01T00:00:00Z"),
                                        c["metadata"]["name"]))


class DefaultIngressClass:
    mutates = frozenset({("networking.k8s.io", "ingresses")})

    def __init__(self, rest) -> None:
        self.rest = rest

    def mutate(self, a) -> None:
        if a.res.group != "networking.k8s.io" or a.res.plural != "ingresses" or a.operation != "CREATE" or a.subresource:
            return
        spec = a.obj.setdefault("spec", {})
        if spec.get("ingressClassName") is not None or LEGACY_ANNOTATION in (a.obj["metadata"].get("annotations") or {}):
            return
        ic = default_class(list_objects(self.rest, "networking.k8s.io", "ingressclasses"))
        if ic is not None:
            spec["ingressClassName"] = ic["metadata"]["name"]
