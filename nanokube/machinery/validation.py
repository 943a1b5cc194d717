"""Field errors and the shared validation rules of apimachinery.

Errors carry upstream's reason, message and field path so a 422 reads exactly
as kube-apiserver's: `Pod "x" is invalid: spec.containers[0].name: Required value`.
"""

from __future__ import annotations

import functools
import ipaddress
import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Iterable

import orjson

from . import gofmt


@dataclass(slots=True)
class FieldError:
    reason: str  # FieldValueRequired, FieldValueInvalid, ...
    field: str
    detail: str = ""
    value: Any = None
    has_value: bool = False

    @property
    def message(self) -> str:
        """The cause message upstream returns (without the field path)."""
        base = _REASON_TEXT[self.reason]
        if self.has_value and self.reason not in _VALUELESS:
            base = f"{base}: {_render(self.value)}"
        return f"{base}: {self.detail}" if self.detail else base

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


_REASON_TEXT = {
    "FieldValueRequired": "Required value",
    "FieldValueInvalid": "Invalid value",
    "FieldValueNotSupported": "Unsupported value",
    "FieldValueDuplicate": "Duplicate value",
    "FieldValueNotFound": "Not found",
    "FieldValueForbidden": "Forbidden",
    "FieldValueTooLong": "Too long",
    "FieldValueTooMany": "Too many",
    "FieldValueTypeInvalid": "Invalid value",
    "InternalError": "Internal error",
}


#: ErrorBody prints no value for these, whatever the error holds
_VALUELESS = frozenset(("FieldValueRequired", "FieldValueForbidden", "FieldValueTooLong", "InternalError"))


class Stringer(str):
    """A bad value upstream holds as a fmt.Stringer of its own type (resource.k8s.io's device IDs):
    ErrorBody prints its String() as it is, unquoted."""


#: the last list or map `_render` printed, with its text (held, so no other value takes its id): the
#: errors that share one value print it once, not once each (validateResourceQuotaScopes refuses each
#: of 3,000 scopes with all of them: 9 million items printed, a minute with the loop held)
_last_rendered: tuple[Any, str] = (None, "")


def _render(v: Any) -> str:
    """A bad value as ErrorBody prints it: strings %q, Stringers as they are, bools, ints and
    floats %v, anything else (nil, lists, maps) as json.Marshal writes it."""
    global _last_rendered
    if isinstance(v, Stringer):
        return str(v)
    if isinstance(v, str):
        return gofmt.quote(v)
    if isinstance(v, float):
        return gofmt.format_float(v)
    if isinstance(v, (list, dict)):
        last, text = _last_rendered
        if last is not v:
            text = gofmt.marshal(v)
            _last_rendered = (v, text)
        return text
    return gofmt.marshal(v)


def label_selector_value(sel: dict | None) -> gofmt.Struct | None:
    """A metav1.LabelSelector as field.Error prints it: its JSON fields in the struct's order
    (matchLabels, matchExpressions; key, operator, values), empty ones left out."""
    if sel is None:
        return None
    out = gofmt.Struct()
    if sel.get("matchLabels"):
        out["matchLabels"] = sel["matchLabels"]
    if sel.get("matchExpressions"):
        out["matchExpressions"] = [gofmt.Struct(key=r.get("key", ""), operator=r.get("operator", ""),
                                                **({"values": r["values"]} if r.get("values") else {}))
                                   for r in sel["matchExpressions"]]
    return out


def node_selector_terms_value(terms: list | None) -> list[gofmt.Struct] | None:
    """[]core.NodeSelectorTerm as field.Error prints it: an internal type, so json.Marshal writes
    every field under its Go name (MatchExpressions, MatchFields; Key, Operator, Values), unset
    lists null."""
    def reqs(rs: list | None) -> list[gofmt.Struct] | None:
        return None if rs is None else [gofmt.Struct(Key=r.get("key") or "", Operator=r.get("operator") or "",
                                                     Values=r.get("values")) for r in rs]
    return None if terms is None else [gofmt.Struct(MatchExpressions=reqs(t.get("matchExpressions")),
                                                    MatchFields=reqs(t.get("matchFields"))) for t in terms]


def required(field: str, detail: str = "") -> FieldError:
    return FieldError("FieldValueRequired", field, detail)


#: field.OmitValueType{}: an Invalid error whose message leaves the value out
OMIT = object()


def invalid(field: str, value: Any, detail: str) -> FieldError:
    return FieldError("FieldValueInvalid", field, detail, value, value is not OMIT)


def not_found(field: str, value: Any) -> FieldError:
    return FieldError("FieldValueNotFound", field, "", value, True)


def forbidden(field: str, detail: str) -> FieldError:
    return FieldError("FieldValueForbidden", field, detail)


def repeats(values: list) -> list[int]:
    """The indices of the values an earlier one equals: one pass over a set of those seen, where
    searching the earlier ones for each held the loop for seconds on a list of 10,000."""
    earlier: set = set()
    out = []
    for i, v in enumerate(values):
        if v in earlier:
            out.append(i)
        earlier.add(v)
    return out


def duplicate(field: str, value: Any) -> FieldError:
    return FieldError("FieldValueDuplicate", field, "", value, True)


def not_supported(field: str, value: Any, supported: Iterable[Any]) -> FieldError:
    """NotSupported: the supported values each quoted (a value that is not a string as its JSON,
    as the apiextensions-apiserver passes an enum's), no detail when there are none."""
    opts = ", ".join(gofmt.quote(s if isinstance(s, str) else gofmt.marshal(s)) for s in supported)
    return FieldError("FieldValueNotSupported", field, f"supported values: {opts}" if opts else "", value, True)


def too_many(field: str, actual: int, limit: int) -> FieldError:
    """TooMany: a negative count leaves the value out, a negative limit the number."""
    detail = f"must have at most {limit} item{'' if limit == 1 else 's'}" if limit >= 0 else "has too many items"
    return FieldError("FieldValueTooMany", field, detail, actual, actual >= 0)


def too_long(field: str, limit: int) -> FieldError:
    """TooLong: a negative limit says no number."""
    detail = f"may not be more than {limit} byte{'' if limit == 1 else 's'}" if limit >= 0 else "value is too long"
    return FieldError("FieldValueTooLong", field, detail)


def immutable(field: str, value: Any) -> FieldError:
    return invalid(field, value, "field is immutable")


def validate_node_selector(selector: dict, path: str) -> list[FieldError]:
    """ValidateNodeSelector: at least one term, each term's requirements."""
    terms = selector.get("nodeSelectorTerms") or []
    if not terms:
        return [required(f"{path}.nodeSelectorTerms", "must have at least one node selector term")]
    errs: list[FieldError] = []
    for i, term in enumerate(terms):
        errs += validate_node_selector_term(term or {}, f"{path}.nodeSelectorTerms[{i}]")
    return errs


def validate_node_selector_term(term: dict, path: str) -> list[FieldError]:
    """ValidateNodeSelectorTerm: label requirements (ValidateNodeSelectorRequirement) and field
    requirements, of which metadata.name In/NotIn one node name is the only kind."""
    errs: list[FieldError] = []
    for j, r in enumerate(term.get("matchExpressions") or ()):
        p, op, values = f"{path}.matchExpressions[{j}]", r.get("operator", ""), r.get("values") or []
        if op in ("In", "NotIn"):
            if not values:
                errs.append(required(f"{p}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
        elif op in ("Exists", "DoesNotExist"):
            if values:
                errs.append(forbidden(f"{p}.values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
        elif op in ("Gt", "Lt"):
            if len(values) != 1:
                errs.append(required(f"{p}.values", "must be specified single value when `operator` is 'Lt' or 'Gt'"))
        else:
            errs.append(invalid(f"{p}.operator", op, "not a valid selector operator"))
        key = r.get("key", "")
        errs += [invalid(f"{p}.key", key, m) for m in qualified_name(key)]
        for k, v in enumerate(values):
            errs += [invalid(f"{p}.values[{k}]", v, m) for m in label_value(v)]
    for j, r in enumerate(term.get("matchFields") or ()):
        p, op, values = f"{path}.matchFields[{j}]", r.get("operator", ""), r.get("values") or []
        if op in ("In", "NotIn"):
            if len(values) != 1:
                errs.append(required(f"{p}.values",
                                     "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"))
        else:
            errs.append(invalid(f"{p}.operator", op, "not a valid selector operator"))
        if r.get("key", "") != "metadata.name":
            errs.append(invalid(f"{p}.key", r.get("key", ""), "not a valid field selector key"))
        else:
            for k, v in enumerate(values):
                errs += [invalid(f"{p}.values[{k}]", v, m) for m in dns1123_subdomain(v)]
    return errs


# --- names ---------------------------------------------------------------

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
_DNS1123_SUBDOMAIN_UNDERSCORE = re.compile(r"^_?[a-z0-9]([-_a-z0-9]*[a-z0-9])?(\._?[a-z0-9]([-_a-z0-9]*[a-z0-9])?)*\Z")
_WILDCARD_DNS1123_SUBDOMAIN = re.compile(r"^\*\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?\Z")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\Z")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?\Z")
_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+\Z")


def remembers_valid(check):
    """Wraps a validator of strings to skip values it already found valid
    (8192 at most): every write of an object validates its labels,
    annotations, namespace and its pods' container and port names again,
    status writes too, and they repeat across objects.
    Errors are worked out each time, so callers always get a fresh list."""
    valid: set[str] = set()

    @functools.wraps(check)
    def remembering(value: str) -> list[str]:
        if type(value) is str and value in valid:
            return []
        errs = check(value)
        if not errs and type(value) is str:
            if len(valid) >= 8192:
                valid.clear()
            valid.add(value)
        return errs

    return remembering


def remembers_clean(check=None, *, limit: int = 4096, tries: int = 0, key=orjson.dumps):
    """Wraps a check of a decoded JSON value (field errors or warnings, with the value's path or
    name after it) to skip values of a JSON it already found clean (`limit` at most): every pod now
    carries the same projected token volume but for its name, and checking its sources on each
    create cost about as much as the rest of its volumes. The further arguments only word a
    finding, so a clean value is clean wherever it is; findings are worked out each time. A value
    orjson cannot encode (an integer past 64 bits) is checked every time, and so is one whose JSON
    holds a null, since orjson writes a NaN or an infinity as null too (the body decoders refuse
    them, but the key would not tell them apart).

    `tries` (for values that may never repeat, as each pod's spec where pods differ in env): after that
    many lookups missed in a row, the JSON is built for only one check in `tries` until one hits.
    `key`: the value's JSON, or JSON that stands for it (a value found clean is clean exactly when
    one of the same key is). Used as `@remembers_clean` or `@remembers_clean(limit=..., ...)`."""
    if check is None:
        return functools.partial(remembers_clean, limit=limit, tries=tries, key=key)
    encode = key
    clean: set[bytes] = set()
    misses = 0

    @functools.wraps(check)
    def remembering(value: Any, *where: Any) -> list:
        nonlocal misses
        if tries and misses >= tries:
            misses += 1
            if misses % tries:
                return check(value, *where)
        try:
            key = encode(value)
        except orjson.JSONEncodeError:
            return check(value, *where)
        if b"null" in key:
            return check(value, *where)
        if key in clean:
            misses = 0
            return []
        misses += 1
        found = check(value, *where)
        if not found:
            if len(clean) >= limit:
                clean.clear()
            clean.add(key)
        return found

    return remembering


def _longer(value: str, limit: int) -> bool:
    """Go's len(value) > limit: the string's UTF-8 bytes, not its characters."""
    return len(value) > limit or (not value.isascii() and len(value.encode()) > limit)


def _bounded_match(value: str, limit: int, pattern: re.Pattern, message: str, unit: str = "characters") -> list[str]:
    """The shape of upstream's IsDNS1123Label and its kin: a length limit, then the pattern, each
    with its own message. apimachinery's util/validation words the limit in characters; its
    api/validate/content package (label keys and values, and a key's DNS prefix) in bytes."""
    errs = []
    if _longer(value, limit):
        errs.append(f"must be no more than {limit} {unit}")
    if not pattern.match(value):
        errs.append(message)
    return errs


@remembers_valid
def dns1123_label(value: str) -> list[str]:
    """IsDNS1123Label: a value that fails only for its dots (a valid subdomain) is told so, not given
    the pattern (`kubectl create ns my.team`, a pod named web.1's hostname warning)."""
    if _DNS1123_LABEL.match(value):
        return ["must be no more than 63 characters"] if _longer(value, 63) else []
    if _DNS1123_SUBDOMAIN.match(value):
        return [*_bounded_match(value, 63, _DNS1123_SUBDOMAIN, ""), "must not contain dots"]
    return _bounded_match(value, 63, _DNS1123_LABEL, (
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
        "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
        "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
    ))


_DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


@remembers_valid
def dns1123_subdomain(value: str) -> list[str]:
    return _bounded_match(value, 253, _DNS1123_SUBDOMAIN, _DNS1123_SUBDOMAIN_MSG)


def config_key(key: str) -> list[str]:
    """IsConfigMapKey: ConfigMap and Secret keys, and the keys env and volumes name in them."""
    msgs = _bounded_match(key, 253, _CONFIG_KEY, (
        "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  "
        "or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"))
    if key == ".":
        msgs.append("must not be '.'")
    elif key == "..":
        msgs.append("must not be '..'")
    elif key.startswith(".."):
        msgs.append("must not start with '..'")
    return msgs


def wildcard_dns1123_subdomain(value: str) -> list[str]:
    """IsWildcardDNS1123Subdomain: '*.' and a DNS subdomain (RFC 1034 section 4.3.3)."""
    return _bounded_match(value, 253, _WILDCARD_DNS1123_SUBDOMAIN, (
        "a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, which must "
        "consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric character "
        "(e.g. '*.example.com', regex used for validation is "
        "'\\*\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
    ))


@remembers_valid
def dns1123_subdomain_with_underscore(value: str) -> list[str]:
    """IsDNS1123SubdomainWithUnderscore: each label may also hold '_' and start with one (a pod's
    dnsConfig.searches, SRV-style names)."""
    return _bounded_match(value, 253, _DNS1123_SUBDOMAIN_UNDERSCORE, (
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '_', '-' or '.', "
        "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
        "validation is '_?[a-z0-9]([-_a-z0-9]*[a-z0-9])?(\\._?[a-z0-9]([-_a-z0-9]*[a-z0-9])?)*')"
    ))


def fully_qualified_domain_name(name: str, path: str) -> list[FieldError]:
    """IsFullyQualifiedDomainName: a DNS-1123 subdomain (a trailing dot aside) of two labels or more."""
    if not name:
        return [required(path)]
    name = name[:-1] if name.endswith(".") else name
    errs = dns1123_subdomain(name)
    if errs:
        return [invalid(path, name, ",".join(errs))]
    if len(name.split(".")) < 2:
        return [invalid(path, name, "should be a domain with at least two segments separated by dots")]
    for label in name.split("."):
        errs = dns1123_label(label)
        if errs:
            return [invalid(path, label, ",".join(errs))]
    return []


def dns1035_label(value: str) -> list[str]:
    return _bounded_match(value, 63, _DNS1035_LABEL, (
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
        "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
        "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
    ))


def mixed_case_label(value: str) -> list[str]:
    """A kind's rule: a DNS-1035 label once lowercased, its messages in one, as apiextensions words it."""
    errs = dns1035_label(value.lower())
    return ["may have mixed case, but should otherwise match: " + ",".join(errs)] if errs else []


def group_version_error(gv: str) -> str | None:
    """schema.ParseGroupVersion's refusal: more than one '/'."""
    return f"unexpected GroupVersion string: {gv}" if gv.count("/") > 1 else None


@remembers_valid
def qualified_name(value: str) -> list[str]:
    """Label and annotation keys (IsLabelKey): optional DNS subdomain prefix, '/', name part. Like upstream,
    a bad or empty prefix still lets the name part be judged, and an empty name part also fails the regex."""
    parts = value.split("/")
    if len(parts) > 2:
        return [
            "a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
            "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
            "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix "
            "and '/' (e.g. 'example.com/MyName')"
        ]
    errs = []
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend(f"prefix part {e}" for e in _bounded_match(
                prefix, 253, _DNS1123_SUBDOMAIN, _DNS1123_SUBDOMAIN_MSG, "bytes"))
    name = parts[-1]
    if not name:
        errs.append("name part must be non-empty")
    elif _longer(name, 63):
        errs.append("name part must be no more than 63 bytes")
    if not _QUALIFIED_NAME.match(name):
        errs.append(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
            "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
            "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
        )
    return errs


@remembers_valid
def label_value(value: str) -> list[str]:
    return _bounded_match(value, 63, _LABEL_VALUE, (
        "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
        "must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', "
        "regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
    ), "bytes")


#: label and annotation maps found valid, by their items (maps of 64 items and 16 KiB at most,
#: 4096 maps and 4 MiB of keys and values in all, so a client writing distinct maps cannot pin much
#: memory): a pod's labels are checked again on each of its writes (status patches too), and a
#: workload's pods share theirs; each key and value is remembered already (`remembers_valid`), but
#: not walking them was ~20% of the metadata checks of a status patch
_VALID_MAPS: set[tuple] = set()
_valid_maps_bytes = 0
_MAP_ITEMS_MAX = 64
_MAP_BYTES_MAX = 16 << 10
_VALID_MAPS_BYTES = 4 << 20


def _known_valid(m: Any, kind: str) -> tuple | None:
    """The memo key of a label (`kind` "l") or annotation ("a") map, or None when it is valid
    already; `(kind,)`, never remembered, for a map without a key (not a dict, too many items,
    a value that is not hashable)."""
    if type(m) is not dict or len(m) > _MAP_ITEMS_MAX:
        return (kind,)
    key = (kind, *m.items())
    try:
        return None if key in _VALID_MAPS else key
    except TypeError:
        return (kind,)


def _remember_valid(key: tuple, size: int) -> None:
    """`size`: the map's keys' and values' characters."""
    global _valid_maps_bytes
    if len(key) > 1 and size <= _MAP_BYTES_MAX:
        if len(_VALID_MAPS) >= 4096 or _valid_maps_bytes + size > _VALID_MAPS_BYTES:
            _VALID_MAPS.clear()
            _valid_maps_bytes = 0
        _VALID_MAPS.add(key)
        _valid_maps_bytes += size


def validate_labels(labels: Any, path: str) -> list[FieldError]:
    if (key := _known_valid(labels, "l")) is None:
        return []
    errs: list[FieldError] = []
    size = 0
    for k, v in (labels or {}).items():
        for msg in qualified_name(k):
            errs.append(invalid(path, k, msg))
        if not isinstance(v, str):
            errs.append(invalid(f"{path}.{k}", v, "must be a string"))
            continue
        size += len(k) + len(v)
        for msg in label_value(v):
            errs.append(invalid(path, v, msg))
    if not errs:
        _remember_valid(key, size)
    return errs


def validate_label_selector(sel: Any, path: str, allow_invalid_values: bool = False) -> list[FieldError]:
    """metav1 ValidateLabelSelector."""
    errs: list[FieldError] = []
    if not sel:
        return errs
    for i, req in enumerate(sel.get("matchExpressions") or []):
        p = f"{path}.matchExpressions[{i}]"
        op, values = req.get("operator"), req.get("values") or []
        if op in ("In", "NotIn"):
            if not values:
                errs.append(required(f"{p}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
        elif op in ("Exists", "DoesNotExist"):
            if values:
                errs.append(forbidden(f"{p}.values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
        else:
            errs.append(invalid(f"{p}.operator", op, "not a valid selector operator"))
        key = req.get("key", "")
        errs += [invalid(f"{p}.key", key, m) for m in qualified_name(key)]
        if not allow_invalid_values:
            for j, v in enumerate(values):
                errs += [invalid(f"{p}.values[{j}]", v, m) for m in label_value(v)]
    errs += validate_labels(sel.get("matchLabels"), f"{path}.matchLabels")
    return errs


def validate_annotations(annotations: Any, path: str) -> list[FieldError]:
    if (key := _known_valid(annotations, "a")) is None:
        return []
    errs: list[FieldError] = []
    total = 0
    for k, v in (annotations or {}).items():
        for msg in qualified_name(k.lower()):
            errs.append(invalid(path, k, msg))
        total += len(k) + len(v or "")
    if total > 256 * 1024:
        errs.append(too_long(path, 256 * 1024))
    if not errs:
        _remember_valid(key, total)
    return errs


def _owner_reference(ref: dict) -> gofmt.Struct:
    """A metav1.OwnerReference as json.Marshal writes it (the two pointers left out when unset)."""
    out = gofmt.Struct(apiVersion=ref.get("apiVersion") or "", kind=ref.get("kind") or "", name=ref.get("name") or "",
                       uid=ref.get("uid") or "")
    for f in ("controller", "blockOwnerDeletion"):
        if ref.get(f) is not None:
            out[f] = ref[f]
    return out


def _owner_reference_errors(refs: list, path: str) -> list[FieldError]:
    """ValidateOwnerReferences: each reference's fields (Invalid at the list's path, not an item's),
    no Event as owner, and one controller at most: every further one is an error naming the first."""
    errs: list[FieldError] = []
    first = ""
    for ref in refs:
        api_version, kind = ref.get("apiVersion") or "", ref.get("kind") or ""
        # FromAPIVersionAndKind: no version when empty, after a slash, or unparsed (two slashes)
        if not api_version or api_version[-1] == "/" or api_version.count("/") > 1:
            errs.append(invalid(f"{path}.apiVersion", api_version, "version must not be empty"))
        if not kind:
            errs.append(invalid(f"{path}.kind", kind, "kind must not be empty"))
        for f in ("name", "uid"):
            if not ref.get(f):
                errs.append(invalid(f"{path}.{f}", ref.get(f) or "", f"{f} must not be empty"))
        if (api_version, kind) == ("v1", "Event"):  # BannedOwners
            errs.append(invalid(path, _owner_reference(ref), "/v1, Kind=Event is disallowed from being an owner"))
        if ref.get("controller"):
            name = f"{kind}/{ref.get('name') or ''}"
            if first:
                errs.append(invalid(path, [_owner_reference(r) for r in refs], "Only one reference can have Controller "
                                    f'set to true. Found "true" in references for {first} and {name}'))
            else:
                first = name
    return errs


def validate_object_meta(
    meta: dict, namespaced: bool, name_fn=dns1123_subdomain, path: str = "metadata"
) -> list[FieldError]:
    errs: list[FieldError] = []
    name = meta.get("name")
    gen = meta.get("generateName")
    if gen:  # validated first, and even when a name is set, as upstream's ValidateObjectMeta does
        # as a prefix: maskTrailingDash turns a trailing "x-" into "a" (a name goes on after it)
        prefix = gen[:-2] + "a" if len(gen) > 1 and gen.endswith("-") else gen
        for msg in name_fn(prefix):
            errs.append(invalid(f"{path}.generateName", gen, msg))
    if not name and not gen:
        errs.append(required(f"{path}.name", "name or generateName is required"))
    elif name:
        for msg in name_fn(name):
            errs.append(invalid(f"{path}.name", name, msg))
    ns = meta.get("namespace")
    if namespaced:
        if not ns:
            errs.append(required(f"{path}.namespace"))
        else:
            for msg in dns1123_label(ns):
                errs.append(invalid(f"{path}.namespace", ns, msg))
    elif ns:
        errs.append(forbidden(f"{path}.namespace", "not allowed on this type"))
    if type(generation := meta.get("generation")) is int and generation < 0:  # as sent, where a kind does not track it
        errs.append(invalid(f"{path}.generation", generation, "must be greater than or equal to 0"))
    if labels := meta.get("labels"):  # (none or empty: no error, and no call or path to build)
        errs += validate_labels(labels, f"{path}.labels")
    if annotations := meta.get("annotations"):
        errs += validate_annotations(annotations, f"{path}.annotations")
    if refs := meta.get("ownerReferences"):
        errs += _owner_reference_errors(refs, f"{path}.ownerReferences")
    if fins := meta.get("finalizers"):
        for i, fin in enumerate(fins):
            for msg in qualified_name(fin):
                errs.append(invalid(f"{path}.finalizers[{i}]", fin, msg))
    return errs + managed_fields_errors(meta.get("managedFields"), f"{path}.managedFields")


#: ValidateFieldManager's limit on a manager's name, in bytes
FIELD_MANAGER_MAX_LENGTH = 128


def field_manager_errors(manager: str, path: str) -> list[FieldError]:
    """ValidateFieldManager: at most 128 bytes, printable characters only."""
    if manager.isascii() and manager.isprintable() and len(manager) <= FIELD_MANAGER_MAX_LENGTH:
        return []  # ASCII: Python's printable is Go's IsPrint (0x20-0x7E); one unicodedata call a character was ~2 k
    errs = []
    if len(manager.encode()) > FIELD_MANAGER_MAX_LENGTH:
        errs.append(too_long(path, FIELD_MANAGER_MAX_LENGTH))
    for i, ch in enumerate(manager):
        if not _printable(ch):
            errs.append(invalid(path, manager, f"invalid character U+{ord(ch):04X} (at position {i})"))
            break
    return errs


def _printable(ch: str) -> bool:
    """Go's unicode.IsPrint: letters, marks, numbers, punctuation, symbols and the ASCII space."""
    return ch == " " or unicodedata.category(ch)[0] in "LMNPS"


def user_agent_manager(user_agent: str) -> str:
    """prefixFromUserAgent: the field manager of a write that names none, a valid one (at most 128
    bytes of printable characters): the User-Agent before its first '/', its unprintable characters
    dropped, cut before the character that would pass 128 bytes."""
    head = user_agent.split("/", 1)[0]
    if head.isascii() and head.isprintable() and len(head) <= FIELD_MANAGER_MAX_LENGTH:
        return head
    kept, size = [], 0
    for ch in head:
        if _printable(ch):
            size += len(ch.encode())  # (not a surrogate: those are unprintable)
            if size > FIELD_MANAGER_MAX_LENGTH:
                break
            kept.append(ch)
    return "".join(kept)


#: what a managedFields entry's operation and fieldsType may be without a second look
_OPERATIONS = ("Apply", "Update")
_FIELDS_TYPES = ("FieldsV1", None, "")


def managed_fields_errors(entries: Any, path: str) -> list[FieldError]:
    """v1validation.ValidateManagedFields: each entry's operation, fieldsType, manager and subresource
    (what the field manager kept of the ones a write sent: a manager's name it decodes, but not one of
    129 bytes)."""
    if type(entries) is not list:
        return []
    for e in entries:  # one pass without paths: an entry the field manager wrote has no error to name
        if not (type(e) is dict and e.get("operation") in _OPERATIONS and e.get("fieldsType") in _FIELDS_TYPES
                and (type(m := e.get("manager")) is str and m.isascii() and m.isprintable()
                     and len(m) <= FIELD_MANAGER_MAX_LENGTH or m is None)
                and (type(s := e.get("subresource")) is str and len(s) <= 64 or s is None)):
            break
    else:
        return []
    errs: list[FieldError] = []
    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            continue
        p = f"{path}[{i}]"
        if (op := e.get("operation") or "") not in ("Apply", "Update"):
            errs.append(invalid(f"{p}.operation", op, "must be `Apply` or `Update`"))
        if (ft := e.get("fieldsType") or "") and ft != "FieldsV1":
            errs.append(invalid(f"{p}.fieldsType", ft, "must be `FieldsV1`"))
        if type(manager := e.get("manager") or "") is str:
            errs += field_manager_errors(manager, f"{p}.manager")
        if type(sub := e.get("subresource") or "") is str and len(sub.encode()) > 256:
            errs.append(too_long(f"{p}.subresource", 256))
    return errs


#: core's standard finalizers: the only names allowed without a domain prefix (validateKubeFinalizerName)
STANDARD_FINALIZERS = frozenset(("kubernetes", "orphan", "foregroundDeletion"))


_NOT_STANDARD = "name is neither a standard finalizer name nor is it fully qualified"


def _standard_or_qualified(fin: str) -> bool:
    return "/" in fin or fin in STANDARD_FINALIZERS


def kube_finalizer_errors(meta: dict, path: str = "metadata") -> list[FieldError]:
    """The built-in kinds' extra finalizer rule (core validation's ObjectMeta checks, beyond
    apimachinery's): a name without '/' must be a standard one. Kinds validated with apimachinery's
    generic rules alone (CRDs, APIServices, admission configuration) and custom resources skip it."""
    return [invalid(f"{path}.finalizers[{i}]", fin, _NOT_STANDARD)
            for i, fin in enumerate(meta.get("finalizers") or []) if not _standard_or_qualified(fin)]


def custom_finalizer_warnings(meta: dict, old_meta: dict | None) -> list[str]:
    """A custom resource's finalizer warnings (customresource strategy's WarningsOnCreate/Update): each
    finalizer the write adds, in sorted order, that is neither standard nor domain-qualified. (Upstream
    also repeats qualified-name messages there, but a write carrying one is refused before warnings.)"""
    added = set(meta.get("finalizers") or []) - set((old_meta or {}).get("finalizers") or [])
    return [f"metadata.finalizers: {gofmt.quote(fin)}: prefer a domain-qualified finalizer name to avoid "
            "accidental conflicts with other finalizer writers" for fin in sorted(added) if not _standard_or_qualified(fin)]


def finalizer_name_errors(fin: str, path: str) -> list[FieldError]:
    """core's validateFinalizerName (a Namespace's spec.finalizers): the qualified-name errors, then
    the standard-name rule."""
    errs = [invalid(path, fin, msg) for msg in qualified_name(fin)]
    return errs if _standard_or_qualified(fin) else [*errs, invalid(path, fin, _NOT_STANDARD)]


def validate_object_meta_update(new: dict, old: dict, path: str = "metadata") -> list[FieldError]:
    errs: list[FieldError] = []
    for f in ("name", "namespace", "uid", "creationTimestamp"):
        if new.get(f) != old.get(f) and not (f == "creationTimestamp" and not new.get(f)):
            errs.append(immutable(f"{path}.{f}", new.get(f)))
    if old.get("deletionTimestamp") and new.get("deletionTimestamp") != old.get("deletionTimestamp"):
        errs.append(immutable(f"{path}.deletionTimestamp", new.get("deletionTimestamp")))
    if old.get("deletionTimestamp"):
        added = set(new.get("finalizers") or []) - set(old.get("finalizers") or [])
        if added:
            found = ", ".join(map(gofmt.quote, sorted(added)))  # %#v of a []string
            errs.append(forbidden(f"{path}.finalizers", "no new finalizers can be added if the object is being "
                                                        f"deleted, found new finalizers []string{{{found}}}"))
    return errs


#: ObjectMeta's fields in its Go struct's order: (JSON name, the name upstream's allow-list check reports)
_TEMPLATE_META_FIELDS = (
    ("name", "name"), ("generateName", "generateName"), ("namespace", "namespace"), ("selfLink", "selfLink"),
    ("uid", "uID"), ("resourceVersion", "resourceVersion"), ("generation", "generation"),
    ("creationTimestamp", "creationTimestamp"), ("deletionTimestamp", "deletionTimestamp"),
    ("deletionGracePeriodSeconds", "deletionGracePeriodSeconds"), ("ownerReferences", "ownerReferences"),
    ("finalizers", "finalizers"), ("managedFields", "managedFields"),
)


def template_object_meta(meta: dict, path: str) -> list[FieldError]:
    """ValidateTemplateObjectMeta (a claim template's metadata): labels and annotations, and no other
    ObjectMeta field set (an empty list is set; "" and a zero generation are not)."""
    errs = validate_annotations(meta.get("annotations"), f"{path}.annotations")
    errs += validate_labels(meta.get("labels"), f"{path}.labels")
    for key, go_name in _TEMPLATE_META_FIELDS:
        v = meta.get(key)
        if v is not None and v != "" and not (key == "generation" and v == 0):
            errs.append(forbidden(f"{path}.{go_name}", "cannot be set"))
    return errs


def path_segment_name(name: str) -> list[str]:
    """path.IsValidPathSegmentName: not '.' or '..', no '/' or '%'."""
    if name in (".", ".."):
        return [f"may not be '{name}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in name]


def label_name(key: Any, path: str) -> list[FieldError]:
    """metav1 ValidateLabelName: a qualified name, required."""
    if not key:
        return [required(path)]
    return [invalid(path, key, m) for m in qualified_name(key)]


_REASON = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?\Z")


def validate_conditions(conditions: Any, path: str) -> list[FieldError]:
    """metav1 ValidateConditions: type, status, reason, timestamps, uniqueness."""
    errs: list[FieldError] = []
    seen: set = set()
    for i, c in enumerate(conditions or []):
        p = f"{path}[{i}]"
        t = c.get("type") or ""
        errs += label_name(t, f"{p}.type")
        if t in seen:
            errs.append(duplicate(f"{p}.type", t))
        seen.add(t)
        if c.get("status") not in ("True", "False", "Unknown"):
            errs.append(not_supported(f"{p}.status", c.get("status", ""), ["False", "True", "Unknown"]))
        og = c.get("observedGeneration")
        if og is not None and og < 0:
            errs.append(invalid(f"{p}.observedGeneration", og, "must be greater than or equal to zero"))
        if not c.get("lastTransitionTime"):
            errs.append(required(f"{p}.lastTransitionTime", "must be set"))
        reason = c.get("reason") or ""
        if not reason:
            errs.append(required(f"{p}.reason", "must be set"))
        else:
            if not _REASON.match(reason):
                errs.append(invalid(f"{p}.reason", reason, "a condition reason must start with alphabetic character, optionally followed by a string of alphanumeric characters or '_,:', and must end with an alphanumeric character or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName',  or 'ReasonA,ReasonB',  or 'ReasonA:ReasonB', regex used for validation is '[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?')"))
            if len(reason) > 1024:
                errs.append(too_long(f"{p}.reason", 1024))
        if len(c.get("message") or "") > 32768:
            errs.append(too_long(f"{p}.message", 32768))
    return errs


@functools.lru_cache(maxsize=4096)
def parse_ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """An IPv4 or IPv6 address without a zone, as netip.ParseAddr reads it, else None; memoized (a
    node's and its pods' addresses come back in every status write). IPv4 octets with leading zeros
    ("010.1.2.3"), which Go's ParseIPSloppy still reads, are refused here (see sloppy_ip)."""
    try:
        return ipaddress.ip_address(text) if isinstance(text, str) and "%" not in text else None
    except ValueError:
        return None


def is_ip(text: str) -> bool:
    """An address parse_ip reads."""
    return parse_ip(text) is not None


_IP_MSG = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
_CIDR_MSG = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"


def sloppy_ipv4(text: Any) -> ipaddress.IPv4Address | None:
    """A dotted quad whose octets may have leading zeros, as Go's ParseIPSloppy reads it."""
    parts = text.split(".") if isinstance(text, str) else []
    if len(parts) != 4 or not all(p.isascii() and p.isdigit() and int(p) <= 255 for p in parts):
        return None
    return ipaddress.IPv4Address(".".join(str(int(p)) for p in parts))


def sloppy_ip(text: Any) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address Go's ParseIPSloppy reads, as net.IP sees it: leading zeros ignored, an
    IPv4-mapped IPv6 address its IPv4 one (IsIPv4, To4). For values stored before strict validation,
    kept on update (ratcheting): their family and ranges are still checked."""
    ip = parse_ip(text) if isinstance(text, str) else None
    if ip is None:
        return sloppy_ipv4(text)
    return ip.ipv4_mapped or ip if ip.version == 6 else ip


@functools.lru_cache(maxsize=4096)
def legacy_ip_valid(text: str) -> bool:
    """Whether legacy_ip_errors finds nothing wrong with `text` (memoized, for the status writes
    that repeat the same addresses)."""
    ip = parse_ip(text)
    return ip is not None and not (ip.version == 6 and ip.ipv4_mapped)


def legacy_ip_errors(value: Any, path: str, valid_old: Iterable[str] = ()) -> list[FieldError]:
    """IsValidIPForLegacyField with StrictIPCIDRValidation on (beta, on by default in 1.37) for the
    fields that predate strict validation: IPv4 octets with leading zeros and IPv4-mapped IPv6
    addresses are refused, a non-canonical IPv6 form passes (upstream warns). A value in `valid_old`
    (the old object's, on update) passes whatever it is, as stored objects keep theirs."""
    if isinstance(value, str) and value in valid_old:
        return []
    ip = parse_ip(value)
    if ip is None:
        return [invalid(path, value, "must not have leading 0s" if sloppy_ipv4(value) else _IP_MSG)]
    if ip.version == 6 and ip.ipv4_mapped:
        return [invalid(path, value, "must not be an IPv4-mapped IPv6 address")]
    return []


def ip_errors(value: str, path: str) -> list[FieldError]:
    """IsValidIP for the fields that came with strict validation (an IPAddress's name): the legacy
    field's checks, then any other form than the canonical one."""
    if errs := legacy_ip_errors(value, path):
        return errs
    if str(ip := parse_ip(value)) != value:
        return [invalid(path, value, f'must be in canonical form ("{ip}")')]
    return []


def _sloppy_cidr(value: Any) -> tuple[Any, int] | None:
    """What Go's ParseCIDRSloppy reads: the address (leading zeros ignored) and the prefix length
    (leading zeros allowed), else None."""
    addr, slash, bits = value.partition("/") if isinstance(value, str) else ("", "", "")
    if not slash or not (bits.isascii() and bits.isdigit()):
        return None
    ip = parse_ip(addr) or sloppy_ipv4(addr)
    return (ip, int(bits)) if ip is not None and int(bits) <= ip.max_prefixlen else None


def legacy_cidr_errors(value: Any, path: str, valid_old: Iterable[str] = ()) -> list[FieldError]:
    """IsValidCIDRForLegacyField with StrictIPCIDRValidation on (see legacy_ip_errors): what Go's
    ParseCIDRSloppy refuses, then leading zeros (in the address or the prefix length), an
    IPv4-mapped IPv6 address, bits set beyond the prefix length (a subnet, not an interface
    address); a non-canonical IPv6 form passes. A value in `valid_old` passes whatever it is."""
    if isinstance(value, str) and value in valid_old:
        return []
    parsed = _sloppy_cidr(value)
    if parsed is None:
        return [invalid(path, value, _CIDR_MSG)]
    ip, bits = parsed
    addr, _, text_bits = value.partition("/")
    if parse_ip(addr) is None or (len(text_bits) > 1 and text_bits[0] == "0"):
        return [invalid(path, value, "must not have leading 0s in IP or prefix length")]
    if ip.version == 6 and ip.ipv4_mapped:
        return [invalid(path, value, "must not have an IPv4-mapped IPv6 address")]
    if ipaddress.ip_network(f"{ip}/{bits}", strict=False).network_address != ip:
        return [invalid(path, value, "must not have bits set beyond the prefix length")]
    return []


def cidr_family(value: Any) -> int | None:
    """netutils.IPFamilyOfCIDRString: the IP version of what ParseCIDRSloppy reads, else None."""
    parsed = _sloppy_cidr(value)
    return parsed[0].version if parsed else None


def sloppy_network(value: Any) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    """The subnet Go's ParseCIDRSloppy returns (its address masked), else None; an IPv4-mapped one
    as IPv6 with its prefix length, as Go keeps it."""
    parsed = _sloppy_cidr(value)
    return ipaddress.ip_network(f"{parsed[0]}/{parsed[1]}", strict=False) if parsed else None


def cidr_errors(value: str, path: str) -> list[FieldError]:
    """IsValidCIDR for the fields that came with strict validation (a ServiceCIDR's cidrs): the
    legacy field's checks, then any other form than the canonical one."""
    if errs := legacy_cidr_errors(value, path):
        return errs
    if str(net := sloppy_network(value)) != value:
        return [invalid(path, value, f'must be in canonical form ("{net}")')]
    return []


def interface_address_errors(value: Any, path: str) -> list[FieldError]:
    """IsValidInterfaceAddress (a ResourceClaim's networkData.ips, strict since it came): an address
    with its prefix length ("192.0.2.5/24") as ParseCIDRSloppy reads it, written canonically (leading
    zeros and an IPv4-mapped address are then not)."""
    parsed = _sloppy_cidr(value)
    if parsed is None:
        return [invalid(path, value, "must be a valid address in CIDR form, (e.g. 10.9.8.7/24 or 2001:db8::1/64)")]
    ip, bits = parsed
    if ip.version == 6 and ip.ipv4_mapped:  # Go prints it as IPv4, its prefix length less 96 past 32
        ip, bits = ip.ipv4_mapped, bits - 96 if bits > 32 else bits
    canonical = f"{ip}/{bits}"
    return [] if value == canonical else [invalid(path, value, f'must be in canonical form ("{canonical}")')]


def endpoint_ip(addr: Any, path: str) -> list[FieldError]:
    """ValidateEndpointIP (Endpoints and EndpointSlice addresses, Service externalIPs): an IP, and
    none of the unspecified, loopback, link-local or link-local multicast ones, as Go's net.IP
    tells them (read sloppily, see sloppy_ip; multicast ffX2::/16 whatever X)."""
    ip = sloppy_ip(addr)
    if ip is None:
        return [invalid(path, addr, "must be a valid IP address")]
    if ip.is_unspecified:
        return [invalid(path, addr, f"may not be unspecified ({addr})")]
    if ip.is_loopback:
        return [invalid(path, addr, "may not be in the loopback range (127.0.0.0/8, ::1/128)")]
    if ip.is_link_local:
        return [invalid(path, addr, "may not be in the link-local range (169.254.0.0/16, fe80::/10)")]
    if _link_local_multicast(ip):
        return [invalid(path, addr, "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)")]
    return []


def _link_local_multicast(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Go's IsLinkLocalMulticast: 224.0.0.0/24, or ff with a scope nibble of 2."""
    b = ip.packed
    return b[:3] == b"\xe0\x00\x00" if ip.version == 4 else b[0] == 0xFF and b[1] & 0x0F == 0x02
