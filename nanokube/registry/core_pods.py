"""Pods: v1 defaulting, 1.37 validation, update rules, binding and printing.

Defaults are what `kubectl get pod -o yaml` shows on a real cluster: the v1
defaulters plus what PrepareForCreate and the DefaultTolerationSeconds
admission plugin add (status Pending with its QoS class, the not-ready and
unreachable tolerations).
"""

from __future__ import annotations

import collections
import copy
import functools
import re
import time
from typing import Any

from .base import AGE, RESET_DELETION, Column, Strategy
from .core_printing import AGE_DOC, NAME_DOC, Clock, doc, parse_time, since
from .core_spec import (
    POD_CONDITION_SCHEDULED,
    default_container,
    default_volume,
    file_key_ref_volumes,
    hugepages_alone,
    image_whitespace_errors,
    local_path,
    plain_init_restarts_on_resize,
    validate_apparmor_profile,
    validate_containers,
    validate_dns_config,
    validate_ids,
    validate_pod_resource_claims,
    validate_resources,
    validate_seccomp_profile,
    validate_tolerations,
    validate_volumes,
    validate_windows_options,
)
from ..machinery.conditions import find_condition, is_condition_true
from ..machinery.deletioncost import POD_DELETION_COST, parse_deletion_cost
from ..machinery.gofmt import Struct, quote
from ..machinery.podresources import QUANTITIES, aggregate
from ..machinery import restartrules
from ..machinery.quantity import (
    QuantityError,
    canonical,
    is_quantity,
    nano_value,
    parse_list,
    parse_quantity,
)
from ..quota.resources import is_standard_resource
from ..machinery.validation import (
    FieldError,
    dns1123_label,
    dns1123_subdomain,
    duplicate,
    forbidden,
    immutable,
    invalid,
    legacy_ip_errors,
    legacy_ip_valid,
    not_supported,
    qualified_name,
    remembers_clean,
    repeats,
    required,
    sloppy_ip,
    too_long,
    validate_label_selector,
    validate_labels,
    validate_node_selector,
    validate_node_selector_term,
)
from . import pod_subresources as subresources
from . import spec_diff
from .gated_fields import drop_pod_fields
from .pod_disabled_fields import drop_disabled_pod_fields
from .pod_spec_key import spec_key
from . import pod_warnings
from .kind_warnings import ip_warnings

DEFAULT_TOLERATION_SECONDS = 300
_DEFAULT_TOLERATIONS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
_MAX_INT32 = 2147483647
_TERMINAL = ("Succeeded", "Failed")

_MUTABLE_MESSAGE = (
    "pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,"
    "`spec.activeDeadlineSeconds`,"
    "`spec.tolerations` (only additions to existing tolerations),"
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
)


# --- defaulting --------------------------------------------------------------


def default_pod_spec(spec: dict) -> None:
    """SetDefaults_PodSpec and the per-container/volume defaulters, after the fields of features
    that are off are dropped (upstream's PrepareForCreate/Update drop them from a pod and from every
    kind's pod template, DropDisabledTemplateFields; every such write defaults its spec here first)."""
    drop_disabled_pod_fields(spec)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("enableServiceLinks", True)
    if not spec.get("serviceAccountName") and spec.get("serviceAccount"):
        spec["serviceAccountName"] = spec["serviceAccount"]
    if spec.get("serviceAccountName"):
        spec["serviceAccount"] = spec["serviceAccountName"]
    host_network = bool(spec.get("hostNetwork"))
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for c in spec.get(key) or []:
            default_container(c, host_network, ephemeral=key == "ephemeralContainers")
    for v in spec.get("volumes") or []:
        default_volume(v)
    if spec.get("resources"):
        _default_requests(spec["resources"])


def _default_requests(resources: dict) -> None:
    """Requests default to limits; quantities are stored in canonical form."""
    limits = resources.get("limits") or {}
    if limits:
        requests = resources.setdefault("requests", {})
        for name, q in limits.items():
            requests.setdefault(name, q)
    for bag in ("limits", "requests"):
        quantities = resources.get(bag)
        for name, q in (quantities or {}).items():
            try:
                quantities[name] = canonical(q)  # one remembered look-up, not a parse and then one
            except QuantityError:
                pass  # not a quantity: validation reports it


def add_default_tolerations(spec: dict) -> None:
    """DefaultTolerationSeconds admission: tolerate not-ready/unreachable 300s."""
    tolerations = spec.setdefault("tolerations", [])
    for key in _DEFAULT_TOLERATIONS:
        covered = any(
            t.get("key", "") in ("", key) and t.get("effect", "") in ("", "NoExecute") for t in tolerations
        )
        if not covered:
            tolerations.append(
                {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": DEFAULT_TOLERATION_SECONDS}
            )


def qos_class(spec: dict) -> str:
    """The pod's QoS class from its cpu/memory requests and limits (exact totals, in billionths).
    Remembered by the requests and limits it is worked out from: pods of one template repeat
    them, and the totals were ~10 us of every pod create."""
    pod_res = spec.get("resources")
    groups = [pod_res] if pod_res else [
        (c.get("resources") or {}) for c in (spec.get("initContainers") or []) + (spec.get("containers") or [])
    ]
    key = tuple((tuple((res.get("requests") or {}).items()), tuple((res.get("limits") or {}).items())) for res in groups)
    try:
        return _QOS[key]
    except KeyError:
        qos = _QOS[key] = _qos_class(groups)
        if len(_QOS) > _QOS_MAX:
            _QOS.popitem(last=False)
        return qos
    except TypeError:  # a value that is no quantity (a list, a map): validation reports it
        return _qos_class(groups)


#: QoS classes by the requests and limits of their pods' containers (`qos_class`); ordered, so the
#: oldest leaves in O(1) (a dict's `next(iter(d))` walks the slots its deletions left)
_QOS: collections.OrderedDict[tuple, str] = collections.OrderedDict()
_QOS_MAX = 4096


def _qos_class(groups: list[dict]) -> str:
    requests: dict[str, int] = {}
    limits: dict[str, int] = {}
    guaranteed = True
    for res in groups:
        for bag, into in (("requests", requests), ("limits", limits)):
            for name, q in (res.get(bag) or {}).items():
                if name not in ("cpu", "memory"):
                    continue
                try:
                    value = nano_value(q)
                except QuantityError:
                    continue
                if value > 0:
                    into[name] = into.get(name, 0) + value
        found = {n for n, q in (res.get("limits") or {}).items() if n in ("cpu", "memory") and _positive(q)}
        if found != {"cpu", "memory"}:
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed and requests.keys() == limits.keys() and all(limits[n] == requests[n] for n in requests):
        return "Guaranteed"
    return "Burstable"


def _positive(q: Any) -> bool:
    try:
        return nano_value(q) > 0
    except QuantityError:
        return False


# --- validation --------------------------------------------------------------


_PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")
_OS_NAMES = ("linux", "windows")


def _validate_classes(spec: dict, path: str) -> list[FieldError]:
    """ValidateRuntimeClassName (set, even empty) and ValidatePreemptionPolicy: what a pod's
    admission plugins refuse first, but a template (CronJob, StatefulSet...) meets here."""
    errs: list[FieldError] = []
    if (rc := spec.get("runtimeClassName")) is not None:
        errs += [invalid(f"{path}.runtimeClassName", rc, m) for m in dns1123_subdomain(rc)]
    if (pp := spec.get("preemptionPolicy")) is not None:
        if pp == "":
            errs.append(required(f"{path}.preemptionPolicy"))
        elif pp not in _PREEMPTION_POLICIES:
            errs.append(not_supported(f"{path}.preemptionPolicy", pp, _PREEMPTION_POLICIES))
    return errs


def validate_pod_spec(spec: dict, path: str = "spec", old_ips: tuple[str, ...] = (),
                      old_spread_keys_invalid: bool = False, pod: bool = False,
                      old_spec: dict | None = None) -> list[FieldError]:
    """ValidatePodSpec for the rules OpenAPI cannot state; `old_ips` (on update, the old spec's
    pod_spec_ips) stand unchecked, and so do the spread constraints' matchLabelKeys when the old
    spec's already broke their rules (OldPodViolatesMatchLabelKeysValidation), and a plain init
    container's RestartContainer resize policy when `old_spec` (the stored pod's) had one; `pod`:
    the spec is a pod's, not a template's (opts.ResourceIsPod)."""
    errs: list[FieldError] = []
    # ValidatePodSpec's order; lists most pods lack are checked (and their paths built) only when present
    tgps = spec.get("terminationGracePeriodSeconds")
    if tgps is not None and tgps < 0:
        errs.append(invalid(f"{path}.terminationGracePeriodSeconds", tgps, "must be greater than or equal to 0"))
    volume_names: set[str] = set()
    if volumes := spec.get("volumes"):
        volume_names, verrs = validate_volumes(volumes, f"{path}.volumes")
        errs += verrs
    claim_names: set[str] = set()
    if claims := spec.get("resourceClaims"):
        claim_names, cerrs = validate_pod_resource_claims(claims, f"{path}.resourceClaims")
        errs += cerrs
    ratchet = old_spec is not None and any(map(plain_init_restarts_on_resize, old_spec.get("initContainers") or ()))
    errs += validate_containers(spec, path, volume_names, claim_names, ratchet)
    if (resources := spec.get("resources")) is not None:
        errs += _validate_pod_resources(spec, resources, f"{path}.resources")
    errs += file_key_ref_volumes(spec, path)
    if spec.get("hostNetwork"):
        errs += _host_network_ports(spec, path, pod)
    rp = spec.get("restartPolicy")
    if not rp:
        errs.append(required(f"{path}.restartPolicy"))
    elif rp not in ("Always", "OnFailure", "Never"):
        errs.append(not_supported(f"{path}.restartPolicy", rp, ["Always", "OnFailure", "Never"]))
    dns = spec.get("dnsPolicy")
    if dns and dns not in ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"):
        errs.append(not_supported(f"{path}.dnsPolicy", dns, ["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"]))
    if node_selector := spec.get("nodeSelector"):
        errs += validate_labels(node_selector, f"{path}.nodeSelector")
    if (psc := spec.get("securityContext")) or spec.get("shareProcessNamespace"):
        errs += _validate_pod_security_context(psc or {}, spec, f"{path}.securityContext")
    if affinity := spec.get("affinity"):
        errs += _validate_affinity(affinity, f"{path}.affinity")
    if dns == "None" or spec.get("dnsConfig") is not None:  # most pods have neither: no call
        errs += validate_dns_config(spec, path, old_ips)
    for i, g in enumerate(spec.get("readinessGates") or []):
        ct = g.get("conditionType", "")
        errs += [invalid(f"{path}.readinessGates[{i}].conditionType", ct, m) for m in qualified_name(ct)]
    if spec.get("schedulingGates"):
        errs += _validate_scheduling_gates(spec, path)
    errs += _validate_scheduling_group(spec, path)
    if constraints := spec.get("topologySpreadConstraints"):
        errs += _validate_spread_constraints(constraints, f"{path}.topologySpreadConstraints",
                                             old_spread_keys_invalid)
    if _sets_host_process(spec):
        errs += _validate_host_process(spec, path)
    if spec.get("hostUsers") is False:
        errs += _validate_host_users(spec, path)
    for f, check in (("serviceAccountName", dns1123_subdomain), ("nodeName", dns1123_subdomain),
                     ("schedulerName", dns1123_subdomain)):
        v = spec.get(f)
        if v and (msgs := check(v)):
            errs += [invalid(f"{path}.{f}", v, m) for m in msgs]
    ads = spec.get("activeDeadlineSeconds")
    if ads is not None and not 1 <= ads <= _MAX_INT32:
        errs.append(invalid(f"{path}.activeDeadlineSeconds", ads, "must be between 1 and 2147483647, inclusive"))
    for f in ("hostname", "subdomain"):
        v = spec.get(f)
        if v and (msgs := dns1123_label(v)):
            errs += [invalid(f"{path}.{f}", v, m) for m in msgs]
    if (override := spec.get("hostnameOverride")) is not None:
        errs += _validate_hostname_override(spec, override, f"{path}.hostnameOverride")
    errs += validate_tolerations(spec.get("tolerations") or [], f"{path}.tolerations")
    for i, alias in enumerate(spec.get("hostAliases") or []):  # ValidateHostAliases
        p = f"{path}.hostAliases[{i}]"
        errs += legacy_ip_errors(alias.get("ip", ""), f"{p}.ip", old_ips)
        for j, name in enumerate(alias.get("hostnames") or []):
            errs += [invalid(f"{p}.hostnames[{j}]", name, m) for m in dns1123_subdomain(name)]
    pcn = spec.get("priorityClassName")
    if pcn and (msgs := dns1123_subdomain(pcn)):
        errs += [invalid(f"{path}.priorityClassName", pcn, m) for m in msgs]
    errs += _validate_classes(spec, path)
    for name, q in (spec.get("overhead") or {}).items():
        if is_quantity(q) and parse_quantity(q) < 0:
            errs.append(invalid(f"{path}.overhead[{name}]", q, "must be greater than or equal to 0"))
    if (os_ := spec.get("os")) is not None:  # validateOS; a valid name's own rules only when it is valid
        name = os_.get("name") or ""
        if not name:
            errs.append(required(f"{path}.os.name", "cannot be empty"))
        elif name not in _OS_NAMES:
            errs.append(not_supported(f"{path}.os", name, _OS_NAMES))
        elif name == "linux":
            errs += _validate_linux(spec, path)
        else:
            errs += _validate_windows(spec, path)
    return errs


@remembers_clean(limit=1024, tries=256, key=spec_key)
def _created_spec_errors(spec: dict) -> list[FieldError]:
    """A created pod's spec rules, which read nothing but the spec: remembered clean by its JSON
    (`spec_key`: its token volume's name aside), as the pods of one template (a ReplicaSet's, a
    Job's, a scheduler benchmark's) send one spec over and over, and checking it was a fifth of
    their create. A spec that never repeats stops being encoded for it after a run of misses
    (`remembers_clean`'s `tries`)."""
    errs = validate_pod_spec(spec, pod=True) + validate_pod_only(spec)
    if spec.get("ephemeralContainers"):  # added only through pods/ephemeralcontainers
        errs.append(forbidden("spec.ephemeralContainers", "cannot be set on create"))
    if spec.get("schedulingGates") and spec.get("nodeName"):
        errs.append(forbidden("spec.nodeName", "cannot be set until all schedulingGates have been cleared"))
    return errs


_HOSTNAME_MAX = 64  # the kernel's limit on a hostname


def _validate_hostname_override(spec: dict, override: str, path: str) -> list[FieldError]:
    """validatePodHostName (KEP-4762 HostnameOverride, on by default since 1.35): the pod's own
    hostname, so neither the FQDN-as-hostname switch nor the node's network; a DNS subdomain of at
    most 64 characters."""
    errs: list[FieldError] = []
    if spec.get("setHostnameAsFQDN"):
        errs.append(forbidden(path, "may not be specified when setHostnameAsFQDN is true"))
    if spec.get("hostNetwork"):
        errs.append(forbidden(path, "may not be specified when hostNetwork is true"))
    errs += [invalid(path, override, m) for m in dns1123_subdomain(override)]
    if len(override) > _HOSTNAME_MAX:
        errs.append(too_long(path, _HOSTNAME_MAX))
    return errs


_POD_LEVEL_RESOURCES = ("cpu", "hugepages-", "memory")


def _validate_pod_resources(spec: dict, res: dict, path: str) -> list[FieldError]:
    """validatePodResources (PodLevelResources, on by default since 1.34): no claims; cpu, memory
    and hugepages only, each checked as a container's; then validatePodResourceConsistency."""
    errs: list[FieldError] = []
    if res.get("claims") is not None:
        errs.append(forbidden(f"{path}.claims", "claims cannot be set for Resources at pod-level"))
    bags: dict[str, dict] = {}
    for bag in ("limits", "requests"):
        kept = bags[bag] = {}
        for name, q in sorted((res.get(bag) or {}).items()):
            p = f"{path}.{bag}[{name}]"
            if name in ("cpu", "memory") or name.startswith("hugepages-"):
                kept[name] = q
            elif msgs := qualified_name(name):
                errs += [invalid(p, name, m) for m in msgs]
            elif "/" not in name and not is_standard_resource(name):
                errs.append(invalid(p, name, "must be a standard resource type or fully qualified"))
            else:
                errs.append(not_supported(p, name, _POD_LEVEL_RESOURCES))
    errs += validate_resources(bags, path)
    if hugepages_alone(bags):
        errs.append(forbidden(path, "HugePages require cpu or memory"))
    return errs + _pod_resource_consistency(spec, bags, path)


def _pod_resource_consistency(spec: dict, res: dict, path: str) -> list[FieldError]:
    """validatePodResourceConsistency: a pod-level request covers the containers' aggregate request
    of it, a pod-level hugepages limit their aggregate limit, and no regular container's limit
    exceeds the pod's."""
    errs: list[FieldError] = []
    requests, limits = parse_list(res.get("requests")), parse_list(res.get("limits"))
    for name, total in sorted(aggregate(spec, "requests", QUANTITIES).items()):
        if name in requests and total.value > requests[name].value:
            errs.append(invalid(f"{path}.requests[{name}]", str(requests[name]),
                                f"must be greater than or equal to aggregate container requests of {total}"))
    for name, total in sorted(aggregate(spec, "limits", QUANTITIES).items()):
        if name.startswith("hugepages-") and name in limits and total.value > limits[name].value:
            errs.append(invalid(f"{path}.limits[{name}]", str(limits[name]),
                                f"must be greater than or equal to aggregate container limits of {total}"))
    for i, c in enumerate(spec.get("containers") or ()):
        for name, value in sorted(parse_list((c.get("resources") or {}).get("limits")).items()):
            if name in limits and value.value > limits[name].value:
                errs.append(invalid(f"{path}.containers[{i}][{name}].limits", str(value),
                                    f"must be less than or equal to pod limits of {limits[name]}"))
    return errs


def _host_network_ports(spec: dict, path: str, pod: bool) -> list[FieldError]:
    """validatePodHostNetworkDeps: with the host's network a regular container's hostPort is its
    containerPort; a template may leave it 0, for the pod's defaulting to fill in."""
    return [invalid(f"{path}.containers[{i}].ports[{j}].hostPort", hp, "must match `containerPort` when `hostNetwork` is true")
            for i, c in enumerate(spec.get("containers") or ()) for j, port in enumerate(c.get("ports") or ())
            if (hp := port.get("hostPort") or 0) != (port.get("containerPort") or 0) and (pod or hp)]


def validate_pod_only(spec: dict) -> list[FieldError]:
    """validatePodMetadataAndSpec's checks for a pod and not a template, after its spec's: no
    service account token projected without a service account, and no image with leading or
    trailing whitespace (the regular containers', then the init containers')."""
    errs: list[FieldError] = []
    if not spec.get("serviceAccountName"):
        for vi, volume in enumerate(spec.get("volumes") or ()):
            for si, source in enumerate(((volume.get("projected") or {}).get("sources")) or ()):
                if source.get("serviceAccountToken") is not None:
                    errs.append(forbidden(f"spec.volumes[{vi}].projected.sources[{si}].serviceAccountToken",
                                          "must not be specified when serviceAccountName is not set"))
    return (errs + image_whitespace_errors(spec.get("containers") or (), "spec.containers")
            + image_whitespace_errors(spec.get("initContainers") or (), "spec.initContainers"))


def _host_process(sc: dict | None) -> bool | None:
    return ((sc or {}).get("windowsOptions") or {}).get("hostProcess")


def _sets_host_process(spec: dict) -> bool:
    """Whether any windowsOptions is set (where a hostProcess could be): a plain walk, as every pod
    takes it and almost none has one."""
    if (spec.get("securityContext") or {}).get("windowsOptions") is not None:
        return True
    for kind in _CONTAINER_KINDS:
        for c in spec.get(kind) or ():
            sc = c.get("securityContext")
            if sc and sc.get("windowsOptions") is not None:
                return True
    return False


def _validate_host_process(spec: dict, path: str) -> list[FieldError]:
    """validateWindowsHostProcessPod: a container's hostProcess agrees with the pod's; with any
    HostProcess container all are, and the pod uses the host network."""
    pod_value = _host_process(spec.get("securityContext"))
    errs: list[FieldError] = []
    count = host_process = 0
    for kind in _CONTAINER_KINDS:
        for i, c in enumerate(spec.get(kind) or ()):
            count += 1
            value = _host_process(c.get("securityContext"))
            if pod_value is not None and value is not None and value != pod_value:
                errs.append(invalid(f"{path}.{kind}[{i}].securityContext.windowsOptions.hostProcess", value,
                                    f"pod hostProcess value must be identical if both are specified, was "
                                    f"{str(pod_value).lower()}"))
            host_process += bool(value) if value is not None else bool(pod_value)
    if host_process:
        if host_process != count:
            errs.append(invalid(path, "", "If pod contains any hostProcess containers then all containers must be "
                                          "HostProcess containers"))
        if not spec.get("hostNetwork"):
            errs.append(invalid(f"{path}.hostNetwork", False, "hostNetwork must be true if pod contains any hostProcess "
                                                              "containers"))
    return errs


def _validate_host_users(spec: dict, path: str) -> list[FieldError]:
    """validateHostUsers: a user namespace excludes the host's network, PID and IPC namespaces
    (the last two at upstream's capitalized paths)."""
    return [forbidden(f"{path}.{where}", "when `pod.Spec.HostUsers` is false")
            for field, where in (("hostNetwork", "hostNetwork"), ("hostPID", "HostPID"), ("hostIPC", "HostIPC"))
            if spec.get(field)]


#: validateWindows: what a windows pod may not set, at its path (the v1 spec's own fields, which upstream
#: holds in the internal pod security context, at the spec)
_NOT_WINDOWS_POD = (("sc", "appArmorProfile"), ("sc", "seLinuxOptions"), ("spec", "hostUsers"), ("spec", "hostPID"),
                    ("spec", "hostIPC"), ("sc", "seccompProfile"), ("sc", "fsGroup"), ("sc", "fsGroupChangePolicy"),
                    ("sc", "sysctls"), ("spec", "shareProcessNamespace"), ("sc", "runAsUser"), ("sc", "runAsGroup"),
                    ("sc", "supplementalGroups"), ("sc", "supplementalGroupsPolicy"), ("sc", "seLinuxChangePolicy"))
_NOT_WINDOWS_CONTAINER = ("appArmorProfile", "seLinuxOptions", "seccompProfile", "capabilities", "readOnlyRootFilesystem",
                          "privileged", "allowPrivilegeEscalation", "procMount", "runAsUser", "runAsGroup")
_WINDOWS = "cannot be set for a windows pod"


def _validate_windows(spec: dict, path: str) -> list[FieldError]:
    """validateWindows: the Linux-only settings of the pod and of its containers (set, even to false,
    but for hostPID and hostIPC; an empty sysctls list is unset), as upstream's checks read them."""
    psc = spec.get("securityContext") or {}
    errs: list[FieldError] = []
    for where, name in _NOT_WINDOWS_POD:
        value = (psc if where == "sc" else spec).get(name)
        if value is None or (name in ("hostPID", "hostIPC", "sysctls") and not value):
            continue
        errs.append(forbidden(f"{path}.securityContext.{name}" if where == "sc" else f"{path}.{name}", _WINDOWS))
    for kind in _CONTAINER_KINDS:
        for i, c in enumerate(spec.get(kind) or ()):
            sc = c.get("securityContext") or {}
            errs += [forbidden(f"{path}.{kind}[{i}].securityContext.{name}", _WINDOWS)
                     for name in _NOT_WINDOWS_CONTAINER if sc.get(name) is not None]
    return errs


def _validate_linux(spec: dict, path: str) -> list[FieldError]:
    """validateLinux: a linux pod and its containers take no windowsOptions."""
    words = "windows options cannot be set for a linux pod"
    errs = [forbidden(f"{path}.securityContext.windowsOptions", words)] if (
        (spec.get("securityContext") or {}).get("windowsOptions") is not None) else []
    return errs + [forbidden(f"{path}.{kind}[{i}].securityContext.windowsOptions", words)
                   for kind in _CONTAINER_KINDS for i, c in enumerate(spec.get(kind) or ())
                   if (c.get("securityContext") or {}).get("windowsOptions") is not None]


def _validate_pod_security_context(psc: dict, spec: dict, path: str) -> list[FieldError]:
    """validatePodSpecSecurityContext, in its order: IDs, shareProcessNamespace beside hostPID (both
    v1 spec fields, the internal security context's, reported under it), sysctls,
    fsGroupChangePolicy, seccomp, windowsOptions, appArmorProfile, supplementalGroupsPolicy,
    seLinuxChangePolicy."""
    errs = validate_ids(psc, ("fsGroup", "runAsUser", "runAsGroup"), path)
    for i, gid in enumerate(psc.get("supplementalGroups") or ()):
        if not 0 <= gid <= 2147483647:
            errs.append(invalid(f"{path}.supplementalGroups[{i}]", gid, "must be between 0 and 2147483647, inclusive"))
    if spec.get("shareProcessNamespace") and spec.get("hostPID"):
        errs.append(invalid(f"{path}.shareProcessNamespace", True, "ShareProcessNamespace and HostPID cannot both be enabled"))
    if sysctls := psc.get("sysctls"):
        errs += _validate_sysctls(sysctls, spec, f"{path}.sysctls")
    if (policy := psc.get("fsGroupChangePolicy")) is not None and policy not in ("Always", "OnRootMismatch"):
        errs.append(not_supported(f"{path}.fsGroupChangePolicy", policy, ("Always", "OnRootMismatch")))
    errs += validate_seccomp_profile(psc.get("seccompProfile"), f"{path}.seccompProfile")
    errs += validate_windows_options(psc.get("windowsOptions"), f"{path}.windowsOptions")
    errs += validate_apparmor_profile(psc.get("appArmorProfile"), f"{path}.appArmorProfile")
    if (groups := psc.get("supplementalGroupsPolicy")) is not None and groups not in ("Merge", "Strict"):
        errs.append(not_supported(f"{path}.supplementalGroupsPolicy", groups, ("Merge", "Strict")))
    if (change := psc.get("seLinuxChangePolicy")) is not None and change not in ("MountOption", "Recursive"):
        errs.append(not_supported(f"{path}.seLinuxChangePolicy", change, ("MountOption", "Recursive")))
    return errs


_SECCOMP_POD = "seccomp.security.alpha.kubernetes.io/pod"
_SECCOMP_CONTAINER = "container.seccomp.security.alpha.kubernetes.io/"
_APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"
_CONTAINER_KINDS = ("initContainers", "containers", "ephemeralContainers")


def _seccomp_annotation(value: str, path: str) -> list[FieldError]:
    """ValidateSeccompProfile: a known profile, or localhost/ and a relative path."""
    if value in ("runtime/default", "docker/default", "unconfined"):
        return []
    if value.startswith("localhost/"):
        return local_path(value.removeprefix("localhost/"), path, non_reserved=False)
    return [invalid(path, value, "must be a valid seccomp profile")]


def _pod_specific_annotations(annotations: dict, spec: dict, allow_invalid_cost: bool = False,
                              path: str = "metadata.annotations") -> list[FieldError]:
    """ValidatePodSpecificAnnotations: a mirror pod is bound, a deletion cost an int32, the
    deprecated seccomp annotations name profiles (reported at metadata.annotations.<key>, as
    upstream's Child does), the deprecated AppArmor ones a container of the pod and a profile."""
    if not annotations:
        return []
    errs: list[FieldError] = []
    if subresources.MIRROR in annotations and not spec.get("nodeName"):
        errs.append(invalid(f"{path}[{subresources.MIRROR}]", annotations[subresources.MIRROR], "must set spec.nodeName if mirror pod annotation is set"))
    if not allow_invalid_cost and POD_DELETION_COST in annotations and parse_deletion_cost(annotations[POD_DELETION_COST]) is None:
        errs.append(invalid(f"{path}[{POD_DELETION_COST}]", annotations[POD_DELETION_COST], "must be a 32bit integer"))
    if _SECCOMP_POD in annotations:
        errs += _seccomp_annotation(annotations[_SECCOMP_POD], f"{path}.{_SECCOMP_POD}")
    errs += [e for k, v in annotations.items() if k.startswith(_SECCOMP_CONTAINER)
             for e in _seccomp_annotation(v, f"{path}.{k}")]
    names = {c.get("name") for kind in _CONTAINER_KINDS for c in spec.get(kind) or ()}
    for k, v in annotations.items():
        if not k.startswith(_APPARMOR_ANNOTATION):
            continue
        if (name := k.removeprefix(_APPARMOR_ANNOTATION)) not in names:
            errs.append(invalid(f"{path}[{k}]", name, "container not found"))
        if v not in ("", "runtime/default", "unconfined") and not v.startswith("localhost/"):
            errs.append(invalid(f"{path}[{k}]", v, f"invalid AppArmor profile name: {quote(v)}"))
    return errs


def _pod_annotation_updates(new: dict, old: dict) -> list[FieldError]:
    """ValidatePodSpecificAnnotationUpdates: AppArmor and mirror pod annotations are fixed at create,
    then the annotations' own checks (a deletion cost that was invalid may stay so)."""
    na, oa = (new.get("metadata") or {}).get("annotations") or {}, (old.get("metadata") or {}).get("annotations") or {}
    errs: list[FieldError] = []
    for changes, verb in (([k for k, v in oa.items() if na.get(k) != v], "remove or update"),
                          ([k for k in na if k not in oa], "add")):
        for k in changes:
            if k.startswith(_APPARMOR_ANNOTATION):
                errs.append(forbidden(f"metadata.annotations[{k}]", f"may not {verb} AppArmor annotations"))
            if k == subresources.MIRROR:
                errs.append(forbidden(f"metadata.annotations[{k}]", f"may not {verb} mirror pod annotation"))
    invalid_cost = POD_DELETION_COST in oa and parse_deletion_cost(oa[POD_DELETION_COST]) is None
    return errs + _pod_specific_annotations(na, new.get("spec") or {}, invalid_cost)


_SECCOMP_VALUES = {"Unconfined": ("unconfined",), "RuntimeDefault": ("runtime/default", "docker/default")}


def _seccomp_matches(annotation: str, profile: dict, path: str) -> list[FieldError]:
    """validateSeccompAnnotationsAndFieldsMatch."""
    t = profile.get("type")
    if (t in _SECCOMP_VALUES and annotation not in _SECCOMP_VALUES[t]) or (
            t == "Localhost" and not annotation.startswith("localhost/")):
        return [forbidden(f"{path}.type", "seccomp type in annotation and field must match")]
    if t == "Localhost" and annotation.removeprefix("localhost/") != profile.get("localhostProfile"):
        return [forbidden(f"{path}.localhostProfile", "seccomp profile in annotation and field must match")]
    return []


def _seccomp_annotations_match(annotations: dict, spec: dict, path: str = "spec") -> list[FieldError]:
    """validateSeccompAnnotationsAndFields (on create): the pod's and each container's own
    seccompProfile agree with the deprecated annotations."""
    if not any(k.startswith((_SECCOMP_POD, _SECCOMP_CONTAINER)) for k in annotations):
        return []
    errs: list[FieldError] = []
    profile = (spec.get("securityContext") or {}).get("seccompProfile")
    if profile is not None and _SECCOMP_POD in annotations:
        errs += _seccomp_matches(annotations[_SECCOMP_POD], profile, f"{path}.securityContext.seccompProfile")
    for kind in _CONTAINER_KINDS:
        for i, c in enumerate(spec.get(kind) or ()):
            profile = (c.get("securityContext") or {}).get("seccompProfile")
            annotation = annotations.get(_SECCOMP_CONTAINER + (c.get("name") or ""))
            if profile is not None and annotation is not None:
                errs += _seccomp_matches(annotation, profile, f"{path}.{kind}[{i}].securityContext.seccompProfile")
    return errs
_APPARMOR_VALUES = {"Unconfined": "unconfined", "RuntimeDefault": "runtime/default"}


def _apparmor_annotations_match(annotations: dict, spec: dict) -> list[FieldError]:
    """validateAppArmorAnnotationsAndFieldsMatchOnCreate: a container's deprecated AppArmor
    annotation and its effective appArmorProfile (its own, else the pod's) agree (not checked for
    Windows pods)."""
    if not any(k.startswith(_APPARMOR_ANNOTATION) for k in annotations) or (
            (spec.get("os") or {}).get("name") == "windows"):
        return []
    pod_profile = (spec.get("securityContext") or {}).get("appArmorProfile")
    errs: list[FieldError] = []
    for kind in _CONTAINER_KINDS:
        for i, c in enumerate(spec.get(kind) or ()):
            profile = (c.get("securityContext") or {}).get("appArmorProfile")
            profile = pod_profile if profile is None else profile
            annotation = annotations.get(_APPARMOR_ANNOTATION + (c.get("name") or ""))
            if profile is None or annotation is None:
                continue
            path, t = f"spec.{kind}[{i}].securityContext.appArmorProfile", profile.get("type")
            if t in _APPARMOR_VALUES and annotation != _APPARMOR_VALUES[t] or (
                    t == "Localhost" and not annotation.startswith("localhost/")):
                errs.append(forbidden(f"{path}.type", "apparmor type in annotation and field must match"))
            elif t == "Localhost" and annotation.removeprefix("localhost/") != profile.get("localhostProfile"):
                errs.append(forbidden(f"{path}.localhostProfile", "apparmor profile in annotation and field must match"))
    return errs


_SYSCTL = re.compile(r"^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$")
_SYSCTL_MSG = ("must have at most 253 characters and match regex "
               "^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$")
_IPC_SYSCTLS = ("kernel.shm", "kernel.msg", "fs.mqueue.")


def _validate_sysctls(sysctls: list, spec: dict, path: str) -> list[FieldError]:
    """validateSysctls: a name (IsValidSysctlName) once; a network sysctl not with hostNetwork, an
    IPC one not with hostIPC (ValidateHostSysctl)."""
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, s in enumerate(sysctls):
        name, p = s.get("name") or "", f"{path}[{i}].name"
        if not name:
            errs.append(required(p))
        elif len(name) > 253 or not _SYSCTL.match(name):
            errs.append(invalid(p, name, _SYSCTL_MSG))
        elif name in seen:
            errs.append(duplicate(p, name))
        if spec.get("hostNetwork") and name.startswith("net."):
            errs.append(invalid(p, name, "may not be specified when 'hostNetwork' is true"))
        elif spec.get("hostIPC") and (name == "kernel.sem" or name.startswith(_IPC_SYSCTLS)):
            errs.append(invalid(p, name, "may not be specified when 'hostIPC' is true"))
        seen.add(name)
    return errs


def _validate_affinity(affinity: dict, path: str) -> list[FieldError]:
    """validateAffinity: node affinity's selector and weighted preferences, pod (anti-)affinity's terms."""
    errs: list[FieldError] = []
    if (node := affinity.get("nodeAffinity")) is not None:
        np = f"{path}.nodeAffinity"
        if (req := node.get("requiredDuringSchedulingIgnoredDuringExecution")) is not None:
            errs += validate_node_selector(req, f"{np}.requiredDuringSchedulingIgnoredDuringExecution")
        for i, pref in enumerate(node.get("preferredDuringSchedulingIgnoredDuringExecution") or ()):
            pp = f"{np}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
            errs += _weight(pref, pp)
            errs += validate_node_selector_term(pref.get("preference") or {}, f"{pp}.preference")
    for kind in ("podAffinity", "podAntiAffinity"):
        if (pod := affinity.get(kind)) is None:
            continue
        kp = f"{path}.{kind}"
        for i, term in enumerate(pod.get("requiredDuringSchedulingIgnoredDuringExecution") or ()):
            errs += _pod_affinity_term(term, f"{kp}.requiredDuringSchedulingIgnoredDuringExecution[{i}]")
        for i, weighted in enumerate(pod.get("preferredDuringSchedulingIgnoredDuringExecution") or ()):
            wp = f"{kp}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
            errs += _weight(weighted, wp)
            errs += _pod_affinity_term(weighted.get("podAffinityTerm") or {}, f"{wp}.podAffinityTerm")
    return errs


def _weight(weighted: dict, path: str) -> list[FieldError]:
    w = weighted.get("weight", 0)
    return [] if 0 < w <= 100 else [invalid(f"{path}.weight", w, "must be in the range 1-100")]


def _pod_affinity_term(term: dict, path: str) -> list[FieldError]:
    """validatePodAffinityTerm; a bad namespace is reported at the term's "namespace", as upstream does."""
    errs = validate_label_selector(term.get("labelSelector"), f"{path}.labelSelector")
    errs += validate_label_selector(term.get("namespaceSelector"), f"{path}.namespaceSelector")
    for ns in term.get("namespaces") or ():
        errs += [invalid(f"{path}.namespace", ns, m) for m in dns1123_label(ns)]
    errs += _match_label_keys(term, path)
    key = term.get("topologyKey") or ""
    if not key:
        errs.append(required(f"{path}.topologyKey", "can not be empty"))
    return errs + [invalid(f"{path}.topologyKey", key, m) for m in qualified_name(key)]


def _label_keys(keys: list, selector: Any, path: str) -> list[FieldError]:
    """validateLabelKeys: the keys need a labelSelector to merge into, and are label names."""
    if not keys:
        return []
    if selector is None:
        return [forbidden(path, "must not be specified when labelSelector is not set")]
    return [invalid(f"{path}[{i}]", k, m) for i, k in enumerate(keys) for m in qualified_name(k)]


def _match_label_keys(term: dict, path: str) -> list[FieldError]:
    """validateMatchLabelKeysAndMismatchLabelKeys: label names; a matchLabelKeys key the selector
    already names twice (reported at the term's path indexed by the key's position, as upstream
    does); a key in both lists."""
    match, mismatch = term.get("matchLabelKeys") or [], term.get("mismatchLabelKeys") or []
    selector = term.get("labelSelector")
    errs = _label_keys(match, selector, f"{path}.matchLabelKeys") + _label_keys(mismatch, selector,
                                                                                f"{path}.mismatchLabelKeys")
    if isinstance(selector, dict):
        position = {k: i for i, k in enumerate(match)}
        seen = set(selector.get("matchLabels") or {})
        for req in selector.get("matchExpressions") or ():
            key = req.get("key") or ""
            if key in position and key in seen:
                errs.append(invalid(f"{path}[{position[key]}]", key, "exists in both matchLabelKeys and labelSelector"))
            seen.add(key)
    errs += [invalid(f"{path}.matchLabelKeys[{i}]", k, "exists in both matchLabelKeys and mismatchLabelKeys")
             for i, k in enumerate(match) if k in mismatch]
    return errs


def merge_label_keys(spec: dict, labels: dict) -> None:
    """PrepareForCreate's mutatePodAffinity and mutateTopologySpreadConstraints: each key of a
    term's matchLabelKeys (mismatchLabelKeys) the pod's labels carry joins its labelSelector as
    `key In (value)` (`NotIn`), and so for a spread constraint's matchLabelKeys
    (MatchLabelKeysInPodTopologySpreadSelectorMerge, on by default). The selector is then what the
    scheduler reads; a label changed later does not move it. A term without a selector matches
    nothing and is left alone."""
    affinity = spec.get("affinity") or {}
    for kind in ("podAffinity", "podAntiAffinity"):
        arms = affinity.get(kind) or {}
        for term in arms.get("requiredDuringSchedulingIgnoredDuringExecution") or ():
            _merge_keys(term, labels, ("matchLabelKeys", "In"), ("mismatchLabelKeys", "NotIn"))
        for weighted in arms.get("preferredDuringSchedulingIgnoredDuringExecution") or ():
            if term := weighted.get("podAffinityTerm"):
                _merge_keys(term, labels, ("matchLabelKeys", "In"), ("mismatchLabelKeys", "NotIn"))
    for constraint in spec.get("topologySpreadConstraints") or ():
        _merge_keys(constraint, labels, ("matchLabelKeys", "In"))


def _merge_keys(holder: dict, labels: dict, *lists: tuple[str, str]) -> None:
    selector = holder.get("labelSelector")
    if not isinstance(selector, dict):
        return
    added = [{"key": key, "operator": op, "values": [labels[key]]}
             for field, op in lists for key in holder.get(field) or () if isinstance(key, str) and key in labels]
    if added:
        selector["matchExpressions"] = (selector.get("matchExpressions") or []) + added


_WHEN_UNSATISFIABLE = ("DoNotSchedule", "ScheduleAnyway")
_INCLUSION_POLICIES = ("Honor", "Ignore")


def spread_label_keys_invalid(spec: dict) -> bool:
    """hasInvalidTopologySpreadConstrainMatchLabelKeys: whether a (stored) spec's spread
    constraints break the matchLabelKeys rules, which an update then leaves unchecked."""
    return any(_match_label_keys(c, "") for c in spec.get("topologySpreadConstraints") or ())


def _validate_spread_constraints(constraints: list, path: str, skip_label_keys: bool = False) -> list[FieldError]:
    """validateTopologySpreadConstraints; matchLabelKeys as a pod affinity term's
    (ValidateMatchLabelKeysAndMismatchLabelKeys at the constraint's path: with the selector merge
    on, a key the selector already names is its second mention)."""
    errs: list[FieldError] = []
    # (upstream compares each constraint with every later one; counting the pairs still ahead finds the same ones in one pass)
    ahead = collections.Counter((c.get("topologyKey") or "", c.get("whenUnsatisfiable") or "") for c in constraints)
    for i, c in enumerate(constraints):
        p = f"{path}[{i}]"
        skew = c.get("maxSkew", 0)
        if skew <= 0:
            errs.append(invalid(f"{p}.maxSkew", skew, "must be greater than zero"))
        key, when = c.get("topologyKey") or "", c.get("whenUnsatisfiable") or ""
        if not key:
            errs.append(required(f"{p}.topologyKey", "can not be empty"))
        if when not in _WHEN_UNSATISFIABLE:
            errs.append(not_supported(f"{p}.whenUnsatisfiable", when, _WHEN_UNSATISFIABLE))
        ahead[key, when] -= 1
        if ahead[key, when]:
            errs.append(duplicate(f"{p}.{{topologyKey, whenUnsatisfiable}}", f"{{{key}, {when}}}"))
        if (domains := c.get("minDomains")) is not None:
            if domains <= 0:
                errs.append(invalid(f"{p}.minDomains", domains, "must be greater than zero"))
            if when != "DoNotSchedule":
                errs.append(invalid(f"{p}.minDomains", domains,
                                    f"can only use minDomains if whenUnsatisfiable=DoNotSchedule, not {when}"))
        for f in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
            if (policy := c.get(f)) is not None and policy not in _INCLUSION_POLICIES:
                errs.append(not_supported(f"{p}.{f}", policy, _INCLUSION_POLICIES))
        if not skip_label_keys:
            errs += _match_label_keys(c, p)
        errs += validate_label_selector(c.get("labelSelector"), f"{p}.labelSelector")
    return errs


def pod_spec_ips(spec: dict) -> tuple[str, ...]:
    """The nameservers and host alias IPs a (old) pod spec holds: on update they stand unchecked,
    as StrictIPCIDRValidation ratchets (the fields are immutable on a Pod, not in a template)."""
    servers = (spec.get("dnsConfig") or {}).get("nameservers") or []
    return (*servers, *(a.get("ip") for a in spec.get("hostAliases") or [] if isinstance(a, dict)))


def _status_ips(status: dict, plural: str, single: str) -> list[str]:
    """podIPs or hostIPs as v1's conversion to the internal status makes them: the singular value
    alone when the list is empty or (podIP) does not start with it."""
    entries, one = status.get(plural), status.get(single)
    if not entries:
        return [one] if one else []
    ips = [e.get("ip", "") if e else "" for e in entries]
    return [one] if one and plural == "podIPs" and ips[0] != one else ips


@functools.lru_cache(maxsize=4096)
def _status_ip_warnings(plural: str, *ips: str) -> tuple[str, ...]:
    """GetWarningsForIP on each of a status's pod or host IPs, remembered by the list: a pod's
    kubelet writes the same addresses again and again."""
    return tuple(w for i, ip in enumerate(ips) for w in ip_warnings(f"status.{plural}[{i}].ip", ip))


def _validate_scheduling_gates(spec: dict, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, gate in enumerate(spec.get("schedulingGates") or []):
        name = gate.get("name", "")
        errs += [invalid(f"{path}.schedulingGates[{i}]", name, m) for m in qualified_name(name)]
        if name in seen:
            errs.append(duplicate(f"{path}.schedulingGates[{i}]", name))
        seen.add(name)
    return errs


def _validate_scheduling_group(spec: dict, path: str) -> list[FieldError]:
    group = spec.get("schedulingGroup")
    if group is None:
        return []
    name = group.get("podGroupName")
    p = f"{path}.schedulingGroup.podGroupName"
    if not name:
        return [required(p)]
    return [invalid(p, name, m) for m in dns1123_subdomain(name)]


def validate_pod_template(template: dict, path: str, old_ips: tuple[str, ...] = ()) -> list[FieldError]:
    """ValidatePodTemplateSpec, for a workload's template (Deployment, ReplicaSet, Job): labels and
    annotations at the template's own path (<path>.labels, not metadata.labels, as upstream's), the
    pod-specific annotations, the spec, seccomp annotations against fields, no ephemeral containers;
    `old_ips`, the old template's pod_spec_ips on update, stand unchecked."""
    from ..machinery.validation import validate_annotations, validate_labels

    md = template.get("metadata") or {}
    spec = template.get("spec") or {}
    annotations = md.get("annotations")
    errs = validate_labels(md.get("labels"), f"{path}.labels")
    errs += validate_annotations(annotations, f"{path}.annotations")
    if annotations:
        errs += _pod_specific_annotations(annotations, spec, path=f"{path}.annotations")
    errs += validate_pod_spec(spec, f"{path}.spec", old_ips)
    if annotations:
        errs += _seccomp_annotations_match(annotations, spec, f"{path}.spec")
    if spec.get("ephemeralContainers"):
        errs.append(forbidden(f"{path}.spec.ephemeralContainers", "ephemeral containers not allowed in pod template"))
    return errs


def validate_pod_update(new: dict, old: dict) -> list[FieldError]:
    """ValidatePodUpdate: only images, deadlines, added tolerations, gate removal."""
    errs: list[FieldError] = []
    ns, os_ = new.get("spec") or {}, old.get("spec") or {}
    if len(ns.get("containers") or []) != len(os_.get("containers") or []):
        return [forbidden("spec.containers", "pod updates may not add or remove containers")]
    if len(ns.get("initContainers") or []) != len(os_.get("initContainers") or []):
        return [forbidden("spec.initContainers", "pod updates may not add or remove containers")]
    errs += _validate_deadline_update(ns, os_)
    errs += _validate_added_tolerations(ns.get("tolerations") or [], os_.get("tolerations") or [])
    errs += _validate_gates_update(ns, os_)
    if ns == os_:
        return errs
    munged = copy.deepcopy(ns)
    for key in ("containers", "initContainers"):
        for c, oc in zip(munged.get(key) or [], os_.get(key) or []):
            c["image"] = oc.get("image")
    for f in ("activeDeadlineSeconds", "tolerations", "schedulingGates"):
        _copy_field(munged, os_, f)
    tg_new, tg_old = ns.get("terminationGracePeriodSeconds"), os_.get("terminationGracePeriodSeconds")
    if tg_old is not None and tg_old < 0 and tg_new == 1:
        munged["terminationGracePeriodSeconds"] = tg_old
    if _gated(os_):
        for f in ("nodeSelector", "affinity"):
            _copy_field(munged, os_, f)
    if munged != os_:
        errs.append(forbidden("spec", f"{_MUTABLE_MESSAGE}\n{spec_diff.diff(os_, munged)}"))
    return errs


def _copy_field(dst: dict, src: dict, f: str) -> None:
    if f in src:
        dst[f] = copy.deepcopy(src[f])
    else:
        dst.pop(f, None)


def _gated(spec: dict) -> bool:
    return bool(spec.get("schedulingGates"))


def _validate_deadline_update(ns: dict, os_: dict) -> list[FieldError]:
    new, old = ns.get("activeDeadlineSeconds"), os_.get("activeDeadlineSeconds")
    p = "spec.activeDeadlineSeconds"
    if new is None and old is not None:
        return [invalid(p, None, "must not update from a positive integer to nil value")]
    if new is not None and old is not None and new > old:
        return [invalid(p, new, "must be less than or equal to previous value")]
    return []


def _validate_added_tolerations(new: list, old: list) -> list[FieldError]:
    """Existing tolerations stay; only their tolerationSeconds may change."""
    def key(t: dict) -> dict:
        return {k: v for k, v in t.items() if k != "tolerationSeconds"}
    kept = [key(t) for t in new]
    if any(key(o) not in kept for o in old):
        return [forbidden("spec.tolerations", "existing toleration can not be modified except its tolerationSeconds")]
    return []


def _validate_gates_update(ns: dict, os_: dict) -> list[FieldError]:
    old = {g.get("name") for g in os_.get("schedulingGates") or []}
    for g in ns.get("schedulingGates") or []:
        if g.get("name") not in old:
            return [forbidden("spec.schedulingGates",
                              f"only deletion is allowed, but found new scheduling gate '{g.get('name')}'")]
    return []


#: the condition types the system sets; any other type must be a qualified name
_SYSTEM_CONDITIONS = frozenset((POD_CONDITION_SCHEDULED, "Ready", "Initialized"))
#: those and the other types kubelets and controllers set, known qualified names: a status
#: write's usual conditions pass without a check each
_KNOWN_CONDITIONS = _SYSTEM_CONDITIONS | {"ContainersReady", "PodReadyToStartContainers", "DisruptionTarget",
                                         "PodResizePending", "PodResizeInProgress"}
_RESOURCE_HEALTH = ("Healthy", "Unhealthy", "Unknown")
_STATUS_LISTS = ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses")


def validate_pod_status_update(new: dict, old: dict) -> list[FieldError]:
    """ValidatePodStatusUpdate past the metadata's checks (the REST layer's), in its order. A
    status write keeps the stored spec, so the old one is the pod's; the phase is not checked.
    What a status lacks costs a lookup: the scheduler's and kubelets' writes come all the time."""
    errs: list[FieldError] = []
    st, ost = new.get("status") or _EMPTY, old.get("status") or _EMPTY
    if conds := st.get("conditions"):
        for c in conds:
            if (ctype := c.get("type", "")) not in _KNOWN_CONDITIONS and qualified_name(ctype):
                errs += _validate_condition_types(conds)
                break
    nominated = st.get("nominatedNodeName")
    if nominated and nominated != ost.get("nominatedNodeName"):
        errs += [invalid("status.nominatedNodeName", nominated, m) for m in dns1123_subdomain(nominated)]
    if (qos := st.get("qosClass", "")) != ost.get("qosClass", ""):
        errs.append(immutable("status.qosClass", qos))
    spec = old.get("spec") or _EMPTY
    containers, inits, ephemerals = st.get("containerStatuses"), st.get("initContainerStatuses"), \
        st.get("ephemeralContainerStatuses")
    statuses = (containers or (), inits or (), ephemerals or ()) if containers or inits or ephemerals else None
    if statuses:
        errs += _validate_state_transitions(statuses, ost, spec)
    if claims := st.get("resourceClaimStatuses"):
        errs += _validate_claim_statuses(claims, spec)
    if st.get("podIPs") or st.get("podIP"):
        errs += _validate_status_ips(st, ost, "podIPs", "podIP")
    if st.get("hostIPs") or st.get("hostIP"):
        errs += _validate_status_ips(st, ost, "hostIPs", "hostIP")
    if statuses and _carries_users_or_allocations(statuses):
        errs += _validate_container_statuses(statuses, spec)
    return errs


#: what an absent status or spec reads as (never written to)
_EMPTY: dict = {}


def _validate_condition_types(conds: list) -> list[FieldError]:
    """validatePodConditions: a type the system does not set is a qualified name (upstream names
    the conditions under metadata, and the field "Type")."""
    errs: list[FieldError] = []
    for i, c in enumerate(conds):
        ctype = c.get("type", "")
        if ctype not in _SYSTEM_CONDITIONS:
            errs += [invalid(f"metadata.conditions[{i}].Type", ctype, m) for m in qualified_name(ctype)]
    return errs


def _keep_condition_generations(conds: list, old_conds: list) -> list:
    """`conds` with each condition lacking an observedGeneration given the one of the old condition
    of its type at the same rank (types may repeat); the same list when none needs one."""
    old_gens: dict[str, list] = {}
    for c in old_conds:
        old_gens.setdefault(c.get("type", ""), []).append(c.get("observedGeneration"))
    out = conds
    for i, c in enumerate(conds):
        gens = old_gens.get(c.get("type", ""))
        gen = gens.pop(0) if gens else None
        if gen and not c.get("observedGeneration"):
            out = list(conds) if out is conds else out
            out[i] = {**c, "observedGeneration": gen}
    return out


def _terminated(status: dict) -> dict | None:
    return (status.get("state") or {}).get("terminated")


def _validate_state_transitions(statuses: tuple, ost: dict, spec: dict) -> list[FieldError]:
    """ValidateContainerStateTransition (containers by the pod's restartPolicy, ephemeral ones as
    Never) and ValidateInitContainerStateTransition (sidecars may restart): a terminated container
    may leave that state only where it would be restarted."""
    errs: list[FieldError] = []
    # a pod with a RestartAllContainers rule may restart every container (AllContainersCouldRestart)
    if (policy := spec.get("restartPolicy", "")) != "Always" and not restartrules.restarts_all({"spec": spec}):
        if statuses[0]:
            errs += _transitions("containerStatuses", statuses[0], ost, policy, (), spec.get("containers") or ())
        if statuses[1]:
            sidecars = {c.get("name") for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"}
            errs += _transitions("initContainerStatuses", statuses[1], ost, policy, sidecars)
    if statuses[2]:
        errs += _transitions("ephemeralContainerStatuses", statuses[2], ost, "Never", ())
    return errs


def _transitions(key: str, new_statuses: list, ost: dict, policy: str, restartable: Any,
                 containers: Any = ()) -> list[FieldError]:
    """Each old terminated status (by index) that a new status of its name leaves, unless its
    container restarts: on failure under OnFailure, always where `restartable` names it, or as
    one of `containers`' own policy and rules say for its exit code (ContainerShouldRestart)."""
    errs: list[FieldError] = []
    own = {c.get("name"): c for c in containers}
    for i, o in enumerate(ost.get(key) or ()):
        term = _terminated(o)
        name = o.get("name", "")
        if term is None or (policy == "OnFailure" and term.get("exitCode", 0) != 0) or name in restartable:
            continue
        if name in own and restartrules.on_exit(own[name], policy, term.get("exitCode", 0)):
            continue
        errs += [forbidden(f"status.{key}[{i}].state", "may not be transitioned to non-terminated state")
                 for n in new_statuses if n.get("name", "") == name and _terminated(n) is None]
    return errs


def _validate_claim_statuses(claims: list, spec: dict) -> list[FieldError]:
    """validatePodResourceClaimStatuses: each names one of the spec's claims, once; a generated
    claim's name is a DNS subdomain (reported at the entry's name, as upstream does)."""
    errs: list[FieldError] = []
    known = {c.get("name") for c in spec.get("resourceClaims") or ()}
    seen: set[str] = set()
    for i, s in enumerate(claims):
        p = f"status.resourceClaimStatuses[{i}].name"
        name = s.get("name", "")
        if name not in known:
            errs.append(invalid(p, name, "must match the name of an entry in `spec.resourceClaims`"))
        if name in seen:
            errs.append(duplicate(p, name))
        seen.add(name)
        if (generated := s.get("resourceClaimName")) is not None:
            errs += [invalid(p, generated, m) for m in dns1123_subdomain(generated)]
    return errs


def _carries_users_or_allocations(statuses: tuple) -> bool:
    """Whether a container status reports its user or allocated resources (few do)."""
    for items in statuses:
        for cs in items:
            if "user" in cs or "allocatedResourcesStatus" in cs:
                return True
    return False


def _validate_container_statuses(statuses: tuple, spec: dict) -> list[FieldError]:
    """validateContainerStatusUsers for the three lists, then validateContainerStatusAllocatedResourcesStatus
    for containers and init containers; ephemeral containers may report no allocated resources."""
    errs: list[FieldError] = []
    os_ = spec.get("os")
    os_name = "linux" if os_ is None else os_.get("name", "")
    for key, items in zip(_STATUS_LISTS, statuses):
        for i, cs in enumerate(items):
            if (user := cs.get("user")) is not None and (linux := user.get("linux")) is not None:
                errs += _validate_container_user(linux, f"status.{key}[{i}].linux", os_name)
    for key, items, kind in zip(_STATUS_LISTS, statuses, ("containers", "initContainers")):
        for i, cs in enumerate(items):
            if (allocated := cs.get("allocatedResourcesStatus")) is not None:
                container = next((c for c in spec.get(kind) or () if c.get("name") == cs.get("name", "")), None)
                errs += _validate_allocated(allocated, container, f"status.{key}[{i}].allocatedResourcesStatus")
    for i, cs in enumerate(statuses[2]):
        if cs.get("allocatedResourcesStatus"):
            errs.append(forbidden(f"status.ephemeralContainerStatuses[{i}].allocatedResourcesStatus",
                                  "must not be specified in container status"))
    return errs


def _validate_container_user(linux: dict, path: str, os_name: str) -> list[FieldError]:
    """validateLinuxContainerUser on a Linux pod (uid, gid and groups in int32's range); a Windows
    pod's status may not carry a Linux user; another OS's is not checked. The path skips "user",
    as upstream's does."""
    if os_name == "windows":
        return [forbidden(path, "cannot be set for a windows pod")]
    if os_name != "linux":
        return []
    ids = [(f"{path}.uid", linux.get("uid") or 0), (f"{path}.gid", linux.get("gid") or 0)]
    ids += [(f"{path}.supplementalGroups[{g}]", gid) for g, gid in enumerate(linux.get("supplementalGroups") or ())]
    return [invalid(p, v, f"must be between 0 and {_MAX_INT32}, inclusive") for p, v in ids if not 0 <= v <= _MAX_INT32]


def _validate_allocated(allocated: list, container: dict | None, path: str) -> list[FieldError]:
    """Each allocated resource names one the container requests (or one of its claims, as
    "claim:NAME[/REQUEST]"); its devices' health is known and their IDs unique. A status of a
    container the spec lacks has only its devices checked."""
    errs: list[FieldError] = []
    resources = (container or {}).get("resources") or {}
    for j, ar in enumerate(allocated):
        name = ar.get("name", "")
        if container is None:
            pass
        elif name.startswith("claim:"):
            claims = ["claim:" + c.get("name", "") + (f"/{c['request']}" if c.get("request") else "")
                      for c in resources.get("claims") or ()]
            if name not in claims:
                errs.append(invalid(f"{path}[{j}].name", name, "must match one of the container's resource claims in "
                                    "a format 'claim:<claimName>/<request>' or 'claim:<claimName>' if request is empty"))
        elif name not in (resources.get("requests") or {}):
            errs.append(invalid(f"{path}[{j}].name", name, "must match one of the container's resource requests"))
        ids: set[str] = set()
        for k, r in enumerate(ar.get("resources") or ()):
            p = f"{path}[{j}].resources[{k}]"
            if (health := r.get("health", "")) not in _RESOURCE_HEALTH:
                errs.append(not_supported(f"{p}.health", health, _RESOURCE_HEALTH))
            if (rid := r.get("resourceID", "")) in ids:
                errs.append(duplicate(f"{p}.resourceID", rid))
            ids.add(rid)
    return errs


def _validate_status_ips(st: dict, ost: dict, plural: str, single: str) -> list[FieldError]:
    """validatePodIPs / validateHostIPs: hostIP is hostIPs[0]; each a legacy IP (the old status's
    stand); two at most, of two families, none twice (the internal structs: Go's field names)."""
    ips = _status_ips(st, plural, single)
    if not ips:
        return []
    p = f"status.{plural}"
    errs: list[FieldError] = []
    if plural == "hostIPs" and st.get(single) != ips[0]:
        errs.append(invalid(f"{p}[0].ip", ips[0], "must be equal to `hostIP`"))
    old_ips = None  # read only for an address that needs them: kubelets write statuses all the time
    for i, ip in enumerate(ips):
        if not legacy_ip_valid(ip) and (found := legacy_ip_errors(ip, f"{p}[{i}]")):
            old_ips = _status_ips(ost, plural, single) if old_ips is None else old_ips
            errs += [] if ip in old_ips else found
    if len(ips) < 2:
        return errs
    parsed = [sloppy_ip(ip) for ip in ips]
    spread = None not in parsed and (len(ips) > 2 or len({a.version for a in parsed}) < 2)
    if not spread and len(set(ips)) == len(ips):
        return errs
    entries = [Struct(IP=ip) for ip in ips]  # core.PodIP / core.HostIP
    dups = [duplicate(f"{p}[{i}]", entries[i]) for i in repeats(ips)]
    families = [invalid(p, entries, "may specify no more than one IP for each IP family")] if spread else []
    return errs + (dups + families if plural == "hostIPs" else families + dups)  # each function's order


# --- binding -------------------------------------------------------------------


def validate_binding(binding: dict) -> list[FieldError]:
    """ValidatePodBinding: target must name a Node."""
    target = binding.get("target") or {}
    errs: list[FieldError] = []
    if target.get("kind") not in (None, "", "Node"):
        errs.append(not_supported("target.kind", target.get("kind"), ["Node", "<empty>"]))
    if not target.get("name"):
        errs.append(required("target.name"))
    return errs


# --- printing --------------------------------------------------------------------


def _restartable(c: dict | None) -> bool:
    return bool(c) and c.get("restartPolicy") == "Always"


def _later(a: str | None, b: str | None) -> str | None:
    if not b:
        return a
    if not a:
        return b
    return b if parse_time(b) > parse_time(a) else a


def _terminated_reason(term: dict, prefix: str = "") -> str:
    if term.get("reason"):
        return prefix + term["reason"]
    if term.get("signal"):
        return f"{prefix}Signal:{term['signal']}"
    return f"{prefix}ExitCode:{term.get('exitCode', 0)}"


def pod_summary(pod: dict) -> tuple[str, str, int, str | None]:
    """(READY, STATUS, restarts, last restart time) the way printPod computes them."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    init_specs = {c.get("name"): c for c in spec.get("initContainers") or []}
    total = len(spec.get("containers") or []) + sum(1 for c in init_specs.values() if _restartable(c))
    ready = restarts = sidecar_restarts = 0
    last = sidecar_last = None
    phase = status.get("phase", "")
    reason = status.get("reason") or phase
    for c in status.get("conditions") or []:
        if c.get("type") == POD_CONDITION_SCHEDULED and c.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    initializing = False
    n_init = len(spec.get("initContainers") or [])
    for i, cs in enumerate(status.get("initContainerStatuses") or []):
        restarts += cs.get("restartCount", 0)
        finished = ((cs.get("lastState") or {}).get("terminated") or {}).get("finishedAt")
        last = _later(last, finished)
        sidecar = _restartable(init_specs.get(cs.get("name")))
        if sidecar:
            sidecar_restarts += cs.get("restartCount", 0)
            sidecar_last = _later(sidecar_last, finished)
        state = cs.get("state") or {}
        term, waiting = state.get("terminated"), state.get("waiting")
        if term is not None and term.get("exitCode", 0) == 0:
            continue
        if sidecar and cs.get("started"):
            ready += 1 if cs.get("ready") else 0
            continue
        if term is not None:
            reason = _terminated_reason(term, "Init:")
        elif waiting and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = "Init:" + waiting["reason"]
        else:
            reason = f"Init:{i}/{n_init}"
        initializing = True
        break
    # isPodInitializedConditionTrue reads the first Initialized condition
    if not initializing or (find_condition(status.get("conditions"), "Initialized") or {}).get("status") == "True":
        restarts, last = sidecar_restarts, sidecar_last
        has_running = False
        for cs in reversed(status.get("containerStatuses") or []):
            restarts += cs.get("restartCount", 0)
            last = _later(last, ((cs.get("lastState") or {}).get("terminated") or {}).get("finishedAt"))
            state = cs.get("state") or {}
            waiting, term = state.get("waiting"), state.get("terminated")
            if waiting and waiting.get("reason"):
                reason = waiting["reason"]
            elif term is not None:
                reason = _terminated_reason(term)
            elif cs.get("ready") and state.get("running") is not None:
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            reason = "Running" if is_condition_true(status.get("conditions"), "Ready") else "NotReady"
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        if status.get("reason") == "NodeLost":
            reason = "Unknown"
        elif phase not in _TERMINAL:
            reason = "Terminating"
    return f"{ready}/{total}", reason, restarts, last


def _readiness_gates(pod: dict) -> str:
    gates = (pod.get("spec") or {}).get("readinessGates") or []
    if not gates:
        return "<none>"
    conds = (pod.get("status") or {}).get("conditions")
    true = 0
    for g in gates:
        c = find_condition(conds, g.get("conditionType"))
        true += c is not None and c.get("status") == "True"
    return f"{true}/{len(gates)}"


def _pod_ip(pod: dict) -> str:
    ips = (pod.get("status") or {}).get("podIPs") or []
    return ips[0].get("ip", "") if ips else ""


class PodStrategy(Strategy):
    """Pods. `clock` feeds the RESTARTS column's "(5m ago)"."""
    return_deleted_object = True
    defaults_status = False
    defaults_spec_only = True
    #: podStatusStrategy keeps the stored ownerReferences (old kubelets corrupted them)
    status_metadata = ("labels", "annotations", "finalizers")
    status_deletion_kept = RESET_DELETION  # podStatusStrategy clears it; the update keeps the stored one
    spec_subresources = (subresources.EPHEMERAL, subresources.RESIZE)

    field_selectors = {
        "spec.nodeName": lambda o: (o.get("spec") or {}).get("nodeName", ""),
        "spec.restartPolicy": lambda o: (o.get("spec") or {}).get("restartPolicy", ""),
        "spec.schedulerName": lambda o: (o.get("spec") or {}).get("schedulerName", ""),
        "spec.serviceAccountName": lambda o: (o.get("spec") or {}).get("serviceAccountName", ""),
        "spec.hostNetwork": lambda o: "true" if (o.get("spec") or {}).get("hostNetwork") else "false",
        "status.phase": lambda o: (o.get("status") or {}).get("phase", ""),
        "status.podIP": _pod_ip,
        "status.nominatedNodeName": lambda o: (o.get("status") or {}).get("nominatedNodeName", ""),
        # v1's conversion func also accepts these two: spec.host (old clients) reads as spec.nodeName,
        # and status.podIPs, which the pod's selectable fields lack, reads as ""
        "spec.host": lambda o: (o.get("spec") or {}).get("nodeName", ""),
        "status.podIPs": lambda o: "",
    }

    def __init__(self, clock: Clock = time.time) -> None:
        self.clock = clock
        self.columns = [
            Column("Name", "string", lambda o: o["metadata"]["name"], NAME_DOC, format="name"),
            Column("Ready", "string", lambda o: pod_summary(o)[0],
                   "The aggregate readiness state of this pod for accepting traffic."),
            Column("Status", "string", lambda o: pod_summary(o)[1],
                   "The aggregate status of the containers in this pod."),
            Column("Restarts", "string", self._restarts,
                   "The number of times the containers in this pod have been restarted and when the last "
                   "container in this pod has restarted."),
            Column("Age", "string", AGE, AGE_DOC),
            Column("IP", "string", lambda o: _pod_ip(o) or "<none>", doc("PodStatus", "podIP"), priority=1),
            Column("Node", "string", lambda o: (o.get("spec") or {}).get("nodeName") or "<none>",
                   doc("PodSpec", "nodeName"), priority=1),
            Column("Nominated Node", "string",
                   lambda o: (o.get("status") or {}).get("nominatedNodeName") or "<none>",
                   doc("PodStatus", "nominatedNodeName"), priority=1),
            Column("Readiness Gates", "string", _readiness_gates, doc("PodSpec", "readinessGates"), priority=1),
        ]

    def _restarts(self, pod: dict) -> str:
        _, _, restarts, last = pod_summary(pod)
        if restarts and last:
            return f"{restarts} ({since(last, self.clock)} ago)"
        return str(restarts)

    def graceful_delete_seconds(self, obj, requested):
        """A pod on a node gets its grace period for the node agent to stop it;
        one never scheduled (or already finished) goes at once."""
        spec, st = obj.get("spec") or {}, obj.get("status") or {}
        if not spec.get("nodeName") or st.get("phase") in ("Succeeded", "Failed"):
            return 0
        if requested is not None:  # a negative one is a second (BeforeDelete's "1s"), not at once
            return 1 if int(requested) < 0 else int(requested)
        grace = spec.get("terminationGracePeriodSeconds")
        return 30 if grace is None else max(int(grace), 0)

    def default(self, obj, version):
        spec = obj.setdefault("spec", {})
        default_pod_spec(spec)
        for c in spec.get("initContainers") or []:
            _default_requests(c.setdefault("resources", {}))
        for c in spec.get("containers") or []:
            _default_requests(c.setdefault("resources", {}))

    def prepare_for_create(self, obj):
        spec = obj.setdefault("spec", {})
        drop_pod_fields(spec)
        add_default_tolerations(spec)
        merge_label_keys(spec, (obj.get("metadata") or {}).get("labels") or {})
        obj["status"] = {"phase": "Pending", "qosClass": qos_class(spec)}
        if spec.get("schedulingGates"):
            obj["status"]["conditions"] = [{
                "type": POD_CONDITION_SCHEDULED, "status": "False", "reason": "SchedulingGated",
                "message": "Scheduling is blocked due to non-empty scheduling gates",
            }]

    def prepare_for_update(self, new, old):
        drop_pod_fields(new.setdefault("spec", {}), old.get("spec"))

    def warnings_on_create(self, obj):
        return pod_warnings.pod_warnings(obj)

    def validate(self, obj):
        spec = obj.get("spec") or {}
        errs = _created_spec_errors(spec)
        annotations = (obj.get("metadata") or {}).get("annotations")
        if not annotations:  # most pods: none of the annotation checks has anything to read
            return errs
        return (_pod_specific_annotations(annotations, spec) + errs + _seccomp_annotations_match(annotations, spec)
                + _apparmor_annotations_match(annotations, spec))

    def validate_update(self, new, old):
        """ValidatePodUpdate: the annotations checked as on create, the spec, the annotations' changes
        (which check them again, as upstream does), then what a pod update may change."""
        return self._metadata_and_spec(new, old) + _pod_annotation_updates(new, old) + validate_pod_update(new, old)

    @staticmethod
    def _metadata_and_spec(new, old):
        """validatePodMetadataAndSpec on an update: the annotations (an invalid deletion cost the old
        pod had may stay), then the spec (the old spec's IPs stand unchecked)."""
        old_spec = old.get("spec") or {}
        spec = new.get("spec") or {}
        errs = validate_pod_spec(spec, old_ips=pod_spec_ips(old_spec),
                                 old_spread_keys_invalid=spread_label_keys_invalid(old_spec), pod=True,
                                 old_spec=old_spec)
        errs += validate_pod_only(spec)
        annotations = (new.get("metadata") or {}).get("annotations") or {}
        old_annotations = (old.get("metadata") or {}).get("annotations") or {}
        invalid_cost = POD_DELETION_COST in old_annotations and parse_deletion_cost(old_annotations[POD_DELETION_COST]) is None
        return _pod_specific_annotations(annotations, new.get("spec") or {}, invalid_cost) + errs

    def prepare_for_subresource_update(self, subresource, new, old):
        if subresource == subresources.EPHEMERAL:
            return subresources.keep_ephemeral_containers(new, old)
        return subresources.keep_resize(new, old)

    def validate_subresource_update(self, subresource, new, old):
        """ValidatePodEphemeralContainersUpdate and ValidatePodResize: a refusal of the whole
        write alone, else the pod's own checks and then the subresource's."""
        if subresource == subresources.EPHEMERAL:
            if refusal := subresources.ephemeral_refusal(old):
                return [refusal]
            errs = self._metadata_and_spec(new, old) + _pod_annotation_updates(new, old)
            return errs + subresources.validate_ephemeral_containers_update(new, old)
        if refusal := subresources.resize_refusal(new, old):
            return [refusal]
        errs = self._metadata_and_spec(new, old)
        old_qos = (old.get("status") or {}).get("qosClass") or qos_class(old.get("spec") or {})
        return subresources.validate_resize(new, old, old_qos, qos_class(new.get("spec") or {}), errs)

    def prepare_for_status_update(self, new, old):
        """podStatusStrategy.PrepareForUpdate's status part: a write that drops qosClass (old
        kubelets did) keeps the stored one; one that clears an observedGeneration (the status's, or
        a condition's, matched to the old conditions of its type in order) keeps the old value.
        The status is copied, never changed in place: a patch may share it with the stored pod."""
        st, ost = new.get("status") or _EMPTY, old.get("status")
        if not ost:
            return
        kept = {}
        if not st.get("qosClass") and ost.get("qosClass"):
            kept["qosClass"] = ost["qosClass"]
        if not st.get("observedGeneration") and ost.get("observedGeneration"):
            kept["observedGeneration"] = ost["observedGeneration"]
        if (conds := st.get("conditions")) and (old_conds := ost.get("conditions")):
            for c in old_conds:
                if c.get("observedGeneration"):
                    if (restored := _keep_condition_generations(conds, old_conds)) is not conds:
                        kept["conditions"] = restored
                    break
        if kept:
            new["status"] = {**st, **kept}

    def validate_status_update(self, new, old):
        return validate_pod_status_update(new, old)

    def warnings_on_status_update(self, new, old):
        """GetWarningsForIP on each pod IP and host IP (as the internal status lists them)."""
        st = new.get("status") or _EMPTY
        out: list[str] = []
        if st.get("podIP") or st.get("podIPs"):
            out += _status_ip_warnings("podIPs", *_status_ips(st, "podIPs", "podIP"))
        if st.get("hostIP") or st.get("hostIPs"):
            out += _status_ip_warnings("hostIPs", *_status_ips(st, "hostIPs", "hostIP"))
        return out

