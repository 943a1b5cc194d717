"""API Priority and Fairness configuration every kube-apiserver keeps:
upstream's mandatory and suggested PriorityLevelConfigurations and
FlowSchemas (apiserver/pkg/apis/flowcontrol/bootstrap), created at startup
with `apf.kubernetes.io/autoupdate-spec: "true"`, and the configuration
controller's status: each FlowSchema's `Dangling` condition says whether the
priority level it names exists. apf.py classifies and limits HTTP requests
by them.
"""

from __future__ import annotations

from ..client.informer import Informer
from ..controllers.base import Controller
from ..machinery.conditions import find_condition, remove_condition
from ..machinery.errors import APIError
from ..registry.flowcontrol import MANDATORY_FLOW_SCHEMAS, MANDATORY_PRIORITY_LEVELS

GROUP = "flowcontrol.apiserver.k8s.io"
AUTOUPDATE = "apf.kubernetes.io/autoupdate-spec"
_ALL_RESOURCES = {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "clusterScope": True, "namespaces": ["*"]}
_ALL_URLS = {"verbs": ["*"], "nonResourceURLs": ["*"]}
KCM, SCHEDULER = "system:kube-controller-manager", "system:kube-scheduler"


def _queued(shares: int, lendable: int, queues: int, hand: int) -> dict:
    return {"type": "Limited", "limited": {
        "nominalConcurrencyShares": shares, "lendablePercent": lendable,
        "limitResponse": {"type": "Queue", "queuing": {"queues": queues, "handSize": hand, "queueLengthLimit": 50}}}}


PRIORITY_LEVELS: dict[str, dict] = {
    **MANDATORY_PRIORITY_LEVELS,
    # suggested
    "system": _queued(30, 33, 64, 6),
    "node-high": _queued(40, 25, 64, 6),
    "leader-election": _queued(10, 0, 16, 4),
    "workload-high": _queued(40, 50, 128, 6),
    "workload-low": _queued(100, 90, 128, 6),
    "global-default": _queued(20, 50, 128, 6),
}


def _groups(*names: str) -> list[dict]:
    return [{"kind": "Group", "group": {"name": n}} for n in names]


def _users(*names: str) -> list[dict]:
    return [{"kind": "User", "user": {"name": n}} for n in names]


_KUBE_SYSTEM_SAS = [{"kind": "ServiceAccount", "serviceAccount": {"namespace": "kube-system", "name": "*"}}]


def _rule(verbs, groups, resources, namespaces, cluster_scope=False) -> dict:
    r = {"verbs": verbs, "apiGroups": groups, "resources": resources, "namespaces": namespaces}
    if cluster_scope:
        r["clusterScope"] = True
    return r


def _schema(pl: str, precedence: int, distinguisher: str | None, subjects: list[dict],
            resource_rules: list[dict] | None = None, non_resource_rules: list[dict] | None = None) -> dict:
    rule: dict = {"subjects": subjects}
    if resource_rules:
        rule["resourceRules"] = resource_rules
    if non_resource_rules:
        rule["nonResourceRules"] = non_resource_rules
    spec: dict = {"priorityLevelConfiguration": {"name": pl}, "matchingPrecedence": precedence}
    if distinguisher:
        spec["distinguisherMethod"] = {"type": distinguisher}
    spec["rules"] = [rule]
    return spec


def _everything(pl: str, precedence: int, distinguisher: str | None, subjects: list[dict]) -> dict:
    return _schema(pl, precedence, distinguisher, subjects, [dict(_ALL_RESOURCES)], [dict(_ALL_URLS)])


_LEADER_RULES = [_rule(["get", "create", "update"], [""], ["endpoints", "configmaps"], ["*"]),
                 _rule(["get", "create", "update"], ["coordination.k8s.io"], ["leases"], ["*"])]

FLOW_SCHEMAS: dict[str, dict] = {
    **MANDATORY_FLOW_SCHEMAS,
    # suggested
    "probes": _schema("exempt", 2, None, _groups("system:unauthenticated", "system:authenticated"),
                      non_resource_rules=[{"verbs": ["get"], "nonResourceURLs": ["/healthz", "/readyz", "/livez"]}]),
    "system-leader-election": _schema(
        "leader-election", 100, "ByUser", _users(KCM, SCHEDULER) + _KUBE_SYSTEM_SAS,
        [_rule(["get", "create", "update"], [""], ["endpoints", "configmaps"], ["kube-system"]),
         _rule(["get", "create", "update"], ["coordination.k8s.io"], ["leases"], ["*"])]),
    "endpoint-controller": _schema(
        "workload-high", 150, "ByUser",
        _users(KCM) + [{"kind": "ServiceAccount", "serviceAccount": {"namespace": "kube-system", "name": "endpoint-controller"}}],
        [_rule(["get", "create", "update"], [""], ["endpoints"], ["*"])]),
    "workload-leader-election": _schema("leader-election", 200, "ByUser", list(_KUBE_SYSTEM_SAS), _LEADER_RULES),
    "system-node-high": _schema(
        "node-high", 400, "ByUser", _groups("system:nodes"),
        [_rule(["*"], [""], ["nodes", "nodes/status"], ["*"], True),
         _rule(["*"], ["coordination.k8s.io"], ["leases"], ["*"])]),
    "system-nodes": _everything("system", 500, "ByUser", _groups("system:nodes")),
    "kube-controller-manager": _everything("workload-high", 800, "ByNamespace", _users(KCM)),
    "kube-scheduler": _everything("workload-high", 800, "ByNamespace", _users(SCHEDULER)),
    "kube-system-service-accounts": _everything("workload-high", 900, "ByNamespace", list(_KUBE_SYSTEM_SAS)),
    "service-accounts": _everything("workload-low", 9000, "ByUser", _groups("system:serviceaccounts")),
    "global-default": _everything("global-default", 9900, "ByUser", _groups("system:unauthenticated", "system:authenticated")),
}


async def ensure_bootstrap_configuration(server) -> None:
    """Create the mandatory and suggested objects that are missing (an operator's
    edits to existing ones are kept, as with autoupdate-spec turned off)."""
    md = {"annotations": {AUTOUPDATE: "true"}}
    for name, spec in PRIORITY_LEVELS.items():
        await server.ensure(GROUP, "v1", "prioritylevelconfigurations", None, {"metadata": {"name": name, **md}, "spec": spec})
    for name, spec in FLOW_SCHEMAS.items():
        await server.ensure(GROUP, "v1", "flowschemas", None, {"metadata": {"name": name, **md}, "spec": spec})


def dangling_condition(schema: dict, exists: bool, now: str) -> dict:
    pl = ((schema.get("spec") or {}).get("priorityLevelConfiguration") or {}).get("name", "")
    if exists:
        return {"type": "Dangling", "status": "False", "lastTransitionTime": now, "reason": "Found",
                "message": f'This FlowSchema references the PriorityLevelConfiguration object named "{pl}" and it exists'}
    return {"type": "Dangling", "status": "True", "lastTransitionTime": now, "reason": "NotFound",
            "message": f'This FlowSchema references the PriorityLevelConfiguration object named "{pl}" but there is no such object'}


class FlowSchemaStatus(Controller):
    """The APF configuration controller's status work: each FlowSchema's Dangling condition."""

    name = "apf-configuration"

    def __init__(self, client, **kw):
        super().__init__(client, **kw)
        self.schemas = client.resource(GROUP, "v1", "flowschemas")
        self.fs_inf = Informer(self.schemas, clock=self.clock)
        self.pl_inf = Informer(client.resource(GROUP, "v1", "prioritylevelconfigurations"), clock=self.clock)
        self.fs_inf.add_handlers(on_add=self._enqueue, on_update=lambda o, n: self._enqueue(n))
        self.pl_inf.add_handlers(on_add=self._enqueue_all, on_delete=self._enqueue_all)

    def informers(self):
        return [self.fs_inf, self.pl_inf]

    def _enqueue(self, fs: dict) -> None:
        self.queue.add(fs["metadata"]["name"])

    def _enqueue_all(self, _pl: dict) -> None:
        for fs in self.fs_inf.list():
            self._enqueue(fs)

    async def sync(self, name: str) -> None:
        fs = self.fs_inf.get(name)
        if fs is None:
            return
        pl = ((fs.get("spec") or {}).get("priorityLevelConfiguration") or {}).get("name", "")
        exists = self.pl_inf.get(pl) is not None
        conditions = (fs.get("status") or {}).get("conditions")
        current = find_condition(conditions, "Dangling")
        cond = dangling_condition(fs, exists, self.clock.rfc3339())
        # upstream's digestFlowSchemas writes the condition when its status, reason or message differ
        if current is not None and all(current.get(k) == cond[k] for k in ("status", "reason", "message")):
            return
        body = {**fs, "status": {"conditions": remove_condition(conditions, "Dangling") + [cond]}}
        try:
            await self.schemas.update(body, subresource="status")
        except APIError as e:
            if e.code != 404:  # a conflict is retried with the newer object
                raise
