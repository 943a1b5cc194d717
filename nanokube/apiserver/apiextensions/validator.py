"""Validation of a custom object against its version's OpenAPI v3 schema.

The checks and their words are kube-openapi's (`pkg/validation/validate`), as the
apiextensions-apiserver maps them to field errors
(`apiserver/validation/validation.go`): a missing required property is
`Required value`, an enum miss `Unsupported value`, `maxLength` `Too long`,
`maxItems`/`maxProperties` `Too many`, a wrong type `Invalid value: "string":
spec.x in body must be of type integer: "string"`, and every other keyword an
`Invalid value` with kube-openapi's sentence (`spec.x in body should be greater
than or equal to 1`). Paths read `spec.a[0].b`.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import json
import math
import re
import struct
import uuid
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Callable

from ...machinery import gofmt, regex
from ...machinery.validation import (
    FieldError,
    group_version_error,
    invalid,
    mixed_case_label,
    not_supported,
    path_segment_name,
    required,
    too_long,
    too_many,
    validate_object_meta,
)

_TYPE_NAMES = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object"}


@dataclass(slots=True)
class JunctorError(FieldError):
    """An error kube-openapi raises as no Validation (an anyOf/oneOf/allOf/not's, a number past its format's
    range): it stands at the root, as upstream prints it, but the node at `node` raised it, and that node's
    value is what ratcheting judges unchanged or not."""
    node: str = ""


def _json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, float) and v.is_integer():
        return "integer"
    return _TYPE_NAMES.get(type(v), "object")


def _type_ok(t: str, v: Any) -> bool:
    if t == "object":
        return isinstance(v, dict)
    if t == "array":
        return isinstance(v, list)
    if t == "string":
        return isinstance(v, str)
    if t == "boolean":
        return isinstance(v, bool)
    if t == "integer":
        return (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer())
    if t == "number":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    return True


def _bound(bound: float | int, v: float | int) -> float | int:
    """MaximumNativeType / MinimumNativeType: an integer is held to the bound cut to an int64, a
    float to the float64 bound."""
    return float(bound) if isinstance(v, float) else int(bound)


def _printed(bound: float | int) -> str:
    """A bound as kube-openapi's %v prints the int64 or float64 it compared with."""
    return gofmt.format_float(bound) if isinstance(bound, float) else str(bound)


def _date_time(s: str) -> bool:
    try:
        datetime.fromisoformat(s.replace("Z", "+00:00").replace("z", "+00:00"))
        return "T" in s or "t" in s or " " in s
    except ValueError:
        return False


def _is_date(s: str) -> bool:
    try:
        date.fromisoformat(s)
        return len(s) == 10
    except ValueError:
        return False


def _is_ip(s: str, version: int) -> bool:
    try:
        return ipaddress.ip_address(s).version == version
    except ValueError:
        return False


def _is_cidr(s: str) -> bool:
    try:
        ipaddress.ip_network(s, strict=False)
        return "/" in s
    except ValueError:
        return False


def _is_uuid(s: str) -> bool:
    try:
        uuid.UUID(s)
        return len(s) == 36
    except ValueError:
        return False


def _is_byte(s: str) -> bool:
    try:
        base64.b64decode(s, validate=True)
        return True
    except (binascii.Error, ValueError):
        return False


_HOSTNAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?)*\Z")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\Z")
_MAC = re.compile(r"^([0-9A-Fa-f]{2}[:-]){5}[0-9A-Fa-f]{2}\Z")
_DURATION = re.compile(r"^[-+]?(\d+(\.\d*)?(ns|us|µs|ms|s|m|h))+\Z|^0\Z")
#: string formats kube-openapi's strfmt registry checks (others are accepted as any string)
FORMATS: dict[str, Callable[[str], bool]] = {
    "date-time": _date_time,
    "datetime": _date_time,
    "date": _is_date,
    "ipv4": lambda s: _is_ip(s, 4),
    "ipv6": lambda s: _is_ip(s, 6),
    "cidr": _is_cidr,
    "uuid": _is_uuid,
    "byte": _is_byte,
    "hostname": lambda s: bool(_HOSTNAME.match(s)),
    "email": lambda s: bool(_EMAIL.match(s)),
    "mac": lambda s: bool(_MAC.match(s)),
    "duration": lambda s: bool(_DURATION.match(s)),
}


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def validate(obj: Any, node: dict[str, Any] | None, path: str = "", root: str = "<nil>") -> list[FieldError]:
    """The schema's errors for obj. `root` is the field path ValidateCustomResource was given (none for
    a custom object, printed <nil>): the junctors' errors stand there, as errors without a field name.
    kube-openapi's errors come first, then the embedded resources' (objectmeta.Validate) and then the
    list-type duplicates' (ValidateListSetsAndMaps), as the custom resource strategy runs those passes."""
    errs, later = validate_passes(obj, node, path, root)
    return errs + later


def validate_passes(obj: Any, node: dict[str, Any] | None, path: str = "",
                    root: str = "<nil>") -> tuple[list[FieldError], list[FieldError]]:
    """validate's errors in two: kube-openapi's, and the later passes' (embedded resources', list
    types'), between which the custom resource validator puts the scale subresource's."""
    errs: list[FieldError] = []
    later: tuple[list[FieldError], list[FieldError]] = ([], [])
    if isinstance(node, dict):
        _validate(obj, node, path, errs, root, later)
    return errs, later[0] + later[1]


def validate_default(value: Any, node: dict[str, Any], path: str) -> list[FieldError]:
    """validateStructuralDefaults' checks of a default at `path`: its embedded resources' (objectmeta's
    Coerce and Validate), or, when those pass, the schema's (ValidateCustomResource at the default's
    path, where its junctors' errors stand too); no list-type pass."""
    errs: list[FieldError] = []
    later: tuple[list[FieldError], list[FieldError]] = ([], [])
    _validate(value, node, path, errs, path, later)
    return later[0] or errs


def _validate(v: Any, node: dict[str, Any], path: str, errs: list[FieldError], root: str,
              later: tuple[list[FieldError], list[FieldError]] | None) -> int:
    """SchemaValidator.Validate: its validators in their order (type, the junctors, string, format,
    number, array, enum, object), each run where it applies to the value's kind, a wrong type
    included; returns its MatchCount (one per validator applied, one per check that counts itself,
    one for the node), by which a failed anyOf/oneOf picks the alternative whose errors it reports.
    `later` takes the embedded-resource and list-type errors (None inside a junctor)."""
    t = node.get("type")
    int_or_string = node.get("x-kubernetes-int-or-string")
    if v is None:  # the type validator alone (and the enum check, which no null reaches here)
        if not node.get("nullable") and t:
            errs.append(FieldError("FieldValueTypeInvalid", path, f"{path} in body must be of type {t}: \"null\"",
                                   "null", True))
            return 0
        return 1
    count = 1
    if int_or_string:
        ok = _type_ok("integer", v) or isinstance(v, str)
        if not ok:
            errs.append(FieldError("FieldValueTypeInvalid", path,
                                   f"{path} in body must be of type integer,string: \"{_json_type(v)}\"", _json_type(v), True))
        count += 1 + ok
    elif t or node.get("format"):
        ok = not t or _type_ok(t, v)
        if not ok:
            jt = _json_type(v)
            errs.append(FieldError("FieldValueTypeInvalid", path, f"{path} in body must be of type {t}: \"{jt}\"", jt, True))
        count += 1 + ok
    if "anyOf" in node or "oneOf" in node or "allOf" in node or "not" in node:
        count += 2 + _junctors(v, node, path, errs, root)
    else:
        count += 3
    if isinstance(v, str):
        count += 1
        _string(v, node, path, errs)
        fmt = node.get("format")
        if fmt in FORMATS:
            count += 1
            if not FORMATS[fmt](v):
                errs.append(invalid(path, v, f"{path} in body must be of type {fmt}: \"{v}\""))
    elif isinstance(v, (int, float)) and not isinstance(v, bool):
        count += 2
        if not _in_range(v, t, node.get("format")):
            errs.append(JunctorError("FieldValueInvalid", root, _range_error(t, node.get("format"), path), "", True, path))
        _number(v, node, path, errs)
    elif isinstance(v, list):
        count += 2 + _array(v, node, path, errs, root, later)
    count += 1
    if "enum" in node and v not in node["enum"]:
        errs.append(not_supported(path, v, node["enum"]))
    if isinstance(v, dict):
        count += 1 + _object(v, node, path, errs, root, later)
    return count


def _string(v: str, node: dict[str, Any], path: str, errs: list[FieldError]) -> None:
    """stringValidator: the first of maxLength, minLength and pattern that fails, alone."""
    n = len(v)
    if "maxLength" in node and n > node["maxLength"]:
        errs.append(too_long(path, node["maxLength"]))
    elif "minLength" in node and n < node["minLength"]:
        errs.append(invalid(path, v, f"{path} in body should be at least {node['minLength']} chars long"))
    elif (pat := node.get("pattern")) is not None:
        try:
            matched = regex.search(pat, v)
        except regex.PatternError:  # stored before patterns were checked: unchecked, as it was
            matched = True
        if not matched:
            errs.append(invalid(path, v, f"{path} in body should match '{pat}'"))


#: the integers each integer format holds (IsValueValidAgainstRange; any other format is int64's)
_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "uint32": (0, 2**32 - 1), "uint64": (0, 2**64 - 1)}
_INT64 = (-(2**63), 2**63 - 1)


def _in_range(v: float | int, t: str | None, fmt: str | None) -> bool:
    """IsValueValidAgainstRange: whether the number, written as Go writes it, parses as its type and format's
    native type (an integer type's value must be whole; a float or float32 number must not overflow float32)."""
    if t == "integer":
        if isinstance(v, float):
            if not v.is_integer():
                return False
            v = int(v)
        lo, hi = _INT_RANGES.get(fmt or "", _INT64)
        return lo <= v <= hi
    if fmt in ("float", "float32"):
        try:
            struct.pack("<f", v)  # (OverflowError where the value rounds past float32's largest)
        except OverflowError:
            return False
    return True


def _range_error(t: str | None, fmt: str | None, path: str) -> str:
    kind = f"with format {fmt}" if fmt else "(default format)"
    return f"Checked value must be of type {t or ''} {kind} in {path}"


def _number(v: float | int, node: dict[str, Any], path: str, errs: list[FieldError]) -> None:
    """numberValidator: multipleOf, minimum, then maximum."""
    mo = node.get("multipleOf")
    if mo and isinstance(v, int):  # MultipleOfNativeType: an integer against int64(multipleOf)
        factor = int(mo)
        if factor and v % factor:
            errs.append(invalid(path, v, f"{path} in body should be a multiple of {factor}"))
    elif mo and not math.isclose(math.remainder(v, mo), 0, abs_tol=1e-9):
        errs.append(invalid(path, v, f"{path} in body should be a multiple of {_printed(float(mo))}"))
    if "minimum" in node:
        mn = _bound(node["minimum"], v)
        if node.get("exclusiveMinimum") and v <= mn:
            errs.append(invalid(path, v, f"{path} in body should be greater than {_printed(mn)}"))
        elif v < mn:
            errs.append(invalid(path, v, f"{path} in body should be greater than or equal to {_printed(mn)}"))
    if "maximum" in node:
        mx = _bound(node["maximum"], v)
        if node.get("exclusiveMaximum") and v >= mx:
            errs.append(invalid(path, v, f"{path} in body should be less than {_printed(mx)}"))
        elif v > mx:
            errs.append(invalid(path, v, f"{path} in body should be less than or equal to {_printed(mx)}"))


def _array(v: list, node: dict[str, Any], path: str, errs: list[FieldError], root: str,
           later: tuple[list[FieldError], list[FieldError]] | None) -> int:
    """schemaSliceValidator: the items, then minItems and maxItems; the list-type duplicates go to
    `later`. Returns the items' MatchCounts and its own."""
    count = 1
    items = node.get("items")
    if isinstance(items, dict):
        for i, item in enumerate(v):
            count += _validate(item, items, f"{path}[{i}]", errs, root, later)
    n = len(v)
    if "minItems" in node and n < node["minItems"]:  # TooFewItems: the count is the value
        errs.append(invalid(path, n, f"{path} in body should have at least {node['minItems']} items"))
    if "maxItems" in node and n > node["maxItems"]:
        errs.append(too_many(path, n, node["maxItems"]))
    if later is not None:
        _list_type(v, node, path, later[1])
    return count


def _list_type(v: list, node: dict[str, Any], path: str, errs: list[FieldError]) -> None:
    """ValidateListSetsAndMaps: a set's item, a map's key (its key fields that are set), reported
    once, where it first repeats (upstream's validateListSet counts each in a hash map: linear)."""
    lt = node.get("x-kubernetes-list-type")
    if lt == "set":
        for i in _first_repeats(v):
            errs.append(FieldError("FieldValueDuplicate", f"{path}[{i}]", "", v[i], True))
    elif lt == "map":
        fields = node.get("x-kubernetes-list-map-keys") or []
        keys = [{f: item[f] for f in fields if f in item} if isinstance(item, dict) else {} for item in v]
        single = len(fields) == 1
        for i in _first_repeats([k.get(fields[0], _UNSPECIFIED) for k in keys] if single else keys):
            errs.append(FieldError("FieldValueDuplicate", f"{path}[{i}]", "", keys[i], True))


#: a list-map item without its one key field (upstream's unspecifiedKeyValue): equal only to another such
_UNSPECIFIED = object()


def _first_repeats(values: list) -> list[int]:
    """The indices where a value of `values` appears the second time. Values are told apart as Go's
    map keys tell the decoded JSON apart: by type (1, 1.0 and true are three values), objects and
    lists by their JSON with sorted keys."""
    seen: dict[Any, int] = {}
    out = []
    for i, x in enumerate(values):
        key = ("c", json.dumps(x, sort_keys=True)) if isinstance(x, (dict, list)) else (type(x), x)
        times = seen.get(key, 0)
        if times == 1:
            out.append(i)
        seen[key] = times + 1
    return out


def _object(v: dict, node: dict[str, Any], path: str, errs: list[FieldError], root: str,
            later: tuple[list[FieldError], list[FieldError]] | None) -> int:
    """objectValidator: a refused property count stops it (no children, no required); else the
    additionalProperties' values, the properties' values, then the required ones missing. The
    embedded resource's own checks go to `later`. Returns its children's MatchCounts."""
    props = node.get("properties") or {}
    embedded = node.get("x-kubernetes-embedded-resource")
    if embedded and later is not None:
        later[0].extend(_embedded(v, path))
    n = len(v)
    if "minProperties" in node and n < node["minProperties"]:
        errs.append(invalid(path, n, f"{path} in body should have at least {node['minProperties']} properties"))
        return 0
    if "maxProperties" in node and n > node["maxProperties"]:
        errs.append(too_many(path, n, node["maxProperties"]))
        return 0
    count = 0
    ap = node.get("additionalProperties")
    if isinstance(ap, dict):
        for k, item in v.items():
            if k not in props:
                count += _validate(item, ap, _join(path, k), errs, root, later)
    for k, item in v.items():
        if k in props and not (embedded and k == "metadata"):
            count += _validate(item, props[k], _join(path, k), errs, root, later)
    for name in node.get("required") or ():
        if name not in v:
            errs.append(required(_join(path, name)))
    return count


def _embedded(v: dict, path: str) -> list[FieldError]:
    """objectmeta's validateEmbeddedResource: a missing apiVersion or kind is Required; then each of
    them is a non-empty string, the apiVersion a group/version and the kind a mixed-case DNS-1035
    label, and the metadata an ObjectMeta."""
    errs = [required(_join(path, f)) for f in ("apiVersion", "kind") if f not in v]
    for k, item in v.items():
        p = _join(path, k)
        if k in ("apiVersion", "kind"):
            if not isinstance(item, str):
                errs.append(invalid(p, item, "must be a string"))
            elif not item:
                errs.append(required(p))
            elif k == "apiVersion" and (problem := group_version_error(item)):
                errs.append(invalid(p, item, problem))
            elif k == "kind":
                errs += [invalid(p, item, m) for m in mixed_case_label(item)]
        elif k == "metadata":
            errs += _embedded_metadata(item, p)
    return errs


def _embedded_metadata(meta: Any, path: str) -> list[FieldError]:
    """validateEmbeddedResource's metadata: it must decode as an ObjectMeta, then ValidateObjectMeta with a
    path-segment name ("fakename" when empty) and a namespace only checked where one is set."""
    from .. import structural

    errs = structural.definition_errors(meta, _OBJECT_META) if isinstance(meta, dict) else ["must be an object"]
    if errs:
        return [invalid(path, meta, errs[0])]
    ns = meta.get("namespace") or ""
    return validate_object_meta({**meta, "name": meta.get("name") or "fakename"}, bool(ns), path_segment_name, path)


_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


def coerce_error(obj: Any, node: dict[str, Any] | None, path: str = "") -> FieldError | None:
    """objectmeta.Coerce's error as a request body is decoded (its invalid fields not dropped): the
    first x-kubernetes-embedded-resource object below the root whose apiVersion or kind is no
    string, or whose metadata does not decode as an ObjectMeta. Upstream's decoder fails on it, a
    400, before any validation runs. Walks the declared schema only."""
    from .. import structural

    if not isinstance(node, dict):
        return None
    if isinstance(obj, dict):
        if path and node.get("x-kubernetes-embedded-resource") is True:
            for k in ("apiVersion", "kind"):
                if k in obj and not isinstance(obj[k], str):
                    return invalid(_join(path, k), obj[k], "must be a string")
            if "metadata" in obj and obj["metadata"] is not None:
                meta = obj["metadata"]
                go = "bool" if isinstance(meta, bool) else {str: "string", list: "array"}.get(type(meta), "number")
                errs = structural.definition_errors(meta, _OBJECT_META) if isinstance(meta, dict) else [
                    f"json: cannot unmarshal {go} into Go value of type v1.ObjectMeta"]
                if errs:
                    return invalid(_join(path, "metadata"), meta, errs[0])
        props, ap = node.get("properties") or {}, node.get("additionalProperties")
        for k, v in obj.items():
            sub = props.get(k) if k in props else ap if isinstance(ap, dict) else None
            if sub is not None and (e := coerce_error(v, sub, _join(path, k) if k in props else f"{path}[{k}]")):
                return e
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            if e := coerce_error(v, node.get("items"), f"{path}[{i}]"):
                return e
    return None


def _junctors(v: Any, node: dict[str, Any], path: str, errs: list[FieldError], root: str) -> int:
    """schemaPropsValidator: anyOf, oneOf, allOf, then not (upstream allows only value validations
    inside them). Its own errors are no kube-openapi Validation, so the apiextensions-apiserver
    reports them at `root` with an empty value, the schema path quoted. A failed anyOf or oneOf
    adds the errors of the failed alternative with the highest MatchCount (the first of equals);
    returns the MatchCount it merges (with its own)."""
    name = gofmt.quote(path)

    def failed(detail: str) -> JunctorError:
        return JunctorError("FieldValueInvalid", root, detail, "", True, path)

    count = 1
    if node.get("anyOf"):
        best: tuple[list[FieldError], int] | None = None
        for alt_errs, alt_count in _alternatives(v, node["anyOf"], path, root):
            if not alt_errs:
                count += alt_count
                break
            if best is None or alt_count > best[1]:
                best = (alt_errs, alt_count)
        else:
            errs.append(failed(f"{name} must validate at least one schema (anyOf)"))
            if best is not None:
                errs.extend(best[0])
                count += best[1]
    if node.get("oneOf"):
        best, passed, first = None, 0, None
        for alt_errs, alt_count in _alternatives(v, node["oneOf"], path, root):
            if not alt_errs:
                passed += 1
                best = None
                first = alt_count if first is None else first
            elif not passed and (best is None or alt_count > best[1]):
                best = (alt_errs, alt_count)
        if passed != 1:
            found = "Found none valid" if not passed else f"Found {passed} valid alternatives"
            errs.append(failed(f"{name} must validate one and only one schema (oneOf). {found}"))
            if best is not None:
                errs.extend(best[0])
                count += best[1]
        elif first is not None:
            count += first
    if node.get("allOf"):
        passed = total = 0
        for alt_errs, alt_count in _alternatives(v, node["allOf"], path, root):
            total += 1
            passed += not alt_errs
            errs.extend(alt_errs)
            count += alt_count
        if passed != total:
            none = ". None validated" if not passed else ""
            errs.append(failed(f"{name} must validate all the schemas (allOf){none}"))
    if isinstance(node.get("not"), dict):
        not_errs: list[FieldError] = []
        _validate(v, node["not"], path, not_errs, root, None)
        if not not_errs:
            errs.append(failed(f"{name} must not validate the schema (not)"))
    return count


def _alternatives(v: Any, spec: Any, path: str, root: str):
    """Each alternative's errors and MatchCount for v, in the junctor's order."""
    for alt in spec if isinstance(spec, list) else ():
        if isinstance(alt, dict):
            alt_errs: list[FieldError] = []
            yield alt_errs, _validate(v, alt, path, alt_errs, root, None)
