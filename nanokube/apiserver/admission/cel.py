"""CEL for admission (webhook matchConditions, ValidatingAdmissionPolicy and
MutatingAdmissionPolicy) on the shared Kubernetes CEL environment (nanokube.cel).

Variables are the ones upstream's admission CEL declares: `object`,
`oldObject`, `request`, `params`, `namespaceObject`, `variables` and
`authorizer`, any of which may be null (an object on DELETE, oldObject on
CREATE, params without a paramRef), so programs run in a context of their own
that binds nulls as values. Typed object construction (`Object{...}`,
`JSONPatch{...}`) and `jsonpatch.escapeKey(k)` are the environment's (its
struct types).
"""

from __future__ import annotations

import functools
import re
import threading
from typing import Any, Callable

import cel

from ...cel import CELError as _SharedCELError
from ...cel import Environment, desugar
from ...cel import admission as admission_types
from ...cel.cost import dynamic_sizes, extent
from ...cel.library import runtime_functions
from ...cel.types import DYN, Type

VARIABLES = ("object", "oldObject", "request", "params", "namespaceObject", "variables", "authorizer")


class CELError(Exception):
    """Compilation or evaluation failed; the text follows upstream's."""


_LOCAL = threading.local()


def _dyn(obj: Type, name: str) -> Type | None:
    return DYN


_field_type = admission_types.field_type(_dyn)


@functools.lru_cache(maxsize=256)
def _environment(declared: frozenset, variables: tuple[tuple[str, Type], ...] | None = None) -> Environment:
    """One environment per set of declared variables and of a policy's variables (bounded:
    policies written with many different variables share the cache)."""
    types = {name: admission_types.TYPED.get(name, DYN) for name in declared}
    if variables is not None and "variables" in declared:
        types["variables"] = Type("object", schema=admission_types.Fields(variables))  # (declared's, without kwargs)
    return Environment(types, field_type=_field_type, struct_types=True)


def _context() -> cel.Context:
    ctx = getattr(_LOCAL, "ctx", None)
    if ctx is None:
        ctx = _LOCAL.ctx = cel.Context()
        for name, fn in {**runtime_functions(), **desugar.RUNTIME}.items():
            ctx.add_function(name, fn)
    return ctx


def _bind(ctx: cel.Context, activation: dict[str, Any], boxed: bool = False) -> None:
    """Set the admission variables on this thread's context, converting only what it does not
    hold yet for this activation: an activation's values are private copies, replaced (never
    changed) while it is evaluated, except `variables`, which fills as a policy's variables are
    computed and is set again once it grew. Most of an evaluation was converting a whole object
    into the engine, once per expression, and then the engine copying every value it holds
    whenever one is set: setting `variables` at every evaluation copied the object every time.
    `boxed`: the expression reads `variables` only as `variables.<name>`, so each of the policy's
    variables is set as the engine's optional value holding it, converted once per activation
    (the engine's field selection takes a present optional's value); else the whole map is
    converted, as every evaluation did before: each of a policy's variables converted again for
    every later one, 40 lists of 5,000 strings 7.4 s."""
    loaded = getattr(_LOCAL, "loaded", None)
    if loaded is None or loaded[0] is not activation:
        loaded = _LOCAL.loaded = (activation, {}, {})
    held, boxes = loaded[1], loaded[2]
    for name in VARIABLES:
        v = activation.get(name)
        if name == "variables":  # (set again only once it grew: setting any has the engine copy them all)
            if boxed and v:
                for k, value in v.items():
                    if k not in boxes or boxes[k][0] is not value:
                        boxes[k] = (value, cel.OptionalValue.of(value))
                bound = tuple((k, id(boxes[k][1])) for k in v)
                if held.get(name) != bound:
                    ctx.add_variable(name, {k: boxes[k][1] for k in v})
            else:
                bound = (id(v), len(v) if v else 0)  # (a policy's variables are only ever added)
                if held.get(name) != bound:
                    ctx.add_variable(name, v)
            held[name] = bound
        elif name not in held or held[name] is not v:
            ctx.add_variable(name, v)
            held[name] = v


@functools.lru_cache(maxsize=4096)
def reads_variables_by_field(expression: str) -> bool:
    """Whether the expression reads `variables` only as `variables.<name>` (has() included),
    never as a whole, by index or by optional selection."""
    try:
        program = compile_expression(expression)
    except CELError:
        return False
    stack = [program.ast]
    while stack:
        n = stack.pop()
        if n.kind == "select" and not n.optional and n.target is not None and n.target.kind == "ident" \
                and n.target.name == "variables":
            continue
        if n.kind == "ident" and n.name == "variables":
            return False
        if n.target is not None:
            stack.append(n.target)
        stack.extend(n.args)
    return True


class VariableCompiler:
    """A policy's variables compiled in order, each seeing those before it, as upstream's composited
    compiler adds each to its `variables` type once compiled: one fields object grows, each compile
    in an environment of its own (no cached result of an earlier, smaller scope is reused). A scope
    per variable, copied from the one before, was quadratic: 3,000 variables held the loop 1.3 s,
    the 60,000 a 3 MiB body holds would have taken minutes."""

    def __init__(self, declared: frozenset) -> None:
        self.fields = admission_types.Fields()
        self._types = {name: admission_types.TYPED.get(name, DYN) for name in declared}
        if "variables" in declared:
            self._types["variables"] = Type("object", schema=self.fields)

    def compile(self, expression: str):
        """The checked program of a variable's expression, with the variables added so far."""
        try:
            return Environment(self._types, field_type=_field_type, struct_types=True).compile(expression)
        except _SharedCELError as e:
            raise CELError(f"compilation failed: {e}") from None


def compile_expression(expression: str, declared: frozenset = frozenset(VARIABLES),
                       variables: tuple[tuple[str, Type], ...] | None = None):
    """The checked program (cached) with the `declared` variables (where an
    expression is written limits them: no `params` without a paramKind, no
    `authorizer` in a messageExpression); `variables` (a policy's, with the
    types their expressions compiled to) are the fields `variables` has, as
    upstream's composited compiler types it: `variables.x` of another name is
    an undefined field, and a bool variable is a bool. CELError reads
    `compilation failed: ERROR: <input>:1:5: ...` as upstream's does."""
    try:
        return _environment(declared, variables).compile(expression)
    except _SharedCELError as e:
        raise CELError(f"compilation failed: {e}") from None


#: upstream's celconfig.RuntimeCELCostBudget: what one evaluation of a policy's validations (then
#: their messageExpressions), or of its auditAnnotations, may spend together
RUNTIME_CEL_COST_BUDGET = 10_000_000
#: upstream's celconfig.RuntimeCELCostBudgetMatchConditions: the same for one set of matchConditions
MATCH_CONDITIONS_COST_BUDGET = 2_500_000
OUT_OF_BUDGET = "validation failed due to running out of cost budget, no further validation rules will be run"


#: where an activation keeps why each of the policy's variables that failed to evaluate did (name -> error)
FAILED_VARIABLES = "__failed_variables__"


class OutOfBudget(Exception):
    """The expressions sharing a Budget cost more than it holds: none after this one runs."""


class Budget:
    """What a set of expressions evaluated together may spend (upstream's remaining budget,
    passed from one expression to the next). The policy's variables an expression reads,
    directly or through other variables, are charged the first time, as upstream charges
    their lazy evaluation to the expression that triggers it. variables: name -> (cost of
    evaluating it, the variables it reads)."""

    __slots__ = ("remaining", "variables", "charged")

    def __init__(self, limit: int, variables: dict[str, tuple[int, frozenset]] | None = None) -> None:
        self.remaining = limit
        self.variables = variables or {}
        self.charged: set[str] = set()

    def spend(self, cost: int, reads: frozenset = frozenset()) -> None:
        pending = [n for n in reads if n not in self.charged]
        composition = 0
        while pending:
            name = pending.pop()
            if name in self.charged or name not in self.variables:
                continue
            self.charged.add(name)
            spent, deeper = self.variables[name]
            composition += spent
            pending.extend(deeper)
        for part in (composition, cost):
            if part > self.remaining:
                self.remaining = -1
                raise OutOfBudget(OUT_OF_BUDGET)
            self.remaining -= part


@functools.lru_cache(maxsize=4096)
def variables_read(expression: str) -> frozenset:
    """The policy variables (`variables.x`) an expression reads."""
    try:
        program = compile_expression(expression)
    except CELError:
        return frozenset()
    out, stack = set(), [program.ast]
    while stack:
        n = stack.pop()
        if n.kind == "select" and n.target is not None and n.target.kind == "ident" and n.target.name == "variables":
            out.add(n.name)
        if n.target is not None:
            stack.append(n.target)
        stack.extend(n.args)
    return frozenset(out)


def _sizes(activation: dict[str, Any]) -> Callable[[Type], int]:
    """Sizes for bounding an expression over these values (kept in the activation until one of
    them is replaced, a mutation's object, or another variable is set)."""
    values = [v for k, v in activation.items() if k != "authorizer" and not k.startswith("__")]
    key = (tuple(map(id, values)), len(activation.get("variables") or ()))
    cached = activation.get("__sizes__")
    if cached is not None and cached[0] == key:
        return cached[1]
    sizes = dynamic_sizes(*extent(values))
    activation["__sizes__"] = (key, sizes)
    return sizes


def _failure(e: Exception) -> str:
    """Why an evaluation failed, in upstream's words."""
    if isinstance(e, _SharedCELError):
        return str(e)
    if isinstance(e, KeyError):
        return f"no such key: {e.args[0]}"
    if isinstance(e, ZeroDivisionError):
        return "division by zero"
    text = str(e)  # the engine reports evaluation errors by many types
    own = re.search(r"CELError: (.*?)\. Check function arguments", text, re.S)
    return own.group(1) if own else text.split(". Check that the variable", 1)[0].split("\n")[0]


def evaluate(expression: str, activation: dict[str, Any], budget: Budget | None = None) -> Any:
    """Evaluate with the admission variables bound (absent ones are null). With a budget, its
    cost (and that of the variables it reads) is spent from it, OutOfBudget past it, whether
    or not the expression failed."""
    program = compile_expression(expression)
    ctx = _context()
    _bind(ctx, activation, reads_variables_by_field(expression))
    value, error, cost = program.run(ctx, lambda: _sizes(activation))
    why = None if error is None else _failure(error)
    if budget is not None:
        budget.spend(cost, variables_read(expression))
    if why is not None:
        failed = activation.get(FAILED_VARIABLES) or {}
        name = why[len("no such key: "):] if why.startswith("no such key: ") else None
        if name in failed and name in variables_read(expression):  # (upstream's lazy variable's error)
            why = f'composited variable "{name}" fails to evaluate: {failed[name]}'
        raise CELError(f"expression '{expression}' resulted in error: {why}")
    return value
