"""PATCH mechanics: JSON patch, JSON merge patch, strategic merge patch and server-side apply.

Every patch function is pure: it returns a new document and raises `PatchError`
when the patch is malformed or cannot be applied. The error carries what
kube-apiserver answers with for that failure, so the HTTP layer only renders it.
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar

import orjson

_REJECTED = "the server rejected our request due to an error in our request"


class PatchError(Exception):
    """A patch that is malformed or does not apply.

    `str(err)` is the patch library's own message. `code`, `reason`,
    `status_message` and `details` are the meta/v1 Status fields upstream
    returns: 400 BadRequest for undecodable patches, 413 for oversized JSON
    patches, 422 for JSON patch operations that fail and for strategic-merge
    lists of lists (upstream's NewGenericServerResponse, not an unexpected
    response: a generic "rejected" message and empty details, the library's
    message dropped, so kubectl prints "The request is invalid: the server
    rejected our request due to an error in our request"), 400 for every
    other strategic-merge error (upstream passes those through as a 500; a
    patch is the client's error).
    """

    _REASONS: ClassVar[dict[int, str]] = {400: "BadRequest", 413: "RequestEntityTooLarge", 422: "Invalid"}

    def __init__(self, message: str, code: int = 400):
        super().__init__(message)
        self.code = code
        self.reason = self._REASONS[code]
        self.details: dict[str, Any] | None = None
        self.status_message = message
        if code == 422:
            self.status_message = _REJECTED
            self.details = {}


def copy_to_patch(doc: Any) -> Any:
    """A deep copy of an object about to be patched that shares its managedFields with `doc`:
    often a third of a stored object, they are only read by the write that follows, so a
    patch that does not name them leaves them as they are."""
    md = doc.get("metadata") if type(doc) is dict else None
    managed = md.get("managedFields") if type(md) is dict else None
    if not managed:
        return json_copy(doc)
    out = json_copy({**doc, "metadata": {**md, "managedFields": None}})  # the key keeps its place
    out["metadata"]["managedFields"] = managed
    return out


def json_copy(v: Any) -> Any:
    """A deep copy of a JSON tree through orjson (a C round trip, many times
    faster than copy.deepcopy); anything orjson cannot encode is deep-copied."""
    try:
        return orjson.loads(orjson.dumps(v))
    except TypeError:
        return copy.deepcopy(v)
