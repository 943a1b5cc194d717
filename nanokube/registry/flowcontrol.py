"""flowcontrol.apiserver.k8s.io/v1: API Priority and Fairness configuration,
FlowSchemas and PriorityLevelConfigurations, with v1's defaults and
pkg/apis/flowcontrol/validation's rules. The API server creates upstream's
mandatory and suggested objects at startup (apiserver/flowcontrol.py)."""

from __future__ import annotations

from .apps import age_column, name_column
from .base import Column, Obj, Resource, Strategy, register
from ..machinery.validation import FieldError, forbidden, invalid, not_supported, required

GROUP = "flowcontrol.apiserver.k8s.io"
_DISTINGUISHERS = ("ByNamespace", "ByUser")
_SUBJECT_KINDS = ("Group", "ServiceAccount", "User")
_PL_TYPES = ("Exempt", "Limited")
_LIMIT_RESPONSES = ("Queue", "Reject")


def _spec(o: Obj) -> dict:
    return o.get("spec") or {}


# --- FlowSchema -------------------------------------------------------------------


def _validate_subject(s: dict, path: str) -> list[FieldError]:
    kind = s.get("kind")
    if kind not in _SUBJECT_KINDS:
        return [not_supported(f"{path}.kind", kind or "", _SUBJECT_KINDS)]
    errs: list[FieldError] = []
    member = {"User": "user", "Group": "group", "ServiceAccount": "serviceAccount"}[kind]
    for other in ("user", "group", "serviceAccount"):
        if other != member and s.get(other) is not None:
            errs.append(invalid(f"{path}.{other}", s[other], f"must be nil when kind is {kind}"))
    body = s.get(member)
    if body is None:
        return errs + [required(f"{path}.{member}", f"{member} is required when subject kind is '{kind}'")]
    if not body.get("name"):
        errs.append(required(f"{path}.{member}.name", f"{member} name is required"))
    if kind == "ServiceAccount" and not body.get("namespace"):
        errs.append(required(f"{path}.serviceAccount.namespace", "must specify namespace for service account"))
    return errs


def _validate_rule_lists(rule: dict, path: str, fields: tuple[str, ...]) -> list[FieldError]:
    errs: list[FieldError] = []
    for f in fields:
        values = rule.get(f) or []
        if not values and f != "namespaces":
            errs.append(required(f"{path}.{f}", f"{f} must contain at least one value"))
        elif "*" in values and len(values) > 1:
            errs.append(invalid(f"{path}.{f}", values, "if '*' is present, must not specify other " + f))
    return errs


def validate_flow_schema_spec(spec: dict, path: str = "spec") -> list[FieldError]:
    errs: list[FieldError] = []
    mp = spec.get("matchingPrecedence")
    if mp is not None and not 1 <= mp <= 10000:
        errs.append(invalid(f"{path}.matchingPrecedence", mp, "must be between 1 and 10000, inclusive"))
    dm = spec.get("distinguisherMethod")
    if dm is not None and dm.get("type") not in _DISTINGUISHERS:
        errs.append(not_supported(f"{path}.distinguisherMethod.type", dm.get("type", ""), _DISTINGUISHERS))
    if not (spec.get("priorityLevelConfiguration") or {}).get("name"):
        errs.append(required(f"{path}.priorityLevelConfiguration.name", "must reference a priority level"))
    for i, rule in enumerate(spec.get("rules") or []):
        rp = f"{path}.rules[{i}]"
        subjects = rule.get("subjects") or []
        if not subjects:
            errs.append(required(f"{rp}.subjects", "subjects must contain at least one value"))
        for j, s in enumerate(subjects):
            errs += _validate_subject(s, f"{rp}.subjects[{j}]")
        rr, nr = rule.get("resourceRules") or [], rule.get("nonResourceRules") or []
        if not rr and not nr:
            errs.append(required(rp, "at least one of resourceRules and nonResourceRules has to be non-empty"))
        for j, r in enumerate(rr):
            errs += _validate_rule_lists(r, f"{rp}.resourceRules[{j}]", ("verbs", "apiGroups", "resources", "namespaces"))
            if not r.get("namespaces") and not r.get("clusterScope"):
                errs.append(required(f"{rp}.resourceRules[{j}].namespaces",
                                     "resource rules that are not cluster scoped must supply at least one namespace"))
        for j, r in enumerate(nr):
            errs += _validate_rule_lists(r, f"{rp}.nonResourceRules[{j}]", ("verbs", "nonResourceURLs"))
    return errs


def _dangling(o: Obj) -> str:
    for c in (o.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Dangling":
            return c.get("status", "?")
    return "?"


class FlowSchemaStrategy(Strategy):
    columns = [
        name_column(),
        Column("PriorityLevel", "string", lambda o: (_spec(o).get("priorityLevelConfiguration") or {}).get("name", ""),
               "The name of the priority level configuration this schema uses."),
        Column("MatchingPrecedence", "string", lambda o: _spec(o).get("matchingPrecedence", ""),
               "Order in which the schema's rules are checked; lower numbers first."),
        Column("DistinguisherMethod", "string", lambda o: (_spec(o).get("distinguisherMethod") or {}).get("type", "<none>"),
               "How requests matching this schema are divided into flows."),
        age_column(),
        Column("MissingPL", "string", _dangling, "Whether the referenced priority level is missing."),
    ]
    #: printFlowSchemaList's FlowSchemaSequence: by matchingPrecedence, then name
    table_sort_key = staticmethod(lambda o: (_spec(o).get("matchingPrecedence", 1000), o["metadata"]["name"]))

    def default(self, obj, version):
        obj.setdefault("spec", {}).setdefault("matchingPrecedence", 1000)

    def prepare_for_create(self, obj):
        obj["status"] = {}

    def validate(self, obj):
        return validate_flow_schema_spec(_spec(obj))


# --- PriorityLevelConfiguration ----------------------------------------------------------


def default_priority_level(spec: dict) -> None:
    """v1 defaults: nominalConcurrencyShares 30 (0 for Exempt), lendablePercent 0,
    queuing 64 queues, hand size 8, queue length limit 50."""
    limited = spec.get("limited")
    if limited is not None:
        limited.setdefault("nominalConcurrencyShares", 30)
        limited.setdefault("lendablePercent", 0)
        lr = limited.setdefault("limitResponse", {})
        if lr.get("type") == "Queue":
            q = lr.setdefault("queuing", {})
            q.setdefault("queues", 64)
            q.setdefault("handSize", 8)
            q.setdefault("queueLengthLimit", 50)
    exempt = spec.get("exempt")
    if spec.get("type") == "Exempt" and exempt is None:
        exempt = spec["exempt"] = {}
    if exempt is not None:
        exempt.setdefault("nominalConcurrencyShares", 0)
        exempt.setdefault("lendablePercent", 0)


def _validate_queuing(q: dict, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for f in ("queueLengthLimit", "queues", "handSize"):
        if q.get(f) is not None and q[f] <= 0:
            errs.append(invalid(f"{path}.{f}", q[f], "must be positive"))
    queues, hand = q.get("queues") or 0, q.get("handSize") or 0
    if hand > queues > 0:
        errs.append(invalid(f"{path}.handSize", hand, f"should not be greater than queues ({queues})"))
    return errs


def validate_priority_level_spec(spec: dict, path: str = "spec") -> list[FieldError]:
    t = spec.get("type")
    if t not in _PL_TYPES:
        return [not_supported(f"{path}.type", t or "", _PL_TYPES)]
    errs: list[FieldError] = []
    limited, exempt = spec.get("limited"), spec.get("exempt")
    if t == "Exempt":
        if limited is not None:
            errs.append(invalid(f"{path}.limited", "limited", "must be nil if the type is not Limited"))
    else:
        if exempt is not None:
            errs.append(invalid(f"{path}.exempt", "exempt", "must be nil if the type is Limited"))
        if limited is None:
            return errs + [required(f"{path}.limited", "must not be empty when type is Limited")]
        lp = f"{path}.limited"
        ncs = limited.get("nominalConcurrencyShares")
        if ncs is not None and ncs < 0:
            errs.append(invalid(f"{lp}.nominalConcurrencyShares", ncs, "must be a non-negative integer"))
        lend = limited.get("lendablePercent")
        if lend is not None and not 0 <= lend <= 100:
            errs.append(invalid(f"{lp}.lendablePercent", lend, "must be between 0 and 100, inclusive"))
        lr = limited.get("limitResponse") or {}
        if lr.get("type") not in _LIMIT_RESPONSES:
            errs.append(not_supported(f"{lp}.limitResponse.type", lr.get("type", ""), _LIMIT_RESPONSES))
        elif lr["type"] == "Queue":
            if lr.get("queuing") is None:
                errs.append(required(f"{lp}.limitResponse.queuing", "must not be empty if the type is Queue"))
            else:
                errs += _validate_queuing(lr["queuing"], f"{lp}.limitResponse.queuing")
        elif lr.get("queuing") is not None:
            errs.append(forbidden(f"{lp}.limitResponse.queuing", "must be nil if limited.limitResponse.type is not Limited"))
    return errs


def _limited(o: Obj) -> dict:
    return _spec(o).get("limited") or {}


def _queuing(field: str):
    def cell(o: Obj):
        q = (_limited(o).get("limitResponse") or {}).get("queuing")
        return "<none>" if q is None else q.get(field, "<none>")
    return cell


class PriorityLevelConfigurationStrategy(Strategy):
    columns = [
        name_column(),
        Column("Type", "string", lambda o: _spec(o).get("type", ""), "Whether this priority level is exempt or limited."),
        Column("NominalConcurrencyShares", "string",
               lambda o: _limited(o).get("nominalConcurrencyShares", "<none>") if _spec(o).get("limited") else "<none>",
               "Share of the server's concurrency this level gets."),
        Column("Queues", "string", _queuing("queues"), "Number of queues."),
        Column("HandSize", "string", _queuing("handSize"), "Number of queues a flow is shuffle-sharded over."),
        Column("QueueLengthLimit", "string", _queuing("queueLengthLimit"), "Requests allowed to wait in one queue."),
        age_column(),
    ]

    def default(self, obj, version):
        default_priority_level(obj.setdefault("spec", {}))

    def prepare_for_create(self, obj):
        obj["status"] = {}

    def validate(self, obj):
        return validate_priority_level_spec(_spec(obj))


register(
    Resource(GROUP, "flowschemas", "FlowSchema", ["v1"], namespaced=False, subresources=("status",),
             strategy=FlowSchemaStrategy()),
    Resource(GROUP, "prioritylevelconfigurations", "PriorityLevelConfiguration", ["v1"], namespaced=False,
             subresources=("status",), strategy=PriorityLevelConfigurationStrategy()),
)
