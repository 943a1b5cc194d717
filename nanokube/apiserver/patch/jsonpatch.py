"""RFC 6902 JSON patch (application/json-patch+json), as kube-apiserver applies it.

Upstream applies these with evanphx/json-patch v4, whose behaviour differs from
the RFC in ways clients can observe, so it is mirrored here rather than taken
from a generic library: `replace` on a missing object member adds it, negative
array indices count from the end, `copy` from a missing member inserts null, a
`test` for null also matches a missing member, and every error message is the
library's own. Operation failures are 422; an undecodable patch is 400; more
than 10000 operations is 413.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from . import PatchError, json_copy

MAX_OPERATIONS = 10000
#: bytes a patch's copies may add in all (kube-apiserver's JSONPatchMaxCopyBytes, the library's AccumulatedCopySizeLimit)
MAX_COPY_BYTES = 3 * 1024 * 1024
_MISSING = "missing value"
_BAD_INDEX = "invalid index referenced"
_INT = re.compile(r"[+-]?[0-9]+")
_GO_INT_MAX = 2**63 - 1


class _OpError(Exception):
    """An operation failure, carrying upstream's message; becomes a 422 PatchError."""


def apply(doc: dict, patch: list) -> dict:
    """Apply the operations of `patch` in order to a copy of `doc`."""
    if patch is None:
        return json_copy(doc)
    if not isinstance(patch, list):
        raise PatchError(f"json: cannot unmarshal {_go_type(patch)} into Go value of type jsonpatch.Patch", 400)
    for op in patch:
        if op is not None and not isinstance(op, dict):
            raise PatchError(f"json: cannot unmarshal {_go_type(op)} into Go value of type jsonpatch.Operation", 400)
    if len(patch) > MAX_OPERATIONS:
        raise PatchError(f"The allowed maximum operations in a JSON patch is {MAX_OPERATIONS}, got {len(patch)}", 413)
    root: Any = json_copy(doc)
    copied = [0]  # bytes the copies so far added
    try:
        for op in patch:
            root = _copy(root, op, copied) if (op or {}).get("op") == "copy" else _apply_op(root, op or {})
    except _OpError as e:
        raise PatchError(str(e), 422) from None
    return root


def _apply_op(root: Any, op: dict) -> Any:
    kind = op.get("op")
    handler = _OPS.get(kind) if isinstance(kind, str) else None
    if handler is None:
        raise _OpError(f"Unexpected kind: {kind if isinstance(kind, str) else 'unknown'}")
    return handler(root, op)


def _add(root: Any, op: dict) -> Any:
    path, err = _pointer(op, "path")
    if err:
        raise _OpError(f"add operation failed to decode path: {_MISSING}")
    con, key = _find(root, path)
    if con is None:
        raise _OpError(f'add operation does not apply: doc is missing path: "{path}": {_MISSING}')
    try:
        _insert(con, key, json_copy(op.get("value")))
    except _OpError as e:
        raise _OpError(f"error in add for path: '{path}': {e}") from None
    return root


def _remove(root: Any, op: dict) -> Any:
    path, err = _pointer(op, "path")
    if err:
        raise _OpError(f"remove operation failed to decode path: {_MISSING}")
    con, key = _find(root, path)
    if con is None:
        raise _OpError(f'remove operation does not apply: doc is missing path: "{path}": {_MISSING}')
    try:
        _delete(con, key)
    except _OpError as e:
        raise _OpError(f"error in remove for path: '{path}': {e}") from None
    return root


def _replace(root: Any, op: dict) -> Any:
    path, err = _pointer(op, "path")
    if err:
        raise _OpError(f"replace operation failed to decode path: {err}")
    value = json_copy(op.get("value"))
    if path == "":
        if not isinstance(value, (dict, list)):
            raise _OpError("replace operation value must be object or array: %!w(<nil>)")
        return value
    con, key = _find(root, path)
    if con is None:
        raise _OpError(f"replace operation does not apply: doc is missing path: {path}: {_MISSING}")
    if isinstance(con, dict):
        con[key] = value
        return root
    try:
        idx = _existing_index(con, key)
    except _OpError:
        raise _OpError(f"replace operation does not apply: doc is missing key: {path}: {_MISSING}") from None
    con[idx] = value
    return root


def _move(root: Any, op: dict) -> Any:
    src, err = _pointer(op, "from")
    if err:
        raise _OpError(f"move operation failed to decode from: {err}")
    con, key = _find(root, src)
    if con is None:
        raise _OpError(f"move operation does not apply: doc is missing from path: {src}: {_MISSING}")
    try:
        value = _get(con, key)
        _delete(con, key)
    except _OpError as e:
        raise _OpError(f"error in move for path: '{key}': {e}") from None
    path, err = _pointer(op, "path")
    if err:
        raise _OpError(f"move operation failed to decode path: {err}")
    con, key = _find(root, path)
    if con is None:
        raise _OpError(f"move operation does not apply: doc is missing destination path: {path}: {_MISSING}")
    try:
        _insert(con, key, value)
    except _OpError as e:
        raise _OpError(f"error in move for path: '{path}': {e}") from None
    return root


def _copy(root: Any, op: dict, copied: list[int]) -> Any:
    src, err = _pointer(op, "from")
    if err:
        raise _OpError(f"copy operation failed to decode from: {err}")
    con, key = _find(root, src)
    if con is None:
        raise _OpError(f"copy operation does not apply: doc is missing from path: {src}: {_MISSING}")
    try:
        value = json_copy(_get(con, key))
    except _OpError as e:
        raise _OpError(f"error in copy for from: '{src}': {e}") from None
    path, err = _pointer(op, "path")
    if err:
        raise _OpError(f"copy operation failed to decode path: {_MISSING}")
    con, key = _find(root, path)
    if con is None:
        raise _OpError(f"copy operation does not apply: doc is missing destination path: {path}: {_MISSING}")
    copied[0] += len(orjson.dumps(value))
    if copied[0] > MAX_COPY_BYTES:  # each copy may double the document: 26 of them were 2^26 times its size
        raise _OpError(f"Unable to complete the copy, the accumulated size increase of copy is {copied[0]}, "
                       f"exceeding the limit {MAX_COPY_BYTES}")
    try:
        _insert(con, key, value)
    except _OpError as e:
        raise _OpError(f"error while adding value during copy: {e}") from None
    return root


def _test(root: Any, op: dict) -> Any:
    path, err = _pointer(op, "path")
    if err:
        raise _OpError(f"test operation failed to decode path: {err}")
    failed = _OpError(f"testing value {path} failed: test failed")
    if path == "":
        if not _equal(root, op.get("value")):
            raise failed
        return root
    con, key = _find(root, path)
    if con is None:
        raise _OpError(f"test operation does not apply: is missing path: {path}: {_MISSING}")
    try:
        current = _get(con, key)
    except _OpError as e:
        raise _OpError(f"error in test for path: '{path}': {e}") from None
    if current is None:
        if op.get("value") is not None:
            raise failed
    elif "value" not in op or not _equal(current, op["value"]):
        raise failed
    return root


_OPS = {"add": _add, "remove": _remove, "replace": _replace, "move": _move, "test": _test}


def _pointer(op: dict, name: str) -> tuple[str, str]:
    """(pointer, decode error) of the `path` or `from` member, worded as upstream does."""
    value = op.get(name)
    if value is None:
        missing = "operation missing path field" if name == "path" else "operation, missing from field"
        return "", f"{missing}: {_MISSING}"
    if not isinstance(value, str):
        return "", f"json: cannot unmarshal {_go_type(value)} into Go value of type string"
    return value, ""


def _find(root: Any, path: str) -> tuple[Any, str]:
    """The container holding the pointer's last token, and that token; (None, "") if unreachable.

    Like upstream, the text before the first "/" is ignored and a null or
    scalar on the way makes the path missing.
    """
    tokens = path.split("/")
    if len(tokens) < 2:
        return None, ""
    node = root
    for token in tokens[1:-1]:
        try:
            node = _get(node, _unescape(token))
        except _OpError:
            return None, ""
        if not isinstance(node, (dict, list)):
            return None, ""
    return node, _unescape(tokens[-1])


def _unescape(token: str) -> str:
    return re.sub(r"~[01]", lambda m: "/" if m.group() == "~1" else "~", token)


def _get(con: Any, key: str) -> Any:
    if isinstance(con, dict):
        return con.get(key)
    return con[_existing_index(con, key)]


def _insert(con: Any, key: str, value: Any) -> None:
    if isinstance(con, dict):
        con[key] = value
        return
    if key == "-":
        con.append(value)
        return
    try:
        idx = _atoi(key)
    except _OpError as e:
        raise _OpError(f"value was not a proper array index: '{key}': {e}") from None
    size = len(con) + 1
    if idx >= size or idx < -size:
        raise _OpError(f"Unable to access invalid index: {idx}: {_BAD_INDEX}")
    con.insert(idx + size if idx < 0 else idx, value)


def _delete(con: Any, key: str) -> None:
    if isinstance(con, dict):
        if key not in con:
            raise _OpError(f"Unable to remove nonexistent key: {key}: {_MISSING}")
        del con[key]
        return
    del con[_existing_index(con, key)]


def _existing_index(con: list, key: str) -> int:
    idx = _atoi(key)
    if idx < -len(con):
        raise _OpError(f"Unable to access invalid index: {idx}: {_BAD_INDEX}")
    if idx < 0:
        idx += len(con)
    if idx >= len(con):
        raise _OpError(f"Unable to access invalid index: {idx}: {_BAD_INDEX}")
    return idx


def _atoi(key: str) -> int:
    """Go's strconv.Atoi, including its error text."""
    if not _INT.fullmatch(key):
        raise _OpError(f'strconv.Atoi: parsing "{key}": invalid syntax')
    idx = int(key)
    if not -_GO_INT_MAX - 1 <= idx <= _GO_INT_MAX:
        raise _OpError(f'strconv.Atoi: parsing "{key}": value out of range')
    return idx


def _equal(a: Any, b: Any) -> bool:
    """JSON equality without Python's bool/int/float coercions (upstream compares encodings)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def _go_type(value: Any) -> str:
    """How Go's encoding/json names a JSON value's type in its errors."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"
