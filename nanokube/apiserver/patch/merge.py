"""RFC 7386 JSON merge patch (application/merge-patch+json), as kube-apiserver applies it.

Upstream uses evanphx/json-patch v4 `MergePatch`, which has two details beyond
the RFC that are kept here: a key whose current value is null is treated as
absent, and nulls are pruned recursively from any value that is inserted
rather than merged (including from objects nested in arrays, and null array
elements themselves).
"""

from __future__ import annotations

from typing import Any

from . import PatchError, copy_to_patch, json_copy

BAD_PATCH = "Invalid JSON Patch"


def apply(doc: dict, patch: dict, handed: bool = False) -> dict:
    """Merge `patch` into a copy of `doc`; a non-object patch is rejected with 400. `handed`: the
    caller gives `patch` up (a fresh decode nothing else reads), so it is not copied first."""
    if not isinstance(patch, dict):
        raise PatchError(BAD_PATCH, 400)
    result = copy_to_patch(doc)  # a merge patch replaces lists whole: the shared managedFields stay as they are
    _merge_into(result, patch if handed else json_copy(patch))
    return result


def _merge_into(doc: dict, patch: dict) -> None:
    for key, value in patch.items():
        if value is None:
            doc.pop(key, None)
        elif doc.get(key) is None:
            doc[key] = _prune_nulls(value)
        else:
            doc[key] = _merge_value(doc[key], value)


def _merge_value(cur: Any, patch: Any) -> Any:
    if not isinstance(cur, dict):
        return _prune_nulls(patch)
    if not isinstance(patch, dict):
        return patch
    _merge_into(cur, patch)
    return cur


def _prune_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _prune_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_prune_nulls(v) for v in value if v is not None]
    return value
