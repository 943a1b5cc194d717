"""Worst-case cost of an expression, after cel-go's estimator.

Each identifier or field read costs 1, a function call 1, string work a
tenth of the bytes traversed, list work one per element (a list built: one
per element and 11 more, sort and distinct two per pair, as cel-go's lists
library v3), and a comprehension its range's size times the cost of one
iteration. Sizes come from the types
(maxLength, maxItems, maxProperties, or what fits in a 3 MiB request). The
same estimate with the sizes clamped to those of the actual values bounds
an evaluation before it runs, since the engine cannot be interrupted.

The figures follow cel-go's model for the operations rules use most (a rule
such as `self.all(x, x.contains('gpu'))` costs what upstream says); for the
rest they are of the same order, not identical.

A metered estimate leaves out what the running program reports itself (see
`meter`): each comprehension's iterations, and the size-dependent part of the
library calls implemented in Python, which `actual_call_cost` prices on the
actual values as cel-go's runtime cost tracker does.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from .parser import OPTIONAL_MACROS, Node
from .types import DYN, MAX_REQUEST_SIZE, Type

#: the most integers lists.range builds: more would cost over the per-call limit to walk
RANGE_LIMIT = 1_000_000
#: the size cel-go's estimate gives lists.range(n) where n is not written out (math.MaxUint): a CRD
#: rule building one is over the static limits whatever it does with it
UNKNOWN_RANGE = 2**64 - 1
#: the longest string a function builds: at a tenth per character, the per-call limit's worth
STRING_LIMIT = 10_000_000

#: string functions whose cost is one tenth of the receiver's bytes
_STRING_TRAVERSAL = frozenset({
    "contains", "startsWith", "endsWith", "matches", "lowerAscii", "upperAscii", "trim", "reverse",
    "split", "replace", "substring", "indexOf", "lastIndexOf", "charAt", "join", "find", "findAll", "format",
    "url", "isURL", "quantity", "isQuantity", "semver", "isSemver", "ip", "isIP", "cidr", "isCIDR", "validate",
    "string", "bytes", "base64.encode", "base64.decode", "strings.quote", "jsonpatch.escapeKey"})
_LIST_TRAVERSAL = frozenset({"isSorted", "sum", "min", "max", "includes", "distinct", "flatten", "sort", "sets.contains",
                             "sets.equivalent", "sets.intersects", "math.greatest", "math.least", "join"})
#: what upstream charges for one authorization check (library/cost.go)
AUTHZ_CHECK_COST = 350_000
#: cel-go's cost of a call and of creating a list (common.ListCreateBaseCost), which its lists library
#: (v3, as Kubernetes enables it) adds to what a function that builds a list does per element
CALL_COST, LIST_CREATE_COST = 1, 10
#: cel-go's common.RegexStringLengthCostFactor: a regex's price per character of its pattern
REGEX_FACTOR = 0.25
#: the Kubernetes format library's regex length a named format's `validate` is priced at (cel.MaxNameFormatRegexSize)
FORMAT_REGEX_SIZE = 128
#: list functions priced by the list they build (lists.range, reverse, slice) or by comparing its
#: elements with each other (sort, distinct), as cel-go's lists library v3
_LIST_BUILDING = frozenset({"lists.range", "slice", "sort", "distinct"})
#: the sets library: the product of the two lists' sizes (equivalent: twice, both ways)
_SETS = {"sets.contains": 1, "sets.intersects": 1, "sets.equivalent": 2}
_PER_ITERATION = {"all": 3, "exists": 3, "exists_one": 3, "filter": 12, "map": 12, "sortBy": 12,
                  "transformList": 12, "transformMap": 12, "transformMapEntry": 12}
#: size-dependent library functions implemented in Python whose price their arguments tell (flatten:
#: its result): a metered run prices each call on its values before it runs, so a sort or a range over
#: the limit never starts (those that may build more than their price says, such as join, replace,
#: format, quote, keep their estimate, which bounds them before anything runs)
#: (the engine's own contains, startsWith and endsWith are printed as calls of ours in a metered program,
#: its matches after one)
RUNTIME_COSTED = (_STRING_TRAVERSAL | _LIST_TRAVERSAL | _LIST_BUILDING | {"flatten", "find", "findAll"}) - {
    "string", "bytes", "join", "replace", "format", "strings.quote", "base64.encode"}
#: the engine's operators priced by their operands' sizes, and the types that have one
SIZED_OPERATORS = frozenset({"_+_", "_==_", "_!=_", "_<_", "_<=_", "_>_", "_>=_", "@in"})
_SIZED_KINDS = frozenset({"string", "bytes", "list", "map", "dyn"})
#: runtime-priced calls whose price needs their result (the others are charged before they run)
PRICED_AFTER = frozenset({"flatten"})


def priced_at_runtime(n: Node, types: dict[int, Type]) -> bool:
    """Whether a metered run prices the operator call `n` on its operands' values as it runs
    (meter.OPERANDS): where an operand's size matters and is a `dyn` value's, which could be
    a string or a collection (the values' longest string or largest collection bound it
    apart); a comparison with an exact size is bounded by it."""
    if n.kind != "call" or n.name not in SIZED_OPERATORS or n.target is not None or len(n.args) != 2:
        return False
    a, b = (types.get(id(x), DYN) for x in n.args)
    if n.name == "@in":
        return b.name == "dyn"
    return "dyn" in (a.name, b.name) and {a.name, b.name} <= _SIZED_KINDS and (
        n.name == "_+_" or not (a.exact or b.exact))


def operator_cost(name: str, a: Any, b: Any) -> int:
    """What an operator priced at run time costs on these operands (Estimator.operator's formula),
    a list or map given as [its size] (see meter.OPERANDS)."""
    def size(v: Any) -> int:
        return v[0] if isinstance(v, list) else len(v)

    if name == "@in":
        return size(b) if isinstance(b, list) else 1
    if not (isinstance(a, (str, bytes, list)) and isinstance(b, (str, bytes, list))):
        return 1
    if name == "_+_":
        return _tenth(size(a) + size(b))
    return _tenth(min(size(a), size(b)))


def _tenth(n: int) -> int:
    return math.ceil(0.1 * n)


def string_test_cost(name: str, text: int, part: int) -> int:
    """contains: a tenth of the text times a tenth of what it looks for, as cel-go prices it;
    startsWith and endsWith: a tenth of the text."""
    cost = max(1, _tenth(text))
    return cost * max(1, _tenth(part)) if name == "contains" else cost


def building_list(size: int, factor: float = 1) -> int:
    """What a function building a list of `size` elements costs, at `factor` per element."""
    return math.ceil(max(size, 0) * factor) + CALL_COST + LIST_CREATE_COST


def self_comparing(size: int, strings: bool) -> int:
    """sort, distinct, sortBy's sort: size^2 comparisons, twice, and a tenth more for strings."""
    return building_list(size * size, 2.1 if strings else 2)


def regex_cost(text: int, pattern: int) -> int:
    """A regex over a text, as cel-go's matches and the Kubernetes library's find and findAll are
    priced: a tenth of the text and one character, times a quarter of the pattern."""
    return _tenth(text + 1) * math.ceil(REGEX_FACTOR * pattern)


class Estimator:
    def __init__(self, types: dict[int, Type], size: Callable[[Type], int] | None = None,
                 metered: bool = False) -> None:
        """size(t) -> the size to assume for a value of type t (default:
        the type's own bound). `metered`: leave out comprehension iterations
        and RUNTIME_COSTED calls' work, and note each comprehension's cost
        per iteration in `per_iteration` (by source position)."""
        self.types = types
        self.size = size or (lambda t: t.max_size)
        self.metered = metered
        self.per_iteration: dict[int, int] = {}

    def sz(self, n: Node) -> int:
        return self.size(self.types.get(id(n), DYN))

    def cost(self, n: Node) -> int:
        k = n.kind
        if k == "lit":
            return 0
        if k == "ident":
            return 1
        if k == "select":
            return 1 + self.cost(n.target)
        if k == "list":
            return 10 + sum(self.cost(a) for a in n.args)
        if k == "map":
            return 30 + sum(self.cost(e.args[0]) + self.cost(e.args[1]) for e in n.args)
        if k == "struct":
            return 40 + sum(self.cost(f.args[0]) for f in n.args)
        if k == "comprehension" and n.name in OPTIONAL_MACROS:  # hasValue, value, optional.of and the body
            return self.cost(n.target) + 3 + sum(self.cost(a) for a in n.args)
        if k == "comprehension":
            body = sum(self.cost(a) for a in n.args)
            if self.metered:
                self.per_iteration[n.pos] = _PER_ITERATION[n.name] + body
                return self.cost(n.target)
            return self.cost(n.target) + self.sz(n.target) * (_PER_ITERATION[n.name] + body) + self.sort_by(n)
        return self.call(n)

    def sort_by(self, n: Node) -> int:
        """sortBy's sort of its keys (a metered run charges it as it runs)."""
        if n.name != "sortBy":
            return 0
        return self_comparing(self.sz(n.target), self.types.get(id(n.args[0]), DYN).name in ("string", "bytes"))

    def operator(self, name: str, a: Node, b: Node) -> int:
        """An operator of the engine's, priced on its operands' sizes as cel-go prices them: a
        comparison a tenth of the smaller, `in` a list's size, concatenation a tenth of both
        (lists too, as cel-go priced them before its concatenation became a view: the engine
        copies both); 1 where an operand has no size."""
        ta, tb = self.types.get(id(a), DYN).name, self.types.get(id(b), DYN).name
        if name == "@in":
            return self.sz(b) if tb in ("list", "dyn") else 1
        kinds = {ta, tb}
        if not kinds <= _SIZED_KINDS:
            return 1
        if name == "_+_":
            return _tenth(self.sz(a) + self.sz(b))
        return _tenth(min(self.sz(a), self.sz(b)))

    def call(self, n: Node) -> int:
        name = n.name
        operands = ([n.target] if n.target is not None else []) + n.args
        if name == "_?_:_":
            return self.cost(n.args[0]) + max(self.cost(n.args[1]), self.cost(n.args[2]))
        args = sum(self.cost(a) for a in operands)
        if name in ("_&&_", "_||_") or (self.metered and name in RUNTIME_COSTED):
            return args
        first = operands[0] if operands else None
        t = self.types.get(id(first), DYN) if first is not None else DYN
        if name in SIZED_OPERATORS and len(operands) == 2:
            if self.metered and priced_at_runtime(n, self.types):
                return args
            return args + self.operator(name, operands[0], operands[1])
        if name in ("matches", "find", "findAll") and len(operands) >= 2:
            return args + regex_cost(self.sz(operands[0]), self.sz(operands[1]))
        if name in ("contains", "startsWith", "endsWith") and len(operands) == 2:
            return args + string_test_cost(name, self.sz(operands[0]), self.sz(operands[1]))
        if name in _SETS and len(operands) == 2:
            return args + math.ceil(_SETS[name] * self.sz(operands[0]) * self.sz(operands[1])) + CALL_COST
        if name == "validate" and len(operands) == 2:  # a format's regex over the string
            return args + _tenth(self.sz(operands[1])) * math.ceil(REGEX_FACTOR * FORMAT_REGEX_SIZE)
        if name in ("sort", "distinct") and first is not None:
            elem = t.params[0].name if t.params else "dyn"
            return args + self_comparing(self.sz(first), elem in ("string", "bytes"))
        if name in ("lists.range", "slice") or (name == "reverse" and t.name == "list"):
            return args + building_list(self.sz(n))
        if name == "split" and first is not None:  # the traversal and the result's construction
            return args + math.ceil(0.2 * self.sz(first))
        if name in ("indexOf", "lastIndexOf") and t.name == "list":
            return args + self.sz(first)
        if name == "check":
            return args + AUTHZ_CHECK_COST
        if name in ("join", "replace"):  # building the result, which may outgrow the receiver
            return args + max(1, _tenth(self.sz(first)), _tenth(self.sz(n)))
        if name == "flatten":
            return args + max(1, self.sz(n))
        if name in _STRING_TRAVERSAL and first is not None:
            return args + max(1, _tenth(self.sz(first)))
        if name in _LIST_TRAVERSAL and first is not None:
            return args + max(1, self.sz(first))
        return args + 1


def _actual_size(v: Any) -> int:
    return len(v) if isinstance(v, (str, bytes, list, dict)) else 1


def actual_call_cost(name: str, args: tuple, result: Any = None) -> int:
    """What a RUNTIME_COSTED call costs on these values, as cel-go's cost tracker charges it:
    the estimate's formula with the actual sizes (receiver, pattern, list built); only those
    in PRICED_AFTER need `result`."""
    first = _actual_size(args[0]) if args else 1
    if name in ("find", "findAll") and len(args) >= 2:
        return regex_cost(first, _actual_size(args[1]))
    if name in _SETS and len(args) == 2:
        return math.ceil(_SETS[name] * first * _actual_size(args[1])) + CALL_COST
    if name == "validate" and len(args) == 2:
        return regex_cost(_actual_size(args[1]), FORMAT_REGEX_SIZE)
    if name in ("sort", "distinct"):
        return self_comparing(first, bool(args[0]) and isinstance(args[0][0], (str, bytes)))
    if name == "lists.range":
        return building_list(args[0])
    if name == "slice":
        return building_list(min(args[2], first) - args[1])
    if name == "reverse" and isinstance(args[0], list):
        return building_list(first)
    if name == "split":
        return math.ceil(0.2 * first)
    if name in ("indexOf", "lastIndexOf") and args and isinstance(args[0], list):
        return first
    if name == "flatten":
        return max(1, _actual_size(result))
    if name in _STRING_TRAVERSAL:
        return max(1, _tenth(first))
    return max(1, first)


def extent(v: Any) -> tuple[int, int]:
    """(largest collection, longest string) within a value."""
    if isinstance(v, (str, bytes)):
        return 1, len(v)
    if isinstance(v, dict):
        n, s = len(v), 1
        for k, x in v.items():
            a, b = extent(x)
            n, s = max(n, a), max(s, b, len(k) if isinstance(k, str) else 1)
        return n, s
    if isinstance(v, list):
        n, s = len(v), 1
        for x in v:
            a, b = extent(x)
            n, s = max(n, a), max(s, b)
        return n, s
    return 1, 1


def dynamic_sizes(collection: int, string: int) -> Callable[[Type], int]:
    """Sizes for bounding an expression over values its types say nothing about
    (admission's `dyn` variables), given the largest collection and the longest
    string among them. An exact size stays; any other bound is k * MAX**j, the
    sums (k) and products (j) of unknown sizes an expression's values make, and
    becomes k * E**j, E the actual values' size for the type."""
    def size(t: Type) -> int:
        if t.exact or t.name not in ("string", "bytes", "list", "map", "dyn"):
            return t.max_size
        base = string if t.name in ("string", "bytes") else collection if t.name == "dyn" else max(collection, string)
        k, j = -(-t.max_size // MAX_REQUEST_SIZE), 1
        while k >= MAX_REQUEST_SIZE:
            k, j = -(-k // MAX_REQUEST_SIZE), j + 1
        return k * base ** j
    return size
