"""CEL syntax the engine lacks, rewritten into syntax it has.

The `common-expression-language` engine parses neither the optional syntax
(`a.?f`, `l[?i]`), nor two-variable comprehensions (`l.all(i, v, ...)`), nor
`cel.bind`, nor typed object construction (`Object{spec: ...}`, which
admission policies use). Each has an equivalent the engine runs, built from
the checked syntax tree and printed back to source:

- `a.?f` and `l[?i]` call functions of ours with the receiver (an optional
  one applied to its value), which test the field, the index (lists) or the
  key (maps) and answer the optional;
- `l.all(i, v, p)` ranges over the indices of `l` (a range of ours, which
  the meter does not charge as `lists.range`) with `v` read as `l[i]` (for
  a map, `v` is `m[k]`); `exists` and `exists_one` alike;
- `transformList`, `transformMap` and `transformMapEntry` map over the same
  range (filtered first in their four-argument form) and build the list or
  map; `l.sortBy(x, key)` sorts by the mapped keys;
- `cel.bind(x, e, body)` is `[e].map(x, body)[0]` (the engine's comprehensions
  unwrap optional values: an optional `e` is substituted for `x` instead);
- `T{f: v}` is the map `{"f": v}` (a struct's fields are its map keys);
- `map` and `filter` (and the transforms) over more than a few elements
  build their list through `collect`: the engine's own are quadratic;
- `.f` and `[i]` after an optional selection or index are optional too;
- any other `a.f` is `a["f"]`: the engine's selection copies the whole value it selects (78 ms
  for `object.spec.n` over 300,000 strings) and unwraps an optional value it finds in a map,
  where the index does neither (`variables.f` stays a selection: see BOXED);
- `o.optMap(v, e)` is `o.hasValue() ? optional.of(e) : optional.none()` with
  `v` read as `o.value()` (optFlatMap: `e` itself);
- string() of a timestamp, duration, double or dyn value, size() of a string
  or dyn value and a timestamp's accessors, which the engine answers
  otherwise than cel-go, call functions of ours (see `_restated`).

A receiver a rewrite reads more than once is evaluated once and bound the same
way (`[e].map(v, ...)[0]`), so that the rewrite costs what the original does
(the cost estimate is made on the original tree, as upstream makes it) and
its text grows linearly: repeating it doubled a chain of `.?f` or of binds
at every step.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Callable

import cel
from cel import stdlib

from . import collect, meter
from .cost import priced_at_runtime, self_comparing
from .parser import OPTIONAL_MACROS, Node
from .types import DYN, Type

#: functions the rewrites call (not callable from source: the checker knows no such names)
SORT_BY_KEYS, ZIP_MAP, MERGE_MAPS = "__sort_by_keys__", "__zip_map__", "__merge_maps__"
OPT_FIELD, OPT_INDEX = "__opt_field__", "__opt_index__"
#: a list's indices, for a two-variable comprehension (free: cel-go builds no such list)
INDICES = "__nk_indices__"
#: CEL's string() of a timestamp, a duration or a double as cel-go converts them (the engine's
#: reads '+00:00' for 'Z', '1h30m0s' for '5400s', '100000000000000000000' for '1e+20')
STRING = "__nk_string__"
_OWN_STRING = frozenset({"timestamp", "duration", "double", "dyn"})
#: size() of a string: its code points (the engine's counts UTF-8 bytes: 'héllo' was 6)
SIZE = "__nk_size__"
#: a timestamp's accessors, which without a time zone read UTC in Kubernetes (the engine: the
#: timestamp's own offset); printed with "UTC", the form `library.timestamps` implements
_ACCESSORS = frozenset({"getFullYear", "getMonth", "getDate", "getDayOfMonth", "getDayOfWeek", "getDayOfYear",
                        "getHours", "getMinutes", "getSeconds", "getMilliseconds"})
#: the comprehensions that stop at the first element deciding them
SHORT_CIRCUITS = frozenset({"all", "exists"})
#: the comprehensions whose list is built by `collect` (the engine's own is quadratic)
_BUILT = frozenset({"map", "filter", "sortBy"})
#: the variable whose fields admission sets as the engine's optional values, which only its field
#: selection unwraps: `variables.x` stays a selection (every other `a.f` is printed `a["f"]`)
BOXED = "variables"


def _sort_by_keys(items: list, keys: list) -> list:
    """cel-go's @sortByAssociatedKeys, charged in a metered run as it charges it (its keys
    compared with each other)."""
    from .library.lists import less

    m = meter.active()
    if m is not None:
        m.charge(self_comparing(len(keys), bool(keys) and isinstance(keys[0], (str, bytes))))
    order = sorted(range(len(items)), key=lambda i: _Key(keys[i], less))
    return [items[i] for i in order]


class _Key:
    __slots__ = ("v", "less")

    def __init__(self, v, less) -> None:
        self.v, self.less = v, less

    def __lt__(self, other: _Key) -> bool:
        return self.less(self.v, other.v)


def _zip_map(pairs: list) -> dict:
    return {k: v for k, v in pairs}


def _merge_maps(maps: list) -> dict:
    from .errors import CELError

    out: dict = {}
    for m in maps:
        for k, v in m.items():
            if k in out:
                raise CELError(f"insert failed: key {k} already exists")
            out[k] = v
    return out


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

def _opt_index(coll, key):
    """`coll[?key]`, and `coll.?key` for a map: the entry as an optional, none when absent."""
    if isinstance(coll, cel.OptionalValue):
        if not coll.has_value():
            return coll
        coll = coll.value()
    if isinstance(coll, list):
        found = isinstance(key, int) and not isinstance(key, bool) and 0 <= key < len(coll)
    else:
        found = isinstance(coll, dict) and key in coll
    return cel.OptionalValue.of(coll[key]) if found else cel.OptionalValue.none()


#: the engine functions behind the rewrites
def _string(v):
    from .library.formatting import convert

    return convert(v)


def _size(v):
    from .errors import CELError
    from .library.values import marker

    if isinstance(v, (str, bytes, list)) or (isinstance(v, dict) and marker(v) is None):
        return len(v)
    raise CELError("no such overload")


RUNTIME = {SORT_BY_KEYS: _sort_by_keys, ZIP_MAP: _zip_map, MERGE_MAPS: _merge_maps, INDICES: stdlib.lists_range,
           OPT_FIELD: _opt_index, OPT_INDEX: _opt_index, STRING: _string, SIZE: _size, **meter.RUNTIME, **collect.RUNTIME}

_INFIX = {"_+_": "+", "_-_": "-", "_*_": "*", "_/_": "/", "_%_": "%", "_==_": "==", "_!=_": "!=", "_<_": "<",
          "_<=_": "<=", "_>_": ">", "_>=_": ">=", "_&&_": "&&", "_||_": "||", "@in": "in"}
#: infix precedence, as CEL's grammar nests them (all left-associative)
_PRECEDENCE = {"_||_": 1, "_&&_": 2, **{f: 3 for f in ("_==_", "_!=_", "_<_", "_<=_", "_>_", "_>=_", "@in")},
               "_+_": 4, "_-_": 4, "_*_": 5, "_/_": 5, "_%_": 5}


def needs_rewrite(n: Node, builds: bool = True, types: dict[int, Type] | None = None) -> bool:
    """Whether the engine needs the printed form: for syntax it lacks, for a call it answers
    differently (`types`: the checker's, which tell them), or (`builds`) for a map or filter
    it would build in quadratic time or a field selection (which copies what it selects)."""
    if n.kind in ("bind", "struct") or n.optional or (n.kind == "call" and n.name == "_[?_]") or (
            n.kind == "comprehension" and (len(n.vars) == 2 or n.name in ("sortBy", *OPTIONAL_MACROS) or
                                           (builds and n.name in _BUILT))) or (
            builds and n.kind == "select" and not n.test_only):
        return True
    if types is not None and _restated(n, types):
        return True
    children = ([n.target] if n.target is not None else []) + n.args
    return any(needs_rewrite(c, builds, types) for c in children)


def _restated(n: Node, types: dict[int, Type]) -> str | None:
    """The printed form of a call of ours that stands for `n`, given its operands' printed forms
    (a format string: {0} the receiver or argument), where the engine's own answers differently."""
    if n.kind != "call":
        return None
    if n.name == "string" and n.target is None and len(n.args) == 1 and \
            types.get(id(n.args[0]), DYN).name in _OWN_STRING:
        return STRING + "({0})"
    if n.name == "size" and len(operands := ([n.target] if n.target is not None else []) + n.args) == 1 and \
            types.get(id(operands[0]), DYN).name in ("string", "dyn"):
        return SIZE + "({0})"
    if n.name in _ACCESSORS and n.target is not None and not n.args and types.get(id(n.target), DYN).name == "timestamp":
        return '{0}.%s("UTC")' % n.name
    return None


def _str(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def _bytes(b: bytes) -> str:
    return 'b"' + "".join(f"\\x{c:02x}" for c in b) + '"'


def _double(v: float) -> str:
    text = repr(v)
    return text if any(c in text for c in ".eE") else text + ".0"


class Printer:
    """Source text for a tree, with the rewrites above; `types` are the
    checker's types by node id (the receivers decide list or map forms).
    `metered`: each comprehension first reports its range's size to the
    meter (meter.ITERATE with its source position), and the engine's string
    tests, regex matches and operators on `dyn` operands are calls of ours that
    report their price, or are preceded by one."""

    def __init__(self, types: dict[int, Type], metered: bool = False) -> None:
        self.types = types
        self.fresh = 0
        self.metered = metered

    def once(self, n: Node, use: Callable[[str], str]) -> str:
        """`use(v)` with `v` naming the value of `n`, evaluated once (where the engine keeps it
        as it is: its comprehensions unwrap the optional values a collection holds)."""
        source = self(n)
        if _NAME.fullmatch(source) or "optional" in str(self.type_of(n)):
            return use(source)
        self.fresh += 1
        v = f"__nk{self.fresh}__"
        return f"[{source}].map({v}, {use(v)})[0]"

    def type_of(self, n: Node) -> Type:
        return self.types.get(id(n), DYN)

    def __call__(self, n: Node) -> str:
        return getattr(self, f"p_{n.kind}")(n)

    def p_lit(self, n: Node) -> str:
        if n.name == "string":
            return _str(n.value)
        if n.name == "bytes":
            return _bytes(n.value)
        if n.name == "bool":
            return "true" if n.value else "false"
        if n.name == "null":
            return "null"
        if n.name == "uint":
            return f"{n.value}u"
        if n.name == "double":
            return _double(n.value)
        return str(n.value) if n.value >= 0 else f"({n.value})"

    def p_ident(self, n: Node) -> str:
        return n.name

    def receiver(self, n: Node) -> str:
        """`n` before `.f`, `.f()` or `[i]`: in parentheses only if it is an infix operation or a
        number (a chain of selections parenthesized at every step would nest as deep as it is long)."""
        text = self(n)
        if (n.kind == "call" and n.target is None and n.name in _PRECEDENCE) or (
                n.kind == "lit" and n.name in ("int", "uint", "double")):
            return f"({text})"
        return text

    def p_select(self, n: Node) -> str:
        """`.f` of an optional value (after a `.?` or `[?]` along the chain) is optional too, none
        where the field is absent, as cel-go qualifies once a qualifier was optional."""
        if n.test_only:
            return f"has({self.receiver(n.target)}.{n.name})"
        if not n.optional and self.type_of(n.target).name != "optional":
            if n.target.kind == "ident" and n.target.name == BOXED:
                return f"{n.target.name}.{n.name}"
            return f"{self.receiver(n.target)}[{_str(n.name)}]"
        return f"{OPT_FIELD}({self(n.target)}, {_str(n.name)})"

    def p_list(self, n: Node) -> str:
        return "[" + ", ".join(self(a) for a in n.args) + "]"

    def p_map(self, n: Node) -> str:
        return "{" + ", ".join(f"{self(e.args[0])}: {self(e.args[1])}" for e in n.args) + "}"

    def p_struct(self, n: Node) -> str:
        return "{" + ", ".join(f"{_str(f.name)}: {self(f.args[0])}" for f in n.args) + "}"

    def p_bind(self, n: Node) -> str:
        if self.type_of(n.args[0]).name == "optional":
            return self(substitute(n.args[1], n.vars[0], n.args[0], self.types))
        return f"[{self(n.args[0])}].map({n.vars[0]}, {self(n.args[1])})[0]"

    def p_comprehension(self, n: Node) -> str:
        if n.name in OPTIONAL_MACROS:
            return self._optional_macro(n)
        if self.metered:
            return self._metered_comprehension(n)
        return self._comprehension(n)

    def _optional_macro(self, n: Node) -> str:
        """`o.optMap(v, e)`: `o.hasValue() ? optional.of(e) : optional.none()` with `v` read as
        `o.value()` (optFlatMap: e itself, an optional)."""
        def use(o: str) -> str:
            value = Node("call", n.pos, "value", target=Node("ident", n.pos, f"({o})"))
            inner = self.type_of(n.target)
            self.types[id(value)] = inner.params[0] if inner.name == "optional" else DYN
            body = self(substitute(n.args[0], n.vars[0], value, self.types))
            return f"({o}.hasValue() ? {f'optional.of({body})' if n.name == 'optMap' else body} : optional.none())"
        return use(self(n.target))

    def _metered_comprehension(self, n: Node) -> str:
        """`all` and `exists`, which stop early, report each iteration as it starts (as cel-go
        charges what runs); any other comprehension its range's size before it starts (the range
        evaluated once)."""
        if n.name in SHORT_CIRCUITS:
            return self._comprehension(n, step=True)
        self.fresh += 1
        rng = f"__nk{self.fresh}__"
        alias = Node("ident", n.pos, rng)
        self.types[id(alias)] = self.type_of(n.target)
        size = f"(type({rng}) == list || type({rng}) == map ? size({rng}) : 0)"
        body = self._comprehension(replace(n, target=alias))
        return f"[{self(n.target)}].map({rng}, {meter.ITERATE}({n.pos}, {size}) ? {body} : null)[0]"

    def _comprehension(self, n: Node, step: bool = False) -> str:
        """`step`: the body reports each iteration to the meter before it runs."""
        if n.name == "sortBy":
            key = self(n.args[0])
            return self.once(n.target, lambda t: f"{SORT_BY_KEYS}({t}, {self._built(t, n.vars[0], 'map', [key], n.args)})")
        if len(n.vars) == 1 and n.name in _BUILT:
            return self._built(self.receiver(n.target), n.vars[0], n.name, [self(a) for a in n.args], n.args)
        if len(n.vars) == 1:
            args = [self._body(n, a, step and i == 0) for i, a in enumerate(n.args)]
            return f"{self.receiver(n.target)}.{n.name}({', '.join((n.vars[0], *args))})"
        return self.once(n.target, lambda target: self._two_var_comprehension(n, target, step))

    def _built(self, rng: str, var: str, name: str, parts: list[str], body: list[Node]) -> str:
        """`rng.map(var, ...)` (parts: [transform] or [predicate, transform]) or `rng.filter(var,
        predicate)`, its list built by `collect` in linear time. Where the body (`body`, the
        nodes of the parts) holds no such comprehension itself, a range of up to
        collect.NATIVE_UP_TO elements is the engine's own, quicker on a few; the body printed
        twice then, which nested ones would repeat at every level."""
        self.fresh += 1
        t = f"__nk{self.fresh}__"
        if name == "filter":
            step = f"({parts[0]} ? {collect.PUSH}({t}, {var}) : true)"
        else:
            step = f"{collect.PUSH}({t}, {parts[-1]})"
            if len(parts) == 2:
                step = f"({parts[0]} ? {step} : true)"

        def built(r: str) -> str:
            return f"[{collect.BEGIN}()].map({t}, {collect.COLLECT}({t}, {r}.all({var}, {step})))[0]"

        if any(_builds(b) for b in body):
            return built(rng)

        def either(r: str) -> str:
            return f"(size({r}) <= {collect.NATIVE_UP_TO} ? {r}.{name}({', '.join((var, *parts))}) : {built(r)})"

        if _NAME.fullmatch(rng):
            return either(rng)
        self.fresh += 1
        v = f"__nk{self.fresh}__"
        return f"[{rng}].map({v}, {either(v)})[0]"

    def _body(self, n: Node, body: Node, step: bool) -> str:
        """A comprehension's body; `step`: a condition reporting the iteration first (the meter's
        stop is an error no operator absorbs there, as it would be in `&&`: the loop goes on)."""
        if not step:
            return self(body)
        return f"({meter.ITERATE}({n.pos}, 1) ? {self(body)} : false)"

    def _two_var_comprehension(self, n: Node, target: str, step: bool) -> str:
        first, second = n.vars
        kind = self.type_of(n.target).name
        as_list = self._two_vars(n, target, first, second, True, step)
        as_map = self._two_vars(n, target, first, second, False, step)
        if kind == "list":
            return as_list
        if kind == "map":
            return as_map
        return f"(type({target}) == map ? {as_map} : {as_list})"

    def _two_vars(self, n: Node, target: str, first: str, second: str, is_list: bool, step: bool) -> str:
        value = Node("call", n.pos, "_[_]", args=[Node("ident", n.pos, f"({target})"), Node("ident", n.pos, first)])
        bodies = [substitute(a, second, value, self.types) for a in n.args]
        parts = [self._body(n, b, step and i == 0) for i, b in enumerate(bodies)]
        rng = f"{INDICES}(size({target}))" if is_list else f"({target})"
        if not n.name.startswith("transform"):
            return f"{rng}.{n.name}({first}, {parts[0]})"
        if len(parts) == 2:  # transform*(i, v, filter, transform)
            rng = self._built(rng, first, "filter", parts[:1], bodies[:1])
        if n.name == "transformList":
            return self._built(rng, first, "map", parts[-1:], bodies[-1:])
        if n.name == "transformMap":
            return f"{ZIP_MAP}({self._built(rng, first, 'map', [f'[{first}, {parts[-1]}]'], bodies[-1:])})"
        return f"{MERGE_MAPS}({self._built(rng, first, 'map', parts[-1:], bodies[-1:])})"

    def operand(self, n: Node, lowest: int) -> str:
        """`n` as an operand of an infix operator: in parentheses when it binds less tightly than
        `lowest`. Only those: a chain parenthesized at every step nests as deep as it is long,
        and the engine refuses nesting past 96."""
        text = self(n)
        if n.kind == "call" and n.target is None and _PRECEDENCE.get(n.name, 99) < lowest:
            return f"({text})"
        return text

    def p_call(self, n: Node) -> str:
        name, a = n.name, n.args
        if self.metered and priced_at_runtime(n, self.types):
            return self._priced_operator(n)
        if name in _INFIX:
            p = _PRECEDENCE[name]
            return f"{self.operand(a[0], p)} {_INFIX[name]} {self.operand(a[1], p + 1)}"
        if name == "_?_:_":
            return f"({self(a[0])} ? {self(a[1])} : {self(a[2])})"
        if name == "!_":
            return f"(!{self.operand(a[0], 99)})"
        if name == "-_":
            return f"(-{self.operand(a[0], 99)})"
        if name == "_[_]" and self.type_of(a[0]).name != "optional":
            return f"{self.receiver(a[0])}[{self(a[1])}]"
        if name in ("_[_]", "_[?_]"):
            return self._optional_index(n)
        if (form := _restated(n, self.types)) is not None:
            return form.format(self.receiver(n.target) if n.target is not None else self(a[0]))
        operands = ([n.target] if n.target is not None else []) + a
        if self.metered and name == "matches" and len(operands) == 2:
            return self._both(*operands, lambda t, p: f"{meter.MATCHES}({t}, {p}) ? {t}.matches({p}) : null")
        args = ", ".join(self(x) for x in a)
        if self.metered and n.target is not None and name in meter.STRING_TESTS and len(a) == 1:
            return f"{meter.STRING_TESTS[name]}({self(n.target)}, {args})"
        if n.target is not None:
            return f"{self.receiver(n.target)}.{name}({args})"
        return f"{name}({args})"

    def _priced_operator(self, n: Node) -> str:
        """`a OP b` whose price depends on what `a` and `b` turn out to be: reported to the meter
        (a collection by its size, which passes no elements through Python), then operated on."""
        op = _INFIX[n.name]

        def report(x: str, y: str) -> str:
            sized = [f"(type({v}) in [list, map] ? [size({v})] : {v})" for v in (x, y)]
            return f"{meter.OPERANDS}({_str(n.name)}, {sized[0]}, {sized[1]}) ? {x} {op} {y} : null"

        return self._both(n.args[0], n.args[1], report)

    def _both(self, left: Node, right: Node, use: Callable[[str, str], str]) -> str:
        """`use(a, b)` with `a` and `b` naming the values of `left` and `right`, each evaluated once."""
        a, b = self(left), self(right)
        if _NAME.fullmatch(a) and _NAME.fullmatch(b):
            return f"({use(a, b)})"
        self.fresh += 1
        v = f"__nk{self.fresh}__"
        return f"[[{a}, {b}]].map({v}, {use(f'{v}[0]', f'{v}[1]')})[0]"

    def _optional_index(self, n: Node) -> str:
        return f"{OPT_INDEX}({self(n.args[0])}, {self(n.args[1])})"


def _builds(n: Node) -> bool:
    """Whether `n` holds a comprehension whose list `collect` builds."""
    if n.kind == "comprehension" and (n.name in _BUILT or n.name.startswith("transform")):
        return True
    return (n.target is not None and _builds(n.target)) or any(_builds(a) for a in n.args)


def substitute(n: Node, name: str, value: Node, types: dict[int, Type]) -> Node:
    """`n` with the free identifier `name` replaced by `value` (a comprehension
    or bind that rebinds `name` shadows it); new nodes keep the types of the
    nodes they copy."""
    if n.kind == "ident":
        return value if n.name == name else n
    target = substitute(n.target, name, value, types) if n.target is not None else None
    if n.kind == "comprehension" and name in n.vars:
        out = replace(n, target=target)
    elif n.kind == "bind" and n.vars[0] == name:
        out = replace(n, args=[substitute(n.args[0], name, value, types), n.args[1]])
    else:
        out = replace(n, target=target, args=[substitute(a, name, value, types) for a in n.args])
    if id(n) in types:
        types[id(out)] = types[id(n)]
    return out


def rewrite(root: Node, types: dict[int, Type], metered: bool = False) -> str:
    """The engine's source for a checked tree that needs_rewrite (or is to be metered)."""
    return Printer(dict(types), metered)(root)
