"""RBAC escalation prevention, as kube-apiserver's rbac registries do it (pkg/registry/rbac/*/policybased):
a Role or ClusterRole may grant only what its writer holds (in the namespace written), an aggregationRule
(which may gather anything) only a writer of full authority, and a binding may bind a role only for a
writer holding what the role grants. Members of system:masters skip the checks, as do writers allowed to
`escalate` the role (roles and clusterroles) or to `bind` the role named (bindings). Without this,
a user allowed to create RoleBindings could bind itself cluster-admin."""

from __future__ import annotations

from ...machinery import errors
from .authorizer import Attributes, decide
from .rbac import MASTERS

GROUP = "rbac.authorization.k8s.io"
#: an aggregationRule's price: everything (upstream's fullAuthority)
FULL_AUTHORITY = [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}, {"verbs": ["*"], "nonResourceURLs": ["*"]}]
#: what a GC-only update may change without the rules being judged again (IsOnlyMutatingGCFields)
_GC_FIELDS = ("ownerReferences", "finalizers", "resourceVersion", "managedFields", "generation")


def breakdown(rule: dict) -> list[dict]:
    """A rule as atomic rules: one group, resource, verb and name each; non-resource URLs one per verb (BreakdownRule)."""
    verbs, names = rule.get("verbs") or [], rule.get("resourceNames") or []
    out = []
    for g in rule.get("apiGroups") or []:
        for r in rule.get("resources") or []:
            for v in verbs:
                out += [{"apiGroups": [g], "resources": [r], "verbs": [v], "resourceNames": [n]} for n in names] or \
                       [{"apiGroups": [g], "resources": [r], "verbs": [v]}]
    out += [{"nonResourceURLs": [u], "verbs": [v]} for u in rule.get("nonResourceURLs") or [] for v in verbs]
    return out


def _has_all(owner: list, wanted: list) -> bool:
    return all(w in owner for w in wanted)


def _resources_covered(owner: list, wanted: list) -> bool:
    if "*" in owner:
        return True
    return all(r in owner or ("/" in r and "*/" + r.split("/", 1)[1] in owner) for r in wanted)


def _url_covered(owner: str, path: str) -> bool:
    return owner == path or (owner.endswith("*") and path.startswith(owner.rstrip("*")))


def covers(owner: dict, rule: dict) -> bool:
    """Does `owner` grant everything (atomic) `rule` does? (ruleCovers: a wildcard covers only where the owner
    has the wildcard itself; a resourceName-limited owner covers only those names.)"""
    o_names, names = owner.get("resourceNames") or [], rule.get("resourceNames") or []
    return (("*" in (owner.get("verbs") or []) or _has_all(owner.get("verbs") or [], rule.get("verbs") or []))
            and ("*" in (owner.get("apiGroups") or []) or _has_all(owner.get("apiGroups") or [], rule.get("apiGroups") or []))
            and _resources_covered(owner.get("resources") or [], rule.get("resources") or [])
            and all(any(_url_covered(o, u) for o in owner.get("nonResourceURLs") or []) for u in rule.get("nonResourceURLs") or [])
            and (not o_names or (bool(names) and _has_all(o_names, names))))


def _quoted(values: list[str]) -> str:
    """Go's %q of a []string."""
    return "[" + " ".join('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values) + "]"


def compact_string(rule: dict) -> str:
    """rbacv1helpers.CompactString: the rule's non-empty lists, in its order."""
    parts = [f"{label}:{_quoted(rule[key])}" for key, label in (
        ("apiGroups", "APIGroups"), ("resources", "Resources"), ("nonResourceURLs", "NonResourceURLs"),
        ("resourceNames", "ResourceNames"), ("verbs", "Verbs")) if rule.get(key)]
    return "{" + ", ".join(parts) + "}"


def _compacted(missing: list[dict]) -> list[dict]:
    """CompactRules: atomic rules of one group and resource, no names, merged into one with their verbs."""
    merged: dict[tuple[str, str], dict] = {}
    out = []
    for r in missing:
        if r.get("resourceNames") or r.get("nonResourceURLs"):
            out.append(r)
            continue
        key = (r["apiGroups"][0], r["resources"][0])
        if key in merged:
            merged[key]["verbs"] += [v for v in r["verbs"] if v not in merged[key]["verbs"]]
        else:
            merged[key] = {"apiGroups": [key[0]], "resources": [key[1]], "verbs": list(r["verbs"])}
            out.append(merged[key])
    return out


def not_held(rbac, user, namespace: str, rules: list[dict]) -> str:
    """ConfirmNoEscalation: "" when the user holds every rule in `namespace`, else why not (with the
    user's bindings whose role could not be found: what they would grant is not counted)."""
    unresolved: list[str] = []
    resource, non_resource = rbac.rules_for(user.name, user.groups, namespace, unresolved)
    owned = resource + non_resource
    missing = [a for r in rules for a in breakdown(r) if not any(covers(o, a) for o in owned)]
    if not missing:
        return ""
    described = sorted({compact_string(r) for r in _compacted(missing)})
    why = (f"user {_quoted([user.name])[1:-1]} (groups={_quoted(list(user.groups))}) is attempting to grant RBAC "
           "permissions not currently held:\n" + "\n".join(described))
    if unresolved:  # Go's %v of a one-error list, the error an aggregate ("[a, b]" where several differ)
        distinct = list(dict.fromkeys(unresolved))
        why += "; resolution errors: [" + (distinct[0] if len(distinct) == 1 else "[" + ", ".join(distinct) + "]") + "]"
    return why


def _only_gc_fields(obj: dict, old: dict | None) -> bool:
    """IsOnlyMutatingGCFields: the update changes owner references or finalizers and nothing else."""
    if old is None:
        return False

    def rest(o: dict) -> dict:
        meta = {k: v for k, v in (o.get("metadata") or {}).items() if k not in _GC_FIELDS}
        return {**o, "metadata": meta}
    return rest(obj) == rest(old)


class RBACEscalation:
    """The checks on writes of the four RBAC kinds, once the server's authorizer is known. They run on the
    object mutating admission leaves, before the registry validates it, as upstream's storage wrappers
    judge it before their inner storage does: a role both invalid and escalating is refused 403, not 422."""

    def __init__(self, plugins) -> None:
        self.plugins = plugins

    async def validate(self, a) -> None:
        authorizer, user = self.plugins.authorizer, a.opts.user
        rbac = getattr(authorizer, "rbac", None)
        if rbac is None or user is None or MASTERS in user.groups or a.operation not in ("CREATE", "UPDATE"):
            return
        if a.operation == "UPDATE" and _only_gc_fields(a.obj, a.old):
            return
        plural, name, ns = a.res.plural, a.obj["metadata"].get("name", ""), a.namespace or ""
        if plural in ("roles", "clusterroles"):
            asked = Attributes("escalate", "", True, GROUP, "*", plural, "", ns, name if a.operation == "UPDATE" else "")
            if (await decide(authorizer, user, asked)).allowed:
                return
            why = not_held(rbac, user, ns, a.obj.get("rules") or [])
            # (an update's too where the old role had one: dropping it stops what it gathers being tightened)
            aggregates = a.obj.get("aggregationRule") or (a.old or {}).get("aggregationRule")
            if not why and aggregates and not_held(rbac, user, ns, FULL_AUTHORITY):
                why = "must have cluster-admin privileges to use the aggregationRule"
        else:
            ref = a.obj.get("roleRef") or {}
            kind = {"ClusterRole": "clusterroles", "Role": "roles"}.get(ref.get("kind", ""))
            if kind is None:  # upstream answers 500 (GetRoleReferenceRules' plain error); validation's 422 here
                return
            bind = Attributes("bind", "", True, ref.get("apiGroup", ""), "", kind, "", ns, ref.get("name", ""))
            if (await decide(authorizer, user, bind)).allowed:
                return
            role = rbac.source.get(kind, ns if kind == "roles" else None, ref.get("name", ""))
            if role is None:
                raise errors.not_found(GROUP, kind, ref.get("name", ""))
            rules = rbac.cluster_role_rules(role) if kind == "clusterroles" else role.get("rules") or []
            why = not_held(rbac, user, ns, rules)
        if why:
            raise errors.forbidden(GROUP, plural, name, why)
