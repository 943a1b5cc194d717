"""Worst-case cost of an expression, after cel-go's estimator.

Each identifier or field read costs 1, a function call 1, string work a
tenth of the bytes traversed, list work one per element, and a comprehension
its range's size times the cost of one iteration. Sizes come from the types
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

from .parser import Node
from .types import DYN, MAX_REQUEST_SIZE, Type

#: the most integers lists.range builds: more would cost over the per-call limit to walk
RANGE_LIMIT = 1_000_000
#: the longest string a function builds: at a tenth per character, the per-call limit's worth
STRING_LIMIT = 10_000_000

#: string functions whose cost is one tenth of the receiver's bytes
_STRING_TRAVERSAL = frozenset({
    "contains", "startsWith", "endsWith", "matches", "lowerAscii", "upperAscii", "trim", "reverse",
    "split", "replace", "substring", "indexOf", "lastIndexOf", "charAt", "join", "find", "findAll", "format",
    "url", "isURL", "quantity", "isQuantity", "semver", "isSemver", "ip", "isIP", "cidr", "isCIDR", "validate",
    "string", "bytes", "base64.encode", "base64.decode", "strings.quote"})
_LIST_TRAVERSAL = frozenset({"isSorted", "sum", "min", "max", "distinct", "flatten", "sort", "sets.contains",
                             "sets.equivalent", "sets.intersects", "math.greatest", "math.least", "join"})
#: what upstream charges for one authorization check (library/cost.go)
AUTHZ_CHECK_COST = 350_000
_PER_ITERATION = {"all": 3, "exists": 3, "exists_one": 3, "filter": 12, "map": 12, "sortBy": 12,
                  "transformList": 12, "transformMap": 12, "transformMapEntry": 12}
#: size-dependent library functions implemented in Python whose result is no larger than their input:
#: a metered run prices each call on its values, after it (those that may build more, such as join,
#: replace, format, quote, keep their estimate, which bounds them before anything runs)
#: (the engine's own contains, startsWith and endsWith are printed as calls of ours in a metered program)
RUNTIME_COSTED = (_STRING_TRAVERSAL | _LIST_TRAVERSAL | {"flatten", "find", "findAll"}) - {
    "matches", "string", "bytes", "join", "replace", "format", "strings.quote", "base64.encode"}


def _tenth(n: int) -> int:
    return math.ceil(0.1 * n)


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
        if k == "comprehension":
            body = sum(self.cost(a) for a in n.args)
            if self.metered:
                self.per_iteration[n.pos] = _PER_ITERATION[n.name] + body
                return self.cost(n.target)
            return self.cost(n.target) + self.sz(n.target) * (_PER_ITERATION[n.name] + body)
        return self.call(n)

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
        if name in ("_==_", "_!=_", "_<_", "_<=_", "_>_", "_>=_"):
            if t.name in ("string", "bytes"):
                return args + _tenth(min(self.sz(operands[0]), self.sz(operands[1])))
            if t.name in ("list", "map"):
                return args + min(self.sz(operands[0]), self.sz(operands[1]))
            return args + 1
        if name == "_+_" and t.name in ("string", "bytes"):
            return args + _tenth(self.sz(operands[0]) + self.sz(operands[1]))
        if name == "_+_" and t.name == "list":
            return args + self.sz(operands[0]) + self.sz(operands[1])
        if name == "@in":
            coll = self.types.get(id(operands[1]), DYN)
            return args + (self.sz(operands[1]) if coll.name == "list" else 1)
        if name in ("matches", "find", "findAll") and len(operands) >= 2:
            return args + _tenth(self.sz(operands[0])) * max(1, _tenth(len(str(operands[1].value or ""))) or 1)
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


def actual_call_cost(name: str, args: tuple, result: Any) -> int:
    """What a RUNTIME_COSTED call cost on these values: the estimate's formula with the
    actual sizes (receiver, pattern, result)."""
    first = _actual_size(args[0]) if args else 1
    if name in ("find", "findAll") and len(args) >= 2:
        return _tenth(first) * max(1, _tenth(_actual_size(args[1])))
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
