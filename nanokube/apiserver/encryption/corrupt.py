"""Upstream's answers for objects whose stored values do not transform (KEP-3926's corrupt objects):
a get's InternalError naming the key, a list's aggregated error, which is no API status of its own
(a 500 without a reason)."""

from __future__ import annotations

from ...machinery import errors


def corrupt_object(key: str) -> str:
    """storage.NewCorruptObjError's text for a value that does not transform."""
    return (f"StorageError: corrupt object, Code: 7, Key: {key}, ResourceVersion: 0, "
            f"AdditionalErrorMsg: data from the storage is not transformable")


def unreadable_error(keys: list[str]) -> errors.APIError:
    if len(keys) == 1:
        return errors.internal(corrupt_object(keys[0]))
    lines = "".join(f"\t{corrupt_object(k)}\n" for k in keys)
    return errors.APIError(500, "", f"unable to transform or decode {len(keys)} objects: {{\n{lines}}}")
