"""The core group ("" / v1): namespaces, nodes, pods, services and friends.

Pods live in core_pods.py (with the pod-spec pieces in core_spec.py) and
services with their IP/port allocators in core_services.py; this module holds
the smaller kinds and registers them all.

Extra strategy hooks beyond base.Strategy, for the API server:
- ServiceStrategy.release(obj) / .restore(objs): allocator bookkeeping.
- NamespaceStrategy.prepare_for_delete(obj): phase Terminating while finalizers run;
  NamespaceStrategy.validate_finalize(new, old) for PUT namespaces/{name}/finalize.
- core_pods.validate_binding for POST pods/{name}/binding.
"""

from __future__ import annotations

import base64
import math
import time

from .base import AGE, Column, Resource, Strategy, register
from .core_pods import PodStrategy, default_pod_spec, pod_spec_ips, validate_binding, validate_pod_template
from .core_printing import AGE_DOC, NAME_DOC, Clock, doc, since
from .core_services import NodePortAllocator, ServiceIPAllocator, ServiceStrategy
from .core_spec import PROTOCOLS, port_number, taint_effect
from .event_encoding import core_encoding
from ..machinery import gofmt, gojson
from ..machinery.quantity import parse_quantity
from ..machinery.validation import (
    FieldError,
    cidr_family,
    config_key,
    dns1123_label,
    dns1123_subdomain,
    duplicate,
    endpoint_ip,
    finalizer_name_errors,
    forbidden,
    immutable,
    invalid,
    label_value,
    legacy_cidr_errors,
    legacy_ip_errors,
    not_supported,
    qualified_name,
    repeats,
    required,
    too_long,
)
from ..quota.resources import is_integer_resource
from . import kind_warnings

__all__ = [
    "default_pod_spec",
    "pod_spec_ips",
    "validate_pod_template",
    "ConfigMapStrategy", "EndpointsStrategy", "EventStrategy", "NamespaceStrategy", "NodePortAllocator",
    "NodeStrategy", "PodStrategy", "SecretStrategy", "ServiceAccountStrategy", "ServiceIPAllocator",
    "ServiceStrategy", "validate_binding",
]

MAX_SECRET_SIZE = 1024 * 1024
_IMMUTABLE_SET = "field is immutable when `immutable` is set"
_NAME_COLUMN = Column("Name", "string", lambda o: o["metadata"]["name"], NAME_DOC, format="name")
_AGE_COLUMN = Column("Age", "string", AGE, AGE_DOC)


def _spec(o: dict) -> dict:
    return o.get("spec") or {}


def _status(o: dict) -> dict:
    return o.get("status") or {}


# --- namespaces --------------------------------------------------------------------


class NamespaceStrategy(Strategy):
    track_generation = False  # upstream's strategy neither sets nor bumps it
    name_validator = staticmethod(dns1123_label)
    field_selectors = {"status.phase": lambda o: _status(o).get("phase", "")}
    metadata_field_selectors = ("metadata.name",)
    columns = [
        _NAME_COLUMN,
        Column("Status", "string", lambda o: _status(o).get("phase", ""), "The status of the namespace"),
        _AGE_COLUMN,
    ]

    def default(self, obj, version):
        obj.setdefault("status", {}).setdefault("phase", "Active")
        self._name_label(obj)

    @staticmethod
    def _name_label(obj: dict) -> None:
        name = (obj.get("metadata") or {}).get("name")
        if name:
            obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = name

    def prepare_for_create(self, obj):
        obj["status"] = {"phase": "Active"}
        finalizers = obj.setdefault("spec", {}).setdefault("finalizers", [])
        if "kubernetes" not in finalizers:
            finalizers.append("kubernetes")
        self._name_label(obj)

    def prepare_for_update(self, new, old):
        new["spec"] = dict(_spec(old))
        self._name_label(new)

    def prepare_for_delete(self, obj: dict) -> None:
        """A delete of a namespace with finalizers starts its termination. `obj` is a shallow
        copy of the cached namespace: its status is replaced, not changed in place."""
        obj["status"] = {**(obj.get("status") or {}), "phase": "Terminating"}

    def blocks_deletion(self, obj: dict) -> bool:
        """The namespace controller empties the namespace, then clears spec.finalizers."""
        return bool(_spec(obj).get("finalizers"))

    def validate(self, obj):
        # ValidateNamespace names the list, not the item; the finalize update names the item
        return [e for f in _spec(obj).get("finalizers") or [] for e in finalizer_name_errors(f, "spec.finalizers")]

    def validate_finalize(self, new: dict, old: dict) -> list[FieldError]:
        return [e for i, f in enumerate(_spec(new).get("finalizers") or [])
                for e in finalizer_name_errors(f, f"spec.finalizers[{i}]")]

    def validate_status_update(self, new, old):
        phase = _status(new).get("phase")
        deleting = bool((new.get("metadata") or {}).get("deletionTimestamp"))
        if not deleting and phase != "Active":
            return [invalid("status.phase", phase, "may only be 'Active' if `deletionTimestamp` is empty")]
        if deleting and phase != "Terminating":
            return [invalid("status.phase", phase, "may only be 'Terminating' if `deletionTimestamp` is not empty")]
        return []


# --- nodes -------------------------------------------------------------------------


def _node_status(node: dict) -> str:
    parts = []
    for c in _status(node).get("conditions") or []:
        if c.get("type") == "Ready":
            parts = ["Ready" if c.get("status") == "True" else "NotReady"]
    parts = parts or ["Unknown"]
    if _spec(node).get("unschedulable"):
        parts.append("SchedulingDisabled")
    return ",".join(parts)


def _node_roles(node: dict) -> str:
    roles = set()
    for k, v in ((node.get("metadata") or {}).get("labels") or {}).items():
        if k.startswith("node-role.kubernetes.io/") and k[len("node-role.kubernetes.io/"):]:
            roles.add(k[len("node-role.kubernetes.io/"):])
        elif k == "kubernetes.io/role" and v:
            roles.add(v)
    return ",".join(sorted(roles)) or "<none>"


def _node_address(kind: str):
    def cell(node: dict) -> str:
        for a in _status(node).get("addresses") or []:
            if a.get("type") == kind:
                return a.get("address", "")
        return "<none>"
    return cell


def _node_info(field: str, unknown: bool = True):
    def cell(node: dict) -> str:
        v = (_status(node).get("nodeInfo") or {}).get(field, "")
        return v or ("<unknown>" if unknown else "")
    return cell


class NodeStrategy(Strategy):
    track_generation = False
    keep_status_on_create = True
    field_selectors = {"spec.unschedulable": lambda o: "true" if _spec(o).get("unschedulable") else "false"}
    metadata_field_selectors = ("metadata.name",)
    columns = [
        _NAME_COLUMN,
        Column("Status", "string", _node_status, "The status of the node"),
        Column("Roles", "string", _node_roles, "The roles of the node"),
        _AGE_COLUMN,
        Column("Version", "string", _node_info("kubeletVersion", False), doc("NodeSystemInfo", "kubeletVersion")),
        Column("Internal-IP", "string", _node_address("InternalIP"), doc("NodeStatus", "addresses"), priority=1),
        Column("External-IP", "string", _node_address("ExternalIP"), doc("NodeStatus", "addresses"), priority=1),
        Column("OS-Image", "string", _node_info("osImage"), doc("NodeSystemInfo", "osImage"), priority=1),
        Column("Kernel-Version", "string", _node_info("kernelVersion"), doc("NodeSystemInfo", "kernelVersion"),
               priority=1),
        Column("Container-Runtime", "string", _node_info("containerRuntimeVersion"),
               doc("NodeSystemInfo", "containerRuntimeVersion"), priority=1),
    ]

    def prepare_for_create(self, obj):
        """Dynamic kubelet config is gone: a create may not set status.config. spec.podPreemptionPolicy
        is dropped while its gate (InPlacePodVerticalScalingSchedulerPreemption, alpha in 1.37) is off."""
        (obj.get("status") or {}).pop("config", None)
        _spec(obj).pop("podPreemptionPolicy", None)

    def prepare_for_update(self, new, old):
        """dropDisabledFields: an update may keep the podPreemptionPolicy a node already has, not add one."""
        if _spec(old).get("podPreemptionPolicy") is None:
            _spec(new).pop("podPreemptionPolicy", None)

    def default(self, obj, version):
        status = obj.get("status")
        if status and status.get("capacity") and not status.get("allocatable"):
            status["allocatable"] = dict(status["capacity"])
        spec = obj.get("spec")
        if isinstance(spec, dict):  # v1's podCIDR is the internal podCIDRs' first (the conversion both ways)
            if spec.get("podCIDRs"):
                spec["podCIDR"] = spec["podCIDRs"][0]
            elif spec.get("podCIDR"):
                spec["podCIDRs"] = [spec["podCIDR"]]

    def warnings_on_create(self, obj):
        return kind_warnings.node_warnings(obj)

    def warnings_on_update(self, new, old):
        return kind_warnings.node_warnings(new)

    def validate(self, obj, old_cidrs: tuple[str, ...] = ()):
        """ValidateNode's taints (at metadata.taints, as upstream reports them) and podCIDRs."""
        errs: list[FieldError] = []
        seen = set()
        for i, t in enumerate(_spec(obj).get("taints") or []):
            p = f"metadata.taints[{i}]"
            key = t.get("key", "")
            if not key:
                errs.append(required(f"{p}.key"))
            errs += [invalid(f"{p}.key", key, m) for m in qualified_name(key)] if key else []
            errs += [invalid(f"{p}.value", t["value"], m) for m in label_value(t["value"])] if t.get("value") else []
            effect = t.get("effect", "")
            if not effect:
                errs.append(required(f"{p}.effect"))
            else:
                errs += taint_effect(effect, f"{p}.effect")
            if (key, effect) in seen:
                errs.append(duplicate(f"{p}.effect", effect))
            seen.add((key, effect))
        return errs + _node_resources(obj) + _pod_cidrs(_spec(obj).get("podCIDRs") or [], old_cidrs)

    def validate_update(self, new, old):
        cidrs, old_cidrs = _spec(new).get("podCIDRs") or [], _spec(old).get("podCIDRs") or []
        errs = self.validate(new, tuple(old_cidrs))
        changed = "node updates may not change podCIDR except from \"\" to valid"
        if old_cidrs and len(cidrs) != len(old_cidrs):
            errs.append(forbidden("spec.podCIDRs", changed))
        elif old_cidrs:
            errs += [forbidden("spec.podCIDRs", changed) for o, n in zip(old_cidrs, cidrs) if o != n]
        o = _spec(old).get("providerID")
        if o and _spec(new).get("providerID") != o:
            errs.append(forbidden("spec.providerID", "node updates may not change providerID except from \"\" to valid"))
        return errs + _duplicate_addresses(new)

    def validate_status_update(self, new, old):
        """nodeStatusStrategy validates as an update of the whole node does (ValidateNodeUpdate)."""
        return self.validate_update(new, old)


def _duplicate_addresses(node: dict) -> list[FieldError]:
    """ValidateNodeUpdate's check that no address is listed twice (a create is not checked)."""
    errs, seen = [], set()
    for i, a in enumerate(_status(node).get("addresses") or []):
        key = (a.get("type", ""), a.get("address", ""))
        if key in seen:
            errs.append(duplicate(f"status.addresses[{i}]", gofmt.Struct(type=key[0], address=key[1])))
        seen.add(key)
    return errs


def _node_resources(node: dict) -> list[FieldError]:
    """ValidateNodeResources: capacity and allocatable quantities not negative, integers for integer
    resources (ValidateResourceQuantityValue, which may report both)."""
    errs: list[FieldError] = []
    for field in ("capacity", "allocatable"):
        for name, value in (_status(node).get(field) or {}).items():
            path, q = f"status.{field}.{name}", parse_quantity(str(value))
            if q < 0:
                errs.append(invalid(path, value, "must be greater than or equal to 0"))
            if is_integer_resource(name) and math.ceil(q * 1000) % 1000:  # Go's MilliValue rounds up
                errs.append(invalid(path, value, "must be an integer"))
    return errs


def _pod_cidrs(cidrs: list, valid_old: tuple[str, ...] = ()) -> list[FieldError]:
    """ValidateNode's podCIDRs: each a legacy CIDR (strict; one the old node held passes), at most
    one of each family, no repeats."""
    errs: list[FieldError] = []
    for i, c in enumerate(cidrs):
        errs += legacy_cidr_errors(c, f"spec.podCIDRs[{i}]", valid_old)
    families = {cidr_family(c) for c in cidrs}
    if len(cidrs) > 1 and not errs and (families != {4, 6} or len(cidrs) > 2):
        errs.append(invalid("spec.podCIDRs", cidrs, "may specify no more than one CIDR for each IP family"))
    errs += [duplicate(f"spec.podCIDRs[{i}]", cidrs[i]) for i in repeats(cidrs)]
    return errs


# --- configmaps and secrets -------------------------------------------------------


def _b64_bytes(value: str) -> bytes:
    """A data value's bytes (as stored: base64; anything else as its own bytes)."""
    try:
        return base64.b64decode(value or "", validate=True)
    except ValueError:
        return (value or "").encode()


def _b64_len(value: str) -> int:
    return len(_b64_bytes(value))


def _immutable_update(new: dict, old: dict, fields: tuple[str, ...]) -> list[FieldError]:
    if not old.get("immutable"):
        return []
    errs = []
    if not new.get("immutable"):
        errs.append(forbidden("immutable", _IMMUTABLE_SET))
    for f in fields:
        if (new.get(f) or {}) != (old.get(f) or {}):
            errs.append(forbidden(f, _IMMUTABLE_SET))
    return errs


class ConfigMapStrategy(Strategy):
    track_generation = False
    columns = [
        _NAME_COLUMN,
        Column("Data", "string", lambda o: len(o.get("data") or {}) + len(o.get("binaryData") or {}),
               "Number of data entries in the config map"),
        _AGE_COLUMN,
    ]

    def validate(self, obj):
        errs: list[FieldError] = []
        data, binary = obj.get("data") or {}, obj.get("binaryData") or {}
        total = 0
        for bag, other, label in (("data", binary, "binaryData"), ("binaryData", data, "data")):
            for key, value in (obj.get(bag) or {}).items():
                errs += [invalid(f"{bag}[{key}]", key, m) for m in config_key(key)]
                if key in other:
                    errs.append(invalid(f"{bag}[{key}]", key, f"duplicate of key present in {label}"))
                total += len(value.encode()) if bag == "data" else _b64_len(value)
        if total > MAX_SECRET_SIZE:  # the whole object: upstream's field.NewPath(""), which prints "[]"
            errs.append(too_long("[]", MAX_SECRET_SIZE))
        return errs

    def validate_update(self, new, old):
        return self.validate(new) + _immutable_update(new, old, ("data", "binaryData"))


#: the data keys a secret type needs, in ValidateSecret's order
_SECRET_REQUIRED_KEYS = {
    "kubernetes.io/dockercfg": (".dockercfg",),
    "kubernetes.io/dockerconfigjson": (".dockerconfigjson",),
    "kubernetes.io/tls": ("tls.crt", "tls.key"),
}
#: the keys whose content must decode as a JSON object (a docker config)
_SECRET_JSON_KEYS = (".dockercfg", ".dockerconfigjson")


class SecretStrategy(Strategy):
    track_generation = False
    field_selectors = {"type": lambda o: o.get("type", "")}
    columns = [
        _NAME_COLUMN,
        Column("Type", "string", lambda o: o.get("type", ""), "The type of the secret"),
        Column("Data", "string", lambda o: len(o.get("data") or {}), "Number of data entries in the secret"),
        _AGE_COLUMN,
    ]

    def default(self, obj, version):
        obj.setdefault("type", "Opaque")

    def to_storage(self, obj, version):
        """stringData is write-only: it is merged into data (base64) and dropped."""
        string_data = obj.pop("stringData", None)
        if string_data:
            data = obj.setdefault("data", {})
            for k, v in string_data.items():
                data[k] = base64.b64encode((v or "").encode()).decode()
        return obj

    def validate(self, obj):
        errs: list[FieldError] = []
        data = obj.get("data") or {}
        total = 0
        for key, value in data.items():
            errs += [invalid(f"data[{key}]", key, m) for m in config_key(key)]
            total += _b64_len(value)
        if total > MAX_SECRET_SIZE:
            errs.append(too_long("data", MAX_SECRET_SIZE))
        stype = obj.get("type", "")
        for key in _SECRET_REQUIRED_KEYS.get(stype, ()):
            if key not in data:
                errs.append(required(f"data[{key}]"))
            elif key in _SECRET_JSON_KEYS and (bad := gojson.map_decode_error(_b64_bytes(data[key]))):
                errs.append(invalid(f"data[{key}]", "<secret contents redacted>", bad))
        if stype == "kubernetes.io/basic-auth" and "username" not in data and "password" not in data:
            errs += [required("data[username]"), required("data[password]")]
        if stype == "kubernetes.io/ssh-auth" and not _b64_len(data.get("ssh-privatekey")):  # present but empty too
            errs.append(required("data[ssh-privatekey]"))
        if stype == "kubernetes.io/service-account-token":
            annotations = (obj.get("metadata") or {}).get("annotations") or {}
            if not annotations.get("kubernetes.io/service-account.name"):
                errs.append(required("metadata.annotations[kubernetes.io/service-account.name]"))
        return errs

    def warnings_on_create(self, obj):
        return kind_warnings.secret_warnings(obj)

    def warnings_on_update(self, new, old):
        return kind_warnings.secret_warnings(new)

    def validate_update(self, new, old):
        """ValidateSecretUpdate: the type and an immutable Secret's data first, then ValidateSecret."""
        errs = [immutable("type", new.get("type"))] if new.get("type") != old.get("type") else []
        return errs + _immutable_update(new, old, ("data",)) + self.validate(new)


# --- service accounts, endpoints, events --------------------------------------


class ServiceAccountStrategy(Strategy):
    track_generation = False
    columns = [
        _NAME_COLUMN,
        Column("Secrets", "string", lambda o: len(o.get("secrets") or []), doc("ServiceAccount", "secrets")),
        _AGE_COLUMN,
    ]

    def warnings_on_create(self, obj):
        return kind_warnings.service_account_warnings(obj)

    def warnings_on_update(self, new, old):
        return kind_warnings.service_account_warnings(new, old)

    def validate(self, obj):
        errs = []
        for i, ref in enumerate(obj.get("imagePullSecrets") or []):
            if not ref.get("name"):
                errs.append(required(f"imagePullSecrets[{i}].name"))
        return errs


def format_endpoints(ep: dict) -> str:
    """formatEndpoints: the first three ip:port pairs, then '+ N more...'."""
    subsets = ep.get("subsets") or []
    if not subsets:
        return "<none>"
    shown: list[str] = []
    count, more = 0, False
    for ss in subsets:
        addrs = ss.get("addresses") or []
        ports = ss.get("ports") or [None]
        for port in ports:
            count += len(addrs)
            for a in addrs:
                if len(shown) == 3:
                    more = True
                    break
                ip = a.get("ip", "")
                if port is None:
                    shown.append(ip)
                else:
                    shown.append(f"[{ip}]:{port.get('port')}" if ":" in ip else f"{ip}:{port.get('port')}")
    text = ",".join(shown)
    return f"{text} + {count - 3} more..." if more else text


def _endpoint_address(a: dict, path: str) -> list[FieldError]:
    """validateEndpointAddress: a legacy IP (strict), a DNS label hostname, a node name, then
    ValidateEndpointIP's reserved ranges."""
    ip = a.get("ip") or ""
    errs: list[FieldError] = []
    if not ip:
        errs.append(required(f"{path}.ip"))
    else:
        errs += legacy_ip_errors(ip, f"{path}.ip")
    if a.get("hostname"):
        errs += [invalid(f"{path}.hostname", a["hostname"], m) for m in dns1123_label(a["hostname"])]
    if (node := a.get("nodeName")) is not None:
        errs += [invalid(f"{path}.nodeName", node, m) for m in dns1123_subdomain(node)]
    return errs + (endpoint_ip(ip, f"{path}.ip") if ip else [])


class EndpointsStrategy(Strategy):
    allow_create_on_update = True
    track_generation = False
    columns = [
        _NAME_COLUMN,
        Column("Endpoints", "string", format_endpoints, doc("Endpoints", "subsets")),
        _AGE_COLUMN,
    ]

    def deprecation(self, version):
        """KEP-4974: v1 Endpoints is deprecated in 1.33, with no removal planned."""
        return "v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice"

    def warnings_on_create(self, obj):
        return kind_warnings.endpoints_warnings(obj)

    def warnings_on_update(self, new, old):
        return kind_warnings.endpoints_warnings(new)

    def validate(self, obj):
        errs: list[FieldError] = []
        for i, ss in enumerate(obj.get("subsets") or []):
            p = f"subsets[{i}]"
            if not ss.get("addresses") and not ss.get("notReadyAddresses"):
                errs.append(required(p, "must specify `addresses` or `notReadyAddresses`"))
            for key in ("addresses", "notReadyAddresses"):
                for j, a in enumerate(ss.get(key) or []):
                    errs += _endpoint_address(a, f"{p}.{key}[{j}]")
            ports = ss.get("ports") or []
            for j, port in enumerate(ports):
                pp = f"{p}.ports[{j}]"
                if len(ports) > 1 and not port.get("name"):
                    errs.append(required(f"{pp}.name"))
                elif port.get("name"):
                    errs += [invalid(f"{pp}.name", port["name"], m) for m in dns1123_label(port["name"])]
                errs += port_number(port.get("port"), f"{pp}.port")
                proto = port.get("protocol", "")
                if not proto:
                    errs.append(required(f"{pp}.protocol"))
                elif proto not in PROTOCOLS:
                    errs.append(not_supported(f"{pp}.protocol", proto, PROTOCOLS))
                if port.get("appProtocol") is not None:
                    errs += [invalid(f"{pp}.appProtocol", port["appProtocol"], m) for m in qualified_name(port["appProtocol"])]
        return errs

    def validate_update(self, new, old):
        """ValidateEndpointsUpdate: the subsets' errors stand only when the subsets changed, so an
        Endpoints stored with IPs strict validation now refuses keeps them through other updates."""
        errs = self.validate(new)
        return errs if errs and new.get("subsets") != old.get("subsets") else []

    def default(self, obj, version):
        for ss in obj.get("subsets") or []:
            for port in ss.get("ports") or []:
                port.setdefault("protocol", "TCP")


def _event_source(ev: dict) -> str:
    src = ev.get("source") or {}
    component = src.get("component") or ev.get("reportingComponent", "")
    instance = src.get("host") or ev.get("reportingInstance", "")
    return f"{component}, {instance}" if instance else component


def _event_target(ev: dict) -> str:
    io = ev.get("involvedObject") or {}
    kind = (io.get("kind") or "").lower()
    return f"{kind}/{io['name']}" if io.get("name") else kind


class EventStrategy(Strategy):
    """Core v1 Events. The first column is Last Seen, as upstream prints them."""
    allow_create_on_update = True

    track_generation = False
    field_selectors = {
        **{f"involvedObject.{f}": (lambda f: lambda o: (o.get("involvedObject") or {}).get(f, ""))(f)
           for f in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")},
        "reason": lambda o: o.get("reason", ""),
        "reportingComponent": lambda o: o.get("reportingComponent", ""),
        "source": lambda o: (o.get("source") or {}).get("component", ""),
        "type": lambda o: o.get("type", ""),
    }

    def __init__(self, clock: Clock = time.time) -> None:
        self.clock = clock
        self.columns = [
            Column("Last Seen", "string", self._last_seen, doc("Event", "lastTimestamp")),
            Column("Type", "string", lambda o: o.get("type", ""), doc("Event", "type")),
            Column("Reason", "string", lambda o: o.get("reason", ""), doc("Event", "reason")),
            Column("Object", "string", _event_target, doc("Event", "involvedObject")),
            Column("Subobject", "string", lambda o: (o.get("involvedObject") or {}).get("fieldPath", ""),
                   doc("ObjectReference", "fieldPath"), priority=1),
            Column("Source", "string", _event_source, doc("Event", "source"), priority=1),
            Column("Message", "string", lambda o: (o.get("message") or "").strip(), doc("Event", "message")),
            Column("First Seen", "string", self._first_seen, doc("Event", "firstTimestamp"), priority=1),
            Column("Count", "string", self._count, doc("Event", "count"), priority=1),
            Column("Name", "string", lambda o: o["metadata"]["name"], NAME_DOC, format="name", priority=1),
        ]

    def _first_seen(self, ev: dict) -> str:
        return since(ev.get("firstTimestamp") or ev.get("eventTime"), self.clock)

    def _last_seen(self, ev: dict) -> str:
        if ev.get("series"):
            return since(ev["series"].get("lastObservedTime"), self.clock)
        if ev.get("lastTimestamp"):
            return since(ev["lastTimestamp"], self.clock)
        return self._first_seen(ev)

    @staticmethod
    def _count(ev: dict) -> int:
        if ev.get("series"):
            return ev["series"].get("count", 0)
        return ev.get("count") or 1

    def prepare_for_create(self, obj):
        core_encoding(obj)

    def prepare_for_update(self, new, old):
        core_encoding(new)

    def validate(self, obj):
        errs: list[FieldError] = []
        ns = (obj.get("metadata") or {}).get("namespace", "")
        io_ns = (obj.get("involvedObject") or {}).get("namespace", "")
        if not obj.get("eventTime"):
            if (not io_ns and ns not in ("", "default")) or (io_ns and ns != io_ns):
                errs.append(invalid("involvedObject.namespace", io_ns, "does not match event.namespace"))
        else:
            if not io_ns and ns not in ("default", "kube-system"):
                errs.append(invalid("involvedObject.namespace", io_ns, "does not match event.namespace"))
            controller = obj.get("reportingComponent", "")
            if not controller:
                errs.append(required("reportingComponent"))
            errs += [invalid("reportingComponent", controller, m) for m in qualified_name(controller)]
            for f, limit in (("reportingInstance", 128), ("action", 128), ("reason", 128)):
                if not obj.get(f):
                    errs.append(required(f))
                elif len(obj[f]) > limit:
                    errs.append(invalid(f, "", f"can have at most {limit} characters"))
            if len(obj.get("message") or "") > 1024:
                errs.append(invalid("message", "", "can have at most 1024 characters"))
        errs += [invalid("metadata.namespace", ns, m) for m in dns1123_subdomain(ns)] if ns else []
        return errs


register(
    Resource("", "namespaces", "Namespace", ["v1"], namespaced=False, short_names=("ns",),
             subresources=("status", "finalize"), strategy=NamespaceStrategy(),
             verbs=("create", "delete", "get", "list", "patch", "update", "watch")),
    Resource("", "nodes", "Node", ["v1"], namespaced=False, short_names=("no",),
             subresources=("proxy", "status"), strategy=NodeStrategy()),
    Resource("", "pods", "Pod", ["v1"], namespaced=True, short_names=("po",), categories=("all",),
             subresources=("status", "binding", "eviction", "ephemeralcontainers", "resize", "log", "exec", "attach",
                           "portforward", "proxy"),
             strategy=PodStrategy()),
    Resource("", "services", "Service", ["v1"], namespaced=True, short_names=("svc",), categories=("all",),
             subresources=("proxy", "status"), strategy=ServiceStrategy()),
    Resource("", "endpoints", "Endpoints", ["v1"], namespaced=True, short_names=("ep",), singular="endpoints",
             strategy=EndpointsStrategy()),
    Resource("", "configmaps", "ConfigMap", ["v1"], namespaced=True, short_names=("cm",),
             strategy=ConfigMapStrategy()),
    Resource("", "secrets", "Secret", ["v1"], namespaced=True, strategy=SecretStrategy()),
    Resource("", "serviceaccounts", "ServiceAccount", ["v1"], namespaced=True, short_names=("sa",),
             subresources=("token",), strategy=ServiceAccountStrategy()),
    Resource("", "events", "Event", ["v1"], namespaced=True, short_names=("ev",), strategy=EventStrategy()),
)
