"""RuntimeClass admission: a pod naming a RuntimeClass gets the class's pod
overhead and scheduling (node selector, tolerations); an unknown class, or a
pod whose own overhead or node selector contradicts the class, is refused."""

from __future__ import annotations

from ...machinery import errors
from .lookup import get, object_name


class RuntimeClass:
    mutates = validates = frozenset({("", "pods")})

    def __init__(self, rest) -> None:
        self.rest = rest

    def _refuse(self, a, why: str) -> errors.APIError:
        return errors.forbidden(a.res.group, a.res.plural, object_name(a), f"pod rejected: {why}")

    def mutate(self, a) -> None:
        if a.res.group or a.res.plural != "pods" or a.operation != "CREATE" or a.subresource:
            return
        spec = a.obj.setdefault("spec", {})
        name = spec.get("runtimeClassName")
        if not name:
            return
        rc = get(self.rest, "node.k8s.io", "runtimeclasses", None, name)
        if rc is None:
            raise self._refuse(a, f'RuntimeClass "{name}" not found')
        fixed = (rc.get("overhead") or {}).get("podFixed")
        if fixed:
            if spec.get("overhead") and spec["overhead"] != fixed:
                raise self._refuse(a, "Pod's Overhead doesn't match RuntimeClass's defined Overhead")
            spec["overhead"] = dict(fixed)
        scheduling = rc.get("scheduling") or {}
        selector = spec.get("nodeSelector") or {}
        for k, v in (scheduling.get("nodeSelector") or {}).items():
            if k in selector and selector[k] != v:
                raise self._refuse(a, f"conflict: runtimeClass.scheduling.nodeSelector[{k}] = {v}; "
                                      f"pod.spec.nodeSelector[{k}] = {selector[k]}")
            selector[k] = v
        if selector:
            spec["nodeSelector"] = selector
        tolerations = list(spec.get("tolerations") or [])
        for t in scheduling.get("tolerations") or []:
            if t not in tolerations:
                tolerations.append(t)
        if tolerations:
            spec["tolerations"] = tolerations

    def validate(self, a) -> None:
        """A pod's overhead is its class's; without a class defining one it has none."""
        if a.res.group or a.res.plural != "pods" or a.operation != "CREATE" or a.subresource:
            return
        spec = a.obj.get("spec") or {}
        name = spec.get("runtimeClassName")
        rc = get(self.rest, "node.k8s.io", "runtimeclasses", None, name) if name else None
        fixed = ((rc or {}).get("overhead") or {}).get("podFixed")
        if fixed:
            if spec.get("overhead") != fixed:
                raise self._refuse(a, "Pod's Overhead doesn't match RuntimeClass's defined Overhead")
        elif spec.get("overhead"):
            raise self._refuse(a, "Pod Overhead set without corresponding RuntimeClass defined Overhead")
