"""admissionregistration.k8s.io: webhook configurations (v1), ValidatingAdmissionPolicy
and its bindings (v1), MutatingAdmissionPolicy and its bindings (v1, v1beta1,
v1alpha1 — one shape), with upstream's defaults, validation messages and
kubectl columns (pkg/apis/admissionregistration/{v1/defaults.go,validation}).
"""

from __future__ import annotations

import re
from typing import Any

from .apps import age_column, name_column
from .base import RESET_DELETION, Column, Obj, Resource, Strategy, register
from ..machinery.selectors import selector_to_string
from ..machinery.validation import (
    FieldError,
    dns1035_label,
    dns1123_subdomain,
    duplicate,
    forbidden,
    group_version_error,
    invalid,
    not_supported,
    path_segment_name,
    qualified_name,
    required,
    too_many,
    validate_conditions,
    validate_label_selector,
)

GROUP = "admissionregistration.k8s.io"
_FAILURE = ["Fail", "Ignore"]
_MATCH = ["Equivalent", "Exact"]
_NO_SIDE_EFFECTS = ["None", "NoneOnDryRun"]
_OPERATIONS = ["*", "CONNECT", "CREATE", "DELETE", "UPDATE"]
_REINVOCATION = ["IfNeeded", "Never"]
_SCOPES = ["*", "Cluster", "Namespaced"]
_REVIEW_VERSIONS = ("v1", "v1beta1")
_ACTIONS = ["Audit", "Deny", "Warn"]
_REASONS = ["Forbidden", "Invalid", "RequestEntityTooLarge"]
_PATCH_TYPES = ["ApplyConfiguration", "JSONPatch"]
_CEL_IDENT = re.compile(r"^[_a-zA-Z][_a-zA-Z0-9]*\Z")
_CEL_RESERVED = {"true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function", "if",
                 "import", "let", "loop", "package", "namespace", "return", "var", "void", "while"}
MAX_AUDIT_ANNOTATIONS = 20
MAX_VALUE_EXPRESSION = 5 * 1024


# --- defaults ------------------------------------------------------------------


def _default_rule(rule: dict) -> None:
    rule.setdefault("scope", "*")


def _default_match_resources(m: dict) -> None:
    m.setdefault("matchPolicy", "Equivalent")
    m.setdefault("namespaceSelector", {})
    m.setdefault("objectSelector", {})
    for key in ("resourceRules", "excludeResourceRules"):
        for r in m.get(key) or []:
            if isinstance(r, dict):
                _default_rule(r)


def _default_webhook(w: dict, mutating: bool) -> None:
    w.setdefault("failurePolicy", "Fail")
    w.setdefault("matchPolicy", "Equivalent")
    w.setdefault("namespaceSelector", {})
    w.setdefault("objectSelector", {})
    w.setdefault("timeoutSeconds", 10)
    if mutating:
        w.setdefault("reinvocationPolicy", "Never")
    for r in w.get("rules") or []:
        if isinstance(r, dict):
            _default_rule(r)
    svc = (w.get("clientConfig") or {}).get("service")
    if isinstance(svc, dict):
        svc.setdefault("port", 443)


def _default_policy_spec(spec: dict) -> None:
    spec.setdefault("failurePolicy", "Fail")
    if isinstance(spec.get("matchConstraints"), dict):
        _default_match_resources(spec["matchConstraints"])


def _default_binding_spec(spec: dict) -> None:
    if isinstance(spec.get("matchResources"), dict):
        _default_match_resources(spec["matchResources"])
    if isinstance(spec.get("paramRef"), dict):
        spec["paramRef"].setdefault("parameterNotFoundAction", "Deny")


# --- shared rules ---------------------------------------------------------------


def _has_wildcard(values: list) -> bool:
    return "*" in values


def _validate_resources(resources: list, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    if not resources:
        errs.append(required(path, ""))
    with_wild_sub: set[str] = set()
    with_wild_res: set[str] = set()
    double = single = plain = False
    for i, rs in enumerate(resources):
        if rs == "":
            errs.append(required(f"{path}[{i}]", ""))
            continue
        double |= rs == "*/*"
        single |= rs == "*"
        if "/" not in rs:
            plain = rs != "*"
            continue
        r, sub = rs.split("/", 1)
        if r in with_wild_sub:
            errs.append(invalid(f"{path}[{i}]", rs, f"if '{r}/*' is present, must not specify {rs}"))
        if sub in with_wild_res:
            errs.append(invalid(f"{path}[{i}]", rs, f"if '*/{sub}' is present, must not specify {rs}"))
        if sub == "*":
            with_wild_sub.add(r)
        if r == "*":
            with_wild_res.add(sub)
    if len(resources) > 1 and double:
        errs.append(invalid(path, resources, "if '*/*' is present, must not specify other resources"))
    if single and plain:
        errs.append(invalid(path, resources, "if '*' is present, must not specify other resources without subresources"))
    return errs


def validate_rule_with_operations(rule: Any, path: str) -> list[FieldError]:
    rule = rule if isinstance(rule, dict) else {}
    errs: list[FieldError] = []
    ops = rule.get("operations") or []
    if not ops:
        errs.append(required(f"{path}.operations", ""))
    if len(ops) > 1 and _has_wildcard(ops):
        errs.append(invalid(f"{path}.operations", ops, "if '*' is present, must not specify other operations"))
    for i, op in enumerate(ops):
        if op not in _OPERATIONS:
            errs.append(not_supported(f"{path}.operations[{i}]", op, _OPERATIONS))
    groups = rule.get("apiGroups") or []
    if not groups:
        errs.append(required(f"{path}.apiGroups", ""))
    if len(groups) > 1 and _has_wildcard(groups):
        errs.append(invalid(f"{path}.apiGroups", groups, "if '*' is present, must not specify other API groups"))
    versions = rule.get("apiVersions") or []
    if not versions:
        errs.append(required(f"{path}.apiVersions", ""))
    if len(versions) > 1 and _has_wildcard(versions):
        errs.append(invalid(f"{path}.apiVersions", versions, "if '*' is present, must not specify other API versions"))
    for i, v in enumerate(versions):
        if v == "":
            errs.append(required(f"{path}.apiVersions[{i}]", ""))
    errs += _validate_resources(rule.get("resources") or [], f"{path}.resources")
    if rule.get("scope") is not None and rule["scope"] not in _SCOPES:
        errs.append(not_supported(f"{path}.scope", rule["scope"], _SCOPES))
    return errs


def _fully_qualified_name(name: str, path: str) -> list[FieldError]:
    if not name:
        return [required(path, "")]
    msgs = dns1123_subdomain(name)
    if msgs:
        return [invalid(path, name, ",".join(msgs))]
    if len(name.split(".")) < 3:
        return [invalid(path, name, "should be a domain with at least three segments separated by dots")]
    return []


#: the variables an expression may use, by where it is written (upstream's OptionalVariableDeclarations)
WEBHOOK_VARIABLES = frozenset({"object", "oldObject", "request", "authorizer"})
_POLICY_VARIABLES = frozenset({"object", "oldObject", "request", "namespaceObject", "variables", "authorizer"})


def policy_variables(spec: dict, authorizer: bool = True) -> frozenset:
    """`params` only with a paramKind; no `authorizer` in a messageExpression."""
    out = _POLICY_VARIABLES | ({"params"} if spec.get("paramKind") is not None else set())
    return out if authorizer else out - {"authorizer"}


def _cel_errors(expression: str, path: str, declared: frozenset, variables: tuple | None = None,
                returns: tuple[str, ...] = ()) -> list[FieldError]:
    """Compilation errors, and (upstream's CompileCELExpression) a result of none of the `returns`
    types: 'must evaluate to bool but got dyn' (a bare read of a dynamic value is dyn, which cel-go
    refuses)."""
    from ..apiserver.admission.cel import CELError, compile_expression

    try:
        program = compile_expression(expression, declared, variables)
    except CELError as e:
        return [invalid(path, expression, str(e))]
    if returns and not any(program.may_be(t) for t in returns):
        want = returns[0] if len(returns) == 1 else f"one of [{' '.join(returns)}]"
        return [invalid(path, expression, f"must evaluate to {want} but got {program.result_type}")]
    return []


def validate_match_conditions(conds: Any, path: str, declared: frozenset = WEBHOOK_VARIABLES) -> list[FieldError]:
    conds = conds if isinstance(conds, list) else []
    errs: list[FieldError] = []
    if len(conds) > 64:
        errs.append(too_many(path, len(conds), 64))
    names: set[str] = set()
    for i, c in enumerate(conds):
        c = c if isinstance(c, dict) else {}
        p = f"{path}[{i}]"
        expr = (c.get("expression") or "").strip()
        if not expr:
            errs.append(required(f"{p}.expression", ""))
        else:
            errs += _cel_errors(expr, f"{p}.expression", declared, returns=("bool",))
        name = c.get("name") or ""
        if not name:
            errs.append(required(f"{p}.name", ""))
        else:
            errs += [invalid(f"{p}.name", name, m) for m in qualified_name(name)]
            if name in names:
                errs.append(duplicate(f"{p}.name", name))
            names.add(name)
    return errs


# --- webhook configurations -----------------------------------------------------------


def _validate_review_versions(versions: Any, path: str, require_known: bool) -> list[FieldError]:
    from ..apiserver.webhook.validation import validate_review_versions
    versions = versions if isinstance(versions, list) else []
    if not versions:
        return [required(path, "must specify one of v1, v1beta1")]
    return validate_review_versions(path, versions, require_known)


def validate_webhook(w: Any, path: str, mutating: bool, lenient: dict) -> list[FieldError]:
    from ..apiserver.webhook.validation import validate_client_config

    w = w if isinstance(w, dict) else {}
    errs = _fully_qualified_name(w.get("name") or "", f"{path}.name")
    for i, r in enumerate(w.get("rules") or []):
        errs += validate_rule_with_operations(r, f"{path}.rules[{i}]")
    if w.get("failurePolicy") is not None and w["failurePolicy"] not in _FAILURE:
        errs.append(not_supported(f"{path}.failurePolicy", w["failurePolicy"], _FAILURE))
    if w.get("matchPolicy") is not None and w["matchPolicy"] not in _MATCH:
        errs.append(not_supported(f"{path}.matchPolicy", w["matchPolicy"], _MATCH))
    allowed = _NO_SIDE_EFFECTS if lenient.get("side_effects", True) else ["None", "NoneOnDryRun", "Some", "Unknown"]
    if w.get("sideEffects") is None:
        errs.append(required(f"{path}.sideEffects", f"must specify one of {', '.join(sorted(allowed))}"))
    elif w["sideEffects"] not in allowed:
        errs.append(not_supported(f"{path}.sideEffects", w["sideEffects"], sorted(allowed)))
    t = w.get("timeoutSeconds")
    if t is not None and (not isinstance(t, int) or not 1 <= t <= 30):
        errs.append(invalid(f"{path}.timeoutSeconds", t, "the timeout value must be between 1 and 30 seconds"))
    errs += validate_label_selector(w.get("namespaceSelector"), f"{path}.namespaceSelector")
    errs += validate_label_selector(w.get("objectSelector"), f"{path}.objectSelector")
    if mutating and w.get("reinvocationPolicy") is not None and w["reinvocationPolicy"] not in _REINVOCATION:
        errs.append(not_supported(f"{path}.reinvocationPolicy", w["reinvocationPolicy"], _REINVOCATION))
    errs += validate_client_config(f"{path}.clientConfig", w.get("clientConfig"))
    if not lenient.get("ignore_match_conditions"):
        errs += validate_match_conditions(w.get("matchConditions"), f"{path}.matchConditions")
    return errs


class WebhookConfigurationStrategy(Strategy):
    generic_meta = True
    columns = [
        name_column(),
        Column("Webhooks", "integer", lambda o: len(o.get("webhooks") or []), "Webhooks indicates the number of webhooks."),
        age_column(),
    ]

    def __init__(self, mutating: bool) -> None:
        self.mutating = mutating

    def default(self, obj: Obj, version: str) -> None:
        for w in obj.get("webhooks") or []:
            if isinstance(w, dict):
                _default_webhook(w, self.mutating)

    def _validate(self, obj: Obj, lenient: dict) -> list[FieldError]:
        errs: list[FieldError] = []
        names: set[str] = set()
        for i, w in enumerate(obj.get("webhooks") or []):
            p = f"webhooks[{i}]"
            errs += validate_webhook(w, p, self.mutating, lenient)
            errs += _validate_review_versions((w or {}).get("admissionReviewVersions"), f"{p}.admissionReviewVersions",
                                              lenient.get("known_versions", True))
            name = (w or {}).get("name")
            if lenient.get("unique_names", True) and name:
                if name in names:
                    errs.append(duplicate(f"{p}.name", name))
                names.add(name)
        return errs

    def validate(self, obj: Obj) -> list[FieldError]:
        return self._validate(obj, {})

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        """Rules that old objects may predate stay lenient while they still break them."""
        olds = [w for w in old.get("webhooks") or [] if isinstance(w, dict)]
        news = [w for w in new.get("webhooks") or [] if isinstance(w, dict)]
        old_names = [w.get("name") for w in olds]
        lenient = {
            "side_effects": all(w.get("sideEffects") in _NO_SIDE_EFFECTS for w in olds),
            "known_versions": all(any(v in _REVIEW_VERSIONS for v in w.get("admissionReviewVersions") or [])
                                  or not w.get("admissionReviewVersions") for w in olds),
            "unique_names": len(set(old_names)) == len(old_names),
            "ignore_match_conditions": len(olds) == len(news) and all(
                a.get("matchConditions") == b.get("matchConditions") for a, b in zip(olds, news)),
        }
        return self._validate(new, lenient)


# --- policies and bindings --------------------------------------------------------------


def validate_match_resources(m: Any, path: str) -> list[FieldError]:
    if m is None:
        return []
    m = m if isinstance(m, dict) else {}
    errs: list[FieldError] = []
    if m.get("matchPolicy") is None:
        errs.append(required(f"{path}.matchPolicy", ""))
    elif m["matchPolicy"] not in _MATCH:
        errs.append(not_supported(f"{path}.matchPolicy", m["matchPolicy"], _MATCH))
    for sel in ("namespaceSelector", "objectSelector"):
        if m.get(sel) is None:
            errs.append(required(f"{path}.{sel}", ""))
        else:
            errs += validate_label_selector(m[sel], f"{path}.{sel}")
    for key in ("resourceRules", "excludeResourceRules"):
        for i, r in enumerate(m.get(key) or []):
            p = f"{path}.{key}[{i}]"
            names: set[str] = set()
            for j, n in enumerate((r or {}).get("resourceNames") or []):
                errs += [invalid(f"{p}.resourceNames[{j}]", n, msg) for msg in path_segment_name(n)]
                if n in names:
                    errs.append(duplicate(f"{p}.resourceNames[{j}]", n))
                names.add(n)
            errs += validate_rule_with_operations(r, p)
    return errs


def _validate_param_kind(pk: Any, path: str) -> list[FieldError]:
    pk = pk if isinstance(pk, dict) else {}
    errs: list[FieldError] = []
    av = pk.get("apiVersion") or ""
    if not av:
        errs.append(required(f"{path}.apiVersion", ""))
    elif gv_error := group_version_error(av):
        errs.append(invalid(f"{path}.apiVersion", av, gv_error))
    else:
        group, _, version = av.rpartition("/")
        if group and dns1123_subdomain(group):
            errs.append(invalid(f"{path}.apiVersion", group, ",".join(dns1123_subdomain(group))))
        if not version:
            errs.append(invalid(f"{path}.apiVersion", av, "version must be specified"))
        elif dns1035_label(version):
            errs.append(invalid(f"{path}.apiVersion", version, ",".join(dns1035_label(version))))
    kind = pk.get("kind") or ""
    if not kind:
        errs.append(required(f"{path}.kind", ""))
    elif dns1035_label(kind.lower()):
        errs.append(invalid(f"{path}.kind", kind, "may have mixed case, but should otherwise match: "
                            + ",".join(dns1035_label(kind.lower()))))
    return errs


class _Scope(tuple):
    """The variables a policy's expressions see, (name, type) pairs, hashed once as they are made:
    every expression compiles with them, and hashing them all again for each (the compiled
    environments' cache key) was quadratic (3,000 variables, a 170 KB policy: 50 s, the loop held)."""

    def __new__(cls, pairs: tuple, digest: int) -> _Scope:
        self = super().__new__(cls, pairs)
        self.digest = digest
        return self

    def __hash__(self) -> int:
        return self.digest

    def __eq__(self, other: object) -> bool:
        return tuple.__eq__(self, other)


def _variable_scopes(spec: dict) -> tuple[_Scope, dict[int, str]]:
    """The `variables` object of a policy's other expressions: each variable's name and the type its
    expression compiles to, in order (upstream adds each to the composition environment once
    compiled, so a variable sees only those before it; one that does not compile is dyn); and the
    compilation error of each that does not."""
    from ..apiserver.admission.cel import CELError, VariableCompiler
    from ..cel.types import DYN

    compiler, pairs, failed = VariableCompiler(policy_variables(spec)), [], {}
    for i, v in enumerate(spec.get("variables") if isinstance(spec.get("variables"), list) else []):
        v = v if isinstance(v, dict) else {}
        t = DYN
        if (v.get("expression") or "").strip():
            try:
                t = compiler.compile(v["expression"]).result_type
            except CELError as e:
                failed[i] = str(e)
        pairs.append((v.get("name") or "", t))
        compiler.fields[pairs[-1][0]] = t
    scope = tuple(pairs)
    return _Scope(scope, hash(scope)), failed


def _validate_variables(spec: dict, path: str, failed: dict[int, str]) -> list[FieldError]:
    """`failed`: the compilation errors of `_variable_scopes`."""
    variables = spec.get("variables")
    errs: list[FieldError] = []
    for i, v in enumerate(variables if isinstance(variables, list) else []):
        v = v if isinstance(v, dict) else {}
        p = f"{path}[{i}]"
        name = v.get("name") or ""
        if not name.strip():
            errs.append(required(f"{p}.name", "name is not specified"))
        elif not _CEL_IDENT.match(name) or name in _CEL_RESERVED:
            errs.append(invalid(f"{p}.name", name, "name is not a valid CEL identifier"))
        expr = v.get("expression") or ""
        if not expr.strip():
            errs.append(required(f"{p}.expression", "expression is not specified"))
        elif i in failed:
            errs.append(invalid(f"{p}.expression", expr, failed[i]))
    return errs


def _common_policy_spec(spec: dict, lenient: dict, failed: dict[int, str]) -> list[FieldError]:
    """`failed`: the variables' compilation errors (`_variable_scopes`)."""
    errs: list[FieldError] = []
    fp = spec.get("failurePolicy")
    if fp is None:
        errs.append(required("spec.failurePolicy", ""))
    elif fp not in _FAILURE:
        errs.append(not_supported("spec.failurePolicy", fp, _FAILURE))
    if spec.get("paramKind") is not None:
        errs += _validate_param_kind(spec["paramKind"], "spec.paramKind")
    mc = spec.get("matchConstraints")
    if mc is None:
        errs.append(required("spec.matchConstraints", ""))
    else:
        errs += validate_match_resources(mc, "spec.matchConstraints")
        if not (mc or {}).get("resourceRules"):
            errs.append(required("spec.matchConstraints.resourceRules", ""))
    if not lenient.get("ignore_match_conditions"):
        errs += validate_match_conditions(spec.get("matchConditions"), "spec.matchConditions", policy_variables(spec))
    errs += _validate_variables(spec, "spec.variables", failed)
    return errs


def _has_newlines(s: str) -> bool:
    return "\n" in s or "\r" in s


def validate_validating_policy(obj: Obj, lenient: dict) -> list[FieldError]:
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    scope, failed = _variable_scopes(spec)  # (once: every expression compiles with them)
    errs, types = _common_policy_spec(spec, lenient, failed), scope
    validations, annotations = spec.get("validations") or [], spec.get("auditAnnotations") or []
    if not validations and not annotations:
        errs.append(required("spec.validations", "validations or auditAnnotations must contain at least one item"))
        errs.append(required("spec.auditAnnotations", "validations or auditAnnotations must contain at least one item"))
        return errs
    for i, v in enumerate(validations):
        v = v if isinstance(v, dict) else {}
        p = f"spec.validations[{i}]"
        expr = v.get("expression") or ""
        if not expr.strip():
            errs.append(required(f"{p}.expression", "expression is not specified"))
        else:
            errs += _cel_errors(expr, f"{p}.expression", policy_variables(spec), types, ("bool",))
        me = v.get("messageExpression") or ""
        if me and not me.strip():
            errs.append(invalid(f"{p}.messageExpression", me, "must be non-empty if specified"))
        elif me.strip():
            errs += _cel_errors(me, f"{p}.messageExpression", policy_variables(spec, authorizer=False),
                                types, ("string",))
        msg = v.get("message") or ""
        if msg and not msg.strip():
            errs.append(invalid(f"{p}.message", msg, "message must be non-empty if specified"))
        elif _has_newlines(msg.strip()):
            errs.append(invalid(f"{p}.message", msg, "message must not contain line breaks"))
        if v.get("reason") is not None and v["reason"] not in _REASONS:
            errs.append(not_supported(f"{p}.reason", v["reason"], _REASONS))
    if len(annotations) > MAX_AUDIT_ANNOTATIONS:
        errs.append(invalid("spec.auditAnnotations", annotations,
                            f"must not have more than {MAX_AUDIT_ANNOTATIONS} auditAnnotations"))
    name = (obj.get("metadata") or {}).get("name") or ""
    keys: set[str] = set()
    for i, a in enumerate(annotations):
        a = a if isinstance(a, dict) else {}
        p = f"spec.auditAnnotations[{i}]"
        key = a.get("key") or ""
        if name:
            errs += [invalid(f"{p}.key", f"{name}/{key}", m) for m in qualified_name(f"{name}/{key}")]
        else:
            errs.append(invalid(f"{p}.key", key, "requires metadata.name be non-empty"))
        ve = (a.get("valueExpression") or "").strip()
        if not ve:
            errs.append(required(f"{p}.valueExpression", "valueExpression is not specified"))
        elif len(ve) > MAX_VALUE_EXPRESSION:
            errs.append(required(f"{p}.valueExpression", f"must not exceed {MAX_VALUE_EXPRESSION} bytes in length"))
        else:
            errs += _cel_errors(ve, f"{p}.valueExpression", policy_variables(spec), types,
                                ("string", "null_type"))
        if key in keys:
            errs.append(duplicate(f"{p}.key", key))
        keys.add(key)
    return errs


def validate_mutating_policy(obj: Obj, lenient: dict) -> list[FieldError]:
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    scope, failed = _variable_scopes(spec)  # (once: every expression compiles with them)
    errs, types = _common_policy_spec(spec, lenient, failed), scope
    rp = spec.get("reinvocationPolicy")
    if rp is None:
        errs.append(required("spec.reinvocationPolicy", ""))
    elif rp not in _REINVOCATION:
        errs.append(not_supported("spec.reinvocationPolicy", rp, _REINVOCATION))
    mutations = spec.get("mutations") or []
    if not mutations:
        errs.append(required("spec.mutations", "mutations must contain at least one item"))
    for i, m in enumerate(mutations):
        m = m if isinstance(m, dict) else {}
        p = f"spec.mutations[{i}]"
        pt = m.get("patchType")
        if not pt:
            errs.append(required(f"{p}.patchType", ""))
            continue
        if pt not in _PATCH_TYPES:
            errs.append(not_supported(f"{p}.patchType", pt, _PATCH_TYPES))
            continue
        field, other = ("applyConfiguration", "jsonPatch") if pt == "ApplyConfiguration" else ("jsonPatch", "applyConfiguration")
        if m.get(other) is not None:
            errs.append(forbidden(f"{p}.{other}", f"must not be specified when patchType is {pt}"))
        expr = ((m.get(field) or {}).get("expression") or "").strip()
        if m.get(field) is None:
            errs.append(required(f"{p}.{field}", f"must be specified when patchType is {pt}"))
        elif not expr:
            errs.append(required(f"{p}.{field}.expression", "expression is not specified"))
        else:
            errs += _cel_errors(expr, f"{p}.{field}.expression", policy_variables(spec), types,
                                returns=("Object",) if pt == "ApplyConfiguration" else ("list(JSONPatch)",))
    return errs


def _validate_param_ref(pr: Any, path: str) -> list[FieldError]:
    if pr is None:
        return []
    pr = pr if isinstance(pr, dict) else {}
    errs: list[FieldError] = []
    name, sel = pr.get("name") or "", pr.get("selector")
    if name:
        errs += [invalid(f"{path}.name", name, m) for m in path_segment_name(name)]
        if sel is not None:
            errs.append(forbidden(f"{path}.name", "name and selector are mutually exclusive"))
    if sel is not None:
        errs += validate_label_selector(sel, f"{path}.selector")
        if name:
            errs.append(forbidden(f"{path}.selector", "name and selector are mutually exclusive"))
    if not name and sel is None:
        errs.append(required(path, "one of name or selector must be specified"))
    action = pr.get("parameterNotFoundAction")
    if not action:
        errs.append(required(f"{path}.parameterNotFoundAction", ""))
    elif action not in ("Deny", "Allow"):
        errs.append(not_supported(f"{path}.parameterNotFoundAction", action, ["Deny", "Allow"]))
    return errs


def validate_binding(obj: Obj, validating: bool) -> list[FieldError]:
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    errs: list[FieldError] = []
    policy = spec.get("policyName") or ""
    if not policy:
        errs.append(required("spec.policyName", ""))
    else:
        errs += [invalid("spec.policyName", policy, m) for m in dns1123_subdomain(policy)]
    errs += _validate_param_ref(spec.get("paramRef"), "spec.paramRef")
    errs += validate_match_resources(spec.get("matchResources"), "spec.matchResources")
    if validating:
        actions = spec.get("validationActions") or []
        seen: set[str] = set()
        for i, a in enumerate(actions):
            if a not in _ACTIONS:
                errs.append(not_supported(f"spec.validationActions[{i}]", a, _ACTIONS))
            if a in seen:
                errs.append(duplicate(f"spec.validationActions[{i}]", a))
            seen.add(a)
        if "Deny" in seen and "Warn" in seen:
            errs.append(invalid("spec.validationActions", actions,
                                "must not contain both Deny and Warn (repeating the same validation failure "
                                "information in the API response and headers serves no purpose)"))
        if not seen:
            errs.append(required("spec.validationActions", "at least one validation action is required"))
    return errs


def _param_kind_cell(o: Obj) -> str:
    pk = (o.get("spec") or {}).get("paramKind")
    return f"{pk.get('apiVersion', '')}/{pk.get('kind', '')}" if pk else "<unset>"


def _param_ref_cell(o: Obj) -> str:
    pr = (o.get("spec") or {}).get("paramRef")
    if not pr:
        return "<unset>"
    if pr.get("name"):
        return f"{pr.get('namespace') or '*'}/{pr['name']}"
    if pr.get("selector") is not None:
        return selector_to_string(pr["selector"]) or "<none>"
    return "<unset>"


class PolicyStrategy(Strategy):
    generic_meta = True
    status_metadata = ()  # ResetObjectMetaForStatus (ValidatingAdmissionPolicy's /status)
    status_deletion_kept = RESET_DELETION

    def __init__(self, validating: bool) -> None:
        self.validating = validating
        count = "validations" if validating else "mutations"
        self.columns = [
            name_column(),
            Column(count.capitalize(), "integer", lambda o: len((o.get("spec") or {}).get(count) or []),
                   f"{count.capitalize()} indicates the number of {count} rules."),
            Column("ParamKind", "string", _param_kind_cell, "ParamKind specifies the kind of resources used to parameterize this policy"),
            age_column(),
        ]

    def default(self, obj: Obj, version: str) -> None:
        if isinstance(obj.get("spec"), dict):
            _default_policy_spec(obj["spec"])

    def _validate(self, obj: Obj, lenient: dict) -> list[FieldError]:
        return (validate_validating_policy if self.validating else validate_mutating_policy)(obj, lenient)

    def validate(self, obj: Obj) -> list[FieldError]:
        return self._validate(obj, {})

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        ns, os_ = new.get("spec") or {}, old.get("spec") or {}
        same = ns.get("paramKind") == os_.get("paramKind") and ns.get("matchConditions") == os_.get("matchConditions")
        return self._validate(new, {"ignore_match_conditions": same})

    def validate_status_update(self, new: Obj, old: Obj) -> list[FieldError]:
        status = new.get("status") or {}
        errs: list[FieldError] = []
        for i, w in enumerate(((status.get("typeChecking") or {}).get("expressionWarnings")) or []):
            p = f"status.typeChecking.expressionWarnings[{i}]"
            if not w.get("warning"):
                errs.append(required(f"{p}.warning", ""))
            if not (w.get("fieldRef") or "").strip():
                errs.append(required(f"{p}.fieldRef", ""))
        return errs + validate_conditions(status.get("conditions"), "status.conditions")


class BindingStrategy(Strategy):
    generic_meta = True
    columns = [
        name_column(),
        Column("PolicyName", "string", lambda o: (o.get("spec") or {}).get("policyName", ""),
               "PolicyName indicates the policy definition which the policy binding binded to."),
        Column("ParamRef", "string", _param_ref_cell,
               "ParamRef indicates the param resource which sets the configration param"),
        age_column(),
    ]

    def __init__(self, validating: bool) -> None:
        self.validating = validating

    def default(self, obj: Obj, version: str) -> None:
        if isinstance(obj.get("spec"), dict):
            _default_binding_spec(obj["spec"])

    def validate(self, obj: Obj) -> list[FieldError]:
        return validate_binding(obj, self.validating)


_MAP_VERSIONS = ["v1", "v1beta1", "v1alpha1"]
_EXT = ("api-extensions",)

register(
    Resource(GROUP, "mutatingwebhookconfigurations", "MutatingWebhookConfiguration", ["v1"], namespaced=False,
             categories=_EXT, strategy=WebhookConfigurationStrategy(mutating=True)),
    Resource(GROUP, "validatingwebhookconfigurations", "ValidatingWebhookConfiguration", ["v1"], namespaced=False,
             categories=_EXT, strategy=WebhookConfigurationStrategy(mutating=False)),
    Resource(GROUP, "validatingadmissionpolicies", "ValidatingAdmissionPolicy", ["v1"], namespaced=False,
             categories=_EXT, subresources=("status",), strategy=PolicyStrategy(validating=True)),
    Resource(GROUP, "validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding", ["v1"], namespaced=False,
             categories=_EXT, strategy=BindingStrategy(validating=True)),
    Resource(GROUP, "mutatingadmissionpolicies", "MutatingAdmissionPolicy", _MAP_VERSIONS, namespaced=False,
             categories=_EXT, strategy=PolicyStrategy(validating=False)),
    Resource(GROUP, "mutatingadmissionpolicybindings", "MutatingAdmissionPolicyBinding", _MAP_VERSIONS,
             namespaced=False, categories=_EXT, strategy=BindingStrategy(validating=False)),
)
