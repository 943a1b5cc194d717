"""Kubernetes' CEL environment for DRA device selectors on top of the
`common-expression-language` package: the `device` variable, quantity and
semver values with their member functions, the string/list extensions, a
compile cache, and a cost bound enforced before each evaluation (the Rust
evaluator cannot be interrupted, so a selector whose worst case over this
device's data exceeds the budget is refused instead of being run)."""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Any

import cel
from cel.stdlib import add_stdlib_to_context

from ...machinery.quantity import QuantityError, parse_quantity

#: upstream's resourceapi.CELSelectorExpressionMaxCost and MaxLength
MAX_COST = 1_000_000
MAX_EXPRESSION_LENGTH = 10 * 1024
#: worst-case sizes assumed by the compile-time estimate: attributes and
#: capacities per device, and the longest string attribute
MAX_ENTRIES = 32
MAX_STRING = 64

QUANTITY, SEMVER = "@quantity", "@semver"
COST_LIMIT_ERROR = "operation cancelled: actual cost limit exceeded"


class CELError(Exception):
    """A selector failed to compile or to evaluate; the message follows
    upstream's wording where there is one."""


# -- quantity and semver values -------------------------------------------
# The Rust runtime only carries plain CEL values, so these are maps with one
# marker key whose value is canonical: equal quantities compare equal.


def quantity_value(v: Fraction) -> dict:
    return {QUANTITY: f"{v.numerator}/{v.denominator}"}


def _q(x: Any) -> Fraction:
    if isinstance(x, dict) and QUANTITY in x:
        return Fraction(x[QUANTITY])
    if isinstance(x, int) and not isinstance(x, bool):
        return Fraction(x)
    raise CELError("no such overload")


def _quantity(s: str) -> dict:
    try:
        return quantity_value(parse_quantity(s))
    except QuantityError as e:
        raise CELError(str(e)) from None


def _is_quantity(s: str) -> bool:
    try:
        parse_quantity(s)
    except QuantityError:
        return False
    return True


_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)


def _normalize_semver(s: str) -> str:
    """semver(s, true): strip a leading v, fill missing minor/patch, drop
    leading zeros."""
    s = s[1:] if s.startswith("v") else s
    core, rest = re.match(r"^([0-9.]*)(.*)$", s, re.S).groups()
    parts = core.split(".")
    if not core or len(parts) > 3 or not all(p.isdigit() for p in parts):
        return s
    return ".".join([str(int(p)) for p in parts] + ["0"] * (3 - len(parts))) + rest


def parse_semver(s: str, normalize: bool = False) -> tuple | None:
    """(major, minor, patch, prerelease identifiers) or None if invalid."""
    m = _SEMVER.match(_normalize_semver(s) if normalize else s)
    if not m:
        return None
    pre = tuple(m.group(4).split(".")) if m.group(4) else ()
    return int(m.group(1)), int(m.group(2)), int(m.group(3)), pre


def semver_value(s: str, normalize: bool = False) -> dict:
    v = parse_semver(s, normalize)
    if v is None:
        raise CELError("invalid semver")
    return {SEMVER: f"{v[0]}.{v[1]}.{v[2]}" + ("-" + ".".join(v[3]) if v[3] else "")}


def _v(x: Any) -> tuple:
    if isinstance(x, dict) and SEMVER in x:
        return parse_semver(x[SEMVER])
    raise CELError("no such overload")


def _semver_key(v: tuple) -> tuple:
    """Precedence per semver.org: a release outranks its prereleases;
    numeric identifiers compare numerically and below alphanumeric ones."""
    pre = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in v[3])
    return v[0], v[1], v[2], (1,) if not pre else (0, pre)


def _compare(a: Any, b: Any) -> int:
    if isinstance(a, dict) and SEMVER in a:
        x, y = _semver_key(_v(a)), _semver_key(_v(b))
    else:
        x, y = _q(a), _q(b)
    return (x > y) - (x < y)


def _arith(a: Any, b: Any, sign: int) -> dict:
    return quantity_value(_q(a) + sign * _q(b))


def _as_integer(a: Any) -> int:
    v = _q(a)
    if v.denominator != 1 or not -(2**63) <= v < 2**63:
        raise CELError("cannot convert value to integer")
    return int(v)


_FUNCTIONS = {
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "compareTo": _compare,
    "isLessThan": lambda a, b: _compare(a, b) < 0,
    "isGreaterThan": lambda a, b: _compare(a, b) > 0,
    "add": lambda a, b: _arith(a, b, 1),
    "sub": lambda a, b: _arith(a, b, -1),
    "asInteger": _as_integer,
    "isInteger": lambda a: _q(a).denominator == 1 and -(2**63) <= _q(a) < 2**63,
    "asApproximateFloat": lambda a: float(_q(a)),
    "sign": lambda a: (_q(a) > 0) - (_q(a) < 0),
    "semver": lambda s, normalize=False: semver_value(s, normalize),
    "isSemver": lambda s, normalize=False: parse_semver(s, normalize) is not None,
    "major": lambda v: _v(v)[0],
    "minor": lambda v: _v(v)[1],
    "patch": lambda v: _v(v)[2],
}


# -- cost bound -------------------------------------------------------------

_TOKEN = re.compile(
    r"""\s+|"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d+)?[uU]?|&&|\|\||[=!<>]=|\S"""
)
_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
_STRING_FUNCS = frozenset(
    {"matches", "contains", "startsWith", "endsWith", "lowerAscii", "upperAscii", "split", "replace",
     "join", "indexOf", "lastIndexOf", "substring", "trim", "reverse", "charAt", "size"}
)
_DOMAIN_REF = re.compile(r"""device\s*\.\s*(attributes|capacity)\s*\[\s*("[^"]*"|'[^']*')\s*\]""")
_DOMAIN_TEST = re.compile(r"""("[^"]*"|'[^']*')\s+in\s+device\s*\.\s*(attributes|capacity)\b""")


def _cost_terms(expr: str) -> list[tuple[int, int]]:
    """(comprehension depth, string-function?) for every operation token, so
    the bound for concrete sizes is a sum of powers."""
    tokens = [t for t in _TOKEN.findall(expr) if not t.isspace()]
    terms: list[tuple[int, int]] = []
    stack: list[bool] = []  # per open paren: is it a macro's argument list
    depth = 0
    for i, t in enumerate(tokens):
        if t == "(":
            macro = i >= 2 and tokens[i - 2] == "." and tokens[i - 1] in _MACROS
            stack.append(macro)
            depth += macro
        elif t == ")":
            if stack and stack.pop():
                depth -= 1
        elif t not in (",", "[", "]", "{", "}", ":"):
            terms.append((depth, int(t in _STRING_FUNCS)))
    return terms


def cost_bound(terms: list[tuple[int, int]], entries: int, longest: int) -> int:
    """Worst-case cost: each operation costs 1, string functions a tenth of
    the longest string, and each comprehension level multiplies by the
    largest collection."""
    n, s = max(entries, 1), max(1, math.ceil(longest * 0.1))
    return sum(n**d * (s if f else 1) for d, f in terms)


# -- compiled selectors -----------------------------------------------------


class _Environment:
    """One CEL context with Kubernetes' functions; the `device` variable is
    resolved per evaluation (single-threaded use)."""

    def __init__(self) -> None:
        self.device: dict | None = None
        self.ctx = cel.Context()
        add_stdlib_to_context(self.ctx, ["core", "strings", "sets", "lists", "math"])
        for name, fn in _FUNCTIONS.items():
            self.ctx.add_function(name, fn)
        self.ctx.set_variable_resolver(lambda name: self.device if name == "device" else None)


_ENV = _Environment()
#: how the runtime wraps a CELError raised inside one of our functions
_OWN_ERROR = re.compile(r"CELError: (.*?)\. Check function arguments", re.S)


class Selector:
    """A compiled selector expression."""

    __slots__ = ("expression", "program", "terms", "estimated_cost", "_domains")

    def __init__(self, expression: str) -> None:
        if len(expression) > MAX_EXPRESSION_LENGTH:
            raise CELError(f"compilation failed: expression is longer than {MAX_EXPRESSION_LENGTH} characters")
        try:
            self.program = cel.compile(expression)
        except ValueError as e:
            raise CELError(f"compilation failed: {e}") from None
        self.expression = expression
        self.terms = _cost_terms(expression)
        self.estimated_cost = cost_bound(self.terms, MAX_ENTRIES, MAX_STRING)
        tested = {(m.group(2), m.group(1)[1:-1]) for m in _DOMAIN_TEST.finditer(expression)}
        self._domains = {(m.group(1), m.group(2)[1:-1]) for m in _DOMAIN_REF.finditer(expression)} - tested

    def matches(self, device: DeviceInput) -> bool:
        """Evaluate against one device; CELError on any failure."""
        if cost_bound(self.terms, device.entries, device.longest) > MAX_COST:
            raise CELError(COST_LIMIT_ERROR)
        value = device.value
        missing = [(k, d) for k, d in self._domains if d not in value[k]]
        if missing:
            value = {**value, **{k: dict(value[k]) for k, _ in missing}}
            for k, d in missing:
                value[k][d] = {}  # an unknown domain reads as an empty map
        _ENV.device = value
        try:
            result = self.program.execute(_ENV.ctx)
        except KeyError as e:
            raise CELError(f"no such key: {e.args[0]}") from None
        except CELError:
            raise
        except Exception as e:  # the runtime reports evaluation errors by many types
            own = _OWN_ERROR.search(str(e))
            raise CELError(own.group(1) if own else str(e)) from None
        finally:
            _ENV.device = None
        if not isinstance(result, bool):
            raise CELError(f"must evaluate to bool or the unknown type, not {type(result).__name__}")
        return result


class DeviceInput:
    """The `device` variable for one device, built once with the sizes the
    cost bound needs."""

    __slots__ = ("value", "entries", "longest")

    def __init__(self, driver: str, attributes: dict, capacity: dict, allow_multiple: bool) -> None:
        self.value = {
            "driver": driver,
            "attributes": attributes,
            "capacity": capacity,
            "allowMultipleAllocations": allow_multiple,
        }
        sizes = [len(attributes), len(capacity)] + [len(m) for m in attributes.values()] + [
            len(m) for m in capacity.values()]
        self.entries = max(sizes)
        strings = [len(k) for m in attributes.values() for k in m] + [
            len(v) for m in attributes.values() for v in m.values() if isinstance(v, str)]
        self.longest = max(strings, default=0)


_CACHE: dict[str, Selector | CELError] = {}


def compile_selector(expression: str) -> Selector:
    """The compiled selector, cached per expression text (errors too)."""
    hit = _CACHE.get(expression)
    if hit is None:
        try:
            hit = Selector(expression)
        except CELError as e:
            hit = e
        _CACHE[expression] = hit
    if isinstance(hit, CELError):
        raise hit
    return hit
