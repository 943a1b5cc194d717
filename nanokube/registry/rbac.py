"""rbac.authorization.k8s.io (Roles, ClusterRoles, bindings) and
authorization.k8s.io's access and rules reviews, which are answered, not stored."""

from __future__ import annotations

from .base import AGE, Column, Resource, Strategy, register
from ..machinery.gofmt import Struct
from ..machinery.validation import (
    FieldError,
    dns1123_subdomain,
    forbidden,
    immutable,
    invalid,
    label_selector_value,
    label_value,
    not_supported,
    path_segment_name,
    qualified_name,
    required,
    validate_label_selector,
)

GROUP = "rbac.authorization.k8s.io"
Errors = list[FieldError]


def policy_rule(rule: dict, path: str, namespaced: bool) -> Errors:
    errs: Errors = []
    if not rule.get("verbs"):
        errs.append(required(f"{path}.verbs", "verbs must contain at least one value"))
    if rule.get("nonResourceURLs"):
        if namespaced:
            errs.append(invalid(f"{path}.nonResourceURLs", rule["nonResourceURLs"], "namespaced rules cannot apply to non-resource URLs"))
        if rule.get("apiGroups") or rule.get("resources"):
            errs.append(invalid(f"{path}.nonResourceURLs", rule["nonResourceURLs"], "rules cannot apply to both regular resources and non-resource URLs"))
        return errs
    if not rule.get("apiGroups"):
        errs.append(required(f"{path}.apiGroups", "resource rules must supply at least one api group"))
    if not rule.get("resources"):
        errs.append(required(f"{path}.resources", "resource rules must supply at least one resource"))
    return errs


def subject(s: dict, path: str, binding_namespaced: bool) -> Errors:
    kind, name = s.get("kind", ""), s.get("name", "")
    errs: Errors = [] if name else [required(f"{path}.name")]
    if kind == "ServiceAccount":
        if name:
            errs += [invalid(f"{path}.name", name, m) for m in dns1123_subdomain(name)]
        if s.get("apiGroup"):
            errs.append(not_supported(f"{path}.apiGroup", s["apiGroup"], [""]))
        if not binding_namespaced and not s.get("namespace"):
            errs.append(required(f"{path}.namespace"))
    elif kind in ("User", "Group"):
        if s.get("apiGroup") != GROUP:
            errs.append(not_supported(f"{path}.apiGroup", s.get("apiGroup", ""), [GROUP]))
    else:
        errs.append(not_supported(f"{path}.kind", kind, ["ServiceAccount", "User", "Group"]))
    return errs


class _RoleStrategy(Strategy):
    name_validator = staticmethod(path_segment_name)  # named with colons (system:node): any path segment
    track_generation = False
    namespaced = True

    def validate(self, obj):
        errs: Errors = []
        for i, r in enumerate(obj.get("rules") or []):
            errs += policy_rule(r, f"rules[{i}]", self.namespaced)
        return errs


class ClusterRoleStrategy(_RoleStrategy):
    namespaced = False

    def validate(self, obj, allow_invalid_values: bool = False):
        """ValidateClusterRole: its rules, and an aggregationRule's selectors (each must also convert
        to a selector, or it is an 'invalid label selector.')."""
        errs = super().validate(obj)
        rule = obj.get("aggregationRule")
        if rule is None:
            return errs
        selectors = rule.get("clusterRoleSelectors") or []
        if not selectors:
            errs.append(required("aggregationRule.clusterRoleSelectors",
                                 "at least one clusterRoleSelector required if aggregationRule is non-nil"))
        for i, sel in enumerate(selectors):
            p = f"aggregationRule.clusterRoleSelectors[{i}]"
            errs += validate_label_selector(sel, p, allow_invalid_values)
            if _unconvertible(sel):
                errs.append(invalid(p, label_selector_value(sel), "invalid label selector."))
        return errs

    def validate_update(self, new, old):
        """Label values a stored selector already had invalid stay allowed (upstream's ratcheting)."""
        old_selectors = (old.get("aggregationRule") or {}).get("clusterRoleSelectors") or []
        ratchet = any(_invalid_values(sel) for sel in old_selectors)
        return self.validate(new, ratchet)


def _invalid_values(sel: dict) -> bool:
    return any(label_value(v) for req in sel.get("matchExpressions") or [] for v in req.get("values") or [])


def _unconvertible(sel: dict) -> bool:
    """Whether metav1.LabelSelectorAsSelector fails: a bad label key or value, an unknown operator,
    or values the operator does not take."""
    for k, v in (sel.get("matchLabels") or {}).items():
        if qualified_name(k) or label_value(v):
            return True
    for req in sel.get("matchExpressions") or []:
        op, values = req.get("operator"), req.get("values") or []
        if op not in ("In", "NotIn", "Exists", "DoesNotExist") or qualified_name(req.get("key") or ""):
            return True
        if (op in ("In", "NotIn")) != bool(values) or any(label_value(v) for v in values):
            return True
    return False


def _role_ref(o: dict) -> str:
    ref = o.get("roleRef") or {}
    return f'{ref.get("kind", "")}/{ref.get("name", "")}'


def _subjects(kind: str):
    def col(o: dict) -> str:
        return ", ".join((f'{s.get("namespace", "")}/{s["name"]}' if kind == "ServiceAccount" else s["name"])
                         for s in o.get("subjects") or [] if s.get("kind") == kind)
    return col


class _BindingStrategy(Strategy):
    name_validator = staticmethod(path_segment_name)
    track_generation = False
    namespaced = True
    columns = [
        Column("Name", "string", lambda o: o["metadata"]["name"], format="name"),
        Column("Role", "string", _role_ref),
        Column("Age", "string", AGE),
        Column("Users", "string", _subjects("User"), priority=1),
        Column("Groups", "string", _subjects("Group"), priority=1),
        Column("ServiceAccounts", "string", _subjects("ServiceAccount"), priority=1),
    ]

    def default(self, obj, version):
        """rbac/v1 SetDefaults_*RoleBinding and SetDefaults_Subject: an unset roleRef.apiGroup, and a
        User's or Group's subject apiGroup, is rbac.authorization.k8s.io (manifests often leave them out)."""
        ref = obj.get("roleRef")
        if isinstance(ref, dict) and not ref.get("apiGroup"):
            ref["apiGroup"] = GROUP
        for s in obj.get("subjects") or []:
            if isinstance(s, dict) and not s.get("apiGroup") and s.get("kind") in ("User", "Group"):
                s["apiGroup"] = GROUP

    def validate(self, obj):
        ref = obj.get("roleRef") or {}
        errs: Errors = []
        if ref.get("apiGroup") != GROUP:
            errs.append(not_supported("roleRef.apiGroup", ref.get("apiGroup", ""), [GROUP]))
        kinds = ["Role", "ClusterRole"] if self.namespaced else ["ClusterRole"]
        if ref.get("kind") not in kinds:
            errs.append(not_supported("roleRef.kind", ref.get("kind", ""), kinds))
        if not ref.get("name"):
            errs.append(required("roleRef.name"))
        else:
            errs += [invalid("roleRef.name", ref["name"], m) for m in path_segment_name(ref["name"])]
        for i, s in enumerate(obj.get("subjects") or []):
            errs += subject(s, f"subjects[{i}]", self.namespaced)
        return errs

    def validate_update(self, new, old):
        if new.get("roleRef") != old.get("roleRef"):
            ref = new.get("roleRef") or {}  # the internal rbac.RoleRef: Go's field names
            internal = Struct(APIGroup=ref.get("apiGroup", ""), Kind=ref.get("kind", ""), Name=ref.get("name", ""))
            return [invalid("roleRef", internal, "cannot change roleRef")]
        return self.validate(new)


class ClusterRoleBindingStrategy(_BindingStrategy):
    namespaced = False


class ReviewStrategy(Strategy):
    """Reviews are computed per request; the API server never stores them."""

    track_generation = False

    def validate(self, obj):
        spec = obj.get("spec") or {}
        ra, nra = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
        errs = []
        if ra is not None and nra is not None:
            errs.append(invalid("spec.nonResourceAttributes", _non_resource(nra),
                                "cannot be specified in combination with resourceAttributes"))
        if ra is None and nra is None:
            errs.append(invalid("spec.resourceAttributes", None,
                                "exactly one of nonResourceAttributes or resourceAttributes must be specified"))
        return errs + self.validate_subject(spec) + _selector_attributes(ra or {})

    def validate_subject(self, spec: dict) -> list[FieldError]:
        return []

    def validate_update(self, new, old):
        return [immutable("spec", new.get("spec"))]


def _selector_attributes(ra: dict) -> list[FieldError]:
    """A reviewed request's field and label selectors (validateFieldSelectorAttributes and its label twin):
    a raw selector or requirements, not both; each requirement as metav1 judges it, an operator this
    server does not know allowed (a newer client's), a raw selector left to the authorizer unparsed."""
    errs: list[FieldError] = []
    for name in ("fieldSelector", "labelSelector"):
        sel = ra.get(name)
        if sel is None:
            continue
        path, raw, reqs = f"spec.resourceAttributes.{name}", sel.get("rawSelector") or "", sel.get("requirements") or []
        if raw and reqs:
            errs.append(invalid(f"{path}.rawSelector", raw, "may not specified at the same time as requirements"))
        if not raw and not reqs:
            errs.append(required(f"{path}.requirements", f"when {path} is specified, requirements or rawSelector is required"))
        for i, r in enumerate(reqs):
            p, op, key, values = f"{path}.requirements[{i}]", r.get("operator") or "", r.get("key") or "", r.get("values") or []
            if name == "fieldSelector" and not key:
                errs.append(required(f"{p}.key", "must be specified"))
            if op in ("In", "NotIn") and not values:
                errs.append(required(f"{p}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
            elif op in ("Exists", "DoesNotExist") and values:
                errs.append(forbidden(f"{p}.values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
            if name == "labelSelector":
                errs += [invalid(f"{p}.key", key, m) for m in qualified_name(key)]
                for j, v in enumerate(values):
                    errs += [invalid(f"{p}.values[{j}]", v, m) for m in label_value(v)]
    return errs


def _non_resource(nra: dict) -> Struct:
    """The internal authorization.NonResourceAttributes field.Invalid is handed: Go's field names."""
    return Struct(Path=nra.get("path") or "", Verb=nra.get("verb") or "")


class SubjectAccessReviewStrategy(ReviewStrategy):
    """A review about a named subject: a user or at least one group."""

    def validate_subject(self, spec: dict) -> list[FieldError]:
        if not spec.get("user") and not spec.get("groups"):
            return [invalid("spec.user", spec.get("user", ""), "at least one of user or group must be specified")]
        return []


class LocalSubjectAccessReviewStrategy(SubjectAccessReviewStrategy):
    def validate(self, obj):
        errs = super().validate(obj)
        nra = (obj.get("spec") or {}).get("nonResourceAttributes")
        if nra is not None:
            errs.append(invalid("spec.nonResourceAttributes", _non_resource(nra), "disallowed on this kind of request"))
        return errs


class SelfSubjectRulesReviewStrategy(Strategy):
    track_generation = False


register(
    Resource(GROUP, "roles", "Role", ["v1"], namespaced=True, strategy=_RoleStrategy()),
    Resource(GROUP, "clusterroles", "ClusterRole", ["v1"], namespaced=False, strategy=ClusterRoleStrategy()),
    Resource(GROUP, "rolebindings", "RoleBinding", ["v1"], namespaced=True, strategy=_BindingStrategy()),
    Resource(GROUP, "clusterrolebindings", "ClusterRoleBinding", ["v1"], namespaced=False, strategy=ClusterRoleBindingStrategy()),
    Resource("authorization.k8s.io", "selfsubjectaccessreviews", "SelfSubjectAccessReview", ["v1"], namespaced=False,
             strategy=ReviewStrategy(), verbs=("create",)),
    Resource("authorization.k8s.io", "subjectaccessreviews", "SubjectAccessReview", ["v1"], namespaced=False,
             strategy=SubjectAccessReviewStrategy(), verbs=("create",)),
    Resource("authorization.k8s.io", "localsubjectaccessreviews", "LocalSubjectAccessReview", ["v1"], namespaced=True,
             strategy=LocalSubjectAccessReviewStrategy(), verbs=("create",)),
    Resource("authorization.k8s.io", "selfsubjectrulesreviews", "SelfSubjectRulesReview", ["v1"], namespaced=False,
             strategy=SelfSubjectRulesReviewStrategy(), verbs=("create",)),
)
