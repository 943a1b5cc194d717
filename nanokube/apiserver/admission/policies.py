"""ValidatingAdmissionPolicy and MutatingAdmissionPolicy: CEL policies bound
to requests by their bindings, evaluated in-process (apiserver's
plugin/policy/{generic,validating,mutating}).

A policy applies where its matchConstraints and the binding's matchResources
both match; a binding's paramRef picks the param objects (of the policy's
paramKind, any kind including custom resources) and the policy is evaluated
once per param. `variables` are evaluated in order, each seeing the earlier
ones. Validations that fail become Deny (a 422 with upstream's message),
Warn (a Warning header) or Audit (the validation_failure audit annotation) as
the binding's validationActions say; mutations are server-side-apply
configurations or JSON patches applied in order. Errors follow the policy's
failurePolicy.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import orjson

from ...cel.environment import METER_FROM
from ...machinery import errors, gofmt
from ...machinery.gojson import value_kind
from ...machinery.validation import invalid
from ...machinery.selectors import matches_labels, selector_from_object
from ..patch import PatchError, json_copy, jsonpatch
from .attributes import Attributes
from .cel import (
    FAILED_VARIABLES, MATCH_CONDITIONS_COST_BUDGET, OUT_OF_BUDGET, RUNTIME_CEL_COST_BUDGET, Budget, CELError, OutOfBudget,
    compile_expression, evaluate, variables_read,
)
from .matching import Target, match_rules, namespace_labels, namespace_matches, object_matches
from .source import ConfigSource

GROUP = "admissionregistration.k8s.io"
MAX_MESSAGE = 5 * 1024
MAX_AUDIT_VALUE = 10 * 1024
VALIDATION_FAILURE = "validation.policy.admission.k8s.io/validation_failure"
_REASON_CODE = {"Forbidden": 403, "Unauthorized": 401, "RequestEntityTooLarge": 413, "Invalid": 422}


class ConfigError(Exception):
    """The binding cannot be evaluated (params missing, a match condition failed to run)."""


@dataclass
class Invocation:
    """A policy bound to a request by one of its bindings; or, with no binding, a policy that cannot
    be configured (`error`: its paramKind names no kind the server serves), which upstream's policy
    source records on the policy before any binding is looked at (hook.ConfigurationError)."""

    policy: dict
    binding: dict | None
    target: Target
    error: str = ""

    @property
    def spec(self) -> dict:
        return self.policy.get("spec") or {}

    @property
    def names(self) -> tuple[str, str]:
        return self.policy["metadata"]["name"], self.binding["metadata"]["name"] if self.binding else ""

    @property
    def fail(self) -> bool:
        return self.spec.get("failurePolicy", "Fail") != "Ignore"


@dataclass
class PolicyRound:
    """Reinvocation bookkeeping of mutating policies for one request."""

    called: set[tuple] = field(default_factory=set)
    again: set[tuple] = field(default_factory=set)
    last_output: Any = None
    #: a policy changed the object: the chain runs a second round
    changed: bool = False


def match_resources(rest, mr: dict | None, a: Attributes) -> Target | None:
    """The target a MatchResources matches (the request's own when it names no rules)."""
    mr = mr or {}
    policy = mr.get("matchPolicy", "Equivalent")
    rules = mr.get("resourceRules") or []
    t = match_rules(rest.index, rules, policy, a.operation, a.target, a.subresource, a.namespace, a.name) \
        if rules else a.target
    if t is None:
        return None
    exclude = mr.get("excludeResourceRules") or []
    if exclude and match_rules(rest.index, exclude, policy, a.operation, a.target, a.subresource, a.namespace, a.name):
        return None
    labels = namespace_labels(rest, a.res, a.operation, a.subresource, a.namespace, a.obj or a.old)
    if not namespace_matches(mr.get("namespaceSelector"), labels):
        return None
    if not object_matches(mr.get("objectSelector"), a.obj, a.old):
        return None
    return t


class PolicyEngine:
    """What both kinds of policy share: finding invocations, params, the CEL activation."""

    def __init__(self, rest, source: ConfigSource, validating: bool) -> None:
        self.rest = rest
        self.source = source
        self.kind = "ValidatingAdmissionPolicy" if validating else "MutatingAdmissionPolicy"
        self.plural = "validatingadmissionpolicies" if validating else "mutatingadmissionpolicies"
        self.binding_plural = "validatingadmissionpolicybindings" if validating else "mutatingadmissionpolicybindings"

    def _bound(self) -> list[tuple[dict, list[dict]]]:
        """Policies that have bindings, with them."""
        def build() -> list[tuple[dict, list[dict]]]:
            bindings: dict[str, list[dict]] = {}
            for b in self.source.objects(self.binding_plural):
                bindings.setdefault((b.get("spec") or {}).get("policyName", ""), []).append(b)
            return [(p, bindings[p["metadata"]["name"]]) for p in self.source.objects(self.plural)
                    if p["metadata"]["name"] in bindings]

        return self.source.derived(("bound", self.plural), build)

    def invocations(self, a: Attributes) -> list[Invocation]:
        out: list[Invocation] = []
        for p, mine in self._bound():
            t = match_resources(self.rest, (p.get("spec") or {}).get("matchConstraints"), a)
            if t is None:
                continue
            if (unknown := self._unknown_param_kind(p)) is not None:
                out.append(Invocation(p, None, t, f"failed to configure policy: failed to find resource "
                                                  f"referenced by paramKind: '{unknown}'"))
                continue
            for b in mine:
                mr = (b.get("spec") or {}).get("matchResources")
                if mr is not None and match_resources(self.rest, mr, a) is None:
                    continue
                out.append(Invocation(p, b, t))
        return out

    async def params(self, inv: Invocation, a: Attributes) -> list[dict | None]:
        """CollectParams: the param objects of a binding (a list with None when it names none)."""
        kind = inv.spec.get("paramKind")
        ref = (inv.binding.get("spec") or {}).get("paramRef")
        if kind is None or ref is None:
            return [None]
        group, _, version = (kind.get("apiVersion") or "").rpartition("/")
        res = self._by_kind(group, version, kind.get("kind", ""))
        if res is None:
            raise ConfigError(f"paramKind kind `{group}/{version}, Kind={kind.get('kind', '')}` not known")
        namespace = None
        if res.namespaced:
            namespace = ref.get("namespace") or a.namespace
            if not namespace:
                raise ConfigError("cannot use namespaced paramRef in policy binding that matches cluster-scoped resources")
        found: list[dict] = []
        if ref.get("name"):
            e = self.rest.cache.get(res.key(namespace, ref["name"]))
            if e is not None:
                found = [e.obj]
        elif ref.get("selector") is not None:
            reqs = selector_from_object(ref["selector"])
            found = [e.obj for _, e in self.rest.cache.list(res.key_prefix(namespace))
                     if matches_labels(reqs, (e.obj.get("metadata") or {}).get("labels"))]
        if not found and ref.get("parameterNotFoundAction", "Deny") == "Deny":
            raise ConfigError("no params found for policy binding with `Deny` parameterNotFoundAction")
        t = Target(res, version)
        await a.prepare(t, *found)
        return [a.versioned(t, o) for o in found]

    def _unknown_param_kind(self, policy: dict) -> str | None:
        """The policy's paramKind as Go prints a GroupVersionKind, where no served resource has it
        (the RESTMapper's miss), whether or not a binding names a paramRef; else None."""
        kind = (policy.get("spec") or {}).get("paramKind")
        if kind is None:
            return None
        group, _, version = (kind.get("apiVersion") or "").rpartition("/")
        if self._by_kind(group, version, kind.get("kind", "")) is not None:
            return None
        return f"{group}/{version}, Kind={kind.get('kind', '')}"

    def _by_kind(self, group: str, version: str, kind: str):
        res = self.rest.index.by_kind(group, kind)
        return res if res is not None and version in res.versions else None

    def activation(self, a: Attributes, t: Target, obj: dict | None, params: dict | None) -> dict[str, Any]:
        ns = None
        if a.namespace and not (a.res.group == "" and a.res.plural == "namespaces"):
            nsres = self.rest.index.get("", "v1", "namespaces")
            e = self.rest.cache.get(nsres.key(None, a.namespace))
            ns = a.versioned(Target(nsres, "v1"), e.obj) if e else None
        return {"object": obj, "oldObject": a.versioned(t, a.old), "request": a.request(t, "", None, None),
                "params": params, "namespaceObject": ns, "variables": {}, "authorizer": a.authorizer}

    def conditions_match(self, inv: Invocation, act: dict, variables: VariableCosts) -> bool:
        """matchConditions, all evaluated first as upstream's matcher does (so running out of
        their budget is an error, a ConfigError, even after a False); then a False skips the
        invocation, else an error is a ConfigError."""
        results: list[tuple[Any, str | None]] = []
        budget = Budget(MATCH_CONDITIONS_COST_BUDGET, variables)
        for c in inv.spec.get("matchConditions") or []:
            try:
                results.append((evaluate(c.get("expression", ""), act, budget), None))
            except CELError as e:
                results.append((None, str(e)))
            except OutOfBudget:
                raise ConfigError(OUT_OF_BUDGET) from None
        if any(ok is False for ok, _ in results):
            return False
        failures = [why for _, why in results if why is not None]
        if failures:
            raise ConfigError(failures[0] if len(failures) == 1 else "[" + ", ".join(failures) + "]")
        return True

    def forbidden(self, a: Attributes, message: str, reason: str = "Forbidden") -> errors.APIError:
        """admission.NewForbidden with the policy's reason and code."""
        name = a.name or ((a.obj or {}).get("metadata") or {}).get("generateName", "") or "Unknown"
        gr = f"{a.res.plural}.{a.res.group}" if a.res.group else a.res.plural
        details: dict[str, Any] = {"name": name}
        if a.res.group:
            details["group"] = a.res.group
        details["kind"] = a.res.plural
        details["causes"] = [{"message": message}]
        return errors.APIError(_REASON_CODE.get(reason, 422), reason, f'{gr} "{name}" is forbidden: {message}', details)

    def policy_errors(self, a: Attributes, failures: list[tuple[str, str]]) -> errors.APIError:
        """The generic policy dispatcher's answer to the PolicyErrors of policies that fail closed
        ((message, reason) each): admission.NewForbidden's 403 and details, its message replaced whole
        by the first failure's (no `<resource> "<name>" is forbidden: ` before it), its reason the
        first's where it has one, and every failure a cause."""
        message, reason = failures[0]
        e = self.forbidden(a, message)
        e.message, e.reason = message, reason or "Forbidden"
        e.details["causes"] = [{"message": m} for m, _ in failures]
        return e


#: a policy's variables: name -> (what evaluating it cost, the variables it reads)
VariableCosts = dict[str, tuple[int, frozenset]]


def compute_variables(spec: dict, act: dict) -> VariableCosts:
    """spec.variables in order, only those the policy's expressions read (directly or through other
    variables): upstream evaluates them lazily, so one that nothing reads costs nothing. One that fails
    to evaluate stays unset, so an expression reading it fails in turn; the costs returned are charged
    to the budget of the expressions reading them (see cel.Budget). Once the variables evaluated cost
    more than a whole budget together, the rest are charged past it unevaluated: any expression reading
    one runs out of budget, as it would upstream after evaluating it."""
    out: dict[str, Any] = {}
    costs: VariableCosts = {}
    failed: dict[str, str] = {}
    act["variables"], act[FAILED_VARIABLES] = out, failed
    wanted, total = _variables_wanted(spec), 0
    for v in spec.get("variables") or []:
        name, expression = v.get("name", ""), v.get("expression", "")
        if name not in wanted:
            continue
        if total > RUNTIME_CEL_COST_BUDGET:
            costs[name] = (RUNTIME_CEL_COST_BUDGET + 1, variables_read(expression))
            continue
        spent = Budget(RUNTIME_CEL_COST_BUDGET)
        try:
            out[name] = evaluate(expression, act, spent)
        except CELError as e:  # (its reader's error names it and why, as upstream's lazy variable does)
            failed[name] = str(e).removeprefix(f"expression '{expression}' resulted in error: ")
        costs[name] = (RUNTIME_CEL_COST_BUDGET - spent.remaining, variables_read(expression))
        total += costs[name][0]
    return costs


def _costly(spec: dict) -> bool:
    """Whether a policy's expressions may cost enough to be metered (a worst case past
    METER_FROM: up to the per-call limit each, about a CPU second here); one reading the authorizer
    is not (its checks read the server's state, which only the loop may)."""
    expressions = [v.get("expression", "") for v in spec.get("variables") or []] + _uses(spec)
    costly = False
    for e in expressions:
        if "authorizer" in e:
            return False
        try:
            costly = costly or (bool(e) and compile_expression(e).max_cost >= METER_FROM)
        except CELError:
            continue
    return costly


def _off_loop(spec: dict, a: Attributes) -> bool:
    """Whether a policy is evaluated in a worker: seconds of metered CEL, or `authorizer` checks that
    may wait on an authorization webhook (each handed back to the loop, which alone reads its state)."""
    return _costly(spec) or (a.authorizer_waits and reads_authorizer(
        [v.get("expression", "") for v in spec.get("variables") or []] + _uses(spec)))


def reads_authorizer(expressions: list[str]) -> bool:
    return any("authorizer" in e for e in expressions)


def _uses(spec: dict) -> list[str]:
    """A policy's expressions other than its variables: match conditions, validations and their
    messages, audit annotations, mutations ("" where one is absent)."""
    expressions = [c.get("expression", "") for c in spec.get("matchConditions") or []]
    for v in spec.get("validations") or []:
        expressions += [v.get("expression", ""), v.get("messageExpression", "")]
    expressions += [a.get("valueExpression", "") for a in spec.get("auditAnnotations") or []]
    for m in spec.get("mutations") or []:
        expressions += [(m.get("applyConfiguration") or {}).get("expression", ""),
                        (m.get("jsonPatch") or {}).get("expression", "")]
    return expressions

def _variables_wanted(spec: dict) -> set[str]:
    """The variables a policy's matchConditions, validations, messages, audit annotations and mutations
    read, with those these read in turn (a variable reads only the ones declared before it)."""
    wanted: set[str] = set().union(*(variables_read(e) for e in _uses(spec) if e))
    for v in reversed(spec.get("variables") or []):
        if v.get("name", "") in wanted:
            wanted |= variables_read(v.get("expression", ""))
    return wanted


def _message(v: dict, got: Any, expression: str) -> str:
    """A failed validation's message: its messageExpression's value when that is a usable
    string, else its message, else the expression."""
    if isinstance(got, str) and got.strip() and len(got) <= MAX_MESSAGE and "\n" not in got.strip():
        return got.strip()
    if (v.get("message") or "").strip():
        return v["message"].strip()
    return f"failed expression: {expression.strip()}"


class ValidatingPolicies(PolicyEngine):
    def __init__(self, rest, source: ConfigSource) -> None:
        super().__init__(rest, source, validating=True)

    async def validate(self, a: Attributes) -> None:
        denied: list[tuple[Invocation, str, str]] = []
        failures: list[dict] = []
        annotations: dict[str, list[str]] = {}
        for inv in self.invocations(a):
            if inv.binding is None:
                if inv.fail:
                    denied.append((inv, inv.error, "Invalid"))
                continue
            policy, binding = inv.names
            actions = (inv.binding.get("spec") or {}).get("validationActions") or []
            try:
                all_params = await self.params(inv, a)
            except ConfigError as e:
                if inv.fail:
                    denied.append((inv, f"failed to configure binding: {e}", "Invalid"))
                continue
            await a.prepare(inv.target)
            for params in all_params:
                t = inv.target
                act = self.activation(a, t, a.versioned(t, a.obj), params)
                if _off_loop(inv.spec, a):  # (in a worker, the loop serving others meanwhile)
                    decisions = await asyncio.to_thread(self._decide, inv, act, annotations)
                else:
                    decisions = self._decide(inv, act, annotations)
                for i, msg, reason in decisions:
                    if "Deny" in actions:
                        denied.append((inv, msg, reason))
                    if "Warn" in actions:
                        a.warnings.append(f"Validation failed for {self.kind} '{policy}' with binding '{binding}': {msg}")
                    if "Audit" in actions:
                        failures.append({"message": msg, "policy": policy, "binding": binding,
                                         "expressionIndex": i, "validationActions": actions})
        for key, values in annotations.items():
            a.add_annotation(key, ", ".join(values)[:MAX_AUDIT_VALUE])
        if failures:
            a.add_annotation(VALIDATION_FAILURE, orjson.dumps(failures[:50]).decode())
        if denied:
            inv, msg, reason = denied[0]
            policy, binding = inv.names
            by = f"{self.kind} '{policy}' with binding '{binding}'" if binding else f"{self.kind} '{policy}'"
            raise self.forbidden(a, f"{by} denied request: {msg}", reason)

    def _decide(self, inv: Invocation, act: dict, annotations: dict[str, list[str]]) -> list[tuple[int, str, str]]:
        """One invocation's decisions (expression index, message, reason): none where its matchConditions
        skip it; its audit annotations go into `annotations`."""
        variables = compute_variables(inv.spec, act)
        try:
            if not self.conditions_match(inv, act, variables):
                return []
        except ConfigError as e:
            return [(0, str(e), "Invalid")] if inv.fail else []
        decisions = self._validations(inv, act, variables)
        return self._audit_annotations(inv, act, variables, annotations, decisions)

    @staticmethod
    def _validations(inv: Invocation, act: dict, variables: VariableCosts) -> list[tuple[int, str, str]]:
        """The validations, then every messageExpression, on one budget (the messages on what the
        validations left). Running out in the validations is the one decision (a failure per
        failurePolicy); in the messages, every validation that did not fail to evaluate is."""
        validations = inv.spec.get("validations") or []
        results: list[tuple[Any, str | None]] = []
        budget = Budget(RUNTIME_CEL_COST_BUDGET, variables)
        try:
            for v in validations:
                try:
                    results.append((evaluate(v.get("expression", ""), act, budget), None))
                except CELError as e:
                    results.append((None, str(e)))
        except OutOfBudget:
            return [(0, OUT_OF_BUDGET, "Invalid")] if inv.fail else []
        messages: list[Any] = []
        budget = Budget(budget.remaining, variables)
        try:
            for v in validations:
                try:
                    messages.append(evaluate(v["messageExpression"], act, budget) if v.get("messageExpression")
                                    else None)
                except CELError:
                    messages.append(None)
            out_of_budget = False
        except OutOfBudget:
            out_of_budget = True
        decisions: list[tuple[int, str, str]] = []
        for i, (v, (ok, error)) in enumerate(zip(validations, results)):
            if error is not None or out_of_budget:
                if inv.fail:
                    decisions.append((i, error or f"failed messageExpression: {OUT_OF_BUDGET}", "Invalid"))
            elif ok is not True:
                decisions.append((i, _message(v, messages[i], v.get("expression", "")), v.get("reason") or "Invalid"))
        return decisions

    def _audit_annotations(self, inv: Invocation, act: dict, variables: VariableCosts, out: dict[str, list[str]],
                           decisions: list[tuple[int, str, str]]) -> list[tuple[int, str, str]]:
        """Add the auditAnnotations' values to `out`; the decisions with their errors. They have a
        budget of their own: running out of it replaces every decision with that failure."""
        policy = inv.names[0]
        budget = Budget(RUNTIME_CEL_COST_BUDGET, variables)
        found: list[tuple[str, str]] = []
        decisions = list(decisions)
        for an in inv.spec.get("auditAnnotations") or []:
            try:
                value = evaluate(an.get("valueExpression", ""), act, budget)
            except CELError as e:
                if inv.fail:
                    decisions.append((0, str(e), "Invalid"))
                continue
            except OutOfBudget:
                return [(0, OUT_OF_BUDGET, "Invalid")] if inv.fail else []
            if value is None:
                continue
            if not isinstance(value, str):
                if inv.fail:
                    decisions.append((0, f"valueExpression '{an.get('valueExpression')}' resulted in unsupported "
                                         f"return type: {type(value).__name__}. Required type: string", "Invalid"))
                continue
            found.append((f"{policy}/{an.get('key', '')}", value))
        for key, value in found:
            values = out.setdefault(key, [])
            if value not in values:
                values.append(value)
        return decisions


class MutatingPolicies(PolicyEngine):
    def __init__(self, rest, source: ConfigSource) -> None:
        super().__init__(rest, source, validating=False)

    async def mutate(self, a: Attributes, state: PolicyRound, round_: int) -> None:
        """Apply matching policies in order (in the second round only those to reinvoke). A policy
        that fails closed denies the request once all have run, with every failure as a cause: the
        generic dispatcher's configuration errors (reason Forbidden) before the mutating dispatcher's
        (a match condition's or mutation's, reason Invalid)."""
        if round_ and state.last_output != a.obj:
            state.again |= state.called
        configuring: list[tuple[str, str]] = []
        failed: list[tuple[str, str]] = []
        for inv in self.invocations(a):
            if a.obj is None:
                continue
            if inv.binding is None:
                self._error(inv, configuring, inv.error, "")
                continue
            try:
                all_params = await self.params(inv, a)
            except ConfigError as e:
                self._error(inv, configuring, f"failed to configure binding: {e}", "")
                continue
            for params in all_params:
                key = (*inv.names, ((params or {}).get("metadata") or {}).get("namespace"),
                       ((params or {}).get("metadata") or {}).get("name"))
                if round_ and key not in state.again:
                    continue
                changed = await self._apply(inv, a, params, failed)
                if changed:
                    state.changed = True
                    state.again |= {k for k in state.called if k != key}
                if inv.spec.get("reinvocationPolicy") == "IfNeeded":
                    state.called.add(key)
        if configuring or failed:
            raise self.policy_errors(a, configuring + failed)
        if not round_ and state.called:  # read only by a second round, and only to re-invoke `called`
            state.last_output = json_copy(a.obj)

    @staticmethod
    def _error(inv: Invocation, failures: list[tuple[str, str]], message: str, reason: str) -> None:
        """Adds PolicyError's words (its Go %q of a policy with no binding) to `failures` where the
        failurePolicy fails."""
        if inv.fail:
            policy, binding = inv.names
            by = f"policy '{policy}' with binding '{binding}'" if binding else f"policy {gofmt.quote(policy)}"
            failures.append((f"{by} denied request: {message}", reason))

    async def _apply(self, inv: Invocation, a: Attributes, params: dict | None, failed: list[tuple[str, str]]) -> bool:
        t = inv.target
        await a.prepare(t)
        obj = a.versioned(t, a.obj)
        act = self.activation(a, t, obj, params)
        if _off_loop(inv.spec, a):  # (in a worker, the loop serving others meanwhile)
            obj = await asyncio.to_thread(self._mutated, inv, a, t, obj, act, failed)
        else:
            obj = self._mutated(inv, a, t, obj, act, failed)
        if obj is None:
            return False
        await a.store_versioned(t, obj)
        return True

    def _mutated(self, inv: Invocation, a: Attributes, t: Target, obj: dict, act: dict,
                 failed: list[tuple[str, str]]) -> dict | None:
        """The object the invocation's mutations make of `obj`, or None where they change nothing (its
        matchConditions skip it, or fail). A failure is added to `failed`; a mutation that fails is
        skipped and those after it still apply, as upstream's dispatcher goes on to the next."""
        variables = compute_variables(inv.spec, act)
        try:
            if not self.conditions_match(inv, act, variables):
                return None
        except ConfigError as e:
            self._error(inv, failed, str(e), "Invalid")
            return None
        before = json_copy(obj)
        sch = a.schema(t)
        for m in inv.spec.get("mutations") or []:
            if act["object"] is not obj:  # the variables read the object the mutations so far made
                act["object"] = obj
                variables = compute_variables(inv.spec, act)
            try:
                out = self._mutation(m, act, obj, sch, Budget(RUNTIME_CEL_COST_BUDGET, variables))
                if m.get("patchType") != "ApplyConfiguration" and (err := type_meta_error(self.rest.index, a, t, before, out)):
                    raise err
                obj = a.prune(t, out, typed=True)
            except (CELError, PatchError, ValueError, OutOfBudget) as e:  # the next mutation goes on from `obj`
                self._error(inv, failed, str(e), "Invalid")
                continue
            obj["apiVersion"], obj["kind"] = before["apiVersion"], before["kind"]
            a.default(t, obj)
        return None if obj == before else obj

    @staticmethod
    def _mutation(m: dict, act: dict, obj: dict, sch: dict | None, budget: Budget) -> dict:
        """One mutation's result. Its expression has a budget of its own (upstream's patchers each
        get RuntimeCELCostBudget), which pays for the variables it reads too."""
        from ..patch import apply as ssa

        if m.get("patchType") == "ApplyConfiguration":
            expr = (m.get("applyConfiguration") or {}).get("expression", "")
            value = evaluate(expr, act, budget)
            if not isinstance(value, dict):
                raise ValueError(f"expression '{expr}' must evaluate to an Object, got {type(value).__name__}")
            try:
                merged = ssa.merge(obj, value, sch)
            except Exception as e:  # a configuration that does not fit the schema
                raise ValueError(f"error applying patch: {e}") from None
            return merged
        expr = (m.get("jsonPatch") or {}).get("expression", "")
        ops = evaluate(expr, act, budget)
        if not isinstance(ops, list):
            raise ValueError(f"expression '{expr}' must evaluate to a list of JSONPatch, got {type(ops).__name__}")
        out = jsonpatch.apply(obj, ops)
        if not isinstance(out, dict):
            raise ValueError("JSON Patch: the patched value is not an object")
        return out


#: the name upstream's built-in scheme gives itself in its decoding errors
LEGACY_SCHEME = "pkg/api/legacyscheme/scheme.go:30"


def _group_version(api: str) -> tuple[str, str] | None:
    """schema.ParseGroupVersion: None where it fails (more than one slash)."""
    if api in ("", "/"):
        return "", ""
    if api.count("/") > 1:
        return None
    group, _, version = api.rpartition("/")
    return group, version


def _go_package(group: str) -> str:
    """The Go package of a group's internal types, as a conversion error names them."""
    return group.split(".")[0] if group else "core"


def type_meta_error(index, a: Attributes, t: Target, before: dict, out: dict) -> errors.APIError | None:
    """Upstream's answer where a JSON patch mutation changed the object's apiVersion or kind, or None
    where it still decodes as the kind (an emptied one is filled in, as gvkWithDefaults fills it). The
    patched JSON is decoded into the kind: a kind the scheme lacks is an InternalError, and so is another
    kind, which does not convert back. A custom resource's is decoded as it is and converted back to the
    request's version: a missing kind, another group or a version the CRD lacks is an InternalError, and
    another kind is refused by the custom resource's validation (ValidateTypeMeta). Each is the answer
    whatever the failurePolicy: upstream's dispatcher returns a StatusError as it is."""
    api, kind = out.get("apiVersion"), out.get("kind")
    if api == before.get("apiVersion") and kind == before.get("kind"):
        return None
    if a.sub_kind is not None and not (before.get("apiVersion") and before.get("kind")):
        return None  # (a Binding or Eviction sent without them: its subresource takes it as it is)
    if a.sub_kind is None and t.res.strategy.unstructured:
        return _custom_type_meta_error(a, t, before, out)
    for f, v in (("apiVersion", api), ("kind", kind)):
        if v is not None and type(v) is not str:
            return errors.internal(f"json: cannot unmarshal {value_kind(v)} into Go struct field .{f} of type string")
    want = _group_version(before["apiVersion"])
    gv = _group_version(api or "")
    if gv is None:
        return errors.internal(f"unexpected GroupVersion string: {api}")
    group, version = gv
    kind = kind or before["kind"]
    if not version and (not group or group == want[0]):
        group, version = group or want[0], want[1]
    if (group, version, kind) == (*want, before["kind"]):
        return None
    res = index.by_kind(group, kind)
    if res is None or version not in res.versions:
        gv_text = f"{group}/{version}" if group else version
        return errors.internal(f'no kind "{kind}" is registered for version "{gv_text}" in scheme "{LEGACY_SCHEME}"')
    return errors.internal(f"failed to convert object: converting ({version}.{kind}) to "
                           f"({_go_package(want[0])}.{before['kind']}): unknown conversion")


def _custom_type_meta_error(a: Attributes, t: Target, before: dict, out: dict) -> errors.APIError | None:
    """A custom resource's (unstructured) side of `type_meta_error`."""
    api, kind = out.get("apiVersion"), out.get("kind")
    if type(kind) is not str or not kind:
        return errors.internal(f"Object 'Kind' is missing in '{orjson.dumps(out).decode()}'")
    gv = _group_version(api) if type(api) is str else ("", "")
    group, version = gv if gv is not None else ("", "")
    if gv is None:
        kind = ""  # (an apiVersion that does not parse leaves the whole GroupVersionKind empty)
    want = _group_version(before["apiVersion"])
    if group != want[0]:
        return errors.internal(f"failed to convert object: {group}/{version}, Kind={kind} is unstructured and is not "
                               f'suitable for converting to "{want[0]}/{want[1]}"')
    if version not in {v.get("name") for v in t.res.strategy.crd["spec"]["versions"]}:
        return errors.internal(f"failed to convert object: request to convert CR from an invalid group/version: "
                               f"{group}/{version}")
    if kind == before["kind"]:
        return None
    name = (out.get("metadata") or {}).get("name") if isinstance(out.get("metadata"), dict) else None
    return errors.invalid(t.res.group, before["kind"], name or a.name, [invalid("kind", kind, f"must be {before['kind']}")])
