"""Semantic validation of resource.k8s.io (DRA) objects, on the v1 shape.

Every served version converts to v1 before validation, so one set of rules
covers v1, v1beta2 and v1beta1 (as upstream validates its internal type).
CEL selectors are compiled at create and update, as upstream's validation
compiles them, so one that does not parse, type-check or evaluate to a bool is
refused before any allocator sees it.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable

import orjson

from ..cel import CELError
from ..dra import device_cel
from ..machinery.validation import (
    FieldError,
    Stringer,
    dns1123_label,
    dns1123_subdomain,
    duplicate,
    forbidden,
    immutable,
    interface_address_errors,
    invalid,
    label_name,
    label_value,
    node_selector_terms_value,
    validate_node_selector,
    not_supported,
    qualified_name,
    required,
    too_long,
    too_many,
    validate_conditions,
)

REQUESTS_MAX = 32
CONSTRAINTS_MAX = 32
CONFIG_MAX = 32
SELECTORS_MAX = 32
FIRST_AVAILABLE_MAX = 8
TOLERATIONS_MAX = 16
CEL_MAX_LENGTH = 10 * 1024
OPAQUE_PARAMETERS_MAX = 10 * 1024
RESERVED_FOR_MAX = 256
RESULTS_MAX = 32
POOL_NAME_MAX = 253
SLICE_DEVICES_MAX = 128
SLICE_DEVICES_MAX_WITH_TAINTS_OR_COUNTERS = 64
COUNTER_SETS_MAX = 8
COUNTERS_PER_SET_MAX = 32
ATTRIBUTES_AND_CAPACITY_MAX = 32
ID_MAX = 32
ATTRIBUTE_VALUE_MAX = 64
TAINTS_MAX = 16
COUNTER_CONSUMPTIONS_MAX = 2
BINDING_CONDITIONS_MAX = 4
DEVICE_STATUS_CONDITIONS_MAX = 8
DEVICE_STATUS_DATA_MAX = 10 * 1024
INTERFACE_NAME_MAX = 256
HARDWARE_ADDRESS_MAX = 128
NETWORK_IPS_MAX = 16
TAINT_RULE_CONDITIONS_MAX = 8

TAINT_EFFECTS = ("NoExecute", "NoSchedule", "None")  # sorted, as upstream lists them
TOLERATION_OPERATORS = ("Equal", "Exists")
ALLOCATION_MODES = ("All", "ExactCount")
CONFIG_SOURCES = ("FromClaim", "FromClass")

_C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
_C_IDENTIFIER_MSG = (
    "a valid C identifier must start with alphabetic character or '_', followed by a string of alphanumeric "
    "characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used for validation is "
    "'[A-Za-z_][A-Za-z0-9_]*')"
)
_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(-(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*)?"
    r"(\+[0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*)?$"
)
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")

Errors = list[FieldError]


# --- shared building blocks -------------------------------------------------


def each(items: Any, path: str, limit: int, check: Callable[[Any, str], Errors]) -> Errors:
    """Upstream's validateSlice: a too-long list reports only its size."""
    items = items or []
    if limit >= 0 and len(items) > limit:
        return [too_many(path, len(items), limit)]
    errs: Errors = []
    for i, item in enumerate(items):
        errs += check(item, f"{path}[{i}]")
    return errs


def each_unique(items: Any, path: str, limit: int, check: Callable[[Any, str], Errors], key: Callable[[Any], Any]) -> Errors:
    """Upstream's validateSet: validateSlice plus a Duplicate per repeated key."""
    errs = each(items, path, limit, check)
    if errs and errs[0].reason == "FieldValueTooMany":
        return errs
    return errs + duplicates(items, path, key)


def duplicates(items: Any, path: str, key: Callable[[Any], Any]) -> Errors:
    """A Duplicate for each item whose key an earlier item had."""
    errs: Errors = []
    seen: set = set()
    for i, item in enumerate(items or []):
        k = key(item)
        if k in seen:
            errs.append(duplicate(f"{path}[{i}]", k))
        seen.add(k)
    return errs


def _messages(path: str, value: str, msgs: Iterable[str]) -> Errors:
    return [invalid(path, value, m) for m in msgs]


def driver_name(name: Any, path: str) -> Errors:
    """Same rule as a CSI driver name: DNS subdomain (case-insensitive), at most 63."""
    name = name or ""
    errs: Errors = []
    if not name:
        errs.append(required(path))
    if len(name) > 63:
        errs.append(too_long(path, 63))
    return errs + _messages(path, name, dns1123_subdomain(name.lower()))


def pool_name(name: Any, path: str) -> Errors:
    if not name:
        return [required(path)]
    errs: Errors = [too_long(path, POOL_NAME_MAX)] if len(name) > POOL_NAME_MAX else []
    for part in name.split("/"):
        errs += _messages(path, part, dns1123_subdomain(part))
    return errs


def uid(value: str, path: str) -> Errors:
    if not _UUID.match(value):
        return [invalid(path, value, "uid must be in RFC 4122 normalized form, `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` with lowercase hexadecimal characters")]
    return []


def raw_object(value: Any, path: str, limit: int, stored: bool = False) -> Errors:
    """An opaque JSON object (RawExtension), bounded in size unless already stored."""
    if value is None:
        return [required(path)]
    if not stored and len(orjson.dumps(value)) > limit:
        return [too_long(path, limit)]
    if not isinstance(value, dict):
        return [invalid(path, "<value omitted>", "must be a valid JSON object")]
    return []


# --- claims ----------------------------------------------------------------


def request_names(devices: dict) -> dict[str, set[str] | None]:
    """Request name -> its subrequest names (None for an `exactly` request)."""
    names: dict[str, set[str] | None] = {}
    for r in devices.get("requests") or []:
        subs = r.get("firstAvailable") or []
        names[r.get("name", "")] = {s.get("name", "") for s in subs} if subs else None
    return names


def _has_request(names: dict, ref: str) -> bool:
    parts = ref.split("/")
    if len(parts) > 2 or parts[0] not in names:
        return False
    return len(parts) == 1 or parts[1] in (names[parts[0]] or set())


_REF_MSG = "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"


def request_ref(ref: str, path: str, names: dict) -> Errors:
    parts = ref.split("/")
    if len(parts) > 2:
        return [invalid(path, ref, _REF_MSG)]
    errs: Errors = []
    for part in parts:
        errs += _messages(path, part, dns1123_label(part))
    if not _has_request(names, ref):
        errs.append(invalid(path, ref, _REF_MSG))
    return errs


def _request_refs(refs: Any, path: str, names: dict) -> Errors:
    return each_unique(refs, path, REQUESTS_MAX, lambda r, p: request_ref(r, p, names), lambda r: r)


def selectors(items: Any, path: str) -> Errors:
    def one(sel: dict, p: str) -> Errors:
        cel = sel.get("cel")
        if cel is None:
            return [required(f"{p}.cel")]
        if len(cel.get("expression") or "") > CEL_MAX_LENGTH:
            return [too_long(f"{p}.cel.expression", CEL_MAX_LENGTH)]
        if not cel.get("expression"):
            return [required(f"{p}.cel.expression", "expression must not be empty")]
        return _compile_selector(cel["expression"], f"{p}.cel.expression")

    return each(items, path, SELECTORS_MAX, one)


_SELECTOR_ENV = device_cel.environment()


def _compile_selector(expression: Any, path: str) -> Errors:
    if not isinstance(expression, str):
        return []
    try:
        program = _SELECTOR_ENV.compile(expression)
    except CELError as e:
        return [invalid(path, expression, f"compilation failed: {e}")]
    if program.result_type.name not in ("bool", "dyn"):
        return [invalid(path, expression, "must evaluate to bool")]
    if device_cel.estimated_cost(program) > device_cel.MAX_COST:
        return [forbidden(path, "too complex, exceeds cost limit")]
    return []


def allocation_mode(req: dict, path: str) -> Errors:
    mode, count = req.get("allocationMode") or "", req.get("count") or 0
    if mode == "All":
        return [invalid(f"{path}.count", count, "must not be specified when allocationMode is 'All'")] if count else []
    if mode == "ExactCount":
        return [invalid(f"{path}.count", count, "must be greater than zero")] if count <= 0 else []
    return [not_supported(f"{path}.allocationMode", mode, ALLOCATION_MODES)]


def toleration(t: dict, path: str) -> Errors:
    errs: Errors = []
    key, value, op = t.get("key") or "", t.get("value") or "", t.get("operator") or ""
    if key:
        errs += label_name(key, f"{path}.key")
    if op == "Exists":
        if value:
            errs.append(invalid(f"{path}.value", value, "must be empty for operator `Exists`"))
    elif op == "Equal":
        if not key:
            errs.append(invalid(f"{path}.operator", op, "operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
        errs += _messages(f"{path}.value", value, label_value(value))
    elif not op:
        errs.append(required(f"{path}.operator"))
    else:
        errs.append(not_supported(f"{path}.operator", op, TOLERATION_OPERATORS))
    effect = t.get("effect") or ""
    if effect and effect not in TAINT_EFFECTS:
        errs.append(not_supported(f"{path}.effect", effect, TAINT_EFFECTS))
    return errs


def _device_class_name(name: Any, path: str) -> Errors:
    if not name:
        return [required(path)]
    return _messages(path, name, dns1123_subdomain(name))


def _exact_like(req: dict, path: str) -> Errors:
    errs = _device_class_name(req.get("deviceClassName"), f"{path}.deviceClassName")
    errs += selectors(req.get("selectors"), f"{path}.selectors")
    errs += allocation_mode(req, path)
    errs += each(req.get("tolerations"), f"{path}.tolerations", TOLERATIONS_MAX, toleration)
    return errs


def device_request(req: dict, path: str) -> Errors:
    errs = _messages(f"{path}.name", req.get("name", ""), dns1123_label(req.get("name", "")))
    exactly, first = req.get("exactly"), req.get("firstAvailable") or []
    if exactly is None and not first:
        errs.append(required(path, "exactly one of `exactly` or `firstAvailable` is required"))
    elif exactly is not None and first:
        errs.append(invalid(path, None, "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set"))
    elif first:
        def sub(s: dict, p: str) -> Errors:
            return _messages(f"{p}.name", s.get("name", ""), dns1123_label(s.get("name", ""))) + _exact_like(s, p)

        errs += each_unique(first, f"{path}.firstAvailable", FIRST_AVAILABLE_MAX, sub, lambda s: s.get("name", ""))
    else:
        errs += _exact_like(exactly, f"{path}.exactly")
    return errs


def _fully_qualified(name: str, path: str) -> Errors:
    errs = attribute_key(name, path)
    if "/" not in name:
        errs.append(invalid(path, name, "a fully qualified name must be a domain and a name separated by a slash"))
    return errs


def opaque_config(cfg: dict, path: str, stored: bool = False) -> Errors:
    opaque = cfg.get("opaque")
    if opaque is None:
        return [required(f"{path}.opaque")]
    return driver_name(opaque.get("driver"), f"{path}.opaque.driver") + raw_object(
        opaque.get("parameters"), f"{path}.opaque.parameters", OPAQUE_PARAMETERS_MAX, stored
    )


def device_claim(devices: dict, path: str) -> Errors:
    names = request_names(devices)
    errs = each_unique(devices.get("requests"), f"{path}.requests", REQUESTS_MAX, device_request, lambda r: r.get("name", ""))

    def constraint(c: dict, p: str) -> Errors:
        e = _request_refs(c.get("requests"), f"{p}.requests", names)
        match, distinct = c.get("matchAttribute"), c.get("distinctAttribute")
        if match is not None and distinct is not None:
            e.append(invalid(p, None, 'exactly one of "matchAttribute" or "distinctAttribute" is required, but multiple fields are set'))
        elif match is not None:
            e += _fully_qualified(match, f"{p}.matchAttribute")
        elif distinct is not None:
            e += _fully_qualified(distinct, f"{p}.distinctAttribute")
        else:
            e.append(required(p, 'exactly one of "matchAttribute" or "distinctAttribute" is required'))
        return e

    errs += each(devices.get("constraints"), f"{path}.constraints", CONSTRAINTS_MAX, constraint)
    errs += each(
        devices.get("config"),
        f"{path}.config",
        CONFIG_MAX,
        lambda c, p: _request_refs(c.get("requests"), f"{p}.requests", names) + opaque_config(c, p),
    )
    return errs


def claim_spec(spec: dict, path: str) -> Errors:
    return device_claim(spec.get("devices") or {}, f"{path}.devices")


def _device_id(d: dict) -> tuple:
    return (d.get("driver", ""), d.get("pool", ""), d.get("device", ""), d.get("shareID"))


def _device_id_text(d: dict) -> Stringer:
    """structured.SharedDeviceID's String(): driver/pool/device[/shareID]."""
    base = f"{d.get('driver', '')}/{d.get('pool', '')}/{d.get('device', '')}"
    return Stringer(f"{base}/{d['shareID']}" if d.get("shareID") else base)


def binding_parameters(item: dict, path: str) -> Errors:
    conds, fails = item.get("bindingConditions") or [], item.get("bindingFailureConditions") or []
    errs = each(conds, f"{path}.bindingConditions", BINDING_CONDITIONS_MAX, label_name)
    errs += each(fails, f"{path}.bindingFailureConditions", BINDING_CONDITIONS_MAX, label_name)
    for field, values in (("bindingConditions", conds), ("bindingFailureConditions", fails)):
        seen: set = set()
        for i, v in enumerate(values):
            if v in seen:
                errs.append(duplicate(f"{path}.{field}[{i}]", v))
            seen.add(v)
    for i, v in enumerate(fails):
        if v in conds:
            errs.append(invalid(f"{path}.bindingFailureConditions[{i}]", v, "bindingFailureConditions must not overlap with bindingConditions"))
    if fails and not conds:
        errs.append(invalid(f"{path}.bindingConditions", conds, "bindingConditions are required to use bindingFailureConditions"))
    if conds and not fails:
        errs.append(invalid(f"{path}.bindingFailureConditions", fails, "bindingFailureConditions are required to use bindingConditions"))
    return errs


def allocation(alloc: dict, path: str, names: dict) -> Errors:
    devices = alloc.get("devices") or {}

    def result(r: dict, p: str) -> Errors:
        e = request_ref(r.get("request", ""), f"{p}.request", names)
        e += driver_name(r.get("driver"), f"{p}.driver")
        e += pool_name(r.get("pool"), f"{p}.pool")
        e += device_name(r.get("device"), f"{p}.device")
        e += binding_parameters(r, p)
        if r.get("shareID") is not None:
            e += uid(r["shareID"], f"{p}.shareID")
        return e

    def config(c: dict, p: str) -> Errors:
        src = c.get("source") or ""
        e: Errors = [required(f"{p}.source")] if not src else []
        if src and src not in CONFIG_SOURCES:
            e.append(not_supported(f"{p}.source", src, CONFIG_SOURCES))
        return e + _request_refs(c.get("requests"), f"{p}.requests", names) + opaque_config(c, p)

    errs = each(devices.get("results"), f"{path}.devices.results", RESULTS_MAX, result)
    errs += each(devices.get("config"), f"{path}.devices.config", 2 * CONFIG_MAX, config)
    return errs


def network_data(nd: Any, path: str) -> Errors:
    if not nd:
        return []
    errs: Errors = []
    if len(nd.get("interfaceName") or "") > INTERFACE_NAME_MAX:
        errs.append(too_long(f"{path}.interfaceName", INTERFACE_NAME_MAX))
    if len(nd.get("hardwareAddress") or "") > HARDWARE_ADDRESS_MAX:
        errs.append(too_long(f"{path}.hardwareAddress", HARDWARE_ADDRESS_MAX))
    return errs + each_unique(nd.get("ips"), f"{path}.ips", NETWORK_IPS_MAX, interface_address_errors, lambda a: a)


def claim_status(status: dict, old_status: dict, names: dict, deleting: bool, path: str = "status") -> Errors:
    reserved = status.get("reservedFor") or []

    def consumer(ref: dict, p: str) -> Errors:
        return [required(f"{p}.{f}") for f in ("resource", "name", "uid") if not ref.get(f)]

    errs = each_unique(reserved, f"{path}.reservedFor", RESERVED_FOR_MAX, consumer, lambda r: r.get("uid", ""))
    alloc = status.get("allocation")
    allocated = {_device_id(r) for r in ((alloc or {}).get("devices") or {}).get("results") or []}

    def device_status(d: dict, p: str) -> Errors:
        e = driver_name(d.get("driver"), f"{p}.driver") + pool_name(d.get("pool"), f"{p}.pool")
        e += device_name(d.get("device"), f"{p}.device")
        if d.get("shareID") is not None:
            e += uid(d["shareID"], f"{p}.shareID")
        if _device_id(d) not in allocated:
            e.append(invalid(p, _device_id_text(d), "must be an allocated device in the claim"))
        conds = d.get("conditions") or []
        if len(conds) > DEVICE_STATUS_CONDITIONS_MAX:
            e.append(too_many(f"{p}.conditions", len(conds), DEVICE_STATUS_CONDITIONS_MAX))
        e += validate_conditions(conds, f"{p}.conditions")
        if d.get("data") is not None:
            e += raw_object(d["data"], f"{p}.data", DEVICE_STATUS_DATA_MAX)
        return e + network_data(d.get("networkData"), f"{p}.networkData")

    errs += each_unique(status.get("devices"), f"{path}.devices", -1, device_status, _device_id_text)
    if reserved:
        if alloc is None:
            errs.append(forbidden(f"{path}.reservedFor", "may not be specified when `allocated` is not set"))
        elif deleting:
            old_uids = {r.get("uid") for r in old_status.get("reservedFor") or []}
            if any(r.get("uid") not in old_uids for r in reserved):
                errs.append(forbidden(f"{path}.reservedFor", "new entries may not be added while `deallocationRequested` or `deletionTimestamp` are set"))
    old_alloc = old_status.get("allocation")
    if old_alloc is not None and alloc is not None:
        if alloc != old_alloc:
            errs.append(immutable(f"{path}.allocation", alloc))
    elif alloc is not None:
        errs += allocation(alloc, f"{path}.allocation", names)
    return errs


# --- slices ----------------------------------------------------------------


def device_name(name: Any, path: str) -> Errors:
    name = name or ""
    if not name:
        return [required(path)]
    return _messages(path, name, dns1123_label(name))


def _c_identifier(ident: str, path: str) -> Errors:
    errs: Errors = [too_long(path, ID_MAX)] if len(ident) > ID_MAX else []
    if not _C_IDENTIFIER.match(ident):
        errs.append(invalid(path, ident, _C_IDENTIFIER_MSG))
    return errs


def attribute_key(name: str, path: str) -> Errors:
    """A C identifier, optionally prefixed by a domain (`gpu.example.com/model`)."""
    parts = name.split("/")
    if len(parts) == 1:
        return _c_identifier(name, path)
    errs: Errors = []
    domain, ident = parts[0], parts[1]
    errs += [invalid(path, "", "the domain must not be empty")] if not domain else driver_name(domain, path)
    errs += [invalid(path, "", "the name must not be empty")] if not ident else _c_identifier(ident, path)
    return errs


def _attribute(attr: dict, path: str) -> Errors:
    errs: Errors = []
    kinds = [k for k in ("bool", "int", "string", "version", "bools", "ints", "strings", "versions") if attr.get(k) is not None]
    if "string" in kinds and len(attr["string"]) > ATTRIBUTE_VALUE_MAX:
        errs.append(too_long(f"{path}.string", ATTRIBUTE_VALUE_MAX))
    if "version" in kinds:
        v = attr["version"]
        if not _SEMVER.match(v):
            errs.append(invalid(f"{path}.version", v, "must be a string compatible with semver.org spec 2.0.0"))
        if len(v) > ATTRIBUTE_VALUE_MAX:
            errs.append(too_long(f"{path}.version", ATTRIBUTE_VALUE_MAX))
    if not kinds:
        errs.append(invalid(path, "", "exactly one value must be specified"))
    elif len(kinds) > 1:
        errs.append(invalid(path, attr, "exactly one value must be specified"))
    return errs


def _keyed(mapping: Any, path: str, check_key: Callable[[str, str], Errors], check_value: Callable[[Any, str], Errors], limit: int = -1) -> Errors:
    mapping = mapping or {}
    if limit >= 0 and len(mapping) > limit:
        return [too_many(path, len(mapping), limit)]
    errs: Errors = []
    for k, v in mapping.items():
        p = f"{path}[{k}]"
        errs += check_key(k, p) + check_value(v, p)
    return errs


def _counter_name(name: str, path: str) -> Errors:
    return _messages(path, name, dns1123_label(name))


def _counters(counters: Any, path: str, limit: int) -> Errors:
    if not counters:
        return [required(path)]
    return _keyed(counters, path, _counter_name, lambda v, p: [], limit)


def _capacity(multi: bool) -> Callable[[dict, str], Errors]:
    def check(cap: dict, path: str) -> Errors:
        policy = cap.get("requestPolicy")
        if policy is None:
            return []
        if not multi:
            return [forbidden(f"{path}.requestPolicy", "allowMultipleAllocations must be true")]
        if policy.get("validValues") and policy.get("validRange") is not None:
            return [forbidden(f"{path}.requestPolicy", 'exactly one policy can be specified, cannot specify "validValues" and "validRange" at the same time')]
        if policy.get("validValues") and policy.get("default") is None:
            return [required(f"{path}.requestPolicy.default", "required when validValues is defined")]
        if policy.get("validRange") is not None and policy.get("default") is None:
            return [required(f"{path}.requestPolicy.default", "required when validRange is defined")]
        return []

    return check


def taint(t: dict, path: str, old: dict | None = None) -> Errors:
    errs = label_name(t.get("key"), f"{path}.key")
    if t.get("value"):
        errs += _messages(f"{path}.value", t["value"], label_value(t["value"]))
    effect = t.get("effect") or ""
    if old is None or old.get("effect") != effect:
        if not effect:
            errs.append(required(f"{path}.effect"))
        elif effect not in TAINT_EFFECTS:
            errs.append(not_supported(f"{path}.effect", effect, TAINT_EFFECTS))
    return errs


def _node_selection_members(obj: dict, fields: tuple[str, ...], path: str, empty_name_msg: str) -> tuple[list[str], Errors]:
    chosen: list[str] = []
    errs: Errors = []
    if "nodeName" in fields and obj.get("nodeName") is not None:
        if obj["nodeName"]:
            chosen.append("`nodeName`")
            errs += _messages(f"{path}.nodeName", obj["nodeName"], dns1123_subdomain(obj["nodeName"]))
        else:
            errs.append(invalid(f"{path}.nodeName", "", empty_name_msg))
    if obj.get("nodeSelector") is not None:
        chosen.append("`nodeSelector`")
    for flag in ("allNodes", "perDeviceNodeSelection"):
        if flag in fields and obj.get(flag) is not None:
            if obj[flag]:
                chosen.append(f"`{flag}`")
            else:
                errs.append(invalid(f"{path}.{flag}", False, "must be either unset or set to true"))
    return chosen, errs


def device(d: dict, path: str, old: dict | None, per_device: bool) -> Errors:
    errs = device_name(d.get("name"), f"{path}.name")
    attrs, caps = d.get("attributes") or {}, d.get("capacity") or {}
    if len(attrs) + len(caps) > ATTRIBUTES_AND_CAPACITY_MAX:
        errs.append(invalid(path, len(attrs) + len(caps), f"the total number of attributes and capacities must not exceed {ATTRIBUTES_AND_CAPACITY_MAX}"))
    errs += _keyed(attrs, f"{path}.attributes", attribute_key, _attribute)
    errs += _keyed(caps, f"{path}.capacity", attribute_key, _capacity(bool(d.get("allowMultipleAllocations"))))
    if old is None or old.get("taints") != d.get("taints"):
        errs += each(d.get("taints"), f"{path}.taints", TAINTS_MAX, lambda t, p: taint(t, p))

    def consumption(c: dict, p: str) -> Errors:
        e = [required(f"{p}.counterSet")] if not c.get("counterSet") else _counter_name(c["counterSet"], f"{p}.counterSet")
        return e + _counters(c.get("counters"), f"{p}.counters", COUNTERS_PER_SET_MAX)

    errs += each_unique(d.get("consumesCounters"), f"{path}.consumesCounters", COUNTER_CONSUMPTIONS_MAX, consumption, lambda c: c.get("counterSet"))
    if per_device:
        chosen, e = _node_selection_members(d, ("nodeName", "allNodes"), path, "must not be empty")
        errs += e
        msg = "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when `perDeviceNodeSelection` is set to true in the ResourceSlice spec"
        if not chosen:
            errs.append(required(path, msg))
        elif len(chosen) > 1:
            errs.append(invalid(path, "{" + ", ".join(chosen) + "}", msg))
    elif any(d.get(f) is not None for f in ("nodeName", "nodeSelector", "allNodes")):
        errs.append(invalid(path, None, "`nodeName`, `nodeSelector` and `allNodes` can only be set if `perDeviceNodeSelection` is set to true in the ResourceSlice spec"))
    return errs + binding_parameters(d, path)


class _Verdicts:
    """Names (attribute keys, device and counter names, versions) known to
    pass a check that depends on the name alone. Thousands of nodes publish
    devices with the same few names, so each is checked once; the memo is
    bounded since names come from clients."""

    LIMIT = 4096

    def __init__(self, check: Callable[[str], bool]):
        self._check = check
        self._ok: set[str] = set()

    def __call__(self, name: Any) -> bool:
        if name in self._ok:
            return True
        if not isinstance(name, str) or not self._check(name):
            return False
        if len(self._ok) < self.LIMIT:
            self._ok.add(name)
        return True

    def all(self, names: Iterable[Any]) -> bool:
        """Every one of `names` passes: one set comparison when all are known."""
        return self._ok.issuperset(names) or all(map(self, names))


_key_ok = _Verdicts(lambda k: not attribute_key(k, ""))
_label_ok = _Verdicts(lambda n: bool(n) and not dns1123_label(n))
_version_ok = _Verdicts(lambda v: bool(_SEMVER.match(v)) and len(v) <= ATTRIBUTE_VALUE_MAX)
_PLAIN_KINDS = frozenset(("bool", "int", "bools", "ints", "strings", "versions"))
_NODE_SELECTION = ("nodeName", "nodeSelector", "allNodes")
#: device fields whose presence (even empty) sends a device to the full validation
_UNCOMMON_DEVICE_FIELDS = frozenset(("taints", "bindingConditions", "bindingFailureConditions", *_NODE_SELECTION))


def _device_valid(d: dict) -> bool:
    """True only where `device(d, ..., per_device=False)` finds nothing, whatever
    the old device: the common shape (no taints, bindings or per-device node
    selection) checked without building paths or error lists, attribute and
    capacity names by one set comparison against names seen valid before.
    Anything this does not recognise as valid gets the full validation, which
    words the errors."""
    if not _UNCOMMON_DEVICE_FIELDS.isdisjoint(d) or not _label_ok(d.get("name")):
        return False
    attrs, caps = d.get("attributes") or {}, d.get("capacity") or {}
    if len(attrs) + len(caps) > ATTRIBUTES_AND_CAPACITY_MAX or not _key_ok.all(attrs) or not _key_ok.all(caps):
        return False
    for attr in attrs.values():
        if len(attr) != 1:
            return False
        (kind, v), = attr.items()
        if kind == "string":
            if v.__class__ is not str or len(v) > ATTRIBUTE_VALUE_MAX:
                return False
        elif kind == "version":
            if not _version_ok(v):
                return False
        elif kind not in _PLAIN_KINDS or v is None:
            return False
    for cap in caps.values():
        if "requestPolicy" in cap:
            return False
    consumes = d.get("consumesCounters")
    if consumes:
        if len(consumes) > COUNTER_CONSUMPTIONS_MAX or len({c.get("counterSet") for c in consumes}) < len(consumes):
            return False
        for c in consumes:
            counters = c.get("counters")
            if not _label_ok(c.get("counterSet")) or not counters or len(counters) > COUNTERS_PER_SET_MAX or \
                    not _label_ok.all(counters):
                return False
    return True


def _device_key(d: dict) -> str:
    return d.get("name", "")


def slice_spec(spec: dict, old: dict | None, path: str = "spec") -> Errors:
    errs = driver_name(spec.get("driver"), f"{path}.driver")
    pool = spec.get("pool") or {}
    errs += pool_name(pool.get("name"), f"{path}.pool.name")
    if (pool.get("resourceSliceCount") or 0) <= 0:
        errs.append(invalid(f"{path}.pool.resourceSliceCount", pool.get("resourceSliceCount", 0), "must be greater than zero"))
    if (pool.get("generation") or 0) < 0:
        errs.append(invalid(f"{path}.pool.generation", pool["generation"], "must be greater than or equal to zero"))
    if old is not None:
        for field, new_v, old_v in (
            ("pool.name", pool.get("name"), (old.get("pool") or {}).get("name")),
            ("driver", spec.get("driver"), old.get("driver")),
            ("nodeName", spec.get("nodeName"), old.get("nodeName")),
        ):
            if new_v != old_v:
                errs.append(immutable(f"{path}.{field}", new_v))
    chosen, e = _node_selection_members(spec, ("nodeName", "allNodes", "perDeviceNodeSelection"), path, "must be either unset or set to a non-empty string")
    errs += e
    if (selector := spec.get("nodeSelector")) is not None:  # core's ValidateNodeSelector, then DRA's one term
        errs += validate_node_selector(selector, f"{path}.nodeSelector")
        terms = selector.get("nodeSelectorTerms")
        if len(terms or ()) != 1:
            errs.append(invalid(f"{path}.nodeSelector.nodeSelectorTerms", node_selector_terms_value(terms),
                                "must have exactly one node selector term"))
    msg = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"
    if not chosen:
        errs.append(required(path, msg))
    elif len(chosen) > 1:
        errs.append(invalid(path, "{" + ", ".join(chosen) + "}", msg + ", but multiple fields are set"))
    devices = spec.get("devices")
    if spec.get("sharedCounters") is not None and devices is not None:
        errs.append(invalid(path, "", "only one of `sharedCounters` or `devices` is allowed"))
    devices = devices or []
    heavy = any(d.get("taints") or d.get("consumesCounters") for d in devices)
    old_devices = {d.get("name"): d for d in (old or {}).get("devices") or []}
    per_device = bool(spec.get("perDeviceNodeSelection"))
    limit = SLICE_DEVICES_MAX_WITH_TAINTS_OR_COUNTERS if heavy else SLICE_DEVICES_MAX
    if not per_device and len(devices) <= limit and all(map(_device_valid, devices)):
        errs += duplicates(devices, f"{path}.devices", _device_key)
    else:
        errs += each_unique(
            devices, f"{path}.devices", limit,
            lambda d, p: [] if not per_device and _device_valid(d) else device(d, p, old_devices.get(d.get("name")), per_device),
            _device_key,
        )

    def counter_set(cs: dict, p: str) -> Errors:
        e = [required(f"{p}.name")] if not cs.get("name") else _counter_name(cs["name"], f"{p}.name")
        return e + _counters(cs.get("counters"), f"{p}.counters", COUNTERS_PER_SET_MAX)

    errs += each_unique(spec.get("sharedCounters"), f"{path}.sharedCounters", COUNTER_SETS_MAX, counter_set, lambda c: c.get("name"))
    return errs


# --- classes and taint rules ----------------------------------------------


def class_spec(spec: dict, old: dict | None, path: str = "spec") -> Errors:
    errs = selectors(spec.get("selectors"), f"{path}.selectors")
    stored = old is not None and old.get("config") == spec.get("config")
    errs += each(spec.get("config"), f"{path}.config", CONFIG_MAX, lambda c, p: opaque_config(c, p, stored))
    name = spec.get("extendedResourceName")
    if name is not None and not _is_extended_resource_name(name):
        errs.append(invalid(f"{path}.extendedResourceName", name, "must be a valid extended resource name"))
    return errs


def _is_extended_resource_name(name: str) -> bool:
    """Domain-prefixed, not kubernetes.io, and usable as `requests.<name>` quota key."""
    if "/" not in name or name.startswith("requests."):
        return False
    domain = name.split("/", 1)[0]
    if domain == "kubernetes.io" or domain.endswith(".kubernetes.io"):
        return False
    return not qualified_name("requests." + name)


def taint_rule_spec(spec: dict, old: dict | None, path: str = "spec") -> Errors:
    errs: Errors = []
    sel = spec.get("deviceSelector")
    if sel is not None:
        if sel.get("driver") is not None:
            errs += driver_name(sel["driver"], f"{path}.deviceSelector.driver")
        if sel.get("pool") is not None:
            errs += pool_name(sel["pool"], f"{path}.deviceSelector.pool")
        if sel.get("device") is not None:
            errs += device_name(sel["device"], f"{path}.deviceSelector.device")
    old_taint = (old or {}).get("taint") if old is not None else None
    return errs + taint(spec.get("taint") or {}, f"{path}.taint", old_taint)


def taint_rule_status(status: dict, path: str = "status") -> Errors:
    conds = status.get("conditions") or []
    errs = validate_conditions(conds, f"{path}.conditions")
    if len(conds) > TAINT_RULE_CONDITIONS_MAX:
        errs.append(too_many(f"{path}.conditions", len(conds), TAINT_RULE_CONDITIONS_MAX))
    return errs
