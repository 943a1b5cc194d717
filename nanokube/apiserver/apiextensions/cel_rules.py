"""`x-kubernetes-validations`: CEL rules on a CRD's structural schema.

`compile_rules` runs when a CRD is written: upstream's static checks of each
rule, compilation against the schema's CEL types (a rule must be a bool, a
messageExpression a string), transition rules only where old values can be
correlated, and the static cost limits, per expression and for the whole
schema, with each estimate multiplied by how many times the node can occur.
`CompiledRules.validate` runs on every write of a custom object: each node's
rules with `self` (and `oldSelf` where the old value correlates), under the
per-call and per-object cost budgets, reporting errors as kube-apiserver
1.35+ does (scalars show their value, objects and arrays omit it).

Each rule is charged what it runs (`Program.measure`: metered, stopped once
past the per-call limit as cel-go's cost tracker cancels it), and the
object's budget is spent by those actual costs, as upstream's validator
spends them, messageExpressions included.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import cel

from ...cel import CELError, Environment, Program
from ...cel.environment import Binding
from ...cel.openapi import field_type, schema_type, to_cel
from ...cel.openapi import items_bound, properties_bound
from ...cel.types import Type, optional_of
from ...machinery import gofmt
from ...machinery.validation import FieldError, invalid

STATIC_COST_LIMIT = 10_000_000  # StaticEstimatedCostLimit
STATIC_CRD_COST_LIMIT = 100_000_000  # StaticEstimatedCRDCostLimit
RUNTIME_BUDGET = 10_000_000  # RuntimeCELCostBudget
PER_CALL_LIMIT = 1_000_000  # PerCallLimit
MAX_MESSAGE_EXPRESSION_SIZE = 5 * 1024  # MaxEvaluatedMessageExpressionSizeBytes
#: (largest collection, longest string) past which a node's values are set on the engine's context
#: rather than converted at each reference (cel.environment.Binding: setting costs ~120 us)
BOUND_FROM = (64, 65_536)
REASONS = ("FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired")
BLOCKING_REASONS = frozenset({"FieldValueNotSupported", "FieldValueRequired", "FieldValueTooLong",
                              "FieldValueTooMany", "FieldValueTypeInvalid"})
NOT_CHECKED = ("some validation rules were not checked because the object was invalid; "
               "correct the existing errors to complete validation")
_NEWLINES = re.compile(r"[\n\r]+")
_MOST_EXPENSIVE = 4


def has_blocking_errors(errors: list[FieldError]) -> bool:
    """Whether OpenAPI validation errors stop CEL rules from running
    (upstream's hasBlockingErr: required, enum, too long, too many, type)."""
    return any(e.reason in BLOCKING_REASONS for e in errors)


def not_checked_error() -> FieldError:
    """The error appended instead of running the rules of an object that
    already has blocking errors: field.Invalid(nil, nil, ...), its nil value printed null."""
    return invalid("<nil>", None, NOT_CHECKED)


def _error(reason: str, path: str, detail: str = "", value: Any = None, has_value: bool = False) -> FieldError:
    return FieldError(reason, path, detail, value, has_value)


def cost_error_message(name: str, cost: int, limit: int) -> str:
    factor = cost / limit
    if factor > 100.0:
        shown = "more than 100x"
    elif factor < 1.5:
        shown = f"{factor:f}x"
    else:
        shown = f"{factor:.1f}x"
    return (f"{name} exceeds budget by factor of {shown} (try simplifying the rule, or adding maxItems, "
            "maxProperties, and maxLength where arrays, maps, and strings are declared)")


# -- compiled schema --------------------------------------------------------


@dataclass
class _Rule:
    spec: dict
    program: Program | None  # None: the rule did not compile (compile_error says why)
    message: Program | None
    field_path: str  # normalized, appended to the node's path
    optional_old_self: bool
    compile_error: str = ""

    @property
    def uses_old_self(self) -> bool:
        return self.program is not None and self.program.uses("oldSelf")


@dataclass
class _Node:
    schema: dict
    root: bool = False
    rules: list[_Rule] = field(default_factory=list)
    properties: dict[str, _Node] = field(default_factory=dict)
    additional: _Node | None = None
    items: _Node | None = None

    @property
    def empty(self) -> bool:
        return not (self.rules or self.properties or self.additional or self.items)


def _environment(t: Type, optional_old: bool, stored: bool) -> Environment:
    return Environment({"self": t, "oldSelf": optional_of(t) if optional_old else t}, field_type, stored=stored)


@dataclass(frozen=True)
class Preexisting:
    """The rule and messageExpression texts a CRD held before an update (upstream's
    preexistingExpressions, matched by text wherever they sit): they compile in the more
    permissive stored-expressions environment, so a CRD keeps updating when a newer checker
    refuses a rule it already holds. `everything`: the rules of a served CRD, all stored."""

    rules: frozenset[str] = frozenset()
    messages: frozenset[str] = frozenset()
    everything: bool = False


#: a CRD being created: every expression is new
NEW = Preexisting()
#: a stored CRD's schema compiled to validate its objects
STORED = Preexisting(everything=True)


def normalize_field_path(path: str, schema: dict) -> str | None:
    """A rule's fieldPath (`.a.b`, `['x.y']`, no indices) as a field path
    suffix (`.a.b`, `[key]` under additionalProperties), or None when it
    names no field of `schema`."""
    out, s, i = [], schema, 0
    while i < len(path):
        if path[i] == ".":
            m = re.match(r"[^.\[\]]+", path[i + 1:])
            if not m:
                return None
            name, i = m.group(), i + 1 + m.end()
        elif path[i] == "[":
            m = re.match(r"'((?:\\.|[^'\\])*)'\]", path[i + 1:])
            if not m:
                return None
            name, i = re.sub(r"\\(.)", r"\1", m.group(1)), i + 1 + m.end()
        else:
            return None
        props = s.get("properties")
        add = s.get("additionalProperties")
        if props is not None and name in props:
            out.append(f".{name}")
            s = props[name]
        elif props is None and isinstance(add, dict) and path[i - 1] == "]":
            out.append(f"[{name}]")
            s = add
        else:
            return None
    return "".join(out) if out else None


class _Compiler:
    def __init__(self, field_path: str, compiling: bool, preexisting: Preexisting) -> None:
        self.compiling = compiling
        self.preexisting = preexisting
        self.errors: list[FieldError] = []
        self.total = 0
        self.expensive: list[tuple[int, str]] = []
        self.base = field_path

    def node(self, s: dict, path: str, root: bool, uncorrelatable: str | None, cardinality: int) -> _Node | None:
        n = _Node(s, root)
        for name, ps in (s.get("properties") or {}).items():
            child = self.node(ps, f"{path}.properties[{name}]", False, uncorrelatable, cardinality)
            if child is not None:
                n.properties[name] = child
        add = s.get("additionalProperties")
        if isinstance(add, dict):
            n.additional = self.node(add, f"{path}.additionalProperties", False, uncorrelatable,
                                     cardinality * properties_bound(s))
        items = s.get("items")
        if isinstance(items, dict):
            inner = uncorrelatable
            if inner is None and s.get("x-kubernetes-list-type") != "map":
                inner = path
            n.items = self.node(items, f"{path}.items", False, inner, cardinality * items_bound(s))
        rules = s.get("x-kubernetes-validations") or []
        for i, rule in enumerate(rules):
            compiled = self.rule(s, rule, f"{path}.x-kubernetes-validations[{i}]", root, uncorrelatable, cardinality)
            if compiled is not None:
                n.rules.append(compiled)
        return None if n.empty else n

    def static_checks(self, s: dict, rule: dict, at: str) -> bool:
        before = len(self.errors)
        text, msg = rule.get("rule") or "", rule.get("message") or ""
        msg_expr, fp = rule.get("messageExpression") or "", rule.get("fieldPath") or ""
        if not text.strip():
            self.errors.append(_error("FieldValueRequired", f"{at}.rule", "rule is not specified"))
        elif msg and not msg.strip():
            self.errors.append(_error("FieldValueInvalid", f"{at}.message", "message must be non-empty if specified",
                                      msg, True))
        elif _NEWLINES.search(msg.strip()):
            self.errors.append(_error("FieldValueInvalid", f"{at}.message", "message must not contain line breaks",
                                      msg, True))
        elif _NEWLINES.search(text.strip()) and not msg.strip():
            self.errors.append(_error("FieldValueRequired", f"{at}.message",
                                      "message must be specified if rule contains line breaks"))
        if msg_expr and not msg_expr.strip():
            self.errors.append(_error("FieldValueRequired", f"{at}.messageExpression",
                                      "messageExpression must be non-empty if specified"))
        reason = rule.get("reason")
        if reason is not None and reason not in REASONS:
            supported = ", ".join(f'"{r}"' for r in REASONS)
            self.errors.append(_error("FieldValueNotSupported", f"{at}.reason", f"supported values: {supported}",
                                      reason, True))
        if fp and not fp.strip():
            self.errors.append(_error("FieldValueInvalid", f"{at}.fieldPath", "fieldPath must be non-empty if specified",
                                      fp, True))
        if _NEWLINES.search(fp):
            self.errors.append(_error("FieldValueInvalid", f"{at}.fieldPath", "fieldPath must not contain line breaks",
                                      fp, True))
        if fp and normalize_field_path(fp, s) is None:
            self.errors.append(_error("FieldValueInvalid", f"{at}.fieldPath", "fieldPath must be a valid path", fp, True))
        return len(self.errors) == before

    def observe(self, path: str, cost: int) -> None:
        self.total += cost
        if cost < STATIC_CRD_COST_LIMIT // 100:  # only rules with 1% of the limit are named
            return
        self.expensive.append((cost, path))
        self.expensive.sort(key=lambda e: -e[0])
        del self.expensive[_MOST_EXPENSIVE:]

    def rule(self, s: dict, rule: dict, at: str, root: bool, uncorrelatable: str | None,
             cardinality: int) -> _Rule | None:
        """The compiled rule (None when its static checks fail: nothing to
        run); a rule that does not compile is kept with its error, which
        every validation reports, as upstream's validator does."""
        if not self.static_checks(s, rule, at) or not self.compiling:
            return None
        t = schema_type(s, root)
        optional_old = bool(rule.get("optionalOldSelf"))
        text = rule["rule"]
        fp = normalize_field_path(rule["fieldPath"], s) if rule.get("fieldPath") else ""
        try:
            stored = self.preexisting.everything or text in self.preexisting.rules
            program = _environment(t, optional_old, stored).compile(text)
        except CELError as e:
            detail = f"compilation failed: {e}"
            self.errors.append(_error("FieldValueInvalid", f"{at}.rule", detail, rule, True))
            return _Rule(rule, None, None, fp or "", optional_old, detail)
        cost = program.max_cost * cardinality
        if cost > STATIC_COST_LIMIT:
            self.errors.append(_error("FieldValueForbidden", f"{at}.rule",
                                      cost_error_message("estimated rule cost", cost, STATIC_COST_LIMIT)))
        self.observe(f"{at}.rule", cost)
        if not program.may_be("bool"):
            detail = "cel expression must evaluate to a bool"
            self.errors.append(_error("FieldValueInvalid", f"{at}.rule", detail, rule, True))
            return _Rule(rule, None, None, fp or "", optional_old, detail)
        message = None
        if (rule.get("messageExpression") or "").strip():
            message = self.message_expression(t, rule, at)
        if program.uses("oldSelf"):
            if uncorrelatable is not None:
                self.errors.append(_error(
                    "FieldValueInvalid", f"{at}.rule",
                    f"oldSelf cannot be used on the uncorrelatable portion of the schema within {uncorrelatable}",
                    text, True))
        elif rule.get("optionalOldSelf") is not None:
            self.errors.append(_error("FieldValueInvalid", f"{at}.optionalOldSelf",
                                      "may not be set if oldSelf is not used in rule", rule["optionalOldSelf"], True))
        return _Rule(rule, program, message, fp or "", optional_old)

    def message_expression(self, t: Type, rule: dict, at: str) -> Program | None:
        text = rule["messageExpression"]
        stored = self.preexisting.everything or text in self.preexisting.messages
        try:
            message = _environment(t, False, stored).compile(text)
        except CELError as e:
            self.errors.append(_error("FieldValueInvalid", f"{at}.messageExpression",
                                      f"messageExpression compilation failed: {e}", rule, True))
            return None
        if not message.may_be("string"):
            self.errors.append(_error("FieldValueInvalid", f"{at}.messageExpression",
                                      "messageExpression must evaluate to a string", rule, True))
            return None
        if message.max_cost > STATIC_COST_LIMIT:
            self.errors.append(_error("FieldValueForbidden", f"{at}.messageExpression", cost_error_message(
                "estimated messageExpression cost", message.max_cost, STATIC_COST_LIMIT)))
        self.observe(f"{at}.messageExpression", message.max_cost)
        return message


def compile_rules(schema: dict, field_path: str, compiling: bool = True, preexisting: Preexisting = NEW
                  ) -> tuple[CompiledRules | None, list[FieldError]]:
    """Compile every x-kubernetes-validations rule of a CRD version's
    openAPIV3Schema (`field_path` is where that schema sits in the CRD, e.g.
    `spec.versions[0].schema.openAPIV3Schema`). Returns the rules (None when
    the schema has none) and the CRD validation errors; the rules are usable
    even with errors (a stored CRD is served with what it has). `compiling=False` runs the static
    checks alone, as upstream does for a schema without a CEL context (not structural, or a
    default that fails). `preexisting`: the expressions that compile as stored ones."""
    c = _Compiler(field_path, compiling, preexisting)
    root = c.node(schema or {}, field_path, True, None, 1)
    if c.total > STATIC_CRD_COST_LIMIT:
        for _, path in c.expensive:
            c.errors.append(_error("FieldValueForbidden", path,
                                   "contributed to estimated rule cost total exceeding cost limit for entire "
                                   "OpenAPIv3 schema"))
        c.errors.append(_error("FieldValueForbidden", field_path, cost_error_message(
            "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema", c.total,
            STATIC_CRD_COST_LIMIT)))
    return (CompiledRules(root, c.total) if root is not None else None), c.errors


# -- validation -------------------------------------------------------------


def _sizes(bounds: tuple[int, int]):
    n, s = bounds

    def size(t: Type) -> int:
        if t.exact:
            return t.max_size
        if t.name in ("string", "bytes"):
            return min(t.max_size, s)
        if t.name in ("list", "map", "object"):
            return min(t.max_size, n)
        return max(n, s) if t.name == "dyn" else 1
    return size


class _Budget:
    """What one object's rules may still spend, and the binding its large values are set on."""

    def __init__(self, binding: Binding) -> None:
        self.remaining = RUNTIME_BUDGET
        self.binding = binding


def _bounded_cost(n: _Node, size, most: int, cardinality: int) -> int:
    """The estimate of `n`'s rules and those below it with sizes clamped by `size` and each
    collection holding at most `most` values."""
    cost = 0
    for r in n.rules:
        cost += sum(p.cost_bound(size) for p in (r.program, r.message) if p is not None) * cardinality
    for child in n.properties.values():
        cost += _bounded_cost(child, size, most, cardinality)
    if n.additional is not None:
        cost += _bounded_cost(n.additional, size, most, cardinality * min(properties_bound(n.schema), most))
    if n.items is not None:
        cost += _bounded_cost(n.items, size, most, cardinality * min(items_bound(n.schema), most))
    return cost


_OUT_OF_BUDGET = "validation failed due to running out of cost budget, no further validation rules will be run"


class CompiledRules:
    """The compiled rules of one CRD version's schema. `cost`: their static estimate, every rule's
    worst case times how many times its node can occur (what compile_rules holds to the limits)."""

    def __init__(self, root: _Node, cost: int) -> None:
        self.root = root
        self.cost = cost
        #: cost_for's answers by the bit length of the object's size
        self._costs: dict[int, int] = {}

    def cost_for(self, size: int) -> int:
        """The estimated cost of validating an object of `size` bytes of JSON (0: not known, the
        static estimate): each rule's worst case with every collection, string and count of nodes
        clamped to what fits in that many bytes (the next power of two: computed once a power). A
        rule costly on any object (`lists.range(1000)`) stays costly; one that walks an unbounded
        list costs what a small object's list can hold."""
        if size <= 0:
            return self.cost
        bits = size.bit_length()
        known = self._costs.get(bits)
        if known is None:
            most = 1 << bits
            known = self._costs[bits] = min(self.cost, _bounded_cost(self.root, _sizes((most // 2, most)), most // 2, 1))
        return known

    def validate(self, obj: dict, old: dict | None, warnings: list[str] | None = None) -> list[FieldError]:
        """Errors of `obj` (the old object on update, for transition rules).
        Errors of rules without oldSelf on values unchanged since `old` are
        ratcheted: reported in `warnings` instead."""
        errs: list[FieldError] = []
        binding = Binding()
        try:
            self._validate(self.root, "", obj, old, old is not None and obj == old, errs, warnings, _Budget(binding))
        finally:
            binding.release()
        return errs

    def _validate(self, n: _Node, path: str, obj: Any, old: Any, ratchet: bool, errs: list[FieldError],
                  warnings: list[str] | None, budget: _Budget) -> bool:
        """False once the budget is spent (no further rules run)."""
        if obj is None:
            return True
        if n.rules and not self._rules(n, path, obj, old, ratchet, errs, warnings, budget):
            return False
        if isinstance(obj, dict):
            olds = old if isinstance(old, dict) else {}
            for k, v in obj.items():
                child = n.properties.get(k) if n.schema.get("properties") else None
                if child is None and n.additional is not None and not n.schema.get("properties"):
                    child = n.additional
                    sub = f"{path}[{k}]"
                else:
                    sub = f"{path}.{k}" if path else k
                if child is None:
                    continue
                o = olds.get(k)
                if not self._validate(child, sub, v, o, o is not None and o == v, errs, warnings, budget):
                    return False
        elif isinstance(obj, list) and n.items is not None:
            keys = n.schema.get("x-kubernetes-list-map-keys") or []
            by_key = {}
            if n.schema.get("x-kubernetes-list-type") == "map" and isinstance(old, list):
                by_key = {tuple(o.get(k) for k in keys): o for o in old if isinstance(o, dict)}
            for i, v in enumerate(obj):
                o = by_key.get(tuple(v.get(k) for k in keys)) if by_key and isinstance(v, dict) else None
                r = (o == v) if o is not None else ratchet
                if not self._validate(n.items, f"{path}[{i}]", v, o, r, errs, warnings, budget):
                    return False
        return True

    def _rules(self, n: _Node, path: str, obj: Any, old: Any, ratchet: bool, errs: list[FieldError],
               warnings: list[str] | None, budget: _Budget) -> bool:
        shown = path or "<nil>"
        stype = n.schema.get("type", "")
        if budget.remaining <= 0:
            errs.append(_error("FieldValueInvalid", shown, _OUT_OF_BUDGET, stype, True))
            return False
        sized = [1, 1]  # (cost.extent of each value, measured as to_cel converts it)
        this = to_cel(obj, n.schema, n.root, sized)
        bounds, prev = (sized[0], sized[1]), None
        if old is not None:
            sized = [1, 1]
            prev = to_cel(old, n.schema, n.root, sized)
            # the larger of each: the longer strings may be the old value's, in a shorter list
            bounds = (max(bounds[0], sized[0]), max(bounds[1], sized[1]))
        size = _sizes(bounds)
        binding = budget.binding if bounds[0] > BOUND_FROM[0] or bounds[1] > BOUND_FROM[1] else None
        optional_old = None
        for r in n.rules:
            text = r.spec["rule"]
            if r.program is None:
                errs.append(_error("FieldValueInvalid", shown, f"rule compile error: {r.compile_error}", stype, True))
                continue
            if r.uses_old_self and prev is None and not r.optional_old_self:
                continue  # a transition rule needs a correlated old value
            if r.optional_old_self and optional_old is None:  # (one object for the node's rules)
                optional_old = cel.OptionalValue.of(prev) if prev is not None else cel.OptionalValue.none()
            variables = {"self": this, "oldSelf": optional_old if r.optional_old_self else prev}
            result, error, cost = r.program.measure(variables, size, PER_CALL_LIMIT, binding)
            if cost > budget.remaining:
                errs.append(_error("FieldValueInvalid", shown, _OUT_OF_BUDGET, stype, True))
                return False
            budget.remaining -= cost
            if error is not None:
                label = _rule_label(r.spec)
                if str(error).startswith("operation cancelled"):
                    errs.append(_error("FieldValueInvalid", shown, f"'{error}': no further validation rules will be "
                                       f"run due to call cost exceeds limit for rule: {label}", stype, True))
                    return False
                if str(error).startswith("no such overload"):
                    detail = (f"'{error}': call arguments did not match a supported operator, function or macro "
                              f"signature for rule: {label}")
                else:
                    detail = f"{error} evaluating rule: {label}"
                errs.append(_error("FieldValueInvalid", shown, detail, stype, True))
                continue
            if result is True:
                continue
            at = (path + r.field_path if path or r.field_path.startswith("[") else r.field_path[1:]) \
                if r.field_path else shown
            ratcheted = ratchet and not r.uses_old_self
            detail = None
            if r.message is not None:
                detail, stop = self._message(r.message, {"self": this, "oldSelf": prev}, size, budget, binding)
                if stop is not None:
                    _report(_error("FieldValueInvalid", at, stop, stype, True), ratcheted, errs, warnings)
                    return False
            if detail is None:
                msg = (r.spec.get("message") or "").strip()
                detail = msg or f"failed rule: {text.strip()}"
            _report(_reason_error(r.spec.get("reason"), at, obj, stype, detail), ratcheted, errs, warnings)
        return True

    @staticmethod
    def _message(program: Program, variables: dict, size, budget: _Budget,
                 binding: Binding | None) -> tuple[str | None, str | None]:
        """(detail, or None to fall back to `message`; why no further rules run, or None), its
        cost spent from `budget` as upstream's evalMessageExpression spends it."""
        value, error, cost = program.measure(variables, size, PER_CALL_LIMIT, binding)
        if cost > budget.remaining:
            return None, ("messageExpression evaluation failed due to running out of cost budget, no further "
                          "validation rules will be run")
        if error is not None and str(error).startswith("operation cancelled"):
            return None, ("no further validation rules will be run due to call cost exceeds limit for "
                          f"messageExpression: {gofmt.quote(program.source)}")
        budget.remaining -= cost
        if error is not None or not isinstance(value, str):
            return None, None
        value = value.strip()
        if not value or len(value) > MAX_MESSAGE_EXPRESSION_SIZE or _NEWLINES.search(value):
            return None, None
        return value, None


def _report(e: FieldError, ratcheted: bool, errs: list[FieldError], warnings: list[str] | None) -> None:
    """A failed rule's error, a warning instead where its value is unchanged (ratcheting)."""
    if not ratcheted:
        errs.append(e)
    elif warnings is not None:
        warnings.append(str(e))


def _rule_label(spec: dict) -> str:
    msg = (spec.get("message") or "").strip()
    return msg or spec["rule"].strip()


def _reason_error(reason: str | None, path: str, value: Any, stype: str, detail: str) -> FieldError:
    scalar = stype not in ("object", "array") and not isinstance(value, (dict, list))
    if reason == "FieldValueForbidden":
        return _error("FieldValueForbidden", path, detail)
    if reason == "FieldValueRequired":
        return _error("FieldValueRequired", path, detail)
    if reason == "FieldValueDuplicate":
        return _error("FieldValueDuplicate", path, "", value if scalar else None, scalar)
    return _error("FieldValueInvalid", path, detail, value if scalar else None, scalar)

