"""Which requests a webhook or policy sees: rules (operations, groups,
versions, resources/subresources, scope), namespace and object selectors,
Equivalent matching across versions and aliases, and the exemption of
admission configuration objects themselves (apiserver's predicates/rules,
namespace and object matchers)."""

from __future__ import annotations

from dataclasses import dataclass

from ...machinery.selectors import matches_labels, selector_from_object
from ...registry.base import Resource

ADMISSION_GROUP = "admissionregistration.k8s.io"
#: never sent to API-registered webhooks or policies, so a bad one cannot lock itself in
EXEMPT = frozenset({"validatingwebhookconfigurations", "mutatingwebhookconfigurations",
                    "validatingadmissionpolicies", "validatingadmissionpolicybindings",
                    "mutatingadmissionpolicies", "mutatingadmissionpolicybindings"})


@dataclass(frozen=True, slots=True)
class Target:
    """A resource at one version: what a rule matched (GVR and GVK)."""

    res: Resource
    version: str

    @property
    def gvr(self) -> dict:
        return {"group": self.res.group, "version": self.version, "resource": self.res.plural}

    @property
    def gvk(self) -> dict:
        return {"group": self.res.group, "version": self.version, "kind": self.res.kind}


def exempt(res: Resource) -> bool:
    return res.group == ADMISSION_GROUP and res.plural in EXEMPT


def _split(resource: str) -> tuple[str, str]:
    r, _, sub = resource.partition("/")
    return r, sub


def rule_matches(rule: dict, op: str, group: str, version: str, plural: str, subresource: str, namespace: str) -> bool:
    scope = rule.get("scope") or "*"
    if scope == "Namespaced" and (plural == "namespaces" and group == "" or not namespace):
        return False
    if scope == "Cluster" and not (plural == "namespaces" and group == "" or not namespace):
        return False
    ops = rule.get("operations") or []
    if "*" not in ops and op not in ops:
        return False
    groups = rule.get("apiGroups") or []
    if "*" not in groups and group not in groups:
        return False
    versions = rule.get("apiVersions") or []
    if "*" not in versions and version not in versions:
        return False
    for r in rule.get("resources") or []:
        rr, rs = _split(r)
        if (rr == "*" or rr == plural) and (rs == "*" or rs == subresource):
            return True
    return False


def rule_names_match(rule: dict, name: str) -> bool:
    names = rule.get("resourceNames") or []
    return not names or name in names


_EQUIVALENTS: dict[int, tuple[Resource, list[Target]]] = {}


def equivalents(index, res: Resource) -> list[Target]:
    """The same objects served under other versions or groups (shared storage),
    kept per Resource: a changed custom resource is a new Resource object."""
    hit = _EQUIVALENTS.get(id(res))
    if hit is not None and hit[0] is res:
        return hit[1]
    key = res.storage_resource
    out = [Target(r, v) for r in index.resources if r.storage_resource == key for v in r.versions]
    if len(_EQUIVALENTS) > 4096:  # custom resources come and go: keep the memo bounded
        _EQUIVALENTS.clear()
    _EQUIVALENTS[id(res)] = (res, out)
    return out


def match_rules(index, rules: list[dict], match_policy: str, op: str, target: Target, subresource: str,
                namespace: str, name: str | None = None) -> Target | None:
    """The target a rule list matches: the request's own, or (Equivalent) an
    equivalent resource, earlier rules first. `name` checks resourceNames."""
    res, version = target.res, target.version
    for rule in rules:
        if rule_matches(rule, op, res.group, version, res.plural, subresource, namespace) and \
                (name is None or rule_names_match(rule, name)):
            return target
    if match_policy != "Equivalent":
        return None
    others = [t for t in equivalents(index, res) if t != target]
    for rule in rules:
        for t in others:
            if rule_matches(rule, op, t.res.group, t.version, t.res.plural, subresource, namespace) and \
                    (name is None or rule_names_match(rule, name)):
                return t
    return None


def selector_matches(sel: dict | None, labels: dict | None) -> bool:
    """A nil or empty selector matches everything here (defaults make it {})."""
    if not sel or not (sel.get("matchLabels") or sel.get("matchExpressions")):
        return True
    return matches_labels(selector_from_object(sel), labels)


def namespace_labels(rest, res: Resource, op: str, subresource: str, namespace: str,
                     obj: dict | None) -> dict | None:
    """The labels a namespaceSelector is checked against; None for requests
    outside any namespace (cluster-scoped objects other than namespaces)."""
    is_namespace = res.group == "" and res.plural == "namespaces"
    if is_namespace and not subresource and op in ("CREATE", "UPDATE") and obj is not None:
        return (obj.get("metadata") or {}).get("labels") or {}
    if not namespace:
        return None
    nsres = rest.index.get("", "v1", "namespaces")
    entry = rest.cache.get(nsres.key(None, namespace))
    return ((entry.obj.get("metadata") or {}).get("labels") or {}) if entry else {}


def namespace_matches(sel: dict | None, labels: dict | None) -> bool:
    return labels is None or selector_matches(sel, labels)


def object_matches(sel: dict | None, obj: dict | None, old: dict | None) -> bool:
    """The new or the old object matches (upstream's object matcher)."""
    if not sel or not (sel.get("matchLabels") or sel.get("matchExpressions")):
        return True
    reqs = selector_from_object(sel)
    return any(o is not None and matches_labels(reqs, (o.get("metadata") or {}).get("labels")) for o in (obj, old))
