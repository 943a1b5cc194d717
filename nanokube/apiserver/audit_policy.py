"""The audit policy of `--audit-policy-file`: an audit.k8s.io/v1 Policy whose rules, in order, say
at which level (and omitting which stages) a request is audited, as kube-apiserver's policy
checker reads them (staging/src/k8s.io/apiserver/pkg/audit/policy/{reader,checker}.go,
pkg/apis/audit/validation): the first rule that matches wins; none matching is level None."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from ..machinery import configfile
from ..machinery.configfile import ANY, Kind, Struct
from ..machinery.validation import FieldError, dns1123_subdomain, invalid, not_supported, required

NONE, METADATA, REQUEST, REQUEST_RESPONSE = "None", "Metadata", "Request", "RequestResponse"
LEVELS = (NONE, METADATA, REQUEST, REQUEST_RESPONSE)
#: the stages, in upstream's order (also that of validation's "allowed stages are ..." message)
RECEIVED, STARTED, COMPLETE, PANIC = "RequestReceived", "ResponseStarted", "ResponseComplete", "Panic"
STAGES = (RECEIVED, STARTED, COMPLETE, PANIC)
#: a Policy's fields and their Go types (audit.k8s.io/v1; metadata, an ObjectMeta, is kept as it is),
#: the file kind as kube-apiserver's audit scheme decodes it
_RULE = Struct("v1.PolicyRule", {
    "level": "v1.Level", "users": [str], "userGroups": [str], "verbs": [str],
    "resources": [Struct("v1.GroupResources", {"group": str, "resources": [str], "resourceNames": [str]})],
    "namespaces": [str], "nonResourceURLs": [str], "omitStages": ["v1.Stage"], "omitManagedFields": bool})
FILE = Kind("audit.k8s.io/v1", "Policy", "pkg/audit/scheme.go:30", Struct("v1.Policy", {
    "apiVersion": str, "kind": str, "metadata": ANY, "rules": [_RULE], "omitStages": ["v1.Stage"],
    "omitManagedFields": bool}))

log = logging.getLogger(__name__)


class PolicyError(ValueError):
    """A policy file that cannot be read, decoded or validated: the server does not start."""


@dataclass(frozen=True, slots=True)
class Decision:
    """What the policy says of one request (upstream's RequestAuditConfig)."""
    level: str
    omit_stages: frozenset[str] = frozenset()
    omit_managed_fields: bool = False


@dataclass(frozen=True, slots=True)
class _GroupResources:
    group: str
    resources: tuple[str, ...]
    names: frozenset[str]


@dataclass(frozen=True, slots=True)
class _Rule:
    decision: Decision
    users: frozenset[str]
    groups: frozenset[str]
    verbs: frozenset[str]
    resources: tuple[_GroupResources, ...]
    namespaces: frozenset[str]
    urls: tuple[str, ...]

    def matches(self, user, verb: str, resource_request: bool, group: str, resource: str, subresource: str,
                namespace: str, name: str, path: str) -> bool:
        if self.users and (user is None or user.name not in self.users):
            return False
        if self.groups and (user is None or self.groups.isdisjoint(user.groups)):
            return False
        if self.verbs and verb not in self.verbs:
            return False
        if self.namespaces or self.resources:
            if not resource_request or self.namespaces and namespace not in self.namespaces:
                return False  # (a cluster-scoped resource's namespace is "")
            return not self.resources or any(_resource_matches(gr, group, resource, subresource, name)
                                             for gr in self.resources)
        if self.urls:
            return not resource_request and any(_path_matches(path, spec) for spec in self.urls)
        return True


def _resource_matches(gr: _GroupResources, group: str, resource: str, subresource: str, name: str) -> bool:
    if gr.group != group:
        return False
    if not gr.resources:
        return True
    if gr.names and name not in gr.names:
        return False
    combined = f"{resource}/{subresource}" if subresource else resource
    for res in gr.resources:
        if res == "*" or res == combined:
            return True
        if subresource and res.startswith("*/") and res[2:] == subresource:
            return True
        if res.endswith("/*") and res[:-2] == resource:  # the resource and all its subresources
            return True
    return False


def _path_matches(path: str, spec: str) -> bool:
    return spec == "*" or spec == path or spec.endswith("*") and path.startswith(spec.rstrip("*"))


class Policy:
    """The rules of a validated policy, with the decision for each loopback client's request kept
    (`decide_loopback`): the in-process components write on every controller's hot path."""

    def __init__(self, rules: list[_Rule], omit_stages: frozenset[str]):
        self.rules = rules
        self.default = Decision(NONE, omit_stages)
        #: whether a decision depends on the object's namespace or name, not only who does what to which resource
        self._by_object = any(r.namespaces or any(gr.names for gr in r.resources) for r in rules)
        self._decided: dict[tuple, Decision] = {}

    def decide(self, user, verb: str, resource_request: bool, group: str = "", resource: str = "",
               subresource: str = "", namespace: str = "", name: str = "", path: str = "") -> Decision:
        for rule in self.rules:
            if rule.matches(user, verb, resource_request, group, resource, subresource, namespace, name, path):
                return rule.decision
        return self.default

    def decide_loopback(self, user, verb: str, group: str, resource: str, subresource: str, namespace: str,
                        name: str) -> Decision:
        key = (user.name, user.groups, verb, group, resource, subresource) + \
            ((namespace, name) if self._by_object else ())
        d = self._decided.get(key)
        if d is None:
            if len(self._decided) >= 4096:
                self._decided.clear()
            d = self._decided[key] = self.decide(user, verb, True, group, resource, subresource, namespace, name)
        return d


def load(path: str | Path) -> Policy:
    """The policy in a file (YAML or JSON), or PolicyError with upstream's reasons (LoadPolicyFromFile's:
    each but a read error followed by `: from file PATH`)."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise PolicyError(f'failed to read file path "{path}": {e}') from None
    try:
        return _from_text(text)
    except PolicyError as e:
        raise PolicyError(f"{e}: from file {path}") from None


def _from_text(text: str) -> Policy:
    """LoadPolicyFromBytes: decoded strictly, else leniently with a warning (where only the strict
    decoding failed), then validated."""
    try:
        doc, strict = configfile.decode(text, FILE, lenient=True)
    except configfile.DecodeError as e:
        raise PolicyError(f"failed decoding: {e}") from None
    if strict:
        log.warning("Audit policy contains errors, falling back to lenient decoding: %s", configfile.strict_error(strict))
    policy = parse(doc)
    if not policy.rules:
        raise PolicyError("loaded illegal policy with 0 rules")
    return policy


def parse(doc: dict) -> Policy:
    """A Policy object's rules, validated as upstream's ValidatePolicy does (all errors at once)."""
    errs = _stage_errors(doc.get("omitStages"), "omitStages")
    rules = doc.get("rules") or []
    if not isinstance(rules, list):
        raise PolicyError(f"rules: Invalid value: {rules!r}: must be a list")
    for i, r in enumerate(rules):
        errs += _rule_errors(r if isinstance(r, dict) else {}, f"rules[{i}]")
    if errs:
        texts = list(dict.fromkeys(str(e) for e in errs))
        raise PolicyError(texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]")
    policy_omit = frozenset(doc.get("omitStages") or ())
    policy_mf = bool(doc.get("omitManagedFields"))
    return Policy([_rule(r, policy_omit, policy_mf) for r in rules], policy_omit)


def _rule(r: dict, policy_omit: frozenset[str], policy_mf: bool) -> _Rule:
    mf = r.get("omitManagedFields")
    decision = Decision(r["level"], policy_omit | frozenset(r.get("omitStages") or ()),
                        policy_mf if mf is None else bool(mf))
    return _Rule(decision, frozenset(r.get("users") or ()), frozenset(r.get("userGroups") or ()),
                 frozenset(r.get("verbs") or ()),
                 tuple(_GroupResources(gr.get("group") or "", tuple(gr.get("resources") or ()),
                                       frozenset(gr.get("resourceNames") or ())) for gr in r.get("resources") or ()),
                 frozenset(r.get("namespaces") or ()), tuple(r.get("nonResourceURLs") or ()))


def _rule_errors(r: dict, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    level = r.get("level") or ""
    if not level:
        errs.append(required(f"{path}.level"))
    elif level not in LEVELS:
        errs.append(not_supported(f"{path}.level", level, LEVELS))
    urls = r.get("nonResourceURLs") or []
    for i, url in enumerate(urls):
        if url == "*":
            continue
        if not url.startswith("/"):
            errs.append(invalid(f"{path}.nonResourceURLs[{i}]", url, "non-resource URL rules must begin with a '/' character"))
        if url and "*" in url[:-1]:
            errs.append(invalid(f"{path}.nonResourceURLs[{i}]", url,
                                "non-resource URL wildcards '*' must be the final character of the rule"))
    for gr in r.get("resources") or []:
        group = gr.get("group") or ""
        if group:
            errs += [invalid(f"{path}.resources.group", group, msg) for msg in dns1123_subdomain(group)]
        if gr.get("resourceNames") and not gr.get("resources"):
            errs.append(invalid(f"{path}.resources.resourceNames", gr["resourceNames"],
                                "using resourceNames requires at least one resource"))
    errs += _stage_errors(r.get("omitStages"), f"{path}.omitStages")
    if urls and (r.get("resources") or r.get("namespaces")):
        errs.append(invalid(f"{path}.nonResourceURLs", urls,
                            "rules cannot apply to both regular resources and non-resource URLs"))
    return errs


def _stage_errors(stages, path: str) -> list[FieldError]:
    return [invalid(f"{path}[{i}]", s, "allowed stages are " + ",".join(STAGES))
            for i, s in enumerate(stages or []) if s not in STAGES]
