"""The Kubernetes jsonpatch library: `jsonpatch.escapeKey`, for JSONPatch paths built from keys
holding '/' or '~'. Only admission's environments declare it: upstream adds library.JSONPatch()
there, beside the resolver of the Object and JSONPatch types, and nowhere else (a CRD rule calling
it is an undeclared reference)."""

from __future__ import annotations

from ..types import STRING
from .overload import Overload


def escape_key(key: str) -> str:
    """RFC 6901's escaping of a reference token: '~' first, so that the '~1' of a '/' stays as it is."""
    return key.replace("~", "~0").replace("/", "~1")


OVERLOADS = [Overload("jsonpatch.escapeKey", (STRING,), STRING, impl=escape_key, admission=True)]
