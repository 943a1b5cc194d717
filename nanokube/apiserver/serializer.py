"""Request bodies as JSON values, at a cost bounded by their size.

kube-apiserver decodes YAML by converting it to JSON first (sigs.k8s.io/yaml):
map keys become strings (`1: a` is `"1": "a"`), timestamps stay strings, and
aliases are expanded, with go-yaml refusing documents whose aliases expand
far beyond their size. Go's decoders also stop at a nesting depth. Every
later stage here (structural checks, patches, managed fields, orjson, which
encodes at most 254 levels) recurses over the object, so the depth bound is
enforced once, at decoding, for every media type and every patch.

Duplicate keys: Go's JSON decoder keeps the last value, as orjson does; the
strict decoder also reports each one (`duplicate field "metadata.name"`),
which `duplicate_fields` finds only when a cheap count says there is one.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import math
import re
import threading
from typing import Any, Callable

import orjson
import yaml

from ..machinery import errors, gojson
from ..machinery.configfile import ALIAS_FLOOR, ALIAS_RATIO, go_int, go_yaml_error

#: deepest nesting of objects and arrays a body may have
MAX_DEPTH = 100
_INT64 = (-(2**63), 2**64 - 1)
_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)


class _Loader(yaml.CSafeLoader if hasattr(yaml, "CSafeLoader") else yaml.SafeLoader):  # type: ignore[misc]
    """YAML 1.1 as go-yaml reads it into interface{}: timestamps are strings."""


_Loader.yaml_implicit_resolvers = {
    ch: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for ch, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_constructor("tag:yaml.org,2002:int", go_int)


#: bodies at least this long are decoded and checked off the event loop: PyYAML builds a YAML
#: body's values in Python, some 10 us a node (a 2.7 MB body of 200,000 small maps took ~30 s at
#: load 8), and in the loop that stalled every other request (/readyz went unanswered)
OFF_LOOP = 64 * 1024


async def off_loop(fn: Callable[..., Any], raw: bytes, *args: Any) -> Any:
    """fn(raw, *args), in a worker thread where `raw` is OFF_LOOP bytes or more."""
    if len(raw) < OFF_LOOP:
        return fn(raw, *args)
    return await asyncio.to_thread(fn, raw, *args)


async def off_loop_json(raw: bytes, lenient: bool = False) -> Any:
    """`loads_json(raw, lenient)`, in a worker thread where `raw` is OFF_LOOP bytes or more (a 2 MB
    body of 150,000 small maps: ~50 ms to decode, ~0.2 s to measure its depth), with what it
    sets of OUT_OF_RANGE set in the caller's context too."""
    if len(raw) < OFF_LOOP:
        return loads_json(raw, lenient)
    ctx = contextvars.copy_context()
    obj = await asyncio.get_running_loop().run_in_executor(None, ctx.run, loads_json, raw, lenient)
    if lenient:
        OUT_OF_RANGE.set(ctx[OUT_OF_RANGE])
    return obj


def too_deep() -> errors.APIError:
    return errors.bad_request(f"the request body is nested deeper than {MAX_DEPTH} levels: exceeded max depth")


def check_depth(obj: Any) -> None:
    """Refuse values nested deeper than MAX_DEPTH (iteratively: any depth is safe to measure)."""
    stack = [(obj, 1)]
    while stack:
        v, depth = stack.pop()
        if type(v) is dict:
            children = v.values()
        elif type(v) is list:
            children = v
        else:
            continue
        if depth > MAX_DEPTH:
            raise too_deep()
        stack.extend((c, depth + 1) for c in children if type(c) is dict or type(c) is list)


#: whether the JSON body this request decoded last had a number past float64's range (read by
#: the typed decoding, in the same task, to refuse one a kind's fields keep)
OUT_OF_RANGE: contextvars.ContextVar[bool] = contextvars.ContextVar("out_of_range", default=False)


def loads_json(raw: bytes | str, lenient: bool = False) -> Any:
    """A JSON body (400 when it is not JSON or too deep). `lenient`: a body a kind's Go struct
    decodes, where a number past float64's range (which orjson refuses) is an OutOfRange that
    typed decoding drops with its unknown field or refuses (OUT_OF_RANGE says there was one)."""
    if lenient:
        OUT_OF_RANGE.set(False)
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        if "depth" in str(e) or "recursion" in str(e).lower():
            raise too_deep() from None
        if lenient and "infinity" in str(e):
            obj = _loads_out_of_range(raw, e)
        elif "UTF-8" not in str(e) and "surrogate" not in str(e):
            raise
        else:
            obj = _loads_replacing(raw, e)
    if _containers(raw) > MAX_DEPTH:  # a value cannot nest deeper than the body has brackets
        check_depth(obj)
    return obj


def _loads_out_of_range(raw: bytes | str, refused: orjson.JSONDecodeError) -> Any:
    """A body orjson refuses for a number float64 cannot hold, with each such number an OutOfRange
    (`refused` is raised when the text is not JSON either)."""
    try:
        obj = json.loads(raw, parse_float=gojson.float_or_out_of_range, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        raise refused from None
    OUT_OF_RANGE.set(True)
    return obj


_SURROGATE = re.compile("[\ud800-\udfff]")


def _loads_replacing(raw: bytes | str, refused: orjson.JSONDecodeError) -> Any:
    """A JSON body orjson refuses for a string that is not UTF-8, decoded as Go's decoder does: each
    byte that is not UTF-8 and each lone surrogate escape (\\ud800) is U+FFFD. `refused` is raised
    when the text is not JSON either."""
    text = raw.decode("utf-8", "surrogateescape") if isinstance(raw, bytes) else raw
    try:
        obj = json.loads(_SURROGATE.sub("\ufffd", text), parse_constant=_no_constant)
    except (ValueError, RecursionError):
        raise refused from None
    out: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(obj, out, 0)]  # (value, parent, key in parent): strings' surrogates replaced
    while stack:
        v, parent, slot = stack.pop()
        if type(v) is dict:
            d: dict[str, Any] = {}
            parent[slot] = d
            for k, x in v.items():
                key = _SURROGATE.sub("\ufffd", k)
                d[key] = None
                stack.append((x, d, key))
        elif type(v) is list:
            lst: list[Any] = [None] * len(v)
            parent[slot] = lst
            stack.extend((x, lst, i) for i, x in enumerate(v))
        else:
            parent[slot] = _SURROGATE.sub("\ufffd", v) if type(v) is str else v
    return out[0]


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _containers(raw: bytes | str) -> int:
    """Opening brackets in a JSON text (those inside strings too): a bound on its nesting depth."""
    return raw.count(b"{") + raw.count(b"[") if isinstance(raw, bytes) else raw.count("{") + raw.count("[")


def loads_yaml(raw: bytes | str) -> Any:
    """A YAML body converted to its JSON value the way sigs.k8s.io/yaml does. JSON is YAML,
    and what kubectl sends for server-side apply: it takes the JSON parser (a 1.3 MB CRD in
    20 ms instead of 0.7 s)."""
    if raw.lstrip()[:1] in (b"{", "{"):
        try:
            return loads_json(raw)
        except orjson.JSONDecodeError:
            pass
    try:
        obj = _loaded(raw)[0]
    except RecursionError:
        raise too_deep() from None
    except ValueError as e:  # e.g. an integer literal longer than Python converts
        raise yaml.YAMLError(str(e)) from None
    budget = max(ALIAS_FLOOR, ALIAS_RATIO * len(raw))  # (as a configuration file's)
    return _to_json(obj, budget)


def loads_config_yaml(raw: bytes | str) -> Any:
    """A configuration file's YAML, bounded in aliases and nesting as a request body's is: ValueError
    with the Go decoder's words (`error converting YAML to JSON: ...`) where it does not decode."""
    try:
        return loads_yaml(raw)
    except yaml.YAMLError as e:
        raise ValueError(f"error converting YAML to JSON: {go_yaml_error(e, raw)}") from None
    except errors.APIError as e:
        raise ValueError(f"error converting YAML to JSON: {e.message}") from None


#: YAML bodies loaded by one of loads_yaml and duplicates, kept for the other (its next call with the
#: same bytes takes it out): a request's body is decoded and checked for repeated keys once, not twice
_LOADED: dict[bytes | str, tuple[Any, list[str]]] = {}
#: how many are kept (one whose other call never comes, as when Strict refuses the duplicates, is dropped)
_LOADED_KEPT = 2
_LOADED_LOCK = threading.Lock()


def _loaded(raw: bytes | str) -> tuple[Any, list[str]]:
    """A YAML body's loaded value (as the loader builds it: _to_json copies it, so it is never changed)
    and the keys it repeats, in go-yaml's words and document order."""
    with _LOADED_LOCK:  # (the two calls may run in worker threads)
        got = _LOADED.pop(raw, None)
    if got is not None:
        return got
    loader = _DuplicateKeys(raw)
    try:
        obj = loader.get_single_data()
    finally:
        loader.dispose()
    got = obj, sorted(loader.duplicates, key=lambda text: int(text.split()[1][:-1]))
    with _LOADED_LOCK:
        while len(_LOADED) >= _LOADED_KEPT:
            del _LOADED[next(iter(_LOADED))]
        _LOADED[raw] = got
    return got


def _key(k: Any) -> str:
    if type(k) is str:
        return k
    if type(k) is bool:
        return "true" if k else "false"
    if k is None:
        return "null"
    if type(k) is int:
        return str(k)
    if type(k) is float:
        return _float_text(k)
    raise yaml.YAMLError(f"error converting YAML to JSON: unsupported map key of type {type(k).__name__}")


def _float_text(f: float) -> str:
    return repr(f) if math.isfinite(f) else ("NaN" if f != f else ("+Inf" if f > 0 else "-Inf"))


def _scalar(v: Any) -> Any:
    if type(v) is int and not _INT64[0] <= v <= _INT64[1]:
        # go-yaml resolves an integer past int64 and uint64 as the float ParseFloat makes of it, and one past
        # float64 too (ParseFloat's range error) as the string it is
        try:
            return float(v)
        except OverflowError:
            return str(v)
    if type(v) is float and not math.isfinite(v):
        raise yaml.YAMLError(f"error converting YAML to JSON: json: unsupported value: {_float_text(v)}")
    if isinstance(v, (bytes, bytearray)):
        import base64

        return base64.b64encode(v).decode()
    if isinstance(v, (set, tuple)):
        raise yaml.YAMLError(f"error converting YAML to JSON: unsupported value of type {type(v).__name__}")
    return v


def _to_json(root: Any, budget: int) -> Any:
    """A copy of a loaded YAML value with string keys; aliases are expanded
    (each reference copied) within `budget` values and MAX_DEPTH levels, so a
    recursive alias or an alias bomb ends in a 400, not a hang."""
    out: list[Any] = [None]
    stack: list[tuple[Any, Any, Any, int]] = [(root, out, 0, 1)]  # (value, parent, key in parent, depth)
    while stack:
        v, parent, slot, depth = stack.pop()
        budget -= 1
        if budget < 0:
            raise yaml.YAMLError("document contains excessive aliasing")
        if isinstance(v, dict):
            if depth > MAX_DEPTH:
                raise too_deep()
            d: dict[str, Any] = {}
            parent[slot] = d
            for k, x in v.items():
                key = _key(k)
                d[key] = None
                stack.append((x, d, key, depth + 1))
        elif isinstance(v, list):
            if depth > MAX_DEPTH:
                raise too_deep()
            lst: list[Any] = [None] * len(v)
            parent[slot] = lst
            stack.extend((x, lst, i, depth + 1) for i, x in enumerate(v))
        else:
            parent[slot] = _scalar(v)
    return out[0]


class _DuplicateKeys(_Loader):
    """A loader that notes every repeated mapping key, in go-yaml's strict wording."""

    def __init__(self, stream) -> None:
        super().__init__(stream)
        self.duplicates: list[str] = []

    def construct_mapping(self, node, deep=False):
        seen: set = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            try:
                key = self.construct_object(key_node, deep=True)
                if key in seen:
                    self.duplicates.append(f"line {key_node.start_mark.line + 1}: key {json.dumps(str(key))} already set in map")
                seen.add(key)
            except TypeError:  # an unhashable key: the conversion to JSON refuses it
                pass
        return super().construct_mapping(node, deep=deep)


def duplicates(raw: bytes, yaml_body: bool, parsed: Any = None) -> list[str]:
    """The strict decoder's texts for the keys a body repeats: `duplicate field "spec.a"` for
    JSON (what kubectl sends, also as apply YAML), go-yaml's `line N: key "a" already set in
    map` for YAML; [] when the body does not parse (its decoding reports that). `parsed` is
    the JSON body as orjson decoded it, when the caller has it."""
    if not yaml_body or raw.lstrip()[:1] in (b"{", b"["):
        try:
            obj = orjson.loads(raw) if parsed is None else parsed
            return [f'duplicate field "{p}"' for p in duplicate_fields(raw, obj)]
        except orjson.JSONDecodeError:
            if not yaml_body:
                return []
    try:
        return _loaded(raw)[1]
    except (yaml.YAMLError, ValueError, RecursionError):
        return []


def yaml_duplicates(raw: bytes) -> list[str]:
    """go-yaml's texts for the keys a body repeats, a JSON body's too (JSON is YAML), as yaml.UnmarshalStrict
    meets them; a JSON body is parsed again as YAML only when the quick JSON count finds repeats."""
    found = duplicates(raw, True)
    if not found or found[0].startswith("line "):
        return found
    try:
        return _loaded(raw)[1]
    except (yaml.YAMLError, ValueError, RecursionError):
        return []


def duplicate_fields(raw: bytes, obj: Any) -> list[str]:
    """Paths of keys a JSON body repeats within one object (`spec.a`, `items[0].b`).

    Every member of an object has exactly one ':' outside strings, so when the
    count matches the decoded members there is no duplicate (the usual case);
    otherwise the body is parsed again keeping every pair."""
    if not isinstance(obj, (dict, list)) or len(raw) > 4 * 1024 * 1024:
        return []
    if _no_member_dropped(raw, obj):
        return []
    found: list[str] = []
    try:
        tree = json.loads(raw, object_pairs_hook=_Pairs)
    except (ValueError, RecursionError):
        return []
    stack = [(tree, "")]
    while stack:
        v, path = stack.pop()
        if type(v) is _Pairs:
            seen: set[str] = set()
            for k, x in v:
                sub = f"{path}.{k}" if path else k
                if k in seen:
                    found.append(sub)
                seen.add(k)
                stack.append((x, sub))
        elif type(v) is list:
            stack.extend((x, f"{path}[{i}]") for i, x in enumerate(v))
    return list(dict.fromkeys(found))


def strict_order(raw: bytes, repeated: list[str], unknown: list[str]) -> list[str]:
    """A JSON body's strict errors as sigs.k8s.io/json's strict decoder meets them, in document
    order: a repeated key where it comes again, an unknown field where it first comes (the paths
    of `duplicate_fields` and of the unknown fields), each once. With neither there is nothing to
    order, and the body is not decoded again (every binding's, whose body has neither)."""
    if not repeated and not unknown:
        return []
    try:
        tree = json.loads(raw, object_pairs_hook=_Pairs)
    except (ValueError, RecursionError):
        return [*(f'duplicate field "{p}"' for p in repeated), *(f'unknown field "{p}"' for p in unknown)]
    dup, unk = set(repeated), set(unknown)
    out: dict[str, None] = {}

    def walk(v: Any, path: str) -> None:
        if type(v) is _Pairs:
            seen: set[str] = set()
            for k, x in v:
                sub = f"{path}.{k}" if path else k
                again = k in seen
                seen.add(k)
                if again and sub in dup:
                    out[f'duplicate field "{sub}"'] = None
                elif sub in unk:
                    out[f'unknown field "{sub}"'] = None
                    continue  # skipped, not decoded: nothing in it is met
                walk(x, sub)
        elif type(v) is list:
            for i, x in enumerate(v):
                walk(x, f"{path}[{i}]")

    try:
        walk(tree, "")
    except RecursionError:
        pass
    return list(out)


def _no_member_dropped(raw: bytes, obj: Any) -> bool:
    """Whether `raw` has one ':' outside strings per member of `obj`. Without `\\u` escapes
    each ':' inside a string is one in its decoded text, which orjson writes back as is, so
    the body has as many ':' as `obj` written back unless members were dropped."""
    if b"\\u" not in raw:
        try:
            return raw.count(b":") == orjson.dumps(obj).count(b":")
        except orjson.JSONEncodeError:  # nested deeper than orjson writes
            pass
    return _STRINGS.sub(b"", raw).count(b":") == _members(obj)


class _Pairs(list):
    """An object's members in document order, repeats kept."""


def _members(obj: Any) -> int:
    n = 0
    stack = [obj]
    while stack:
        v = stack.pop()
        if type(v) is dict:
            n += len(v)
            stack.extend(x for x in v.values() if type(x) is dict or type(x) is list)
        elif type(v) is list:
            stack.extend(x for x in v if type(x) is dict or type(x) is list)
    return n
