"""Validation of CustomResourceDefinition objects (apiextensions `validation/validation.go`).

Names, versions (exactly one storage version, unique DNS-1035 names), a
structural schema for every version, printer columns, selectable fields, the
scale subresource's paths, conversion and status.storedVersions, with upstream's
field paths and words. `x-kubernetes-validations` rules are compiled by
`cel_rules`, so their compile errors and cost limits are CRD errors.

Upstream validates the internal form v1 converts to: a schema, subresources, printer columns or
selectable fields that every version shares move to the spec, so their errors read
`spec.validation.openAPIV3Schema...`, `spec.subresources...` (`_folded`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from ...machinery import gofmt
from ...machinery.validation import (
    FieldError, dns1035_label, dns1123_subdomain, duplicate, forbidden, immutable, invalid, mixed_case_label,
    not_supported, required, too_many,
)
from ..webhook.validation import validate_review_versions, validate_service, validate_url
from . import cel_rules, defaulting, internal, jsonpath, structural_schema

PRINTER_TYPES = ("boolean", "date", "integer", "number", "string")
PRINTER_FORMATS = ("byte", "date", "date-time", "double", "float", "int32", "int64", "password")
MAX_SELECTABLE_FIELDS = 8
MAX_DEPRECATION_WARNING = 256


def _names(names: Any, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    if not isinstance(names, dict):
        return errs
    for f in ("plural", "singular"):
        v = names.get(f)
        if v and dns1035_label(v):
            errs.append(invalid(f"{path}.{f}", v, ",".join(dns1035_label(v))))
    for f in ("kind", "listKind"):
        v = names.get(f)
        if v:
            errs += [invalid(f"{path}.{f}", v, m) for m in mixed_case_label(v)]
    for f in ("shortNames", "categories"):
        for i, v in enumerate(names.get(f) or []):
            if not isinstance(v, str) or dns1035_label(v):
                errs.append(invalid(f"{path}.{f}[{i}]", v, ",".join(dns1035_label(str(v)))))
    if names.get("kind") and names.get("kind") == names.get("listKind"):
        errs.append(invalid(f"{path}.listKind", names["listKind"], "kind and listKind may not be the same"))
    return errs


def _schema_at(schema: dict[str, Any] | None, path: str) -> dict[str, Any] | None:
    """The schema node a simple JSON path (`.spec.replicas`) names, if declared."""
    node = schema
    for name in jsonpath.field_path(path) or [None]:
        if name is None or not isinstance(node, dict):
            return None
        props = node.get("properties") or {}
        if name in props:
            node = props[name]
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        else:
            return None
    return node


def _simple_path(path: str, fld: str) -> list[FieldError]:
    try:
        fields = jsonpath.field_path(path)
    except jsonpath.JSONPathError as e:
        return [invalid(fld, path, f"is an invalid path: {e}")]
    if fields is None:
        return [invalid(fld, path, "must be a simple json path")]
    return []


def _printer_columns(cols: Any, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for i, c in enumerate(cols or []):
        p = f"{path}[{i}]"
        if not c.get("name"):
            errs.append(required(f"{p}.name", ""))
        t = c.get("type")
        if not t:
            errs.append(required(f"{p}.type", "must be one of " + ",".join(PRINTER_TYPES)))
        elif t not in PRINTER_TYPES:
            errs.append(invalid(f"{p}.type", t, "must be one of " + ",".join(PRINTER_TYPES)))
        if c.get("format") and c["format"] not in PRINTER_FORMATS:
            errs.append(invalid(f"{p}.format", c["format"], "must be one of " + ",".join(PRINTER_FORMATS)))
        # validateSimpleJSONPath, at upstream's field name: any path starting with '.' (one the table
        # cannot parse ends the CRD's columns there, resource.printer_columns)
        if not c.get("jsonPath"):
            errs.append(required(f"{p}.JSONPath", ""))
        elif not c["jsonPath"].startswith("."):
            errs.append(invalid(f"{p}.JSONPath", c["jsonPath"], "must be a simple json path starting with ."))
    return errs


def _field_path_tokens(path: str) -> Iterator[str]:
    """ValidFieldPath's scanner: each of '.', '[' and ']' alone, a single-quoted string whole (its
    delimiters kept inside), any other run of text up to the next delimiter."""
    i = 0
    while i < len(path):
        if path[i] == "'":
            end = next((j for j in range(i + 1, len(path)) if path[j] == "'" and path[j - 1] != "\\"), len(path) - 1)
        elif path[i] in ".[]":
            end = i
        else:
            end = next((j for j in range(i, len(path)) if path[j] in ".[]"), len(path)) - 1
        yield path[i:end + 1]
        i = end + 1


def _valid_field_path(path: str, schema: dict | None) -> tuple[str, dict | None]:
    """cel.ValidFieldPath without array notation, as selectable fields are checked: the field path a
    JSON path names in `schema` (`spec.a`, `spec.m[k]` through additionalProperties) and that
    field's schema; ValueError with upstream's reason."""
    tokens, at, node = _field_path_tokens(path), "", schema or {}
    for tok in tokens:
        if tok == "[":
            raise ValueError("array notation is not allowed")
        if tok != ".":
            raise ValueError(f"expected [ or . but got: {tok}")
        name = next(tokens, None)
        if name is None:
            raise ValueError("unexpected end of JSON path")
        if node.get("properties"):
            if name not in node["properties"]:
                raise ValueError("does not refer to a valid field")
            at, node = f"{at}.{name}" if at else name, node["properties"][name]
        elif node.get("additionalProperties") is not None:
            add = node["additionalProperties"]
            at, node = f"{at}[{name}]", add if isinstance(add, dict) else {}
        else:
            raise ValueError("does not refer to a valid field")
    return at, node


def _selectable_fields(fields: Any, schema: dict | None, path: str) -> list[FieldError]:
    """ValidateCustomResourceSelectableFields: each path judged by ValidFieldPath, duplicates and the
    limit counted on the field paths they name (`.spec.a` and `.spec['a']` are one)."""
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, f in enumerate(fields or []):
        p = f"{path}[{i}].jsonPath"
        jp = (f or {}).get("jsonPath")
        if not jp:
            errs.append(required(p, ""))
            continue
        try:
            at, node = _valid_field_path(jp, schema)
        except ValueError as e:
            errs.append(invalid(p, jp, f"is an invalid path: {e}"))
            continue
        if at.split(".")[0].split("[")[0] == "metadata":
            errs.append(invalid(p, jp, "must not point to fields in metadata"))
        if (node or {}).get("type") not in ("string", "boolean", "integer"):
            errs.append(invalid(p, jp, "must point to a field of type string, boolean or integer. "
                                       "Enum string fields and strings with formats are allowed."))
        if at in seen:
            errs.append(duplicate(p, jp))
        seen.add(at)
    if len(seen) > MAX_SELECTABLE_FIELDS:
        errs.append(too_many(path, len(seen), MAX_SELECTABLE_FIELDS))
    return errs


def _scale(scale: dict[str, Any], schema: dict | None, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    spec_path = scale.get("specReplicasPath")
    if not spec_path:
        errs.append(required(f"{path}.specReplicasPath", ""))
    elif not spec_path.startswith(".spec.") or _simple_path(spec_path, ""):
        errs.append(invalid(f"{path}.specReplicasPath", spec_path, "should be a json path under .spec"))
    elif schema is not None:
        node = _schema_at(schema, spec_path)
        if node is not None and node.get("type") != "integer":
            errs.append(invalid(f"{path}.specReplicasPath", spec_path, "should be a json path pointing to an integer"))
    st_path = scale.get("statusReplicasPath")
    if not st_path:
        errs.append(required(f"{path}.statusReplicasPath", ""))
    elif not st_path.startswith(".status.") or _simple_path(st_path, ""):
        errs.append(invalid(f"{path}.statusReplicasPath", st_path, "should be a json path under .status"))
    sel = scale.get("labelSelectorPath")
    if sel and (not sel.startswith((".spec.", ".status.")) or _simple_path(sel, "")):
        errs.append(invalid(f"{path}.labelSelectorPath", sel, "should be a json path under either .spec or .status"))
    return errs


def _conversion(conv: Any, path: str) -> list[FieldError]:
    """validateCustomResourceConversion, its paths those of the internal type (webhookClientConfig, not
    webhook.clientConfig): the client config's url or service as an admission webhook's (the url https,
    without user, query or fragment), the review versions DNS labels, once each, one of them known."""
    errs: list[FieldError] = []
    if not isinstance(conv, dict):
        return errs
    strategy = conv.get("strategy")
    if strategy not in ("None", "Webhook"):
        errs.append(not_supported(f"{path}.strategy", strategy, ["None", "Webhook"]))
        return errs
    wh = conv.get("webhook") if isinstance(conv.get("webhook"), dict) else {}
    cc, crv = wh.get("clientConfig"), wh.get("conversionReviewVersions") or []
    if strategy == "None":
        if cc is not None:
            errs.append(forbidden(f"{path}.webhookClientConfig", "should not be set when strategy is not set to Webhook"))
        if crv:
            errs.append(forbidden(f"{path}.conversionReviewVersions", "should not be set when strategy is not set to Webhook"))
        return errs
    if not isinstance(cc, dict):
        errs.append(required(f"{path}.webhookClientConfig", "required when strategy is set to Webhook"))
    elif (cc.get("url") is None) == (cc.get("service") is None):
        errs.append(required(f"{path}.webhookClientConfig", "exactly one of url or service is required"))
    elif cc.get("url") is not None:
        errs += validate_url(f"{path}.webhookClientConfig.url", cc["url"])
    else:
        errs += validate_service(f"{path}.webhookClientConfig.service", cc["service"])
    if not crv:
        return errs + [required(f"{path}.conversionReviewVersions")]
    return errs + validate_review_versions(f"{path}.conversionReviewVersions", crv)


APPROVAL = "api-approved.kubernetes.io"
_APPROVAL_PATH = f"metadata.annotations[{APPROVAL}]"
_SEE = "see https://github.com/kubernetes/enhancements/pull/1111"


def protected_group(group: str) -> bool:
    """IsProtectedCommunityGroup: the groups under k8s.io and kubernetes.io are the community's."""
    return group in ("k8s.io", "kubernetes.io") or group.endswith((".k8s.io", ".kubernetes.io"))


def _approval_url(v: str) -> bool:
    """url.ParseRequestURI's answer has a scheme and a host (no blank or control character parses)."""
    if any(ch.isspace() or not ch.isprintable() for ch in v):
        return False
    try:
        u = urlsplit(v)
    except ValueError:
        return False
    return bool(u.scheme and u.netloc)


def api_approval_state(crd: dict[str, Any]) -> tuple[str, str]:
    """GetAPIApprovalState: (missing | bypassed | approved | invalid, the reason's words)."""
    v = ((crd.get("metadata") or {}).get("annotations") or {}).get(APPROVAL) or ""
    if not v:
        return "missing", f'protected groups must have approval annotation "{APPROVAL}", {_SEE}'
    if v.startswith("unapproved"):
        return "bypassed", f"not approved: {gofmt.quote(v)}"
    if _approval_url(v):
        return "approved", f"approved in {v}"
    return "invalid", (f'protected groups must have approval annotation "{APPROVAL}" with either a URL or a reason '
                       f'starting with "unapproved", {_SEE}')


def _api_approval(crd: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    """A CRD of a protected group names its approval (a URL) or says it is `unapproved...`
    (KEP-1111); an unchanged state never fails."""
    if not protected_group((crd.get("spec") or {}).get("group") or ""):
        return []
    new, why = api_approval_state(crd)
    if old is not None and new == api_approval_state(old)[0]:
        return []
    if new == "missing":
        return [required(_APPROVAL_PATH, why)]
    if new == "invalid":
        return [invalid(_APPROVAL_PATH, crd["metadata"]["annotations"][APPROVAL], why)]
    return []


def _deprecation_warning(v: dict[str, Any]) -> list[str]:
    """validateDeprecationWarning's words."""
    dw = v.get("deprecationWarning")
    if dw is None:
        return []
    if not v.get("deprecated"):
        return ["can only be set for deprecated versions"]
    words = []
    if len(dw.encode()) > MAX_DEPRECATION_WARNING:
        words.append("must be <= 256 characters long")
    if not dw:
        words.append("must not be an empty string")
    at = 0
    for ch in dw:
        if not ch.isprintable():  # unicode.IsPrint: a control character is not printable either
            words.append(f"must only contain printable UTF-8 characters; non-printable character found at index {at}")
            break
        at += len(ch.encode())
    return words


#: allowedFieldsAtRootSchema, as Go prints the list
_STATUS_ROOT = ("Description", "Type", "Format", "Title", "Maximum", "ExclusiveMaximum", "Minimum", "ExclusiveMinimum",
                "MaxLength", "MinLength", "Pattern", "MaxItems", "MinItems", "UniqueItems", "MultipleOf", "Required",
                "Items", "Properties", "ExternalDocs", "Example", "XPreserveUnknownFields", "XValidations")


def _status_root(schema: dict[str, Any], path: str) -> list[FieldError]:
    """With the status subresource the root schema may only use the fields that stay meaningful
    once `properties[status]` is taken apart (the first other set field is reported)."""
    go = internal.props(schema)
    for name, value in go.items():
        if value is None or value is False or value == "":
            continue
        if name == "Type":
            if value != "object":
                return [invalid(f"{path}.type", value, 'only "object" is allowed as the type at the root of the '
                                                       "schema if the status subresource is enabled")]
            continue
        if name not in _STATUS_ROOT:
            return [invalid(path, go, f"only [{' '.join(_STATUS_ROOT)}] fields are allowed at the root of the "
                                      "schema if the status subresource is enabled")]
    return []


#: what v1 -> internal conversion moves to the spec when every version holds the same
#: (Convert_v1_CustomResourceDefinitionSpec_To_apiextensions_CustomResourceDefinitionSpec)
_FOLDABLE = ("subresources", "schema", "additionalPrinterColumns", "selectableFields")
_LISTS = ("additionalPrinterColumns", "selectableFields")  # slices: nil and empty compare equal


def _folded(versions: list[dict]) -> frozenset[str]:
    """The per-version fields upstream validates once, at spec.<field>, because all versions agree
    (selectable fields only with the schema)."""
    if not versions:
        return frozenset()

    def norm(v: dict, key: str) -> Any:
        value = v.get(key)
        return value or None if key in _LISTS else value

    folded = {key for key in _FOLDABLE if all(norm(v, key) == norm(versions[0], key) for v in versions)}
    if "schema" not in folded:
        folded.discard("selectableFields")
    return frozenset(folded)


_SELECTABLE_WITHOUT_SCHEMA = "selectableFields may only be set when version.schema.openAPIV3Schema is not included"


def _check_schema(schema: Any, path: str, status: bool, stored: cel_rules.Preexisting) -> list[FieldError]:
    """validateCustomResourceDefinitionValidation for one schema."""
    errs = _status_root(schema, path) if status and isinstance(schema, dict) else []
    checked = structural_schema.check(schema, path)
    return errs + checked.errors + cel_rules.compile_rules(schema, path, checked.cel, stored)[1]


def _version(v: dict[str, Any], p: str, folded: frozenset[str], top: dict[str, Any],
             stored: cel_rules.Preexisting) -> list[FieldError]:
    """validateCustomResourceDefinitionVersion: deprecation warning, schema, subresources, printer
    columns, selectable fields (those folded into the spec are validated there)."""
    errs = [invalid(f"{p}.deprecationWarning", v.get("deprecationWarning"), w) for w in _deprecation_warning(v)]
    schema = None if "schema" in folded else (v.get("schema") or {}).get("openAPIV3Schema")
    status = ((top if "subresources" in folded else v).get("subresources") or {}).get("status") is not None
    if schema is not None:
        errs.extend(_check_schema(schema, f"{p}.schema.openAPIV3Schema", status, stored))
    subs = {} if "subresources" in folded else v.get("subresources") or {}
    if isinstance(subs.get("scale"), dict):
        errs.extend(_scale(subs["scale"], schema, f"{p}.subresources.scale"))
    if "additionalPrinterColumns" not in folded:
        errs.extend(_printer_columns(v.get("additionalPrinterColumns"), f"{p}.additionalPrinterColumns"))
    fields = None if "selectableFields" in folded else v.get("selectableFields")
    # a version's own fields over a shared schema are checked against it (the schema conversion
    # moved to the spec still applies to the version)
    field_schema = (v.get("schema") or {}).get("openAPIV3Schema")
    if fields and field_schema is None:
        errs.append(invalid(f"{p}.selectableFields", "", _SELECTABLE_WITHOUT_SCHEMA))
    elif fields:
        errs.extend(_selectable_fields(fields, field_schema, f"{p}.selectableFields"))
    return errs


def _spec_level(versions: list[dict], folded: frozenset[str], stored: cel_rules.Preexisting) -> list[FieldError]:
    """The folded fields, as validateCustomResourceDefinitionSpec checks spec.validation,
    spec.subresources, spec.additionalPrinterColumns and spec.selectableFields."""
    top = versions[0] if versions else {}
    errs: list[FieldError] = []
    schema = (top.get("schema") or {}).get("openAPIV3Schema") if "schema" in folded else None
    if schema is not None:
        status = any((v.get("subresources") or {}).get("status") is not None for v in versions)
        errs.extend(_check_schema(schema, "spec.validation.openAPIV3Schema", status, stored))
    scale = (top.get("subresources") or {}).get("scale") if "subresources" in folded else None
    if isinstance(scale, dict):
        errs.extend(_scale(scale, schema, "spec.subresources.scale"))
    if "additionalPrinterColumns" in folded:
        errs.extend(_printer_columns(top.get("additionalPrinterColumns"), "spec.additionalPrinterColumns"))
    if "selectableFields" in folded and top.get("selectableFields"):
        if schema is None:
            errs.append(invalid("spec.selectableFields", "", "selectableFields may only be set when validations.schema "
                                                            "is included"))
        else:
            errs.extend(_selectable_fields(top["selectableFields"], schema, "spec.selectableFields"))
    return errs


def _schemas(schema: Any) -> Iterator[dict]:
    """Every schema in `schema`, itself first, in upstream's SchemaHas walk."""
    if not isinstance(schema, dict):
        return
    yield schema
    items = schema.get("items")
    subs = list(items) if isinstance(items, list) else [items]
    subs += [*(schema.get("allOf") or ()), *(schema.get("anyOf") or ()), *(schema.get("oneOf") or ()), schema.get("not")]
    subs += [*(schema.get("properties") or {}).values(), schema.get("additionalProperties"),
             *(schema.get("patternProperties") or {}).values(), schema.get("additionalItems"),
             *(schema.get("definitions") or {}).values(), *(schema.get("dependencies") or {}).values()]
    for sub in subs:
        yield from _schemas(sub)


def _format_warnings(schema: Any) -> list[str]:
    """getUnrecognizedFormatsInSchema: each format a schema's type does not know."""
    found = []
    for s in _schemas(schema):
        fmt, t = s.get("format"), s.get("type") or ""
        if fmt:
            known = {"": _STRING_FORMATS, "string": _STRING_FORMATS, "integer": ("int32", "int64"),
                     "number": ("float", "double")}.get(t, ())
            if (fmt.replace("-", "") if t in ("", "string") else fmt) not in known:
                found.append(fmt)
    return found


def _preexisting(crd: dict[str, Any] | None) -> cel_rules.Preexisting:
    """findPreexistingExpressions: every rule and messageExpression text in the old CRD's schemas."""
    if crd is None:
        return cel_rules.NEW
    rules, messages = set(), set()
    for v in (crd.get("spec") or {}).get("versions") or []:
        for s in _schemas((v.get("schema") or {}).get("openAPIV3Schema")):
            for r in s.get("x-kubernetes-validations") or []:
                if isinstance(r, dict):
                    rules.add(r.get("rule") or "")
                    messages.add(r.get("messageExpression") or "")
    return cel_rules.Preexisting(frozenset(rules), frozenset(messages))


#: the string formats CRD schemas validate (1.37), as go-openapi normalizes them (no dashes)
_STRING_FORMATS = frozenset((
    "bsonobjectid", "uri", "email", "hostname", "ipv4", "ipv6", "cidr", "mac", "uuid", "uuid3", "uuid4", "uuid5",
    "isbn", "isbn10", "isbn13", "creditcard", "ssn", "hexcolor", "rgbcolor", "byte", "password", "date", "duration",
    "datetime", "quantity", "k8sshortname", "k8slongname"))


def format_warnings(crd: dict[str, Any]) -> list[str]:
    """WarningsOnCreate: each unrecognized format in the versions' schemas."""
    versions = (crd.get("spec") or {}).get("versions") or []
    return [f'unrecognized format "{f}"' for v in versions
            for f in _format_warnings((v.get("schema") or {}).get("openAPIV3Schema"))]


def validate(crd: dict[str, Any], old: dict[str, Any] | None = None) -> list[FieldError]:
    md = crd.get("metadata") or {}
    spec = crd.get("spec") if isinstance(crd.get("spec"), dict) else {}
    names = spec.get("names") if isinstance(spec.get("names"), dict) else {}
    errs: list[FieldError] = []
    name = md.get("name", "")
    if name and name != f"{names.get('plural', '')}.{spec.get('group', '')}":
        errs.append(invalid("metadata.name", name, 'must be spec.names.plural+"."+spec.group'))
    group = spec.get("group")
    if not group:
        errs.append(required("spec.group", ""))
    elif dns1123_subdomain(group):
        errs.append(invalid("spec.group", group, ",".join(dns1123_subdomain(group))))
    elif "." not in group:
        errs.append(invalid("spec.group", group, "should be a domain with at least one dot"))
    scope = spec.get("scope")
    if not scope:
        errs.append(required("spec.scope", ""))
    elif scope not in ("Cluster", "Namespaced"):
        errs.append(not_supported("spec.scope", scope, ["Cluster", "Namespaced"]))
    versions = spec.get("versions") or []
    if not versions:
        errs.append(invalid("spec.versions", spec.get("versions"), "must have exactly one version marked as storage version"))
    for i, v in enumerate(versions):
        if (v.get("schema") or {}).get("openAPIV3Schema") is None:
            errs.append(required(f"spec.versions[{i}].schema.openAPIV3Schema", "schemas are required"))
    if spec.get("preserveUnknownFields") is True and any(
            defaulting.has_defaults((v.get("schema") or {}).get("openAPIV3Schema")) for v in versions):
        errs.append(invalid("spec.preserveUnknownFields", True, "must be false in order to use defaults in the schema"))
    folded = _folded(versions)
    stored = _preexisting(old)
    seen: set[str] = set()
    unique = True
    storage = 0
    for i, v in enumerate(versions):
        p = f"spec.versions[{i}]"
        vname = v.get("name", "")
        storage += bool(v.get("storage"))
        unique = unique and vname not in seen
        seen.add(vname)
        if dns1035_label(vname):
            errs.append(invalid(f"{p}.name", vname, ",".join(dns1035_label(vname))))
        errs.extend(_version(v, p, folded, versions[0], stored))
    if not unique:
        errs.append(invalid("spec.versions", [internal.version(v, folded) for v in versions],
                            "must contain unique version names"))
    if versions and storage != 1:
        errs.append(invalid("spec.versions", [internal.version(v, folded) for v in versions],
                            "must have exactly one version marked as storage version"))
    # conversion sets spec.version to the first version's name, which is checked again there
    if versions and dns1035_label(first := versions[0].get("name", "")):
        errs.append(invalid("spec.version", first, ",".join(dns1035_label(first))))
    for f in ("plural", "singular", "kind", "listKind"):
        if not names.get(f):
            errs.append(required(f"spec.names.{f}", ""))
    errs.extend(_names(names, "spec.names"))
    errs.extend(_spec_level(versions, folded, stored))
    errs.extend(_conversion(spec.get("conversion"), "spec.conversion"))
    errs.extend(_status(crd, versions))
    errs.extend(_api_approval(crd, old))
    errs.extend(_preserve_unknown_fields(crd, old))
    return errs


def _preserve_unknown_fields(crd: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    """validatePreserveUnknownFields: a v1 CRD never turns spec.preserveUnknownFields on (one that
    had it, from v1beta1 days, keeps it)."""
    if old is not None and (old.get("spec") or {}).get("preserveUnknownFields") is True:
        return []
    if (crd.get("spec") or {}).get("preserveUnknownFields") is True:
        return [invalid("spec.preserveUnknownFields", True, "cannot set to true, set x-kubernetes-preserve-unknown-fields "
                                                            "to true in spec.versions[*].schema instead")]
    return []


def validate_status(crd: dict[str, Any]) -> list[FieldError]:
    """A write through /status: upstream checks only the accepted names (and metadata)."""
    return _names((crd.get("status") or {}).get("acceptedNames") or {}, "status.acceptedNames")


def _status(crd: dict[str, Any], versions: list[dict]) -> list[FieldError]:
    status = crd.get("status") or {}
    errs = _names(status.get("acceptedNames") or {}, "status.acceptedNames")
    stored = status.get("storedVersions") or []
    path = "status.storedVersions"
    if not stored:
        return errs + [invalid(path, stored, "must have at least one stored version")]
    names = {v.get("name") for v in versions}
    for v in versions:
        if v.get("storage") and v.get("name") not in stored:
            errs.append(invalid(path, stored, "must have the storage version " + v.get("name", "")))
    for i, s in enumerate(stored):
        if s not in names:
            errs.append(invalid(f"{path}[{i}]", s, "missing from spec.versions; " + s +
                                " was previously a storage version, and must remain in spec.versions until a "
                                "storage migration ensures no data remains persisted in " + s +
                                " and removes " + s + " from status.storedVersions"))
    return errs


def validate_update(new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
    errs = validate(new, old)
    ns, os_ = new.get("spec") or {}, old.get("spec") or {}
    if ns.get("group") != os_.get("group"):
        errs.append(immutable("spec.group", ns.get("group")))
    if (ns.get("names") or {}).get("plural") != (os_.get("names") or {}).get("plural"):
        errs.append(immutable("spec.names.plural", (ns.get("names") or {}).get("plural")))
    established = any(c.get("type") == "Established" and c.get("status") == "True"
                      for c in (old.get("status") or {}).get("conditions") or [])
    if established:
        if ns.get("scope") != os_.get("scope"):
            errs.append(immutable("spec.scope", ns.get("scope")))
        if (ns.get("names") or {}).get("kind") != (os_.get("names") or {}).get("kind"):
            errs.append(immutable("spec.names.kind", (ns.get("names") or {}).get("kind")))
    return errs
