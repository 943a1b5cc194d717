"""kube-controller-manager's ClusterRole aggregation controller: a ClusterRole with an
aggregationRule stores, as its `rules`, the rules of every other ClusterRole one of its
clusterRoleSelectors matches, so `kubectl get clusterrole admin -o yaml` shows what `admin`
grants, an `aggregate-to-edit` role's rules included. The order is upstream's: selector by
selector, the matching roles sorted by name, each rule once. The RBAC authorizer still unions the
selected roles itself (apiserver/auth/rbac), which yields the same rules with or without this
controller running."""

from __future__ import annotations

import orjson

from ..client.informer import InformerFactory
from ..clock import REAL, Clock
from ..machinery.selectors import matches_labels, selector_from_object
from .base import Controller

GROUP = "rbac.authorization.k8s.io"
#: the field manager of its applies, upstream's
FIELD_MANAGER = "clusterrole-aggregation-controller"


def _semantic(rule: dict) -> dict:
    """A rule with its empty fields dropped: equality.Semantic takes a nil list for an empty one."""
    return {k: v for k, v in rule.items() if v}


def aggregated_rules(role: dict, roles: list[dict]) -> list[dict]:
    """The rules `role`'s aggregationRule selects from `roles`, in upstream's order."""
    out: list[dict] = []
    seen: list[dict] = []
    for sel in role["aggregationRule"].get("clusterRoleSelectors") or []:
        reqs = selector_from_object(sel)
        matching = sorted((r for r in roles if r["metadata"]["name"] != role["metadata"]["name"]
                           and matches_labels(reqs, r["metadata"].get("labels"))),
                          key=lambda r: r["metadata"]["name"])
        for other in matching:
            for rule in other.get("rules") or []:
                if _semantic(rule) not in seen:
                    seen.append(_semantic(rule))
                    out.append(rule)
    return out


class ClusterRoleAggregationController(Controller):
    name = "clusterrole-aggregation-controller"
    queue_name = "ClusterRoleAggregator"

    def __init__(self, client, clock: Clock = REAL, informers: InformerFactory | None = None):
        super().__init__(client, clock, informers)
        self.roles = client.resource(GROUP, "v1", "clusterroles")
        self.role_inf = self.informer_factory.informer(self.roles)
        # any role's change may change what any selector matches: every aggregated role is looked at again
        self.role_inf.add_handlers(on_add=self._enqueue_all, on_update=lambda old, new: self._enqueue_all(new),
                                   on_delete=self._enqueue_all)

    def informers(self):
        return [self.role_inf]

    def _enqueue_all(self, _role: dict) -> None:
        for role in self.role_inf.list():
            if role.get("aggregationRule"):
                self.queue.add(role["metadata"]["name"])

    async def sync(self, name: str) -> None:
        role = self.role_inf.get(name)
        if role is None or not role.get("aggregationRule"):
            return
        rules = aggregated_rules(role, self.role_inf.list())
        if [_semantic(r) for r in rules] == [_semantic(r) for r in role.get("rules") or []]:
            return
        # an apply of the rules alone, forced (rules is an atomic list): the role's other fields
        # stay their writers'; no rules leaves them out, so the ones this manager owned go
        body = {"apiVersion": f"{GROUP}/v1", "kind": "ClusterRole", "metadata": {"name": name}}
        await self.roles.patch(name, orjson.dumps(body | ({"rules": rules} if rules else {})),
                               "application/apply-patch+yaml", field_manager=FIELD_MANAGER, force=True)
