"""helper.DefaultSelector: the label selector that stands for "pods of the
same workload" when a pod has no spread constraints of its own, merged from
the Services selecting the pod and its controlling ReplicaSet or
StatefulSet (this API server serves no ReplicationControllers)."""

from __future__ import annotations

from ...machinery.selectors import Requirement, selector_from_object

#: (apiVersion, kind) of the controllers whose selector counts -> their resource
_OWNERS = {("apps/v1", "ReplicaSet"): ("apps", "v1", "replicasets"),
           ("apps/v1", "StatefulSet"): ("apps", "v1", "statefulsets")}


class DefaultSelectors:
    """Looks the selector up through the scheduler's shared informers."""

    def __init__(self, handle) -> None:
        self.services = handle.informer("", "v1", "services")
        self.owners = {}
        for kind, gvr in _OWNERS.items():
            try:
                self.owners[kind] = handle.informer(*gvr)
            except LookupError:  # a resource this API server does not serve owns no pods
                continue

    def selector(self, pod: dict) -> list[Requirement]:
        """The requirements pods of the workload share; empty when nothing
        ties the pod to a workload (then no default constraint applies)."""
        md = pod["metadata"]
        ns, labels = md.get("namespace", ""), md.get("labels") or {}
        merged: dict[str, str] = {}
        for svc in self.services.list():
            sel = (svc.get("spec") or {}).get("selector")
            # a Service without a selector selects nothing, not everything
            if svc["metadata"].get("namespace") == ns and sel is not None and \
                    all(labels.get(k) == v for k, v in sel.items()):
                merged.update(sel)
        extra: list[Requirement] = []
        owner = next((r for r in md.get("ownerReferences") or [] if r.get("controller")), None)
        if owner is not None:
            kind = (owner.get("apiVersion", ""), owner.get("kind", ""))
            inf = self.owners.get(kind)
            obj = inf.get(f"{ns}/{owner.get('name', '')}") if inf is not None else None
            extra = selector_from_object(((obj or {}).get("spec") or {}).get("selector")) or []
        return [(k, "=", (v,)) for k, v in merged.items()] + extra
