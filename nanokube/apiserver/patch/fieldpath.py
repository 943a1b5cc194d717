"""Field paths and field sets in structured-merge-diff's FieldsV1 form.

A path is a tuple of path elements; a field set is a plain Python set of
paths, which is exactly what structured-merge-diff's `fieldpath.Set` holds.
An element is one of

* `("f", name)`  a struct field or map key            -> `f:name`
* `("k", json)`  a list-map item, by its sorted keys  -> `k:{"name":"nginx"}`
* `("v", json)`  a set-list item, by its value        -> `v:"foo"`
* `("i", n)`     an item of a list with no identity   -> `i:0`

Keys and values are held as canonical compact JSON text, so elements hash
and compare by exact JSON value and serialise without re-encoding. The
ordering and the JSON produced match upstream byte for byte, which is what
`kubectl get -o yaml --show-managed-fields` shows.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Iterator
from typing import Any

import orjson

PathElement = tuple[str, Any]
Path = tuple[PathElement, ...]

_KINDS = "fkvi"


class MalformedFields(ValueError):
    """A FieldsV1 object or managedFields entry that cannot be read."""


def encode_json(v: Any) -> str:
    """Compact JSON with sorted keys and Go's HTML-safe escaping."""
    t = type(v)
    if t is str or t is int or t is dict and all(type(x) is str or type(x) is int for x in v.values()):
        # list-map keys and set values are nearly always strings and ints, which orjson writes as
        # json.dumps does (checked on every code point) at a tenth of its cost (json.dumps with
        # options builds an encoder per call); it refuses lone surrogates and ints beyond 64 bits
        try:
            text = orjson.dumps(v, option=orjson.OPT_SORT_KEYS).decode()
        except TypeError:
            text = _json_text(v)
    else:  # floats and the rest as before: orjson writes some floats otherwise (1e16 for 1e+16)
        text = _json_text(v)
    for ch, esc in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(ch, esc)
    return text


def _json_text(v: Any) -> str:
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False, sort_keys=True, allow_nan=False)


def field(name: str) -> PathElement:
    return ("f", name)


def key(fields: dict[str, Any]) -> PathElement:
    if len(fields) == 1:  # most list-map keys: a name, a type, an ip
        ((k, v),) = fields.items()
        t = type(v)
        if t is str or t is int:
            return _scalar_key(((k, t, v),))
    items = tuple(fields.items())
    if all(type(v) is str or type(v) is int for _, v in items):
        return _scalar_key(tuple((k, type(v), v) for k, v in items))
    return ("k", encode_json(fields))


@functools.lru_cache(maxsize=8192)
def _scalar_key(items: tuple[tuple[str, type, Any], ...]) -> PathElement:
    """List-map keys are nearly always a few strings and ints, repeated on
    every write; the value's type is part of the cache key so that equal
    values of different types cannot share an encoding."""
    return ("k", encode_json({k: v for k, _, v in items}))


def value(v: Any) -> PathElement:
    return ("v", encode_json(v))


def index(i: int) -> PathElement:
    return ("i", i)


def make_path(*names: str) -> Path:
    return tuple(field(n) for n in names)


@functools.lru_cache(maxsize=4096)
def _decoded(text: str) -> Any:
    return json.loads(text)


def _value_order(v: Any) -> tuple:
    """Total order of JSON values: numbers, strings, bools, lists, maps, null."""
    if isinstance(v, bool):
        return (2, v)
    if isinstance(v, (int, float)):
        return (0, v)
    if isinstance(v, str):
        return (1, v)
    if isinstance(v, list):
        return (3, tuple(_value_order(x) for x in v))
    if isinstance(v, dict):
        return (4, tuple((k, _value_order(v[k])) for k in sorted(v)))
    return (5,)


@functools.lru_cache(maxsize=8192)
def element_order(pe: PathElement) -> tuple:
    kind, payload = pe
    if kind == "k":
        fields = _decoded(payload)
        return (
            1,
            len(fields),
            tuple((k, _value_order(fields[k])) for k in sorted(fields)),
        )
    if kind == "v":
        return (2, _value_order(_decoded(payload)))
    return (_KINDS.index(kind), payload)


def _go_string(v: Any) -> str:
    """The value as structured-merge-diff's path strings print it."""
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "[" + ", ".join(_go_string(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}={_go_string(v[k])}" for k in sorted(v)) + "}"
    return str(v)


def element_string(pe: PathElement) -> str:
    kind, payload = pe
    if kind == "f":
        return "." + payload
    if kind == "k":
        fields = _decoded(payload)
        return (
            "[" + ",".join(f"{k}={_go_string(fields[k])}" for k in sorted(fields)) + "]"
        )
    if kind == "v":
        return f"[={_go_string(_decoded(payload))}]"
    return f"[{payload}]"


def path_string(path: Path) -> str:
    """`.spec.template.spec.containers[name="nginx"].image`, as in conflict messages."""
    return "".join(element_string(pe) for pe in path)


class _Node:
    __slots__ = ("children", "member", "only_fields")

    def __init__(self) -> None:
        self.member = False
        self.only_fields = True
        self.children: dict[PathElement, _Node] = {}

    def ordered(self) -> list[PathElement]:
        """Children in element order; field elements alone sort as plain tuples."""
        if self.only_fields:
            return sorted(self.children)
        return sorted(self.children, key=element_order)


def _tree(paths: Iterable[Path]) -> _Node:
    root = _Node()
    for path in paths:
        node = root
        for pe in path:
            child = node.children.get(pe)
            if child is None:
                child = node.children[pe] = _Node()
                if pe[0] != "f":
                    node.only_fields = False
            node = child
        node.member = True
    return root


def _iterate(node: _Node, prefix: Path) -> Iterator[Path]:
    ordered = node.ordered()
    for pe in ordered:
        child = node.children[pe]
        if child.member:
            yield prefix + (pe,)
    for pe in ordered:
        child = node.children[pe]
        if child.children:
            yield from _iterate(child, prefix + (pe,))


def iterate(paths: Iterable[Path]) -> list[Path]:
    """Paths in upstream's iteration order: a node's members, then its children."""
    return list(_iterate(_tree(paths), ()))


def _encode(paths: Iterable[Path]) -> dict[str, Any]:
    """The FieldsV1 object of a field set. Its first two levels are built here; below them each
    second-level node's subtree is encoded once per content and shared (`_subtree`): one writer's
    sets differ in a few branches (a kubelet's in its pod's IP, under status.podIPs) while the rest
    (its conditions, its containers' fields) repeats from object to object."""
    root: dict[PathElement, list] = {}
    for path in paths:
        n = len(path)
        if not n:  # the root itself: never written
            continue
        top = root.get(path[0])
        if top is None:
            top = root[path[0]] = [False, {}]
        if n == 1:
            top[0] = True
            continue
        second = top[1].get(path[1])
        if second is None:
            second = top[1][path[1]] = [False, []]
        if n == 2:
            second[0] = True
        else:
            second[1].append(path[2:])
    out: dict[str, Any] = {}
    for pe in _ordered(root):
        member, children = root[pe]
        if children:
            level: dict[str, Any] = {".": {}} if member else {}
            for pe2 in _ordered(children):
                member2, rest = children[pe2]
                level[_text(pe2)] = _subtree(member2, rest) if rest else {}
            out[_text(pe)] = level
        else:
            out[_text(pe)] = {}
    return out


def _subtree(member: bool, paths: list[Path]) -> dict[str, Any]:
    """The FieldsV1 object of a node (`.` when it is a member) with `paths` below it, shared by
    the encodings that hold the same subtree (FieldsV1 objects are never changed in place)."""
    key = (member, frozenset(paths))
    obj = _SUBTREES.get(key)
    if obj is None:
        if len(_SUBTREES) >= _CACHE_LIMIT:
            _SUBTREES.clear()
        root: dict[PathElement, list] = {}
        for path in paths:
            level = root
            for pe in path[:-1]:
                node = level.get(pe)
                if node is None:
                    node = level[pe] = [False, {}]
                level = node[1]
            pe = path[-1]
            node = level.get(pe)
            if node is None:
                level[pe] = [True, {}]
            else:
                node[0] = True
        obj = _SUBTREES[key] = _emit(root, {".": {}} if member else None)
    return obj


_SUBTREES: dict[tuple[bool, frozenset], dict[str, Any]] = {}


def _ordered(level: dict[PathElement, Any]) -> list[PathElement]:
    """A node's children in element order (field elements alone sort as plain tuples)."""
    for pe in level:
        if pe[0] != "f":
            return sorted(level, key=element_order)
    return sorted(level)


def _emit(level: dict[PathElement, list], out: dict[str, Any] | None = None) -> dict[str, Any]:
    """A trie of [member, children] lists as FieldsV1, into `out` (which holds the node's `.`
    first when it is a member with children of its own)."""
    if out is None:
        out = {}
    for pe in _ordered(level):
        member, children = level[pe]
        out[_text(pe)] = _emit(children, {".": {}} if member else None) if children else {}
    return out


def _text(pe: PathElement) -> str:
    """An element's FieldsV1 key, remembered: the same elements are written again and again."""
    text = _TEXTS.get(pe)
    if text is None:
        if len(_TEXTS) >= _CACHE_LIMIT:
            _TEXTS.clear()
        text = _TEXTS[pe] = f"{pe[0]}:{pe[1]}"
    return text


_TEXTS: dict[PathElement, str] = {}


#: encodings and decodings of recent field sets: an object's managers rarely
#: change their sets, so most writes re-encode what they just decoded; a
#: decoding notes whether its text is the one `to_fields_v1` writes
_ENCODED: dict[frozenset, dict[str, Any]] = {}
_DECODED: dict[bytes, tuple[frozenset, bool]] = {}
_CACHE_LIMIT = 4096


def to_fields_v1(paths: Iterable[Path]) -> dict[str, Any]:
    """The FieldsV1 object for a field set (`{}` for the empty set), shared by the writes that
    encode the same set: it goes into stored objects, which are never changed in place (and the
    next write decodes it by identity)."""
    key = frozenset(paths)
    obj = _ENCODED.get(key)
    if obj is None:
        if len(_ENCODED) >= _CACHE_LIMIT:
            _ENCODED.clear()
        obj = _ENCODED[key] = _encode(key)
        if len(_DECODED_OBJECTS) >= _CACHE_LIMIT:
            _DECODED_OBJECTS.clear()
        _DECODED_OBJECTS[id(obj)] = (obj, (key, True))
    return obj


@functools.lru_cache(maxsize=8192)
def _parse_element(text: str) -> PathElement:
    """Memoized: every write decodes its object's managers, whose elements mostly repeat."""
    kind, sep, payload = text.partition(":")
    if not sep or kind not in _KINDS:
        raise MalformedFields(f"unknown path element {text!r}")
    if kind == "f":
        return field(payload)
    if kind == "i":
        return index(int(payload))
    decoded = json.loads(payload)
    if kind == "k" and not isinstance(decoded, dict):
        raise MalformedFields(f"list-map key is not an object: {text!r}")
    return (kind, encode_json(decoded))


def _parse(obj: dict[str, Any], prefix: Path, out: set[Path]) -> None:
    if not isinstance(obj, dict):
        raise MalformedFields("FieldsV1 nodes must be objects")
    for k, child in obj.items():
        if k == ".":
            out.add(prefix)
            continue
        path = prefix + (_parse_element(k),)
        if child:
            _parse(child, path, out)
        else:
            out.add(path)


def from_fields_v1(obj: dict[str, Any]) -> set[Path]:
    """Parse a FieldsV1 object; raises MalformedFields on a malformed one."""
    return set(decode_fields_v1(obj)[0])


#: decodings by the FieldsV1 object's identity (each object held, so its id stays unique): a
#: stored object's entries are shared by its versions and never changed, and every write decodes
#: its object's managers again
_DECODED_OBJECTS: dict[int, tuple[dict[str, Any], tuple[frozenset, bool]]] = {}


def decode_fields_v1(obj: dict[str, Any]) -> tuple[frozenset[Path], bool]:
    """(field set, whether `obj` is exactly what `to_fields_v1` makes of it): a canonical
    object can stand for its set again as long as the set is unchanged, without encoding it.
    FieldsV1 objects are not changed once decoded (stored ones never are; a request's become
    stored or are dropped)."""
    seen = _DECODED_OBJECTS.get(id(obj))
    if seen is not None and seen[0] is obj:
        return seen[1]
    try:
        key = orjson.dumps(obj)
    except TypeError:
        raise MalformedFields("FieldsV1 must be JSON") from None
    parsed = _DECODED.get(key)
    if parsed is None:
        out: set[Path] = set()
        _parse(obj, (), out)
        out.discard(())
        if len(_DECODED) >= _CACHE_LIMIT:
            _DECODED.clear()
        paths = frozenset(out)
        parsed = _DECODED[key] = (paths, orjson.dumps(_encode(paths)) == key)
    if len(_DECODED_OBJECTS) >= _CACHE_LIMIT:
        _DECODED_OBJECTS.clear()
    _DECODED_OBJECTS[id(obj)] = (obj, parsed)
    return parsed


def without_prefixes(paths: Iterable[Path], prefixes: Iterable[Path]) -> set[Path]:
    """`paths` less every path at or below one of `prefixes` (upstream's RecursiveDifference)."""
    pre = set(prefixes)
    if not pre:
        return set(paths)
    lengths = sorted({len(q) for q in pre})
    return {p for p in paths if not any(p[:n] in pre for n in lengths if n <= len(p))}


def with_prefix(paths: Iterable[Path], pe: PathElement) -> set[Path]:
    """The paths below `pe`, with `pe` cut off."""
    return {p[1:] for p in paths if len(p) > 1 and p[0] == pe}
