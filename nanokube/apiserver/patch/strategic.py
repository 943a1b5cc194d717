"""Strategic merge patch (application/strategic-merge-patch+json), as kube-apiserver applies it.

Semantics follow k8s.io/apimachinery/pkg/util/strategicpatch (the server-side
apply half, with parallel lists merged and unmatched nulls ignored): per-field
patch strategies and merge keys come from the OpenAPI extensions of the kind's
schema; lists with strategy `merge` merge by key (maps) or union (scalars),
other lists and `replace`-strategy maps are replaced; the directives `$patch`,
`$retainKeys`, `$deleteFromPrimitiveList/<f>` and `$setElementOrder/<f>` are
honoured; `$patch: merge` is rejected, as upstream does. Errors carry
upstream's messages: its four format errors are 400 and lists of lists 422, as
upstream answers; the rest upstream passes through as a 500, which for a patch
the client got wrong nanokube answers as a 400 (no input earns a server error).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ... import schema as schemas
from ...machinery import gofmt
from . import PatchError, copy_to_patch, json_copy
from . import merge as merge_patch

DIRECTIVE = "$patch"
DELETE, REPLACE, MERGE = "delete", "replace", "merge"
RETAIN_KEYS = "$retainKeys"
DELETE_FROM_PRIMITIVE_LIST = "$deleteFromPrimitiveList"
SET_ELEMENT_ORDER = "$setElementOrder"

ERR_PRIMITIVE_LIST = "invalid patch format of primitive list"
ERR_RETAIN_KEYS = "invalid patch format of retainKeys"
ERR_SET_ELEMENT_ORDER = "invalid patch format of setElementOrder list"
ERR_LIST_OF_LISTS = "lists of lists are not supported"

_LIST, _MAP = "[]interface {}", "map[string]interface {}"


def apply(doc: dict, patch: dict, schema: dict | None, handed: bool = False) -> dict:
    """Apply `patch` to a copy of `doc`; `schema` is the kind's definition from
    `nanokube.schema.kind_schema`, or None for kinds without one (JSON merge patch).
    `handed`: the caller gives `patch` up (a fresh decode nothing else reads), so the result
    may take its values and the patch is not copied first."""
    if schema is None:
        return merge_patch.apply(doc, patch, handed)
    if patch is None:
        return json_copy(doc)
    if not isinstance(patch, dict):
        raise PatchError(f"json: cannot unmarshal {_json_type(patch)} into Go value of type {_MAP}", 400)
    meta = patch.get("metadata")
    # a patch naming managedFields (a list it may merge into in place) gets a copy of its own
    shared = not (type(meta) is dict and any("managedFields" in k for k in meta))
    return _merge_map(copy_to_patch(doc) if shared else json_copy(doc), patch if handed else json_copy(patch), schema)


# --- maps ---------------------------------------------------------------------------------------


def _merge_map(original: dict, patch: dict, schema: dict | None) -> dict:
    if DIRECTIVE in patch:
        return _map_directive(patch)
    _apply_retain_keys(original, patch)
    _merge_ordered_lists(original, patch, schema)
    for key, value in patch.items():
        is_delete_list = key.startswith(DELETE_FROM_PRIMITIVE_LIST)
        if is_delete_list:
            key = _strip_prefix(key, DELETE_FROM_PRIMITIVE_LIST, ERR_PRIMITIVE_LIST)
        if value is None:
            original.pop(key, None)
            continue
        if key not in original or type(original[key]) is not type(value):
            if not is_delete_list:
                _set_clean(original, key, value)
            continue
        current = original[key]
        if isinstance(current, dict):
            sub = _subschema(schema, key)
            strategy = _strategy(sub)
            original[key] = value if strategy == REPLACE else _merge_map(current, value, sub)
        elif isinstance(current, list):
            original[key] = _merge_list_field(current, value, _subschema(schema, key), is_delete_list)
        else:
            original[key] = value
    return original


def _map_directive(patch: dict) -> dict:
    directive = patch[DIRECTIVE]
    if _is(directive, REPLACE):
        return {k: v for k, v in patch.items() if k != DIRECTIVE}
    if _is(directive, DELETE):
        return {}
    raise PatchError(f"unknown patch type: {gofmt.value(directive)} in map: {gofmt.value(patch)}", 400)


def _apply_retain_keys(original: dict, patch: dict) -> None:
    """`$retainKeys` lists the keys that survive; every key the patch sets must be among them."""
    if RETAIN_KEYS not in patch:
        return
    retain = patch.pop(RETAIN_KEYS)
    if not isinstance(retain, list):
        raise PatchError(ERR_RETAIN_KEYS, 400)
    keep = {k for k in retain if isinstance(k, str)}
    for key, value in patch.items():
        if value is None or key.startswith((DELETE_FROM_PRIMITIVE_LIST, SET_ELEMENT_ORDER)):
            continue
        if key not in keep:
            raise PatchError(ERR_RETAIN_KEYS, 400)
    for key in [k for k in original if k not in keep]:
        del original[key]


def _merge_ordered_lists(original: dict, patch: dict, schema: dict | None) -> None:
    """Merge each list that has a `$setElementOrder/<field>`, then order it: the
    directive's order first, the live order for server-only items."""
    for directive_key in [k for k in patch if k.startswith(SET_ELEMENT_ORDER)]:
        order = patch.pop(directive_key)
        if not isinstance(order, list):
            raise PatchError(_bad_arg_type(_LIST, order), 400)
        key = _strip_prefix(directive_key, SET_ELEMENT_ORDER, ERR_SET_ELEMENT_ORDER)
        in_original, in_patch = key in original, key in patch
        live = original.get(key) if in_original else []
        patched = patch.get(key) if in_patch else []
        for value in (live, patched):
            if not isinstance(value, list):
                raise PatchError(_bad_arg_type(_LIST, value), 400)
        sub = _subschema(schema, key)
        _, _, _, merge_key = schemas.list_semantics(sub)
        merge_key = merge_key or ""
        _validate_against_order(patched, order, merge_key)
        if in_original and in_patch:
            merged = _merge_list_field(live, patched, sub, False)
        elif in_patch:
            merged, _ = _clean(patched, drop_nulls=False)
        elif in_original:
            merged = live
        else:
            continue
        if merge_key:
            in_order, server_only = _partition_maps(merged, order, merge_key)
        else:
            in_order, server_only = _partition_scalars(merged, order)
        kind = _element_type(live, patched)
        original[key] = _normalize_order(in_order, server_only, order, live, merge_key, kind)
        patch.pop(key, None)


def _validate_against_order(patched: list, order: list, merge_key: str) -> None:
    """The patch's own items (deletions aside) must appear in the order list, in that order."""
    if not order or not patched:
        return
    items = _split_deletions(patched)[0] if merge_key else patched
    p = o = 0
    while p < len(items) and o < len(order):
        if isinstance(items[p], dict) and DIRECTIVE in items[p]:
            p += 1
            continue
        if _merge_key_equal(items[p], order[o], merge_key):
            p += 1
        o += 1
    if p < len(items):
        raise PatchError(
            f"the order in patch list:\n{gofmt.value(patched)}\n doesn't match {SET_ELEMENT_ORDER} list:\n{gofmt.value(order)}",
            400,
        )


def _merge_key_equal(left: Any, right: Any, merge_key: str) -> bool:
    if not merge_key:
        return _is(left, right)
    for item in (left, right):
        if not isinstance(item, dict):
            raise PatchError(_bad_arg_type(_MAP, item), 400)
        if merge_key not in item:
            raise PatchError(_no_merge_key(item, merge_key), 400)
    return _is(left[merge_key], right[merge_key])


# --- lists --------------------------------------------------------------------------------------


def _merge_list_field(current: list, value: list, prop: dict | None, is_delete_list: bool) -> list:
    """Lists merge when their strategy says so (deletion lists always); otherwise the patch replaces them."""
    _, _, _, merge_key = schemas.list_semantics(prop)
    if _strategy(prop) == MERGE or is_delete_list:
        return _merge_list(current, value, schemas.items(prop), merge_key or "", is_delete_list)
    return value


def _merge_list(original: list, patch: list, elem: dict | None, merge_key: str, is_delete_list: bool) -> list:
    if not original and not patch:
        return original
    kind = _element_type(original, patch)
    if kind is not dict:
        if is_delete_list:
            gone = {(type(v), v) for v in patch if _hashable(v)}
            return [v for v in original if not ((type(v), v) in gone if _hashable(v) else _contains(patch, v))]
        merged = _dedupe(original + patch)
    else:
        if not merge_key:
            raise PatchError("cannot merge lists without merge key for struct", 400)
        original, patch = _apply_element_directives(original, patch, merge_key)
        merged = _merge_by_key(original, patch, merge_key, elem)
    if merge_key:
        in_patch, server_only = _partition_maps(merged, patch, merge_key)
    else:
        in_patch, server_only = _partition_scalars(merged, patch)
    return _normalize_order(in_patch, server_only, patch, original, merge_key, kind)


def _apply_element_directives(original: list, patch: list, merge_key: str) -> tuple[list, list]:
    """Handle `$patch` elements: `delete` drops live items by key, `replace` makes the
    rest of the patch the whole list. Returns (live items, plain patch items)."""
    plain = []
    replace = False
    gone: set = set()  # the deleted keys, (type, value), dropped from the live items in one pass
    gone_other: list = []  # (keys no set holds)
    for item in patch:
        if DIRECTIVE not in item:
            plain.append(item)
            continue
        directive = item[DIRECTIVE]
        if _is(directive, DELETE):
            if merge_key not in item:
                raise PatchError(_no_merge_key(item, merge_key), 400)
            key = item[merge_key]
            if _hashable(key):
                gone.add((type(key), key))
            else:
                gone_other.append(key)
        elif _is(directive, REPLACE):
            replace = True
        elif _is(directive, MERGE):
            raise PatchError("merging lists cannot yet be specified in the patch", 400)
        else:
            raise PatchError(f"unknown patch type: {gofmt.value(directive)} in map: {gofmt.value(item)}", 400)
    if replace:
        return plain, []
    if gone or gone_other:
        original = [v for v in original if not (merge_key in v and (
            (type(v[merge_key]), v[merge_key]) in gone if _hashable(v[merge_key]) else _contains(gone_other, v[merge_key])))]
    return original, plain


def _merge_by_key(original: list, patch: list, merge_key: str, elem: dict | None) -> list:
    """Upstream's mergeSliceWithoutSpecialElements: each patch item merges into the first item of its key,
    appended ones included, or is appended. Found through an index of the (type, value) keys (a scan per
    item made 50,000 containers a minutes-long merge); a key no dict can hold, or a list holding more than
    dicts (whose errors come from the scan), is scanned for as upstream does."""
    merged = list(original)
    index: dict | None = None
    if all(type(v) is dict for v in merged) and all(type(v) is dict for v in patch):
        index = {}
        for i, v in enumerate(merged):
            if merge_key in v and _hashable(v[merge_key]):
                index.setdefault((type(v[merge_key]), v[merge_key]), i)
    for item in patch:
        if merge_key not in item:
            raise PatchError(_no_merge_key(item, merge_key), 400)
        value = item[merge_key]
        key = (type(value), value) if index is not None and _hashable(value) else None
        idx = index.get(key) if key is not None else _find_by_key(merged, merge_key, value)
        if idx is None:
            if key is not None:
                index[key] = len(merged)
            merged.append(item)
        else:
            merged[idx] = _merge_map(merged[idx], item, elem)
    return merged


def _hashable(value: Any) -> bool:
    return not isinstance(value, (dict, list))


def _find_by_key(items: list, merge_key: str, value: Any) -> int | None:
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise PatchError(f"value for key {i} is not a map", 400)
        if merge_key in item and _is(item[merge_key], value):
            return i
    return None


def _partition_maps(items: list, by: list, merge_key: str) -> tuple[list, list]:
    present, absent = [], []
    keys = {(type(v[merge_key]), v[merge_key]) for v in by if merge_key in v and _hashable(v[merge_key])} \
        if all(type(v) is dict for v in by) else None  # (else scanned, for the scan's error)
    for item in items:
        if not isinstance(item, dict):
            raise PatchError(_bad_arg_type(_MAP, item), 400)
        if merge_key not in item:
            raise PatchError(_no_merge_key(item, merge_key), 400)
        value = item[merge_key]
        found = (type(value), value) in keys if keys is not None and _hashable(value) else \
            _find_by_key(by, merge_key, value) is not None
        (present if found else absent).append(item)
    return present, absent


def _partition_scalars(items: list, by: list) -> tuple[list, list]:
    present, absent = [], []
    keys = {(type(v), v) for v in by if _hashable(v)}
    for item in items:
        found = (type(item), item) in keys if _hashable(item) else _contains(by, item)
        (present if found else absent).append(item)
    return present, absent


def _normalize_order(
    patch_items: list, server_only: list, patch_order: list, server_order: list, merge_key: str, kind: type
) -> list:
    """Patch items in patch order, server-only items in live order, then interleave
    them so server-only items keep their place relative to live neighbours."""
    patch_items = _sort_by(patch_items, patch_order, merge_key, kind)
    server_only = _sort_by(server_only, server_order, merge_key, kind)
    out = []
    i = j = 0
    live_index = _indexer(server_order, merge_key, kind)
    while i < len(server_only) and j < len(patch_items):
        li = live_index(server_only[i])
        ri = live_index(patch_items[j])
        if li >= 0 and ri >= 0 and li < ri:
            out.append(server_only[i])
            i += 1
        else:
            out.append(patch_items[j])
            j += 1
    return out + server_only[i:] + patch_items[j:]


def _sort_by(items: list, order: list, merge_key: str, kind: type) -> list:
    """Stable sort by position in `order`; map items marked `$patch: delete` go last."""
    deletions: list = []
    if kind is dict:
        for item in items + order:
            if not isinstance(item, dict):
                raise PatchError(_bad_arg_type(_MAP, item), 400)
            if merge_key not in item:
                raise PatchError(_no_merge_key(item, merge_key), 400)
        items, deletions = _split_deletions(items)

    index = _indexer(order, merge_key, kind)

    def position(item: Any) -> int:
        idx = index(item)
        return idx if idx >= 0 else len(order)

    return sorted(items, key=position) + deletions


def _split_deletions(items: list) -> tuple[list, list]:
    keep, deletions = [], []
    for item in items:
        if not isinstance(item, dict):
            raise PatchError(_bad_arg_type(_MAP, item), 400)
        (deletions if _is(item.get(DIRECTIVE), DELETE) else keep).append(item)
    return keep, deletions


def _indexer(items: list, merge_key: str, kind: type) -> Callable[[Any], int]:
    """`value` -> the first position in `items` of an equal key (`_is`), or -1. The positions of
    hashable keys are read once, so ordering a merged list is not a scan per lookup."""
    def key_of(item: Any) -> Any:
        if kind is dict:
            return item.get(merge_key) if isinstance(item, dict) else None
        return item

    keys = [key_of(item) for item in items]
    first: dict[tuple[type, Any], int] = {}
    try:
        for i, k in enumerate(keys):
            first.setdefault((type(k), k), i)
    except TypeError:  # a key that is a map or a list: scan with `_is`
        first = None

    def index(value: Any) -> int:
        wanted = key_of(value)
        if first is not None:
            try:
                return first.get((type(wanted), wanted), -1)
            except TypeError:
                return -1  # every key in `items` is hashable, so none equals this one
        for i, k in enumerate(keys):
            if _is(k, wanted):
                return i
        return -1

    return index


def _element_type(*lists: list) -> type:
    """The one type shared by all elements; lists of lists and mixed lists are errors."""
    found: type | None = None
    for items in lists:
        for item in items:
            if found is None:
                found = type(item)
                if found is list:
                    raise PatchError(ERR_LIST_OF_LISTS, 422)
            elif type(item) is not found:
                raise PatchError(f"list element types are not identical: {gofmt.value(list(lists))}", 400)
    if found is None:
        raise PatchError("no elements in any of the given slices", 400)
    return found


# --- schema -------------------------------------------------------------------------------------


def _subschema(schema: dict | None, key: str) -> dict | None:
    """The (unresolved) schema of field `key`, or of a map's values; None when unknown."""
    return schemas.field(schema, key) or schemas.additional(schema)


def _strategy(prop: dict | None) -> str:
    """The field's patch strategy with `retainKeys` split off (it only shapes client-side diffs)."""
    _, _, raw, _ = schemas.list_semantics(prop)
    strategies = [s for s in (raw or "").split(",") if s]
    rest = [s for s in strategies if s != "retainKeys"]
    if len(strategies) > 2 or len(rest) > 1:
        raise PatchError(f"unexpected patch strategy: {gofmt.value(strategies)}", 400)
    return rest[0] if rest else ""


# --- values -------------------------------------------------------------------------------------


def _set_clean(target: dict, key: str, value: Any) -> None:
    """Store a patch value that has nothing to merge with, minus its nulls and directives."""
    cleaned, keep = _clean(value)
    if keep:
        target[key] = cleaned
    else:
        target.pop(key, None)


def _clean(value: Any, drop_nulls: bool = True) -> tuple[Any, bool]:
    """(value without `$patch` maps, whether to keep it): a map carrying `$patch` vanishes. With
    `drop_nulls` its null map entries go too, in the same pass, and a map whose `$patch` is null
    keeps its other entries."""
    if isinstance(value, dict):
        if (value.get(DIRECTIVE) is not None) if drop_nulls else (DIRECTIVE in value):
            return None, False
        out = {}
        for k, v in value.items():
            if v is None and drop_nulls:
                continue
            if isinstance(v, _NESTED):  # a scalar is kept as it is: no call for it (most of a status)
                v, keep = _clean(v, drop_nulls)
                if not keep:
                    continue
            out[k] = v
        return out, True
    if isinstance(value, list):
        out = []
        for v in value:
            if isinstance(v, _NESTED):
                v, keep = _clean(v, drop_nulls)
                if not keep:
                    continue
            out.append(v)
        return out, True
    return value, True


_NESTED = (dict, list)


def _strip_prefix(key: str, prefix: str, error: str) -> str:
    head, sep, rest = key.partition("/")
    if not sep or head != prefix:
        raise PatchError(error, 400)
    return rest


def _is(a: Any, b: Any) -> bool:
    """Go's == on decoded JSON scalars: equal value and equal type (no bool/int/float mixing)."""
    return type(a) is type(b) and a == b


def _contains(items: list, value: Any) -> bool:
    return any(_is(v, value) for v in items)


def _dedupe(items: list) -> list:
    """The first of each value (Go's ==), kept in order."""
    out: list = []
    seen: set = set()
    for item in items:
        if _hashable(item):
            if (type(item), item) in seen:
                continue
            seen.add((type(item), item))
        elif _contains(out, item):
            continue
        out.append(item)
    return out


def _no_merge_key(item: dict, merge_key: str) -> str:
    return f"map: {gofmt.value(item)} does not contain declared merge key: {merge_key}"


def _bad_arg_type(expected: str, actual: Any) -> str:
    return f"expected a {expected}, but received a {_go_type_name(actual)}"


def _go_type_name(value: Any) -> str:
    if value is None:
        return "<nil>"
    return {dict: _MAP, list: _LIST, str: "string", bool: "bool", int: "int64", float: "float64"}.get(
        type(value), "<nil>"
    )


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", list: "array"}.get(type(value), "object")


