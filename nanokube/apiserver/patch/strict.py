"""Strict decoding of patch bodies: the keys a patch repeats and the fields a json patch op does not
know, which upstream's patchers report as warnings (fieldValidation=Warn) or errors (Strict). Shared by
the handlers' patch of a resource and the subresources' patches (/scale, /status)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import orjson

from ...machinery import errors
from .. import serializer, warning
from ..options import APPLY_PATCH
from . import status as status_patch

if TYPE_CHECKING:
    from ..rest import WriteOptions


async def patch_duplicates(raw: bytes, ctype: str, opts: WriteOptions) -> list[str]:
    """A merge, strategic-merge or apply patch that repeats a key, a json patch with an op field
    it does not know or repeats: upstream's strict decoding of the patch reports it, a warning
    under Warn; under Strict an apply patch's is a 400 at once (the applyPatcher's "error strict
    decoding YAML"), the others' strict errors of the result (rest.patch's 422, with its unknown
    fields, once the object is found and the patch applies)."""
    if opts.field_validation == "Ignore":
        return []
    if ctype == "application/json-patch+json":
        texts = await serializer.off_loop(json_patch_strict_errors, raw)
    elif ctype == APPLY_PATCH:  # yaml.UnmarshalStrict of the patch, JSON or YAML: go-yaml's error of them all
        found = await serializer.off_loop(serializer.yaml_duplicates, raw)
        texts = ["error converting YAML to JSON: yaml: unmarshal errors:" + "".join(f"\n  {t}" for t in found)] \
            if found else []
        if texts and opts.field_validation == "Strict":
            raise errors.bad_request("error strict decoding YAML: " + texts[0])
    elif status_patch.seen(ctype, raw):  # a remembered status patch: remembered only if it repeats no key
        return []
    else:
        texts = await serializer.off_loop(serializer.duplicates, raw, False)
    if texts and opts.field_validation == "Strict":
        return texts
    texts = warning.strict_decoding(texts)
    warning.record(texts)
    return texts


#: jsonPatchOp's fields, which the json patcher's strict decoding of the ops knows
JSON_PATCH_OP_FIELDS = frozenset(("op", "path", "from", "value"))


def json_patch_strict_errors(raw: bytes) -> list[str]:
    """kjson.UnmarshalStrict of a json patch into []jsonPatchOp (applyJSPatch), op by op: the
    fields an op has that jsonPatchOp lacks, then the keys it repeats (its value's included), each
    `json patch unknown field "[0].foo"` / `json patch duplicate field "[1].path"`; [] when the
    body does not decode as a list (the patch's decoding reports that)."""
    try:
        ops = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return []
    if type(ops) is not list:
        return []
    repeated: dict[int, list[str]] = {}
    for text in serializer.duplicates(raw, False, ops):  # 'duplicate field "[1].path"'
        repeated.setdefault(int(text.split("[", 1)[1].split("]", 1)[0]), []).append(text)
    texts: list[str] = []
    for i, op in enumerate(ops):
        if type(op) is dict:
            texts += [f'unknown field "[{i}].{k}"' for k in op if k not in JSON_PATCH_OP_FIELDS]
        texts += sorted(repeated.get(i, ()))
    return ["json patch " + t for t in texts]
