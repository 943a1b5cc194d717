"""TaintNodesByCondition: a Node is created tainted `node.kubernetes.io/not-ready:NoSchedule`, so
no pod lands on it in the moment between its registration and the node lifecycle controller's
first look at its Ready condition; that controller takes the taint off once the node is Ready.
Only on create (never through a subresource), and not where the node already has a taint of that
key and effect (a kubelet's --register-with-taints)."""

from __future__ import annotations

NOT_READY = "node.kubernetes.io/not-ready"


class TaintNodesByCondition:
    name = "TaintNodesByCondition"
    mutates = frozenset({("", "nodes")})

    def mutate(self, a) -> None:
        if a.res.group != "" or a.res.plural != "nodes" or a.operation != "CREATE" or a.subresource:
            return
        spec = a.obj.get("spec")
        if spec is None:
            spec = a.obj["spec"] = {}
        taints = spec.get("taints") or []
        if not any(t.get("key") == NOT_READY and t.get("effect") == "NoSchedule" for t in taints):
            spec["taints"] = [*taints, {"key": NOT_READY, "effect": "NoSchedule"}]
