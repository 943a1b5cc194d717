"""Static type checking of a parsed expression, with cel-go's issue wording.

The engine is dynamically typed; Kubernetes is not: a CRD rule that does not
evaluate to bool, calls an unknown function or reads a field the schema does
not declare is refused when the CRD is written. The checker infers a type
for every node (kept for the cost estimate) and reports only what it can
prove: anything involving `dyn` is accepted, as cel-go accepts it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .cost import UNKNOWN_RANGE
from .library.overload import Overload
from .parser import OPTIONAL_MACROS, Node
from .validators import validate
from .types import (
    BOOL, BYTES, DOUBLE, DYN, INT, NULL, STRING, TYPE, UINT, Type, list_of, map_of, optional_of,
)

_LITERAL = {"int": INT, "uint": UINT, "double": DOUBLE, "string": STRING, "bytes": BYTES, "bool": BOOL,
            "null": NULL}
TYPE_NAMES = frozenset({"int", "uint", "double", "string", "bytes", "bool", "list", "map", "null_type", "type",
                        "google.protobuf.Timestamp", "google.protobuf.Duration"})


@dataclass
class Checked:
    """The result type, the type of every node (by id), the issues as
    (offset, message), and the variables the expression reads."""

    result: Type
    types: dict[int, Type] = field(default_factory=dict)
    issues: list[tuple[int, str]] = field(default_factory=list)
    used: set[str] = field(default_factory=set)


class Checker:
    def __init__(self, overloads: dict[str, list[Overload]], field_type, struct_types: bool = False,
                 stored: bool = False) -> None:
        """field_type(object type, name) -> Type | None: the declared field
        of a schema object (None when it has no such field). struct_types:
        whether `T{...}` object construction is declared (admission's
        Object and JSONPatch types; CRD rules have none). stored: the
        expression is already persisted (upstream's stored-expressions
        environment), so what earlier nanokube servers admitted still
        compiles: equality is not type-checked."""
        self.overloads = overloads
        self.field_type = field_type
        self.struct_types = struct_types
        self.stored = stored

    def check(self, root: Node, variables: dict[str, Type]) -> Checked:
        out = Checked(DYN)
        self.out, self.scopes = out, [dict(variables)]
        out.result = self.visit(root)
        if not out.issues and not self.stored:
            out.issues = validate(root, out.types)
        return out

    # -- helpers -----------------------------------------------------------

    def issue(self, node: Node, message: str) -> Type:
        self.out.issues.append((node.pos, message))
        return DYN

    def lookup(self, name: str) -> Type | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def visit(self, n: Node) -> Type:
        t = getattr(self, f"visit_{n.kind}")(n)
        self.out.types[id(n)] = t
        return t

    # -- nodes -------------------------------------------------------------

    def visit_lit(self, n: Node) -> Type:
        if n.name in ("string", "bytes"):
            return Type(n.name, max_size=len(n.value), exact=True)
        return _LITERAL[n.name]

    def visit_ident(self, n: Node) -> Type:
        t = self.lookup(n.name)
        if t is not None:
            if len(self.scopes) == 1 or n.name in self.scopes[0]:
                self.out.used.add(n.name)
            return t
        if n.name in TYPE_NAMES:
            return TYPE
        return self.issue(n, f"undeclared reference to '{n.name}' (in container '')")

    def visit_select(self, n: Node) -> Type:
        target = self.visit(n.target)
        if n.optional:
            inner = target.params[0] if target.name == "optional" else target
            return optional_of(self.select(n, inner, n.name))
        if n.test_only:  # has(): of an optional value's field too, as cel-go unwraps it
            inner = target.params[0] if target.name == "optional" else target
            if inner.name == "object" and self.field_type(inner, n.name) is None:
                self.issue(n, f"undefined field '{n.name}'")
            elif inner.name not in ("object", "map", "dyn") and not _is_struct(inner):
                self.issue(n, f"invalid type for field selection: {target}")
            return BOOL
        if target.name == "optional":  # after `.?`, a selection is optional too (cel-go's checkSelectField)
            return optional_of(self.select(n, target.params[0], n.name))
        return self.select(n, target, n.name)

    def select(self, n: Node, target: Type, name: str) -> Type:
        if target.name == "dyn" or _is_struct(target):  # a struct's fields are those it was built with
            return DYN
        if target.name == "map":
            return target.params[1]
        if target.name == "kubernetes.authorization.Authorizer" and name == "requestResource":
            return Type("kubernetes.authorization.ResourceCheck", max_size=1)
        if target.name == "object":
            t = self.field_type(target, name)
            if t is None:
                return self.issue(n, f"undefined field '{name}'")
            return t
        return self.issue(n, f"type '{target}' does not support field selection")

    def visit_list(self, n: Node) -> Type:
        elems = [self.visit(e) for e in n.args]
        return list_of(_join(elems), max(len(elems), 1), exact=True)

    def visit_map(self, n: Node) -> Type:
        keys = [self.visit(e.args[0]) for e in n.args]
        vals = [self.visit(e.args[1]) for e in n.args]
        return map_of(_join(keys), _join(vals), max(len(keys), 1), exact=True)

    def visit_struct(self, n: Node) -> Type:
        if not self.struct_types:
            return self.issue(n, f"undeclared reference to '{n.name}' (in container '')")
        for f in n.args:
            self.visit(f.args[0])
        return Type(n.name, max_size=len(n.args) or 1)  # Object, Object.spec..., JSONPatch: a type of its own

    def visit_comprehension(self, n: Node) -> Type:
        if n.name in OPTIONAL_MACROS:
            return self.optional_macro(n)
        rng = self.visit(n.target)
        if rng.name == "list":
            kinds = (INT, rng.params[0])
        elif rng.name == "map":
            kinds = (rng.params[0], rng.params[1])
        elif rng.name == "dyn":
            kinds = (DYN, DYN)
        else:
            kinds = (self.issue(n.target, f"expression of type '{rng}' cannot be range of a comprehension "
                                          "(must be list, map, or dynamic)"),) * 2
        var = kinds[1] if rng.name == "list" and len(n.vars) == 1 else kinds[0]
        self.scopes.append(dict(zip(n.vars, kinds)) if len(n.vars) == 2 else {n.vars[0]: var})
        try:
            if len(n.args) == 2:  # map(x, filter, transform)
                self.expect_bool(n.args[0], self.visit(n.args[0]))
            body = self.visit(n.args[-1])
        finally:
            self.scopes.pop()
        if n.name in ("all", "exists", "exists_one"):
            self.expect_bool(n.args[-1], body)
            return BOOL
        if n.name == "filter":
            self.expect_bool(n.args[-1], body)
            return list_of(var, rng.max_size)
        if n.name == "sortBy":
            return list_of(var, rng.max_size, rng.exact)
        if n.name == "transformMap":
            return map_of(kinds[0], body, rng.max_size, rng.exact)
        if n.name == "transformMapEntry":
            if body.name not in ("map", "dyn"):
                self.issue(n.args[-1], f"expected type 'map' but found '{body}'")
            return body if body.name == "map" else map_of(DYN, DYN, rng.max_size)
        return list_of(body, rng.max_size, rng.exact)

    def optional_macro(self, n: Node) -> Type:
        """optMap and optFlatMap: the body reads the optional's value as the variable."""
        target = self.visit(n.target)
        if target.name not in ("optional", "dyn"):
            return self.issue(n, f"found no matching overload for 'hasValue' applied to '{target}.()'")
        inner = target.params[0] if target.name == "optional" else DYN
        self.scopes.append({n.vars[0]: inner})
        try:
            body = self.visit(n.args[0])
        finally:
            self.scopes.pop()
        if n.name == "optMap":
            return optional_of(body)
        if body.name not in ("optional", "dyn"):
            return self.issue(n.args[0], f"found no matching overload for '_?_:_' applied to "
                                         f"'(bool, {body}, optional(dyn))'")
        return body

    def visit_bind(self, n: Node) -> Type:
        init = self.visit(n.args[0])
        self.scopes.append({n.vars[0]: init})
        try:
            return self.visit(n.args[1])
        finally:
            self.scopes.pop()

    def expect_bool(self, n: Node, t: Type) -> None:
        if t.name not in ("bool", "dyn"):
            self.issue(n, f"expected type 'bool' but found '{t}'")

    def visit_call(self, n: Node) -> Type:
        name, target = n.name, n.target
        if target is not None:
            qualified = _qualified_name(target)
            if qualified and self.lookup(qualified.split(".")[0]) is None and self.declared(f"{qualified}.{name}"):
                n.name, n.target = f"{qualified}.{name}", None  # a namespaced function, e.g. sets.contains
                return self.call(n, n.name, [self.visit(a) for a in n.args], member=False)
            args = [self.visit(target)] + [self.visit(a) for a in n.args]
            return self.call(n, name, args, member=True)
        args = [self.visit(a) for a in n.args]
        if name in ("_==_", "_!=_"):
            # cel-go's equality takes two values of one type ('(int, string)' is no overload); a
            # null or an object is left unchecked here (null compares with objects in cel-go)
            if not self.stored and not any(a.name in ("object", "null_type") for a in args):
                self.call(n, name, args, member=False)
            return BOOL
        if name == "_[?_]" or (name == "_[_]" and args[0].name == "optional"):
            inner = args[0].params[0] if args[0].name == "optional" else args[0]
            return optional_of(self.call(n, "_[_]", [inner, args[1]], member=False))
        if name == "_[_]" and args[0].name == "object":
            return self.select(n, args[0], n.args[1].value) if n.args[1].kind == "lit" else DYN
        return self.call(n, name, args, member=False)

    def declared(self, name: str) -> list:
        """The overloads of `name` this environment declares."""
        return [o for o in self.overloads.get(name, ())
                if (self.stored or not o.stored_only) and (self.struct_types or not o.admission)]

    def call(self, n: Node, name: str, args: list[Type], member: bool) -> Type:
        declared = self.declared(name)
        if not declared:
            return self.issue(n, f"undeclared reference to '{name}' (in container '')")
        cands = [o for o in declared if o.member == member and len(o.args) == len(args)]
        results = []
        for o in cands:
            bound: dict[str, Type] = {}
            if all(_assignable(f, a, bound) for f, a in zip(o.args, args)):
                results.append(_substitute(o.result, bound))
        if not results:
            shown = (f"{args[0]}.({', '.join(map(str, args[1:]))})" if member
                     else f"({', '.join(map(str, args))})")
            return self.issue(n, f"found no matching overload for '{name}' applied to '{shown}'")
        first = results[0] if all(r == results[0] for r in results) else DYN
        if name == "_+_" and first.name in ("string", "list", "bytes", "dyn"):  # (dyn: any of them)
            return Type(first.name, first.params, sum(a.max_size for a in args), exact=all(a.exact for a in args))
        return _sized(name, first, args, ([n.target] if member else []) + n.args)


def _is_struct(t: Type) -> bool:
    """A type admission's typed construction builds: Object, Object.<path>, JSONPatch."""
    return t.name in ("Object", "JSONPatch") or t.name.startswith("Object.")


def _qualified_name(n: Node) -> str:
    if n.kind == "ident":
        return n.name
    if n.kind == "select" and not n.test_only:
        inner = _qualified_name(n.target)
        return f"{inner}.{n.name}" if inner else ""
    return ""


def _sized(name: str, result: Type, args: list[Type], nodes: list[Node]) -> Type:
    """The size of what a call builds, where it can outgrow its arguments (cel-go's and the
    Kubernetes libraries' result size estimates): lists.range(n) holds n integers (as many
    as cel-go assumes, math.MaxUint, when n is not written out), flatten and join hold their
    elements' elements, replace may insert its replacement around every character."""
    if name == "lists.range":
        lit = nodes[0] if nodes and nodes[0].kind == "lit" and isinstance(nodes[0].value, int) else None
        return list_of(INT, max(lit.value, 1) if lit is not None else UNKNOWN_RANGE, exact=True)
    if name == "flatten":
        size, elem, levels = args[0].max_size, args[0].params[0] if args[0].params else DYN, _depth(nodes)
        exact = args[0].exact
        for _ in range(levels):
            size *= elem.max_size if elem.name in ("list", "dyn") else 1
            exact = exact and elem.exact
            elem = elem.params[0] if elem.name == "list" and elem.params else DYN
        return list_of(DYN, size, exact)
    if name == "join":
        elem = args[0].params[0] if args[0].params else DYN
        sep = args[1].max_size if len(args) > 1 else 0
        return Type("string", max_size=args[0].max_size * (elem.max_size + sep),
                    exact=args[0].exact and elem.exact and all(a.exact for a in args[1:]))
    if name == "replace" and len(args) >= 3:
        old, new, size = args[1], args[2], args[0].max_size
        if old.exact and old.max_size and new.max_size <= old.max_size:
            grown = size
        elif old.exact and old.max_size:
            grown = -(-size // old.max_size) * new.max_size
        else:
            grown = (size + 1) * new.max_size + size
        return Type("string", max_size=grown, exact=all(a.exact for a in args[:3]))
    if not args or result.name not in ("string", "bytes", "list"):
        return result
    first = args[0]
    if name in _NO_LONGER:  # at most the receiver's size (split: as many pieces as characters)
        if name in ("split", "findAll"):
            return list_of(Type("string", max_size=first.max_size, exact=first.exact), first.max_size, first.exact)
        return replace(result, max_size=first.max_size, exact=first.exact)
    if name == "jsonpatch.escapeKey":  # each '~' or '/' two characters
        return Type("string", max_size=2 * first.max_size, exact=first.exact)
    if name in ("strings.quote", "base64.encode"):  # every character escaped; 4 for every 3 bytes
        return Type("string", max_size=2 * first.max_size + 2, exact=first.exact)
    if name == "format" and len(args) > 1:  # the text, a number's digits, each argument printed
        elem = args[1].params[0] if args[1].params else DYN
        return Type("string", max_size=25 * first.max_size + 2 * args[1].max_size * (elem.max_size + 2),
                    exact=first.exact and args[1].exact and elem.exact)
    return result


_NO_LONGER = frozenset({"lowerAscii", "upperAscii", "trim", "substring", "reverse", "split", "findAll", "sort",
                        "distinct", "slice", "base64.decode"})


def _depth(nodes: list[Node]) -> int:
    """How many levels flatten removes: its literal depth, or (negative or not written
    out) as many as a request's nesting could hold, bounded."""
    if len(nodes) < 2:
        return 1
    d = nodes[1].value if nodes[1].kind == "lit" and isinstance(nodes[1].value, int) else -1
    return d if 0 <= d <= 8 else 8


def _join(types: list[Type]) -> Type:
    """The type of a literal's elements: theirs when they agree (the largest of their sizes)."""
    if not types:
        return DYN
    first = types[0]
    if not all(t == first for t in types):
        return DYN
    return replace(first, max_size=max(t.max_size for t in types), exact=all(t.exact for t in types))


def _assignable(formal: Type, actual: Type, bound: dict[str, Type]) -> bool:
    if actual.name == "dyn" or formal.name == "dyn":
        return True
    if formal.name in ("A", "B"):
        prev = bound.get(formal.name)
        if prev is None or prev.name == "dyn":
            bound[formal.name] = actual
            return True
        return _assignable(prev, actual, {}) or _numeric_pair(prev, actual)
    if actual.name == "null_type":
        return formal.name in ("null_type", "optional")
    if actual.name == "object":
        return formal.name == "object" or (formal.name == "map" and formal.params[0].name in ("string", "A", "dyn"))
    if formal.name != actual.name or len(formal.params) != len(actual.params):
        return False
    return all(_assignable(f, a, bound) for f, a in zip(formal.params, actual.params))


def _numeric_pair(a: Type, b: Type) -> bool:
    return a.name in ("int", "uint", "double") and b.name in ("int", "uint", "double")


def _substitute(t: Type, bound: dict[str, Type]) -> Type:
    if t.name in ("A", "B"):
        return bound.get(t.name, DYN)
    if t.params:
        return Type(t.name, tuple(_substitute(p, bound) for p in t.params), t.max_size)
    return t
