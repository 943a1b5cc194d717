"""Compiling and running expressions: an Environment declares the variables
and their types, compiles expressions once (cached with their issues), and
runs them on the `common-expression-language` engine, metered where their
worst case is not negligible (see `meter`), charged what they ran."""

from __future__ import annotations

import logging
import re
import threading
from collections import OrderedDict
from typing import Any, Callable

import cel

from .checker import Checker, Checked
from . import collect, desugar
from .cost import Estimator
from .errors import COST_LIMIT_ERROR, CELError
from .library import Overload, overloads, runtime_functions
from .meter import Meter, running
from .parser import MAX_RECURSION_DEPTH, NO_LOCATION, Node, ParseError, format_error, parse
from .types import DYN, Type

#: upstream's celconfig.PerCallLimit
PER_CALL_LIMIT = 1_000_000
#: cel-go's parser's default expressionSizeCodePointLimit
MAX_CODE_POINTS = 100_000
#: below this worst case a program runs as it is (its cost a rounding error of any budget); from it, metered
METER_FROM = 10_000
_OWN_ERROR = re.compile(r"CELError: (.*?)\. Check function arguments", re.S)
#: the engine's own nesting limit (96, below cel-go's 250), reported in cel-go's words
_ENGINE_DEPTH = re.compile(r'Syntax error: OtherError\(ParseError \{.*?msg: "Recursion limit of (\d+) exceeded".*?\}\)')
_UNDEFINED = re.compile(r"Undefined variable or function: '([^']*)'")
_LOG = logging.getLogger(__name__)


class _FunctionFailures(logging.Filter):
    """The engine logs a WARNING (logger `cel`) for every exception a function of ours raises
    in it, though each is the evaluation's own error, which its caller reports: a metered stop
    on every refused request, a library function's 'no such overload'. Those go to this
    module's log at debug instead; anything else the engine logs passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if not message.startswith("Python function '"):
            return True
        _LOG.debug("engine: %s", message)
        return False


logging.getLogger(cel.__name__).addFilter(_FunctionFailures())


class _Runtime:
    """An engine context per thread: every library function bound once, the
    variables resolved per evaluation from `current`."""

    def __init__(self) -> None:
        self.current: dict[str, Any] = {}
        self.ctx = cel.Context()
        for name, fn in {**runtime_functions(), **desugar.RUNTIME}.items():
            self.ctx.add_function(name, fn)
        self.ctx.set_variable_resolver(self.current.get)


_LOCAL = threading.local()
_OVERLOADS: dict[str, list[Overload]] | None = None


def _runtime() -> _Runtime:
    rt = getattr(_LOCAL, "runtime", None)
    if rt is None:
        rt = _LOCAL.runtime = _Runtime()
    return rt


class Binding:
    """Variables set on an engine context (add_variable) instead of resolved, for one pass of
    evaluations over the same values (a CRD object's validation). The engine converts a value it
    resolves at every reference of the variable, each iteration of a comprehension included: a
    rule reading `self` 100 times over 50,000 strings converted them 100 times, 14 s on the loop.
    One it holds is converted once; but each value set has the engine copy them all again and
    wrap every library function anew (~120 us), so it pays only for large values. Its contexts
    are this thread's, one per set of variable names (so a value of another evaluation is never
    left to read); a value is set again when it is another object, `release` lets them go."""

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held: dict[frozenset, dict[str, Any]] = {}

    def context(self, variables: dict[str, Any]) -> Any:
        names = frozenset(variables)
        contexts = getattr(_LOCAL, "bound", None)
        if contexts is None:
            contexts = _LOCAL.bound = {}
        ctx = contexts.get(names)
        if ctx is None:
            ctx = contexts[names] = cel.Context()
            for name, fn in {**runtime_functions(), **desugar.RUNTIME}.items():
                ctx.add_function(name, fn)
        held = self._held.setdefault(names, {})
        for name, v in variables.items():
            if name not in held or held[name] is not v:
                ctx.add_variable(name, v)
                held[name] = v
        return ctx

    def release(self) -> None:
        """Drop the values from the contexts (the engine's copies of a large object stay otherwise)."""
        contexts = getattr(_LOCAL, "bound", {})
        for names in self._held:
            ctx = contexts.get(names)
            for name in names if ctx is not None else ():
                ctx.add_variable(name, None)
        self._held.clear()


def declared_overloads() -> dict[str, list[Overload]]:
    global _OVERLOADS
    if _OVERLOADS is None:
        _OVERLOADS = {}
        for o in overloads():
            _OVERLOADS.setdefault(o.name, []).append(o)
    return _OVERLOADS


def _default_field_type(obj: Type, name: str) -> Type | None:
    return DYN


class Metered:
    """A program's metered form (see `meter`): the engine program that reports its
    comprehensions' ranges, and the estimate of the rest under the types' bounds."""

    __slots__ = ("program", "base", "per_iteration", "_types", "_ast")

    def __init__(self, ast: Node, types: dict[int, Type]) -> None:
        self._ast, self._types = ast, types
        self.program = _engine_compile(desugar.rewrite(ast, types, metered=True))
        self.base, self.per_iteration = self.costs(None)

    def costs(self, size: Callable[[Type], int] | None) -> tuple[int, dict[int, int]]:
        """(base, per_iteration) with every size clamped by size(type) (None: the types' bounds)."""
        e = Estimator(self._types, size, metered=True)
        return e.cost(self._ast), e.per_iteration


class Program:
    """A compiled, checked expression."""

    __slots__ = ("source", "ast", "checked", "program", "max_cost", "_estimator", "_metered")

    def __init__(self, source: str, ast: Node, checked: Checked, program: Any) -> None:
        self.source, self.ast, self.checked, self.program = source, ast, checked, program
        self._estimator = Estimator(checked.types)
        self.max_cost = self._estimator.cost(ast)
        self._metered: Metered | bool = False

    def metered(self) -> Metered | None:
        """The metered form, built on first use; None where the engine refuses it (its printed
        form nests deeper than the engine allows, though the source does not)."""
        if self._metered is False:
            try:
                self._metered = Metered(self.ast, self.checked.types)
            except ValueError:
                self._metered = None
        return self._metered

    @property
    def result_type(self) -> Type:
        return self.checked.result

    def may_be(self, type_name: str) -> bool:
        """Whether the result can be of type `type_name` as cel-go's output
        type check sees it: not when another type is known, nor when the
        expression only reads a dynamic value (cel-go types that `dyn` and
        refuses it); other `dyn` results are where this checker knows less
        than cel-go, and pass."""
        t = self.checked.result
        if t.name == type_name or str(t) == type_name:
            return True
        if t.name != "dyn":
            return False
        a = self.ast
        return not (a.kind in ("ident", "select") or (a.kind == "call" and a.name == "_[_]"))

    def uses(self, variable: str) -> bool:
        return variable in self.checked.used

    def cost_bound(self, size: Callable[[Type], int]) -> int:
        """The worst case with every size clamped by size(type)."""
        return Estimator(self.checked.types, size).cost(self.ast)

    def evaluate(self, variables: dict[str, Any], bound: int | None = None, limit: int = PER_CALL_LIMIT) -> Any:
        """Run on the given variable values; CELError with cel-go's wording
        on failure. `bound` is the cost bound for these values; over `limit`
        the expression is not run."""
        if bound is not None and bound > limit:
            raise CELError(COST_LIMIT_ERROR)
        rt = _runtime()
        rt.current.clear()
        rt.current.update(variables)
        opened = collect.mark()
        try:
            return self.program.execute(rt.ctx)
        except Exception as e:
            raise engine_error(e) from None
        finally:
            rt.current.clear()
            collect.release(opened)

    def measure(self, variables: dict[str, Any], sizes: Callable[[Type], int],
                limit: int = PER_CALL_LIMIT, binding: Binding | None = None) -> tuple[Any, CELError | None, int]:
        """Run on the given variable values as `run` does, a cheap program charged its bound for
        `sizes` (those of the values): (value, error or None, cost). `binding`: the values are set
        on its context, for large ones read many times."""
        if binding is not None:
            value, error, cost = self.run(binding.context(variables), lambda: sizes, limit, tight=True)
            return value, None if error is None else engine_error(error), cost
        rt = _runtime()
        rt.current.clear()
        rt.current.update(variables)
        try:
            value, error, cost = self.run(rt.ctx, lambda: sizes, limit, tight=True)
        finally:
            rt.current.clear()
        return value, None if error is None else engine_error(error), cost

    def run(self, ctx: Any, sizes: Callable[[], Callable[[Type], int]], limit: int = PER_CALL_LIMIT,
            tight: bool = False) -> tuple[Any, Exception | None, int]:
        """Evaluate in the engine context `ctx` (its variables set): (value, the exception it
        failed with or None, cost), as cel-go's cost tracker charges it. A cheap program (worst
        case under METER_FROM) runs as it is and costs its worst case (`tight`: its bound for
        sizes(), the values' sizes); any other runs metered and costs what the meter counted,
        stopped (COST_LIMIT_ERROR) once that passes `limit`; where the engine refuses the
        metered form, it is bounded for sizes() before it runs."""
        counted, value, cost = None, None, self.max_cost
        opened = collect.mark()
        try:
            m = self.metered() if self.max_cost >= METER_FROM else None
            if m is None:
                if self.max_cost >= METER_FROM or tight:
                    cost = self.cost_bound(sizes())
                    if cost > limit:
                        return None, CELError(COST_LIMIT_ERROR), limit
                value = self.program.execute(ctx)
            else:
                base, per_iteration, refine = m.base, m.per_iteration, lambda: m.costs(sizes())
                if base > limit:
                    (base, per_iteration), refine = refine(), None
                if base > limit:  # what it does whatever its comprehensions do: not started
                    return None, CELError(COST_LIMIT_ERROR), limit
                counted = Meter(base, per_iteration, limit, refine)
                with running(counted):
                    value = m.program.execute(ctx)
        except Exception as e:
            value, error = None, e
        else:
            error = None
        finally:
            collect.release(opened)
        if counted is None:
            return value, error, cost
        if counted.exceeded:  # also where an operator absorbed the stop's error (`||`)
            return None, CELError(COST_LIMIT_ERROR), counted.total
        return value, error, counted.total


def engine_error(e: Exception) -> CELError:
    """An evaluation's failure as a CELError in cel-go's wording (the engine reports them by many types)."""
    if isinstance(e, CELError):
        return e
    if isinstance(e, KeyError):
        return CELError(f"no such key: {e.args[0]}")
    if isinstance(e, IndexError):
        return CELError(str(e))
    if isinstance(e, ZeroDivisionError):
        return CELError("division by zero")
    if isinstance(e, OverflowError):
        return CELError("integer overflow")
    if isinstance(e, TypeError):
        return CELError("no such overload")
    text = str(e)
    own = _OWN_ERROR.search(text)
    if own:
        return CELError(own.group(1))
    undefined = _UNDEFINED.search(text)
    if undefined:
        return CELError(f"no such attribute: {undefined.group(1)}")
    return CELError(text.split("\n")[0])


class Environment:
    """Declared variables (name -> type) and how schema object fields are
    typed; compiles expressions with a bounded cache."""

    CACHE_SIZE = 4096

    def __init__(self, variables: dict[str, Type],
                 field_type: Callable[[Type, str], Type | None] = _default_field_type,
                 struct_types: bool = False, stored: bool = False) -> None:
        """stored: compile as upstream's stored-expressions environment does, the more
        permissive one, for expressions already persisted (see `Checker`)."""
        self.variables = variables
        self.field_type = field_type
        self.struct_types = struct_types
        self.stored = stored
        self._cache: OrderedDict[str, Program | CELError] = OrderedDict()

    def compile(self, source: str) -> Program:
        """The Program for `source`, or CELError whose message is cel-go's
        issue list (`ERROR: <input>:1:6: ...` with the caret lines)."""
        hit = self._cache.get(source)
        if hit is None:
            try:
                hit = self._compile(source)
            except CELError as e:
                hit = e
            self._cache[source] = hit
            if len(self._cache) > self.CACHE_SIZE:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(source)
        if isinstance(hit, CELError):
            raise hit
        return hit

    def _compile(self, source: str) -> Program:
        if len(source) > MAX_CODE_POINTS:  # cel-go refuses it before parsing, at no location
            raise CELError(f"ERROR: <input>:-1:0: expression code point size exceeds limit: size: {len(source)}, "
                           f"limit {MAX_CODE_POINTS}")
        try:
            return self._compile_nested(source)
        except RecursionError:  # nested deeper than the parser (and cel-go's limit) allows
            raise CELError(format_error(source, NO_LOCATION,
                                        f"expression recursion limit exceeded: {MAX_RECURSION_DEPTH}")) from None

    def _compile_nested(self, source: str) -> Program:
        try:
            ast = parse(source)
        except ParseError as e:
            own = format_error(source, e.pos, str(e))
            if e.pos == NO_LOCATION:  # a parser limit: cel-go stops there, whatever else is wrong
                raise CELError(own) from None
            raise CELError(_engine_syntax_error(source) or own) from None
        checked = Checker(declared_overloads(), self.field_type, self.struct_types,
                          self.stored).check(ast, self.variables)
        if checked.issues:
            raise CELError("\n".join(format_error(source, pos, msg) for pos, msg in checked.issues))
        return Program(source, ast, checked, _engine_program(source, ast, checked))


#: an issue the engine found but could not print (past column 65,535 of a line)
ENGINE_FAILED = "the expression could not be compiled"


def _engine_compile(source: str) -> Any:
    """cel.compile; ValueError with the engine's issues. Printing an issue past column 65,535 of
    a line panics the engine (a BaseException, which no handler expects): then the ValueError
    is empty."""
    try:
        return cel.compile(source)
    except ValueError:
        raise
    except BaseException as e:
        if type(e).__name__ != "PanicException":
            raise
        raise ValueError("") from None


def _engine_program(source: str, ast: Node, checked: Checked) -> Any:
    """The engine's program: for the printed form where the source has syntax the engine lacks,
    or a map or filter (built in linear time there); else for the source. The engine refuses
    nesting past 96 levels (cel-go: 250): the other form is tried then, the printed form having
    no parentheses to spare (a generated `((a || b) || c) ...`), the source fewer levels than
    the printed form's maps."""
    def printed() -> str:
        return desugar.rewrite(ast, checked.types)

    if desugar.needs_rewrite(ast, builds=False, types=checked.types):
        forms = [printed]
    elif desugar.needs_rewrite(ast):
        forms = [printed, lambda: source]
    else:
        forms = [lambda: source, printed]
    first = None
    for form in forms:
        try:
            return _engine_compile(form())
        except ValueError as e:
            first = first or e
            if not _ENGINE_DEPTH.search(str(e)):
                break
    raise CELError(_engine_issues(str(first)) or format_error(source, NO_LOCATION, ENGINE_FAILED))


def _engine_issues(text: str) -> str:
    """The engine's issue list as cel-go prints it (its parser is generated
    from the same grammar, so syntax errors read alike): the snippet lines
    indented by one space, its own internal notes left out."""
    text = text[text.find("ERROR:"):] if "ERROR:" in text else text
    text = _ENGINE_DEPTH.sub(r"expression recursion limit exceeded: \1", text)
    issues = [i for i in re.split(r"\n(?=ERROR: )", text) if "Incomplete `" not in i]
    return "\n".join(issues).replace("\n| ", "\n | ")


def _engine_syntax_error(source: str) -> str | None:
    """cel-go's words for a syntax error: the engine's, when it refuses the
    source too."""
    try:
        _engine_compile(source)
    except ValueError as e:
        return _engine_issues(str(e)) or None
    return None
