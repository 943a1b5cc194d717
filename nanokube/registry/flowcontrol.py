"""flowcontrol.apiserver.k8s.io/v1: API Priority and Fairness configuration,
FlowSchemas and PriorityLevelConfigurations, with v1's defaults and
pkg/apis/flowcontrol/validation's rules. The API server creates upstream's
mandatory and suggested objects at startup (apiserver/flowcontrol.py)."""

from __future__ import annotations

import math
from typing import Any

from .apps import age_column, name_column
from .base import STORED_DELETION, Column, Obj, Resource, Strategy, register
from ..machinery.conditions import find_condition
from ..machinery.gofmt import Struct
from ..machinery.validation import (
    FieldError,
    dns1123_label,
    dns1123_subdomain,
    forbidden,
    invalid,
    not_supported,
    required,
)

GROUP = "flowcontrol.apiserver.k8s.io"
_DISTINGUISHERS = ("ByNamespace", "ByUser")
_SUBJECT_KINDS = ("Group", "ServiceAccount", "User")
_PL_TYPES = ("Exempt", "Limited")
_LIMIT_RESPONSES = ("Queue", "Reject")


def _spec(o: Obj) -> dict:
    return o.get("spec") or {}


# --- FlowSchema -------------------------------------------------------------------


_SUBJECT_MEMBERS = {"ServiceAccount": "serviceAccount", "User": "user", "Group": "group"}
#: the members each subject kind forbids, in upstream's order
_FORBIDDEN_MEMBERS = {"ServiceAccount": ("User", "Group"), "User": ("ServiceAccount", "Group"),
                      "Group": ("ServiceAccount", "User")}
_SUPPORTED_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "proxy", "update", "watch")
_NS_INTRO = "each member of this list must be '*' or a DNS-1123 label; "


def _validate_subject(s: dict, path: str) -> list[FieldError]:
    """ValidateFlowSchemaSubject: the member of the subject's kind, and no other."""
    kind = s.get("kind") or ""
    if kind not in _SUBJECT_MEMBERS:
        return [not_supported(f"{path}.kind", kind, _SUBJECT_KINDS)]
    member = _SUBJECT_MEMBERS[kind]
    body = s.get(member)
    errs: list[FieldError] = []
    if body is None:
        errs.append(required(f"{path}.{member}", f"{member} is required when subject kind is '{kind}'"))
    else:
        name = body.get("name") or ""
        if not name:
            errs.append(required(f"{path}.{member}.name"))
        elif kind == "ServiceAccount" and name != "*":
            errs += [invalid(f"{path}.{member}.name", name, m) for m in dns1123_subdomain(name)]
        if kind == "ServiceAccount":
            if ns := body.get("namespace"):
                errs += [invalid(f"{path}.{member}.namespace", ns, m) for m in dns1123_label(ns)]
            else:
                errs.append(required(f"{path}.{member}.namespace", "must specify namespace for service account"))
    for other in _FORBIDDEN_MEMBERS[kind]:
        if s.get(_SUBJECT_MEMBERS[other]) is not None:
            errs.append(forbidden(f"{path}.{_SUBJECT_MEMBERS[other]}", f"{_SUBJECT_MEMBERS[other]} is forbidden when "
                                  f"subject kind is not '{other}'"))
    return errs


def _validate_verbs(verbs: list, path: str) -> list[FieldError]:
    if not verbs:
        return [required(path, "verbs must contain at least one value")]
    if "*" in verbs:
        return [invalid(path, verbs, "if '*' is present, must not specify other verbs")] if len(verbs) > 1 else []
    if not set(verbs) <= set(_SUPPORTED_VERBS):
        return [not_supported(path, verbs, _SUPPORTED_VERBS)]
    return []


def _validate_listed(values: list, path: str, what: str, missing: str) -> list[FieldError]:
    """A rule's list: not empty, and '*' alone if present."""
    if not values:
        return [required(path, missing)]
    if len(values) > 1 and "*" in values:
        return [invalid(path, values, f"if '*' is present, must not specify other {what}")]
    return []


def non_resource_url_path(value: str, path: str) -> list[FieldError]:
    """ValidateNonResourceURLPath: "/", or a path from a slash without spaces or "//", '*' only as a "/*" suffix."""
    if not value:
        return [invalid(path, value, "must not be empty")]
    if value == "/":
        return []
    for bad, why in ((not value.startswith("/"), "must start with slash"), (" " in value, "must not contain white-space"),
                     ("//" in value, "must not contain double slash"),
                     (value.count("*") > 1 or (value.count("*") == 1 and value[-2:] != "/*"),
                      "wildcard can only do suffix matching")):
        if bad:
            return [invalid(path, value, why)]
    return []


def _validate_resource_rule(r: dict, path: str) -> list[FieldError]:
    """ValidateFlowSchemaResourcePolicyRule."""
    errs = _validate_verbs(r.get("verbs") or [], f"{path}.verbs")
    errs += _validate_listed(r.get("apiGroups") or [], f"{path}.apiGroups", "api groups",
                             "resource rules must supply at least one api group")
    errs += _validate_listed(r.get("resources") or [], f"{path}.resources", "resources",
                             "resource rules must supply at least one resource")
    namespaces = r.get("namespaces") or []
    if not namespaces and not r.get("clusterScope"):
        errs.append(required(f"{path}.namespaces",
                             "resource rules that are not cluster scoped must supply at least one namespace"))
    elif "*" in namespaces:
        if len(namespaces) > 1:
            errs.append(invalid(f"{path}.namespaces", namespaces, "if '*' is present, must not specify other namespaces"))
    else:
        for i, ns in enumerate(namespaces):
            errs += [invalid(f"{path}.namespaces[{i}]", ns, _NS_INTRO + m) for m in dns1123_label(ns)]
    return errs


def _validate_non_resource_rule(r: dict, path: str) -> list[FieldError]:
    """ValidateFlowSchemaNonResourcePolicyRule."""
    errs = _validate_verbs(r.get("verbs") or [], f"{path}.verbs")
    urls = r.get("nonResourceURLs") or []
    errs += _validate_listed(urls, f"{path}.nonResourceURLs", "non-resource URLs",
                             "nonResourceURLs must contain at least one value")
    if urls and "*" not in urls:
        for i, u in enumerate(urls):
            errs += non_resource_url_path(u, f"{path}.nonResourceURLs[{i}]")
    return errs


def validate_flow_schema_spec(spec: dict, name: str, path: str = "spec") -> list[FieldError]:
    """ValidateFlowSchemaSpec."""
    errs: list[FieldError] = []
    mp = spec.get("matchingPrecedence")
    if mp is not None:
        if mp <= 0:
            errs.append(invalid(f"{path}.matchingPrecedence", mp, "must be a positive value"))
        if mp > 10000:
            errs.append(invalid(f"{path}.matchingPrecedence", mp, "must not be greater than 10000"))
        if mp == 1 and name != "exempt":
            errs.append(invalid(f"{path}.matchingPrecedence", mp, "only the schema named 'exempt' may have matchingPrecedence 1"))
    dm = spec.get("distinguisherMethod")
    if dm is not None and dm.get("type") not in _DISTINGUISHERS:
        errs.append(not_supported(f"{path}.distinguisherMethod.type", Struct(Type=dm.get("type") or ""), _DISTINGUISHERS))
    if pl := (spec.get("priorityLevelConfiguration") or {}).get("name"):
        errs += [invalid(f"{path}.priorityLevelConfiguration.name", pl, m) for m in dns1123_subdomain(pl)]
    else:
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
            errs += _validate_resource_rule(r, f"{rp}.resourceRules[{j}]")
        for j, r in enumerate(nr):
            errs += _validate_non_resource_rule(r, f"{rp}.nonResourceRules[{j}]")
    return errs


_EVERYTHING = {"resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "clusterScope": True,
                                  "namespaces": ["*"]}],
               "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}
_EVERYONE = [{"kind": "Group", "group": {"name": "system:unauthenticated"}},
             {"kind": "Group", "group": {"name": "system:authenticated"}}]

#: the mandatory objects' specs (bootstrap's MandatoryFlowSchemas / MandatoryPriorityLevelConfigurations):
#: the API server creates them, and validation holds them to these values
MANDATORY_FLOW_SCHEMAS: dict[str, dict] = {
    "exempt": {"priorityLevelConfiguration": {"name": "exempt"}, "matchingPrecedence": 1,
               "rules": [{"subjects": [{"kind": "Group", "group": {"name": "system:masters"}}], **_EVERYTHING}]},
    "catch-all": {"priorityLevelConfiguration": {"name": "catch-all"}, "matchingPrecedence": 10000,
                  "distinguisherMethod": {"type": "ByUser"}, "rules": [{"subjects": _EVERYONE, **_EVERYTHING}]},
}
MANDATORY_PRIORITY_LEVELS: dict[str, dict] = {
    "exempt": {"type": "Exempt", "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0}},
    "catch-all": {"type": "Limited", "limited": {"nominalConcurrencyShares": 5, "lendablePercent": 0,
                                                 "limitResponse": {"type": "Reject"}}},
}


def _semantic(v: Any) -> Any:
    """A spec as apiequality.Semantic compares it: unset, empty, false and nil alike."""
    if isinstance(v, dict):
        return {k: s for k, x in v.items() if (s := _semantic(x)) not in (None, False, "", [], {})}
    if isinstance(v, list):
        return [_semantic(x) for x in v]
    return v


def _flow_schema_struct(spec: dict) -> Struct:
    """flowcontrol.FlowSchemaSpec (internal: no JSON tags, Go field names)."""
    dm = spec.get("distinguisherMethod")

    def subject(s: dict) -> Struct:
        def member(key: str, *names: str) -> Struct | None:
            m = s.get(key)
            return None if m is None else Struct(**{n: m.get(n.lower()) or "" for n in names})
        return Struct(Kind=s.get("kind") or "", User=member("user", "Name"), Group=member("group", "Name"),
                      ServiceAccount=member("serviceAccount", "Namespace", "Name"))

    def rules(r: dict) -> Struct:
        rr, nr = r.get("resourceRules"), r.get("nonResourceRules")
        return Struct(
            Subjects=None if r.get("subjects") is None else [subject(x) for x in r["subjects"]],
            ResourceRules=None if rr is None else [Struct(
                Verbs=x.get("verbs"), APIGroups=x.get("apiGroups"), Resources=x.get("resources"),
                ClusterScope=bool(x.get("clusterScope")), Namespaces=x.get("namespaces")) for x in rr],
            NonResourceRules=None if nr is None else [Struct(Verbs=x.get("verbs"), NonResourceURLs=x.get("nonResourceURLs"))
                                                      for x in nr])
    return Struct(PriorityLevelConfiguration=Struct(Name=(spec.get("priorityLevelConfiguration") or {}).get("name") or ""),
                  MatchingPrecedence=spec.get("matchingPrecedence") or 0,
                  DistinguisherMethod=None if dm is None else Struct(Type=dm.get("type") or ""),
                  Rules=None if spec.get("rules") is None else [rules(r) for r in spec["rules"]])


def _mandatory_flow_schema(spec: dict, name: str) -> list[FieldError]:
    """ValidateFlowSchema: a mandatory schema's spec is fixed."""
    fixed = MANDATORY_FLOW_SCHEMAS.get(name)
    if fixed is None or _semantic(spec) == _semantic(fixed):
        return []
    return [invalid("spec", _flow_schema_struct(spec), f"spec of '{name}' must equal the fixed value")]


def _dangling(o: Obj) -> str:
    return (find_condition((o.get("status") or {}).get("conditions"), "Dangling") or {}).get("status", "?")


class FlowSchemaStrategy(Strategy):
    status_metadata = ()  # the status strategy keeps the stored ObjectMeta
    status_deletion_kept = STORED_DELETION
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
        spec = obj.setdefault("spec", {})
        if not spec.get("matchingPrecedence"):  # an int32, so 0 is unset too
            spec["matchingPrecedence"] = 1000

    def validate(self, obj):
        name = (obj.get("metadata") or {}).get("name", "")
        return validate_flow_schema_spec(_spec(obj), name) + _mandatory_flow_schema(_spec(obj), name)


# --- PriorityLevelConfiguration ----------------------------------------------------------


def default_priority_level(spec: dict) -> None:
    """v1 defaults: nominalConcurrencyShares 30 (0 for Exempt), lendablePercent 0; a queuing
    configuration's unset or zero queues, hand size and queue length limit are 64, 8 and 50."""
    limited = spec.get("limited")
    if limited is not None:
        limited.setdefault("nominalConcurrencyShares", 30)
        limited.setdefault("lendablePercent", 0)
        q = (limited.get("limitResponse") or {}).get("queuing")
        if q is not None:
            for f, v in (("handSize", 8), ("queues", 64), ("queueLengthLimit", 50)):
                if not q.get(f):
                    q[f] = v
    exempt = spec.get("exempt")
    if spec.get("type") == "Exempt" and exempt is None:
        exempt = spec["exempt"] = {}
    if exempt is not None:
        exempt.setdefault("nominalConcurrencyShares", 0)
        exempt.setdefault("lendablePercent", 0)


_MAX_QUEUES = 10_000_000
_MAX_HASH_BITS = 60  # shufflesharding.MaxHashBits


def _validate_queuing(q: dict, path: str) -> list[FieldError]:
    """ValidatePriorityLevelQueuingConfiguration."""
    errs: list[FieldError] = []
    limit, queues, hand = q.get("queueLengthLimit") or 0, q.get("queues") or 0, q.get("handSize") or 0
    if limit <= 0:
        errs.append(invalid(f"{path}.queueLengthLimit", limit, "must be positive"))
    if queues <= 0:
        errs.append(invalid(f"{path}.queues", queues, "must be positive"))
    elif queues > _MAX_QUEUES:
        errs.append(invalid(f"{path}.queues", queues, f"must not be greater than {_MAX_QUEUES}"))
    if hand <= 0:
        errs.append(invalid(f"{path}.handSize", hand, "must be positive"))
    elif hand > queues:
        errs.append(invalid(f"{path}.handSize", hand, f"should not be greater than queues ({queues})"))
    elif math.ceil(math.log2(queues) * hand) > _MAX_HASH_BITS:  # shufflesharding.RequiredEntropyBits
        errs.append(invalid(f"{path}.handSize", hand, f"required entropy bits of deckSize {queues} and handSize "
                                                      f"{hand} should not be greater than {_MAX_HASH_BITS}"))
    return errs


def _validate_shares(c: dict, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    ncs = c.get("nominalConcurrencyShares")
    if ncs is not None and ncs < 0:
        errs.append(invalid(f"{path}.nominalConcurrencyShares", ncs, "must be a non-negative integer"))
    return errs


def _validate_lendable(c: dict, path: str) -> list[FieldError]:
    lend = c.get("lendablePercent")
    if lend is not None and not 0 <= lend <= 100:
        return [invalid(f"{path}.lendablePercent", lend, "must be between 0 and 100, inclusive")]
    return []


def _validate_limit_response(lr: dict, path: str) -> list[FieldError]:
    """ValidateLimitResponse, in its own (odd) words."""
    t = lr.get("type") or ""
    if t == "Reject":
        if lr.get("queuing") is not None:
            return [forbidden(f"{path}.queuing", "must be nil if limited.limitResponse.type is not Limited")]
        return []
    if t == "Queue":
        if lr.get("queuing") is None:
            return [required(f"{path}.queuing", "must not be empty if limited.limitResponse.type is Limited")]
        return _validate_queuing(lr["queuing"], f"{path}.queuing")
    return [not_supported(f"{path}.type", t, _LIMIT_RESPONSES)]


def validate_priority_level_spec(spec: dict, name: str) -> list[FieldError]:
    """ValidatePriorityLevelConfigurationSpec (zero nominal shares allowed, as the v1 strategy allows)."""
    t = spec.get("type") or ""
    errs: list[FieldError] = []
    if (name == "exempt") != (t == "Exempt"):
        errs.append(invalid("spec.type", t, "type must be 'Exempt' if and only if name is 'exempt'"))
    limited, exempt = spec.get("limited"), spec.get("exempt")
    if t == "Exempt":
        if limited is not None:
            errs.append(forbidden("spec.limited", "must be nil if the type is not Limited"))
        if exempt is not None:
            errs += _validate_shares(exempt, "spec.exempt") + _validate_lendable(exempt, "spec.exempt")
    elif t == "Limited":
        if exempt is not None:
            errs.append(forbidden("spec.exempt", "must be nil if the type is Limited"))
        if limited is None:
            errs.append(required("spec.limited", "must not be empty when type is Limited"))
        else:
            lp = "spec.limited"
            errs += _validate_shares(limited, lp)
            errs += _validate_limit_response(limited.get("limitResponse") or {}, f"{lp}.limitResponse")
            errs += _validate_lendable(limited, lp)
            borrow = limited.get("borrowingLimitPercent")
            if borrow is not None and borrow < 0:
                errs.append(invalid(f"{lp}.borrowingLimitPercent", borrow, "if specified, must be a non-negative integer"))
    else:
        errs.append(not_supported("spec.type", t, _PL_TYPES))
    return errs


def _priority_level_struct(spec: dict) -> Struct:
    """flowcontrol.PriorityLevelConfigurationSpec (internal: no JSON tags, Go field names)."""
    limited, exempt = spec.get("limited"), spec.get("exempt")
    lr = (limited or {}).get("limitResponse") or {}
    q = lr.get("queuing")
    return Struct(
        Type=spec.get("type") or "",
        Limited=None if limited is None else Struct(
            NominalConcurrencyShares=limited.get("nominalConcurrencyShares") or 0,
            LimitResponse=Struct(Type=lr.get("type") or "", Queuing=None if q is None else Struct(
                Queues=q.get("queues") or 0, HandSize=q.get("handSize") or 0,
                QueueLengthLimit=q.get("queueLengthLimit") or 0)),
            LendablePercent=limited.get("lendablePercent"), BorrowingLimitPercent=limited.get("borrowingLimitPercent")),
        Exempt=None if exempt is None else Struct(NominalConcurrencyShares=exempt.get("nominalConcurrencyShares"),
                                                  LendablePercent=exempt.get("lendablePercent")))


def _mandatory_priority_level(spec: dict, name: str) -> list[FieldError]:
    """ValidateIfMandatoryPriorityLevelConfigurationObject: a mandatory level's spec is fixed, but for
    the exempt level's `exempt` settings, which an administrator may tune."""
    fixed = MANDATORY_PRIORITY_LEVELS.get(name)
    if fixed is None:
        return []
    have = {**spec, "exempt": fixed["exempt"]} if name == "exempt" else spec
    if _semantic(have) == _semantic(fixed):
        return []
    words = "except the 'spec.exempt' field " if name == "exempt" else ""
    return [invalid("spec", _priority_level_struct(spec), f"spec of '{name}' {words}must equal the fixed value")]


def _limited(o: Obj) -> dict:
    return _spec(o).get("limited") or {}


def _queuing(field: str):
    def cell(o: Obj):
        q = (_limited(o).get("limitResponse") or {}).get("queuing")
        return "<none>" if q is None else q.get(field, "<none>")
    return cell


class PriorityLevelConfigurationStrategy(Strategy):
    status_metadata = ()  # the status strategy keeps the stored ObjectMeta
    status_deletion_kept = STORED_DELETION
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

    def validate(self, obj):
        name = (obj.get("metadata") or {}).get("name", "")
        return validate_priority_level_spec(_spec(obj), name) + _mandatory_priority_level(_spec(obj), name)


register(
    Resource(GROUP, "flowschemas", "FlowSchema", ["v1"], namespaced=False, subresources=("status",),
             strategy=FlowSchemaStrategy()),
    Resource(GROUP, "prioritylevelconfigurations", "PriorityLevelConfiguration", ["v1"], namespaced=False,
             subresources=("status",), strategy=PriorityLevelConfigurationStrategy()),
)
