"""Pieces of a pod spec: containers, volumes, tolerations, resource claims.

Shared by the Pod strategy and by every group that embeds a pod template
(apps, batch), so each function takes the field path it reports under.
"""

from __future__ import annotations

import re
from typing import Any

from .container_restart import validate_container_restart
from .core_volumes import validate_claim_spec
from ..machinery.gofmt import Struct
from ..machinery.quantity import QuantityError, canonical, nano_value, parse_quantity
from ..machinery.validation import (
    FieldError,
    config_key,
    dns1123_label,
    dns1123_subdomain,
    dns1123_subdomain_with_underscore,
    duplicate,
    forbidden,
    invalid,
    label_value,
    legacy_ip_errors,
    not_found,
    not_supported,
    qualified_name,
    remembers_clean,
    remembers_valid,
    required,
    template_object_meta,
    too_long,
    validate_annotations,
)

POD_CONDITION_SCHEDULED = "PodScheduled"
PORT_RANGE_MSG = "must be between 1 and 65535, inclusive"
FILE_MODE_MSG = "must be a number between 0 and 0777 (octal), both inclusive"
PROTOCOLS = ["SCTP", "TCP", "UDP"]
KEY_TYPES = ["RSA3072", "RSA4096", "ECDSAP256", "ECDSAP384", "ECDSAP521", "ED25519"]

#: VolumeSource members in the order upstream checks them ("more than 1" names the later one)
VOLUME_SOURCES = (
    "emptyDir", "hostPath", "gitRepo", "gcePersistentDisk", "awsElasticBlockStore", "secret", "nfs", "iscsi",
    "glusterfs", "flocker", "persistentVolumeClaim", "rbd", "cinder", "cephfs", "quobyte", "downwardAPI", "fc",
    "flexVolume", "configMap", "azureFile", "vsphereVolume", "photonPersistentDisk", "portworxVolume",
    "azureDisk", "storageos", "projected", "scaleIO", "csi", "ephemeral", "image",
)
#: each source's place in VOLUME_SOURCES: a volume of several is refused in that order
_SOURCE_ORDER = {s: i for i, s in enumerate(VOLUME_SOURCES)}
_STANDARD_CONTAINER_RESOURCES = ("cpu", "memory", "ephemeral-storage")
_PORT_NAME_CHARS = re.compile(r"^[-a-z0-9]+\Z")
_PORT_NAME_LETTER = re.compile(r"[a-z]")
_DEFAULT_MODE = 420


# --- defaults ----------------------------------------------------------------


def image_pull_policy(image: str) -> str:
    """Always for ':latest' or an untagged, undigested image, else IfNotPresent."""
    name, _, digest = (image or "").partition("@")
    last = name.rsplit("/", 1)[-1]
    tag = last.partition(":")[2]
    if not tag and not digest:
        tag = "latest"
    return "Always" if tag == "latest" else "IfNotPresent"


def _default_probe(probe: dict | None) -> None:
    """SetDefaults_Probe: int32 fields, so a zero is unset too; a grpc action's service is "" (its
    +default marker: the field is a pointer Go encodes without omitempty)."""
    if probe is None:
        return
    for k, v in (("timeoutSeconds", 1), ("periodSeconds", 10), ("successThreshold", 1), ("failureThreshold", 3)):
        if not probe.get(k):
            probe[k] = v
    _default_http_get(probe.get("httpGet"))
    if type(grpc := probe.get("grpc")) is dict and grpc.get("service") is None:
        grpc["service"] = ""


def _default_http_get(action: dict | None) -> None:
    if action is not None:
        if not action.get("path"):
            action["path"] = "/"
        if not action.get("scheme"):
            action["scheme"] = "HTTP"


def default_container(c: dict, host_network: bool, ephemeral: bool = False) -> None:
    """SetDefaults_Container (and its nested defaulters)."""
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    if "imagePullPolicy" not in c:  # set on every stored container: each write defaults the whole spec again
        c["imagePullPolicy"] = image_pull_policy(c.get("image", ""))
    c.setdefault("resources", {})
    for p in c.get("ports") or []:
        p.setdefault("protocol", "TCP")
        if host_network and not ephemeral and not p.get("hostPort") and "containerPort" in p:
            p["hostPort"] = p["containerPort"]
    # absent members are passed over without a call or an empty dict to look into: every pod write
    # defaults each of its containers again
    for e in c.get("env") or ():
        if (source := e.get("valueFrom")) and (field_ref := source.get("fieldRef")) is not None:
            field_ref.setdefault("apiVersion", "v1")
    for name in ("livenessProbe", "readinessProbe", "startupProbe"):
        if (probe := c.get(name)) is not None:
            _default_probe(probe)
    if lifecycle := c.get("lifecycle"):
        for hook in ("postStart", "preStop"):
            if handler := lifecycle.get(hook):
                _default_http_get(handler.get("httpGet"))


def default_volume(v: dict) -> None:
    """Volume source defaulters: file modes, hostPath type, downward API fieldRef apiVersion, token expiry."""
    for src in ("secret", "configMap", "downwardAPI", "projected"):
        if isinstance(v.get(src), dict):
            v[src].setdefault("defaultMode", _DEFAULT_MODE)
    if isinstance(v.get("hostPath"), dict):
        v["hostPath"].setdefault("type", "")
    if isinstance(v.get("image"), dict):
        if "pullPolicy" not in v["image"]:
            v["image"]["pullPolicy"] = image_pull_policy(v["image"].get("reference", ""))
    files = list((v.get("downwardAPI") or {}).get("items") or ())
    for source in (v.get("projected") or {}).get("sources") or []:
        files += (source.get("downwardAPI") or {}).get("items") or ()
    for item in files:
        if isinstance(item.get("fieldRef"), dict):
            item["fieldRef"].setdefault("apiVersion", "v1")
    for source in (v.get("projected") or {}).get("sources") or []:
        token = source.get("serviceAccountToken")
        if isinstance(token, dict):
            token.setdefault("expirationSeconds", 3600)
        cert = source.get("podCertificate")
        if isinstance(cert, dict):
            cert.setdefault("maxExpirationSeconds", 86400)


# --- small rules -----------------------------------------------------------------


def port_number(value: Any, path: str) -> list[FieldError]:
    return [] if isinstance(value, int) and 1 <= value <= 65535 else [invalid(path, value, PORT_RANGE_MSG)]


@remembers_valid
def port_name(name: str) -> list[str]:
    """IsValidPortName: an IANA_SVC_NAME."""
    msgs = []
    if len(name) > 15:
        msgs.append("must be no more than 15 characters")
    if not _PORT_NAME_CHARS.match(name):
        msgs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not _PORT_NAME_LETTER.search(name):
        msgs.append("must contain at least one letter (a-z)")
    if "--" in name:
        msgs.append("must not contain consecutive hyphens")
    if name.startswith("-") or name.endswith("-"):
        msgs.append("must not begin or end with a hyphen")
    return msgs


def local_path(value: str, path: str, non_reserved: bool = True) -> list[FieldError]:
    """validateLocalNonReservedPath: relative, no '..' element, not starting '..'."""
    errs = []
    if value.startswith("/"):
        errs.append(invalid(path, value, "must be a relative path"))
    if ".." in value.split("/"):
        errs.append(invalid(path, value, "must not contain '..'"))
    elif non_reserved and value.startswith(".."):
        errs.append(invalid(path, value, "must not start with '..'"))
    return errs


def signer_name(value: str, path: str) -> list[FieldError]:
    """ValidateSignerName: 'example.com/signer-name'."""
    if "/" not in value:
        return [invalid(path, value, "must be a fully qualified domain and path of the form 'example.com/signer-name'")]
    domain, _, rest = value.partition("/")
    errs = []
    if not rest:
        errs.append(required(path, "should be a fully qualified domain and path of the form 'example.com/signer-name'"))
    errs += [invalid(path, value, m) for m in dns1123_subdomain(domain)]
    return errs


# --- DNS -------------------------------------------------------------------------

#: libc resolver limits upstream holds a pod's dnsConfig to
MAX_DNS_NAMESERVERS = 3
MAX_DNS_SEARCH_PATHS = 32
MAX_DNS_SEARCH_LIST_CHARS = 2048


def validate_dns_config(spec: dict, path: str, old_ips: tuple[str, ...] = ()) -> list[FieldError]:
    """validatePodDNSConfig: with dnsPolicy None, a dnsConfig and a nameserver in it (either missing is
    the only error); three nameservers at most, each a legacy IP (`old_ips` stand, see
    legacy_ip_errors); 32 search domains at most, 2048 characters joined by spaces, each a DNS
    subdomain that may hold '_' once one trailing dot is dropped, "." itself passing (the relaxed
    search validation, GA and ungated in 1.37); every option named."""
    config = spec.get("dnsConfig")
    p = f"{path}.dnsConfig"
    if spec.get("dnsPolicy") == "None":
        if config is None:
            return [required(p, "must provide `dnsConfig` when `dnsPolicy` is None")]
        if not config.get("nameservers"):
            return [required(f"{p}.nameservers", "must provide at least one DNS nameserver when `dnsPolicy` is None")]
    if config is None:
        return []
    errs: list[FieldError] = []
    servers = config.get("nameservers") or []
    if len(servers) > MAX_DNS_NAMESERVERS:
        errs.append(invalid(f"{p}.nameservers", servers,
                            f"must not have more than {MAX_DNS_NAMESERVERS} nameservers"))
    for i, ip in enumerate(servers):
        errs += legacy_ip_errors(ip, f"{p}.nameservers[{i}]", old_ips)
    if searches := config.get("searches"):
        errs += _validate_dns_searches(searches, f"{p}.searches")
    for i, option in enumerate(config.get("options") or ()):
        if not option.get("name"):
            errs.append(required(f"{p}.options[{i}]", "must not be empty"))
    return errs


def _validate_dns_searches(searches: list, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    if len(searches) > MAX_DNS_SEARCH_PATHS:
        errs.append(invalid(path, searches,
                            f"must not have more than {MAX_DNS_SEARCH_PATHS} search paths"))
    if len(" ".join(searches).encode()) > MAX_DNS_SEARCH_LIST_CHARS:
        errs.append(invalid(path, searches,
                            f"must not have more than {MAX_DNS_SEARCH_LIST_CHARS} characters (including spaces) "
                            "in the search list"))
    for i, search in enumerate(searches):
        if search != ".":
            name = search[:-1] if search.endswith(".") else search
            errs += [invalid(f"{path}[{i}]", name, m) for m in dns1123_subdomain_with_underscore(name)]
    return errs


# --- containers -------------------------------------------------------------------


def validate_containers(spec: dict, path: str, volume_names: set[str], claim_names: set[str],
                        allow_init_restart_resize: bool = False) -> list[FieldError]:
    """Names unique across all container lists; per-container rules. `allow_init_restart_resize`:
    the old spec already gave a plain init container a RestartContainer resize policy (ratcheting)."""
    errs: list[FieldError] = []
    if not spec.get("containers"):
        errs.append(required(f"{path}.containers"))
    grace = spec.get("terminationGracePeriodSeconds")
    seen: set[str] = set()
    block_volumes = _block_volumes(spec)
    # ValidatePodSpec's order: the regular containers, then init and ephemeral ones, each named
    # after its common checks (a name already taken is the later list's Duplicate)
    for key in ("containers", "initContainers", "ephemeralContainers"):
        for i, c in enumerate(spec.get(key) or ()):
            p = f"{path}.{key}[{i}]"
            name = c.get("name", "")
            if not name:
                errs.append(required(f"{p}.name"))
            elif msgs := dns1123_label(name):
                errs += [invalid(f"{p}.name", name, m) for m in msgs]
            errs += _validate_container(c, p, key, volume_names, claim_names, spec.get("restartPolicy"),
                                        spec.get("hostUsers") is not False, block_volumes)
            if key == "initContainers":
                errs += validate_container_restart(c, p, init=True)
            elif key == "ephemeralContainers":
                errs += image_whitespace_errors((c,), f"{path}.{key}", i)
            if name in seen:
                errs.append(duplicate(f"{p}.name", name))
            elif name:
                seen.add(name)
            if key == "ephemeralContainers":
                errs += _ephemeral_only(c, p, spec)
                continue
            if key == "initContainers":  # init containers run one by one: each on its own
                errs += host_port_conflicts((c,), f"{path}.{key}", i)
            if any(c.get(f) is not None for f in _HANDLED):
                errs += _validate_probes_and_lifecycle(c, p, key, grace)
            if key == "containers":
                errs += validate_container_restart(c, p)
            elif not allow_init_restart_resize and plain_init_restarts_on_resize(c):
                errs.append(forbidden(f"{p}.resizePolicy", _INIT_RESTART_RESIZE))
        if key == "containers":  # checkHostPortConflicts across the regular containers
            errs += host_port_conflicts(spec.get(key) or (), f"{path}.{key}")
    return errs


_INIT_RESTART_RESIZE = "RestartContainer resize policy is not supported for non-sidecar init containers"


def plain_init_restarts_on_resize(c: dict) -> bool:
    """A non-sidecar init container with a RestartContainer resize policy (kubernetes#137458: it
    runs to completion, so a resize never restarts it)."""
    return c.get("restartPolicy") != "Always" and any(
        policy.get("restartPolicy") == "RestartContainer" for policy in c.get("resizePolicy") or ())


def host_port_conflicts(containers, path: str, first: int = 0) -> list[FieldError]:
    """AccumulateUniqueHostPorts: a host port (with its protocol and host IP) used twice is a
    Duplicate at the later use, as "<protocol>/<hostIP>/<port>"."""
    errs: list[FieldError] = []
    used: set[str] = set()
    for ci, c in enumerate(containers, first):
        for pi, port in enumerate(c.get("ports") or ()):
            if not (hp := port.get("hostPort")):
                continue
            key = f"{port.get('protocol', '')}/{port.get('hostIP', '')}/{hp}"
            if key in used:
                errs.append(duplicate(f"{path}[{ci}].ports[{pi}].hostPort", key))
            used.add(key)
    return errs


def image_whitespace_errors(containers, path: str, first: int = 0) -> list[FieldError]:
    """validateContainerOnlyForPod: a pod's (not a template's) image has no leading or trailing
    whitespace; a template may keep " " (a placeholder some tools fill in)."""
    return [invalid(f"{path}[{i}].image", image, "must not have leading or trailing whitespace")
            for i, c in enumerate(containers, first) if (image := c.get("image")) and image != image.strip()]


#: what an ephemeral container may not set (those outside upstream's allowedEphemeralContainerFields),
#: in the order of the Container type's fields
_NOT_EPHEMERAL = ("ports", "resources", "resizePolicy", "restartPolicy", "restartPolicyRules", "livenessProbe",
                  "readinessProbe", "startupProbe", "lifecycle")
_EPHEMERAL_FORBIDDEN = "cannot be set for an Ephemeral Container"


def _ephemeral_only(c: dict, p: str, spec: dict) -> list[FieldError]:
    """validateEphemeralContainers' own rules: a target among the pod's other containers, none of
    the fields a pod's service would rely on, no subPath mounts (their bind mounts outlive the
    container)."""
    errs: list[FieldError] = []
    target = c.get("targetContainerName")
    if target and not any(o.get("name") == target for k in ("containers", "initContainers") for o in spec.get(k) or ()):
        errs.append(not_found(f"{p}.targetContainerName", target))
    errs += [forbidden(f"{p}.{f}", _EPHEMERAL_FORBIDDEN) for f in _NOT_EPHEMERAL if c.get(f)]
    for i, m in enumerate(c.get("volumeMounts") or ()):
        errs += [forbidden(f"{p}.volumeMounts[{i}].{f}", _EPHEMERAL_FORBIDDEN) for f in ("subPath", "subPathExpr")
                 if m.get(f)]
    return errs


_HANDLED = ("lifecycle", "livenessProbe", "readinessProbe", "startupProbe")
_INIT_ONLY = "may not be set for init containers without restartPolicy=Always"
_HTTP_HEADER = re.compile(r"[-A-Za-z0-9]+\Z")


def _validate_probes_and_lifecycle(c: dict, p: str, kind: str, grace: int | None) -> list[FieldError]:
    """validateContainers' and validateInitContainers' lifecycle and probe rules: a plain init
    container may have none of them; liveness and startup probes need successThreshold 1, a
    readiness probe no terminationGracePeriodSeconds."""
    if kind == "initContainers" and c.get("restartPolicy") != "Always":
        return [forbidden(f"{p}.{f}", _INIT_ONLY) for f in _HANDLED if c.get(f) is not None]
    errs: list[FieldError] = []
    if (lifecycle := c.get("lifecycle")) is not None:
        for hook in ("postStart", "preStop"):
            if lifecycle.get(hook) is not None:
                errs += _validate_handler(lifecycle[hook], f"{p}.lifecycle.{hook}", grace)
    for f in _HANDLED[1:]:
        if (probe := c.get(f)) is None:
            continue
        pp = f"{p}.{f}"
        errs += _validate_handler(probe, pp, grace)
        for k in ("initialDelaySeconds", "timeoutSeconds", "periodSeconds", "successThreshold", "failureThreshold"):
            if (probe.get(k) or 0) < 0:
                errs.append(invalid(f"{pp}.{k}", probe[k], "must be greater than or equal to 0"))
        tg = probe.get("terminationGracePeriodSeconds")
        if tg is not None and tg <= 0:
            errs.append(invalid(f"{pp}.terminationGracePeriodSeconds", tg, "must be greater than 0"))
        if f == "readinessProbe":
            if tg is not None:
                errs.append(invalid(f"{pp}.terminationGracePeriodSeconds", tg, "must not be set for readinessProbes"))
        elif probe.get("successThreshold") != 1:
            errs.append(invalid(f"{pp}.successThreshold", probe.get("successThreshold", 0), "must be 1"))
    return errs


def _validate_handler(h: dict, path: str, grace: int | None) -> list[FieldError]:
    """validateHandler: exactly one action (a probe's exec, httpGet, tcpSocket or grpc; a hook's
    exec, httpGet, tcpSocket or sleep), each checked."""
    errs: list[FieldError] = []
    found = False
    for action in ("exec", "httpGet", "tcpSocket", "grpc", "sleep"):
        body = h.get(action)
        if body is None:
            continue
        if found:
            errs.append(forbidden(f"{path}.{action}", "may not specify more than 1 handler type"))
            continue
        found = True
        ap = f"{path}.{action}"
        if action == "exec":
            if not body.get("command"):
                errs.append(required(f"{ap}.command"))
        elif action == "httpGet":
            if not body.get("path"):
                errs.append(required(f"{ap}.path"))
            errs += _port_num_or_name(body.get("port"), f"{ap}.port")
            scheme = body.get("scheme", "")
            if scheme not in ("HTTP", "HTTPS"):
                errs.append(not_supported(f"{ap}.scheme", scheme, ("HTTP", "HTTPS")))
            for header in body.get("httpHeaders") or ():
                name = header.get("name", "")
                if not _HTTP_HEADER.match(name):
                    errs.append(invalid(f"{ap}.httpHeaders", name, "a valid HTTP header must consist of alphanumeric "
                                        "characters or '-' (e.g. 'X-Header-Name', regex used for validation is "
                                        "'[-A-Za-z0-9]+')"))
        elif action in ("tcpSocket", "grpc"):
            errs += _port_num_or_name(body.get("port"), f"{ap}.port")
        else:  # sleep: zero seconds allowed (PodLifecycleSleepActionAllowZero)
            seconds = body.get("seconds", 0)
            if grace is not None and not 0 <= seconds <= grace:
                errs.append(invalid(ap, seconds, f"must be non-negative and less than terminationGracePeriodSeconds ({grace})"))
    if not found:
        errs.append(required(path, "must specify a handler type"))
    return errs


def _port_num_or_name(port: Any, path: str) -> list[FieldError]:
    """ValidatePortNumOrName (an int-or-string)."""
    if isinstance(port, str):
        return [invalid(path, port, m) for m in port_name(port)]
    return port_number(port if isinstance(port, int) else 0, path)


def _validate_container(c: dict, p: str, kind: str, volume_names: set[str], claim_names: set[str],
                        pod_restart: str | None, host_users: bool, block_volumes: frozenset[str]) -> list[FieldError]:
    errs: list[FieldError] = []
    if not c.get("image"):  # its whitespace is a pod's own rule (image_whitespace_errors)
        errs.append(required(f"{p}.image"))
    tmp = c.get("terminationMessagePolicy")
    if not tmp:
        errs.append(required(f"{p}.terminationMessagePolicy"))
    elif tmp not in ("File", "FallbackToLogsOnError"):
        errs.append(not_supported(f"{p}.terminationMessagePolicy", tmp, ["File", "FallbackToLogsOnError"]))
    # each list's path is built only where it has something to check
    if ports := c.get("ports"):
        errs += validate_container_ports(ports, f"{p}.ports")
    if env := c.get("env"):
        errs += _validate_env(env, f"{p}.env")
    if env_from := c.get("envFrom"):
        errs += _validate_env_from(env_from, f"{p}.envFrom")
    devices = c.get("volumeDevices")
    if mounts := c.get("volumeMounts"):
        errs += _validate_mounts(mounts, f"{p}.volumeMounts", volume_names, c, devices or ())
    if devices:
        errs += _validate_devices(devices, mounts or (), f"{p}.volumeDevices", volume_names, block_volumes)
    pull = c.get("imagePullPolicy")
    if not pull:
        errs.append(required(f"{p}.imagePullPolicy"))
    elif pull not in ("Always", "IfNotPresent", "Never"):
        errs.append(not_supported(f"{p}.imagePullPolicy", pull, ["Always", "IfNotPresent", "Never"]))
    res = c.get("resources") or {}
    errs += validate_resources(res, f"{p}.resources", claim_names)
    if hugepages_alone(res):
        errs.append(forbidden(f"{p}.resources", "HugePages require cpu or memory"))
    if policies := c.get("resizePolicy"):
        errs += _validate_resize_policy(policies, f"{p}.resizePolicy", pod_restart)
    if sc := c.get("securityContext"):
        errs += _validate_security_context(sc, f"{p}.securityContext", host_users)
    return errs


_RESIZE_RESOURCES = ("cpu", "memory")
_RESIZE_RESTARTS = ("NotRequired", "RestartContainer")


def _validate_resize_policy(policies: list, path: str, pod_restart: str | None) -> list[FieldError]:
    """validateResizePolicy: each of cpu and memory once, a known restart policy, and none but
    NotRequired in a pod that never restarts its containers (name and value errors at the list)."""
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, policy in enumerate(policies):
        name, restart = policy.get("resourceName", ""), policy.get("restartPolicy", "")
        if name in seen:
            errs.append(duplicate(f"{path}[{i}]", name))
        seen.add(name)
        if not name:
            errs.append(required(path))
        elif name not in _RESIZE_RESOURCES:
            errs.append(not_supported(path, name, _RESIZE_RESOURCES))
        if not restart:
            errs.append(required(path))
        elif restart not in _RESIZE_RESTARTS:
            errs.append(not_supported(path, restart, _RESIZE_RESTARTS))
        if pod_restart == "Never" and restart != "NotRequired":
            errs.append(invalid(path, restart, "must be 'NotRequired' when `restartPolicy` is 'Never'"))
    return errs


def validate_container_ports(ports: list, path: str) -> list[FieldError]:
    """A port's path is built only for its errors: a valid port costs its checks alone."""
    errs: list[FieldError] = []
    names: set[str] = set()
    for i, port in enumerate(ports):
        name = port.get("name")
        if name:
            if msgs := port_name(name):
                errs += [invalid(f"{path}[{i}].name", name, m) for m in msgs]
            elif name in names:
                errs.append(duplicate(f"{path}[{i}].name", name))
            names.add(name)
        cp = port.get("containerPort")
        if not cp:
            errs.append(required(f"{path}[{i}].containerPort"))
        elif not (isinstance(cp, int) and 1 <= cp <= 65535):
            errs += port_number(cp, f"{path}[{i}].containerPort")
        hp = port.get("hostPort")
        if hp and not (isinstance(hp, int) and 1 <= hp <= 65535):
            errs += port_number(hp, f"{path}[{i}].hostPort")
        proto = port.get("protocol")
        if not proto:
            errs.append(required(f"{path}[{i}].protocol"))
        elif proto not in PROTOCOLS:
            errs.append(not_supported(f"{path}[{i}].protocol", proto, PROTOCOLS))
    return errs


def _validate_env(env: list, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for i, e in enumerate(env):
        name = e.get("name", "")
        if not name:
            errs.append(required(f"{path}[{i}].name"))
        else:
            errs += [invalid(f"{path}[{i}].name", name, m) for m in _env_name_errors(name)]
        source = e.get("valueFrom")
        if source is not None:
            errs += _validate_env_source(source, e.get("value"), f"{path}[{i}].valueFrom")
    return errs


_ENV_NAME_MSG = "a valid environment variable name must consist only of printable ASCII characters other than '='"


def _env_name_errors(name: str) -> list[str]:
    """IsRelaxedEnvVarName: printable ASCII (U+0020 to U+007E) but '='."""
    return [_ENV_NAME_MSG] if "=" in name or not (name.isascii() and name.isprintable()) else []


def _validate_env_from(sources: list, path: str) -> list[FieldError]:
    """ValidateEnvFrom: a prefix is an env name, each source one of a ConfigMap or a Secret by a
    name that may end in '-' (a generated prefix); the count errors are at the list's path."""
    errs: list[FieldError] = []
    for i, src in enumerate(sources):
        p = f"{path}[{i}]"
        if prefix := src.get("prefix"):
            errs += [invalid(f"{p}.prefix", prefix, m) for m in _env_name_errors(prefix)]
        n = 0
        for kind in ("configMapRef", "secretRef"):
            if (ref := src.get(kind)) is None:
                continue
            n += 1
            name = ref.get("name") or ""
            if not name:
                errs.append(required(f"{p}.{kind}.name"))
            else:
                masked = name[:-1] + "a" if len(name) > 1 and name.endswith("-") else name  # maskTrailingDash
                errs += [invalid(f"{p}.{kind}.name", name, m) for m in dns1123_subdomain(masked)]
        if n == 0:
            errs.append(invalid(path, "", "must specify one of: `configMapRef` or `secretRef`"))
        elif n > 1:
            errs.append(invalid(path, "", "may not have more than one field specified at a time"))
    return errs


#: validEnvDownwardAPIFieldPathExpressions
_ENV_FIELD_PATHS = ("metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName", "spec.serviceAccountName",
                    "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs")
#: the labels ConvertDownwardAPIFieldLabel passes (spec.host is converted to spec.nodeName)
_DOWNWARD_LABELS = frozenset(("metadata.annotations", "metadata.labels", "metadata.name", "metadata.namespace",
                              "metadata.uid", "spec.nodeName", "spec.restartPolicy", "spec.serviceAccountName",
                              "spec.schedulerName", "status.phase", "status.hostIP", "status.hostIPs", "status.podIP",
                              "status.podIPs"))
_CONTAINER_RESOURCES = ("limits.cpu", "limits.ephemeral-storage", "limits.memory", "requests.cpu",
                        "requests.ephemeral-storage", "requests.memory")


def _subscripted(path: str) -> tuple[str, str] | None:
    """fieldpath.SplitMaybeSubscriptedPath: metadata.labels['key'] is (metadata.labels, key)."""
    if not path.endswith("']"):
        return None
    head, sep, key = path[:-2].partition("['")
    return (head, key) if sep and head else None


def _validate_env_source(source: dict, value: Any, path: str) -> list[FieldError]:
    """validateEnvVarValueFrom: each source's own rules, then one source and no value."""
    errs: list[FieldError] = []
    n = 0
    if (ref := source.get("fieldRef")) is not None:
        n += 1
        errs += _object_field_selector(ref, f"{path}.fieldRef")
    if (ref := source.get("resourceFieldRef")) is not None:
        n += 1
        errs += _resource_field_selector(ref, f"{path}.resourceFieldRef", volume=False)
    for kind in ("configMapKeyRef", "secretKeyRef"):
        if (ref := source.get(kind)) is not None:
            n += 1
            name, key = ref.get("name") or "", ref.get("key") or ""
            errs += [invalid(f"{path}.{kind}.name", name, m) for m in dns1123_subdomain(name)]
            if not key:
                errs.append(required(f"{path}.{kind}.key"))
            else:
                errs += [invalid(f"{path}.{kind}.key", key, m) for m in config_key(key)]
    if (ref := source.get("fileKeyRef")) is not None:
        n += 1
        errs += _file_key_selector(ref, f"{path}.fileKeyRef")
    if n == 0:
        errs.append(invalid(path, "", "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or "
                                      "`secretKeyRef`"))
    elif value:
        errs.append(invalid(path, "", "may not be specified when `value` is not empty"))
    elif n > 1:
        errs.append(invalid(path, "", "may not have more than one field specified at a time"))
    return errs


def _file_key_selector(ref: dict, path: str) -> list[FieldError]:
    """A FileKeySelector (EnvFiles, beta and on since 1.35): the key an env name (printable ASCII
    but '='), the volume a DNS label, the path relative without '..'."""
    errs: list[FieldError] = []
    key, volume, file = ref.get("key") or "", ref.get("volumeName") or "", ref.get("path") or ""
    if not key:
        errs.append(required(f"{path}.key"))
    else:
        errs += [invalid(f"{path}.key", key, m) for m in _env_name_errors(key)]
    if not volume:
        errs.append(required(f"{path}.volumeName"))
    else:
        errs += [invalid(f"{path}.volumeName", volume, m) for m in dns1123_label(volume)]
    if not file:
        errs.append(required(f"{path}.path"))
    else:
        errs += local_path(file, f"{path}.path")
    return errs


def file_key_ref_volumes(spec: dict, path: str) -> list[FieldError]:
    """Each fileKeyRef names one of the pod's emptyDir volumes, the one place an env file can be
    written before the container starts (every container kind may read one)."""
    errs: list[FieldError] = []
    volumes = {v.get("name"): v for v in spec.get("volumes") or ()}
    for kind in ("containers", "initContainers", "ephemeralContainers"):
        for i, c in enumerate(spec.get(kind) or ()):
            for j, e in enumerate(c.get("env") or ()):
                ref = (e.get("valueFrom") or {}).get("fileKeyRef")
                if not ref or not (name := ref.get("volumeName")):
                    continue
                p = f"{path}.{kind}[{i}].env[{j}].valueFrom.fileKeyRef.volumeName"
                if name not in volumes:
                    errs.append(not_found(p, name))
                elif volumes[name].get("emptyDir") is None:
                    errs.append(invalid(p, name, "must reference an emptyDir volume"))
    return errs


_HUGEPAGES_FIELDS = ("limits.hugepages-", "requests.hugepages-")
_BYTE_DIVISORS = ("1", "1k", "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei")
#: validateContainerResourceDivisor: the divisors each resource takes, and the words naming it
_DIVISORS = {"cpu": (("1m", "1"), "only divisor's values 1m and 1 are supported with the cpu resource"),
             "memory": (_BYTE_DIVISORS, f"only divisor's values {', '.join(_BYTE_DIVISORS)} are supported with the "
                                        "memory resource"),
             "ephemeral-storage": (_BYTE_DIVISORS, f"only divisor's values {', '.join(_BYTE_DIVISORS)} are supported "
                                                   "with the local ephemeral storage resource"),
             "hugepages": (_BYTE_DIVISORS, f"only divisor's values {', '.join(_BYTE_DIVISORS)} are supported with the "
                                           "hugepages resource")}


def _resource_field_selector(ref: dict, path: str, volume: bool) -> list[FieldError]:
    """validateContainerResourceFieldSelector: a downward API volume names its container; the resource
    is a container's request or limit; a divisor suits the resource (0 is unset)."""
    resource = ref.get("resource") or ""
    errs: list[FieldError] = []
    if volume and not ref.get("containerName"):
        errs.append(required(f"{path}.containerName"))
    elif not resource:
        errs.append(required(f"{path}.resource"))
    elif resource not in _CONTAINER_RESOURCES and not resource.startswith(_HUGEPAGES_FIELDS):
        errs.append(not_supported(f"{path}.resource", resource, _CONTAINER_RESOURCES))
    divisor = ref.get("divisor")
    try:
        divisor = None if divisor is None else canonical(str(divisor))
    except QuantityError:
        return errs  # the decoder reports it
    if divisor is None or parse_quantity(divisor) == 0:
        return errs
    name = "hugepages" if resource.startswith(_HUGEPAGES_FIELDS) else resource.partition(".")[2]
    allowed, words = _DIVISORS.get(name, (None, ""))
    if allowed is not None and resource.partition(".")[0] in ("limits", "requests") and divisor not in allowed:
        errs.append(invalid(f"{path}.divisor", resource, words))
    return errs


#: validVolumeDownwardAPIFieldPathExpressions
_VOLUME_FIELD_PATHS = ("metadata.annotations", "metadata.labels", "metadata.name", "metadata.namespace", "metadata.uid")


def _downward_api_files(items: list, path: str) -> list[FieldError]:
    """validateDownwardAPIVolumeFile for each item, reported at the volume's (or projection's) own
    path, as upstream passes it (no item index)."""
    errs: list[FieldError] = []
    for item in items:
        file_path = item.get("path") or ""
        if not file_path:
            errs.append(required(f"{path}.path"))
        errs += local_path(file_path, f"{path}.path")
        if (ref := item.get("fieldRef")) is not None:
            errs += _object_field_selector(ref, f"{path}.fieldRef", _VOLUME_FIELD_PATHS)
            if item.get("resourceFieldRef") is not None:
                errs.append(invalid(path, "resource", "fieldRef and resourceFieldRef can not be specified simultaneously"))
        elif (ref := item.get("resourceFieldRef")) is not None:
            errs += _resource_field_selector(ref, f"{path}.resourceFieldRef", volume=True)
        else:
            errs.append(required(path, "one of fieldRef and resourceFieldRef is required"))
        mode = item.get("mode")
        if mode is not None and not 0 <= mode <= 0o777:
            errs.append(invalid(f"{path}.mode", mode, FILE_MODE_MSG))
    return errs


def _object_field_selector(ref: dict, path: str, expressions: tuple[str, ...] = _ENV_FIELD_PATHS) -> list[FieldError]:
    """validateObjectFieldSelector with ConvertDownwardAPIFieldLabel's refusals."""
    version, field_path = ref.get("apiVersion") or "", ref.get("fieldPath") or ""
    if not version:
        return [required(f"{path}.apiVersion")]
    if not field_path:
        return [required(f"{path}.fieldPath")]
    sub = _subscripted(field_path)
    if version != "v1":
        why = f"unsupported pod version: {version}"
    elif sub is not None and sub[0] not in ("metadata.annotations", "metadata.labels"):
        why = f"field label does not support subscript: {field_path}"
    elif sub is None and field_path not in _DOWNWARD_LABELS and field_path != "spec.host":
        why = f"field label not supported: {field_path}"
    else:
        why = ""
    if why:
        return [invalid(f"{path}.fieldPath", field_path, f"error converting fieldPath: {why}")]
    if sub is not None:
        key = sub[1].lower() if sub[0] == "metadata.annotations" else sub[1]
        return [invalid(path, key, m) for m in qualified_name(key)]
    internal = "spec.nodeName" if field_path == "spec.host" else field_path
    if internal not in expressions:
        return [not_supported(f"{path}.fieldPath", internal, sorted(expressions))]
    return []


def _validate_mounts(mounts: list, path: str, volume_names: set[str], container: dict | None = None,
                     devices=()) -> list[FieldError]:
    """ValidateVolumeMounts; `devices`, the container's volumeDevices: a volume or a path is
    mounted or attached as a block device, not both."""
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, m in enumerate(mounts):
        if not m.get("name"):
            errs.append(required(f"{path}[{i}].name"))
        elif m["name"] not in volume_names:
            errs.append(not_found(f"{path}[{i}].name", m["name"]))
        mp = m.get("mountPath", "")
        if not mp:
            errs.append(required(f"{path}[{i}].mountPath"))
        elif mp in seen:
            errs.append(invalid(f"{path}[{i}].mountPath", mp, "must be unique"))
        seen.add(mp)
        if devices:
            if any(d.get("name") == m.get("name") for d in devices):
                errs.append(invalid(f"{path}[{i}].name", m.get("name"), "must not already exist in volumeDevices"))
            if any(d.get("devicePath") == mp for d in devices):
                errs.append(invalid(f"{path}[{i}].mountPath", mp, "must not already exist as a path in volumeDevices"))
        # as ValidateVolumeMounts reports them: at the list's path, not the mount's
        if sub := m.get("subPath"):
            errs += local_path(sub, f"{path}.subPath", non_reserved=False)
        if expr := m.get("subPathExpr"):
            if sub:
                errs.append(invalid(f"{path}.subPathExpr", expr, "subPathExpr and subPath are mutually exclusive"))
            errs += local_path(expr, f"{path}.subPathExpr", non_reserved=False)
        if (prop := m.get("mountPropagation")) is not None:
            if prop not in _PROPAGATIONS:
                errs.append(not_supported(f"{path}.mountPropagation", prop, _PROPAGATIONS))
            if prop == "Bidirectional" and not ((container or {}).get("securityContext") or {}).get("privileged"):
                errs.append(forbidden(f"{path}.mountPropagation",
                                      "Bidirectional mount propagation is available only to privileged containers"))
        errs += _recursive_read_only(m, f"{path}.recursiveReadOnly")
    return errs


def _block_volumes(spec: dict) -> frozenset[str]:
    """The volumes a container may use as a raw block device (a claim or an ephemeral claim), when
    some container asks for one (most pods have no volumeDevices: no walk of their volumes)."""
    if not any(c.get("volumeDevices") for k in ("containers", "initContainers", "ephemeralContainers")
               for c in spec.get(k) or ()):
        return frozenset()
    return frozenset(v.get("name") for v in spec.get("volumes") or ()
                     if v.get("persistentVolumeClaim") is not None or v.get("ephemeral") is not None)


def _validate_devices(devices: list, mounts, path: str, volume_names: set[str],
                      block_volumes: frozenset[str]) -> list[FieldError]:
    """ValidateVolumeDevices: a named volume of a claim (or an ephemeral claim), each name and
    device path once, no '..' in the path, neither the volume nor the path also mounted."""
    mounted = {m.get("name") for m in mounts}
    mount_paths = {m.get("mountPath") for m in mounts}
    names: set[str] = set()
    paths: set[str] = set()
    errs: list[FieldError] = []
    for i, d in enumerate(devices):
        p = f"{path}[{i}]"
        name, device = d.get("name") or "", d.get("devicePath") or ""
        if not name:
            errs.append(required(f"{p}.name"))
        if name in names:
            errs.append(invalid(f"{p}.name", name, "must be unique"))
        if name in volume_names and name not in block_volumes:
            errs.append(invalid(f"{p}.name", name,
                                "can only use volume source type of PersistentVolumeClaim or Ephemeral for block mode"))
        if name not in volume_names:
            errs.append(not_found(f"{p}.name", name))
        if not device:
            errs.append(required(f"{p}.devicePath"))
        if device in paths:
            errs.append(invalid(f"{p}.devicePath", device, "must be unique"))
        if device and ".." in device.split("/"):
            errs.append(invalid(f"{p}.devicePath", device, "can not contain backsteps ('..')"))
        else:
            paths.add(device)
        if name in mounted:
            errs.append(invalid(f"{p}.name", name, "must not already exist in volumeMounts"))
        if device in mount_paths:
            errs.append(invalid(f"{p}.devicePath", device, "must not already exist as a path in volumeMounts"))
        if name:
            names.add(name)
    return errs


_RECURSIVE_READ_ONLY = ("Disabled", "Enabled", "IfPossible")


def _recursive_read_only(mount: dict, path: str) -> list[FieldError]:
    """validateMountRecursiveReadOnly: Enabled and IfPossible need a read-only mount without
    propagation (reported at the list's path, as the other mount fields)."""
    rro = mount.get("recursiveReadOnly")
    if rro is None or rro == "Disabled":
        return []
    if rro not in _RECURSIVE_READ_ONLY:
        return [not_supported(path, rro, _RECURSIVE_READ_ONLY)]
    errs = [] if mount.get("readOnly") else [forbidden(path, "may only be specified when readOnly is true")]
    if mount.get("mountPropagation") not in (None, "None"):
        errs.append(forbidden(path, "may only be specified when mountPropagation is None or not specified"))
    return errs


_PROPAGATIONS = ("Bidirectional", "HostToContainer", "None")
_SECCOMP_TYPES = ("Localhost", "RuntimeDefault", "Unconfined")
_ID_RANGE = "must be between 0 and 2147483647, inclusive"


def validate_ids(sc: dict, fields: tuple[str, ...], path: str) -> list[FieldError]:
    """IsValidUserID / IsValidGroupID of the security context's IDs."""
    return [invalid(f"{path}.{f}", sc[f], _ID_RANGE) for f in fields
            if sc.get(f) is not None and not 0 <= sc[f] <= 2147483647]


def validate_seccomp_profile(profile: dict | None, path: str) -> list[FieldError]:
    """validateSeccompProfileField."""
    if profile is None:
        return []
    errs: list[FieldError] = []
    t = profile.get("type") or ""
    if not t:
        errs.append(required(f"{path}.type", "type is required when seccompProfile is set"))
    elif t not in _SECCOMP_TYPES:
        errs.append(not_supported(f"{path}.type", t, _SECCOMP_TYPES))
    local = profile.get("localhostProfile")
    if t == "Localhost":
        if local is None:
            errs.append(required(f"{path}.localhostProfile", "must be set when seccomp type is Localhost"))
        else:
            errs += local_path(local, f"{path}.localhostProfile", non_reserved=False)
    elif local is not None:
        errs.append(invalid(f"{path}.localhostProfile", Struct(Type=t, LocalhostProfile=local),
                            "can only be set when seccomp type is Localhost"))
    return errs


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_NETBIOS_DOMAIN = re.compile(r'[^\\/:*?"<>|.][^\\/:*?"<>|]{0,14}\Z')
_DNS_LABEL = r"[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?"
_DNS_DOMAIN = re.compile(rf"{_DNS_LABEL}(?:\.{_DNS_LABEL})*\Z")
_USER_BAD_CHARS = re.compile(r'["/\\:;|=,+*?<>@\[\]]')
_USER_DOTS_SPACES = re.compile(r"[. ]+\Z")


def validate_windows_options(win: dict | None, path: str) -> list[FieldError]:
    """validateWindowsSecurityContextOptions: the GMSA credential spec's name and size, and a
    runAsUserName of the form [DOMAIN\\]USER with Windows' naming rules (lengths in bytes)."""
    if win is None:
        return []
    errs: list[FieldError] = []
    if (name := win.get("gmsaCredentialSpecName")) is not None:
        errs += [invalid(f"{path}.gmsaCredentialSpecName", name, m) for m in dns1123_subdomain(name)]
    if (spec := win.get("gmsaCredentialSpec")) is not None:
        if not spec:
            errs.append(invalid(f"{path}.gmsaCredentialSpec", spec, "gmsaCredentialSpec cannot be an empty string"))
        elif len(spec.encode()) > 64 * 1024:
            errs.append(invalid(f"{path}.gmsaCredentialSpec", spec, "gmsaCredentialSpec size must be under 64 KiB"))
    user_name = win.get("runAsUserName")
    if user_name is None:
        return errs
    up = f"{path}.runAsUserName"
    parts = user_name.split("\\")
    if not user_name:
        return errs + [invalid(up, user_name, "runAsUserName cannot be an empty string")]
    if _CONTROL.search(user_name):
        return errs + [invalid(up, user_name, "runAsUserName cannot contain control characters")]
    if len(parts) > 2:
        return errs + [invalid(up, user_name, "runAsUserName cannot contain more than one backslash")]
    domain, user = ("", parts[0]) if len(parts) == 1 else parts
    if len(domain.encode()) >= 256:
        errs.append(invalid(up, user_name, "runAsUserName's Domain length must be under 256 characters"))
    if len(parts) == 2 and not (_NETBIOS_DOMAIN.match(domain) or _DNS_DOMAIN.match(domain)):
        errs.append(invalid(up, user_name, "runAsUserName's Domain doesn't match the NetBios nor the DNS format"))
    if not user:
        errs.append(invalid(up, user_name, "runAsUserName's User cannot be empty"))
    elif len(user.encode()) > 104:
        errs.append(invalid(up, user_name, "runAsUserName's User length must not be longer than 104 characters"))
    if _USER_DOTS_SPACES.match(user):
        errs.append(invalid(up, user_name, "runAsUserName's User cannot contain only periods or spaces"))
    if _USER_BAD_CHARS.search(user):
        errs.append(invalid(up, user_name, 'runAsUserName\'s User cannot contain the following characters: "/\\:;|=,+*?<>@[]'))
    return errs


_APPARMOR_TYPES = ("Localhost", "RuntimeDefault", "Unconfined")


def validate_apparmor_profile(profile: dict | None, path: str) -> list[FieldError]:
    """ValidateAppArmorProfileField."""
    if profile is None:
        return []
    t, local = profile.get("type") or "", profile.get("localhostProfile")
    lp = f"{path}.localhostProfile"
    if t == "Localhost":
        if local is None:
            return [required(lp, "must be set when AppArmor type is Localhost")]
        errs = []
        if local.strip() != local:
            errs.append(invalid(lp, local, "must not be padded with whitespace"))
        elif not local:
            errs.append(required(lp, "must be set when AppArmor type is Localhost"))
        if len(local.encode()) > 4095:
            errs.append(too_long(lp, 4095))
        return errs
    if t in ("RuntimeDefault", "Unconfined"):
        return [invalid(lp, local, "can only be set when AppArmor type is Localhost")] if local is not None else []
    if not t:
        return [required(f"{path}.type", "type is required when appArmorProfile is set")]
    return [not_supported(f"{path}.type", t, _APPARMOR_TYPES)]


def _security_context_value(sc: dict) -> Struct:
    """core.SecurityContext as field.Invalid prints it (internal: Go field names, every field)."""
    caps, seccomp, apparmor = sc.get("capabilities"), sc.get("seccompProfile"), sc.get("appArmorProfile")
    se, win = sc.get("seLinuxOptions"), sc.get("windowsOptions")
    return Struct(
        Capabilities=None if caps is None else Struct(Add=caps.get("add"), Drop=caps.get("drop")),
        Privileged=sc.get("privileged"),
        SELinuxOptions=None if se is None else Struct(User=se.get("user") or "", Role=se.get("role") or "",
                                                      Type=se.get("type") or "", Level=se.get("level") or ""),
        WindowsOptions=None if win is None else Struct(
            GMSACredentialSpecName=win.get("gmsaCredentialSpecName"), GMSACredentialSpec=win.get("gmsaCredentialSpec"),
            RunAsUserName=win.get("runAsUserName"), HostProcess=win.get("hostProcess")),
        RunAsUser=sc.get("runAsUser"), RunAsGroup=sc.get("runAsGroup"), RunAsNonRoot=sc.get("runAsNonRoot"),
        ReadOnlyRootFilesystem=sc.get("readOnlyRootFilesystem"), AllowPrivilegeEscalation=sc.get("allowPrivilegeEscalation"),
        ProcMount=sc.get("procMount"),
        SeccompProfile=None if seccomp is None else Struct(Type=seccomp.get("type") or "",
                                                           LocalhostProfile=seccomp.get("localhostProfile")),
        AppArmorProfile=None if apparmor is None else Struct(Type=apparmor.get("type") or "",
                                                             LocalhostProfile=apparmor.get("localhostProfile")))


def _validate_security_context(sc: dict, path: str, host_users: bool) -> list[FieldError]:
    """ValidateSecurityContext (a container's): IDs, procMount (Unmasked only in a user namespace),
    seccomp, no privilege escalation beside privileged or CAP_SYS_ADMIN, windowsOptions, appArmorProfile."""
    errs = validate_ids(sc, ("runAsUser", "runAsGroup"), path)
    if (proc := sc.get("procMount")) is not None:
        if proc not in ("Default", "Unmasked"):
            errs.append(not_supported(f"{path}.procMount", proc, ("Default", "Unmasked")))
        if host_users and proc == "Unmasked":
            errs.append(invalid(f"{path}.procMount", proc, "`hostUsers` must be false to use `Unmasked`"))
    errs += validate_seccomp_profile(sc.get("seccompProfile"), f"{path}.seccompProfile")
    if sc.get("allowPrivilegeEscalation") is False:
        if sc.get("privileged"):
            errs.append(invalid(path, _security_context_value(sc),
                                "cannot set `allowPrivilegeEscalation` to false and `privileged` to true"))
        for cap in (sc.get("capabilities") or {}).get("add") or ():
            if cap == "CAP_SYS_ADMIN":
                errs.append(invalid(path, _security_context_value(sc),
                                    "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN"))
    errs += validate_windows_options(sc.get("windowsOptions"), f"{path}.windowsOptions")
    return errs + validate_apparmor_profile(sc.get("appArmorProfile"), f"{path}.appArmorProfile")


def _is_native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def _overcommit_allowed(name: str) -> bool:
    return _is_native(name) and not name.startswith("hugepages-")


def _resource_name_errors(name: str) -> list[str]:
    if name in _STANDARD_CONTAINER_RESOURCES:  # qualified names, and standard
        return []
    msgs = qualified_name(name)
    if msgs:
        return msgs
    if "/" not in name and not name.startswith("hugepages-"):
        return ["must be a standard resource for containers"]
    return []


def _quantity(name: str, q: Any) -> tuple[int | None, str]:
    """The quantity's exact value in billionths (ints compare many times faster than Fractions),
    and what is wrong with it ("" when nothing)."""
    try:
        value = nano_value(q)
    except QuantityError as e:
        return None, str(e)
    if value < 0:
        return value, "must be greater than or equal to 0"
    if value % 1_000_000_000 and not _is_native(name):
        return value, "must be an integer"
    return value, ""


def _standard_value(name: str, q: Any) -> int:
    """The value of a cpu, memory or ephemeral-storage quantity (valid, native names) when it is
    valid; -1 for anything the general checks must look at."""
    if name not in _STANDARD_CONTAINER_RESOURCES:
        return -1
    try:
        value = nano_value(q)
    except QuantityError:
        return -1
    return value if value >= 0 else -1


def _quantity_errors(path: str, bag: str, name: str, q: Any) -> tuple[int | None, list[FieldError]]:
    """One entry of `limits` or `requests`: its value and its errors, whose path is built only
    when there are some."""
    msgs = _resource_name_errors(name)
    value, msg = _quantity(name, q)
    if not msgs and not msg:
        return value, []
    p = f"{path}.{bag}[{name}]"
    errs = [invalid(p, name, m) for m in msgs]
    if msg:
        errs.append(invalid(p, q, msg))
    return value, errs


def validate_resources(res: dict, path: str, claim_names: set[str] | None = None) -> list[FieldError]:
    """ResourceRequirements: names, quantities, requests <= limits, claims."""
    errs: list[FieldError] = []
    limits: dict[str, Any] = {}
    for name, q in (res.get("limits") or {}).items():
        value = _standard_value(name, q)
        if value < 0:  # the general checks, and their errors
            value, qerrs = _quantity_errors(path, "limits", name, q)
            errs += qerrs
        limits[name] = (value, q)
    for name, q in (res.get("requests") or {}).items():
        value = _standard_value(name, q)
        if value < 0:
            value, qerrs = _quantity_errors(path, "requests", name, q)
            if qerrs:
                errs += qerrs
                continue
            if value is None:
                continue
        if name in limits and limits[name][0] is not None:
            limit, raw = limits[name]
            if value != limit and name not in _STANDARD_CONTAINER_RESOURCES and not _overcommit_allowed(name):
                errs.append(invalid(f"{path}.requests", canonical(q), f"must be equal to {name} limit of {canonical(raw)}"))
            elif value > limit:
                errs.append(invalid(f"{path}.requests", canonical(q), f"must be less than or equal to {name} limit of {canonical(raw)}"))
        elif name not in limits and not _overcommit_allowed(name):
            errs.append(required(f"{path}.limits", "Limit must be set for non overcommitable resources"))
    if claim_names is not None and (claims := res.get("claims")):
        errs += _validate_claim_refs(claims, f"{path}.claims", claim_names)
    return errs


def hugepages_alone(res: dict) -> bool:
    """ValidateContainerResourceRequirements: hugepages asked for without cpu or memory."""
    limits, requests = res.get("limits") or {}, res.get("requests") or {}
    if "cpu" in limits or "memory" in limits or "cpu" in requests or "memory" in requests:
        return False
    return any(n.startswith("hugepages-") for n in (*limits, *requests))


def _validate_claim_refs(claims: list, path: str, claim_names: set[str]) -> list[FieldError]:
    """validateResourceClaimNames: a name (and request, a DNS label) once each, and a name of the
    pod's claims, else Not found with the names it could be."""
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, c in enumerate(claims):
        name = c.get("name", "")
        if not name:
            errs.append(required(f"{path}[{i}].name"))
            continue
        key = name
        if c.get("request"):
            errs += [invalid(f"{path}[{i}].request", c["request"], m) for m in dns1123_label(c["request"])]
            key = f"{name}/{c['request']}"
        if key in seen:
            errs.append(duplicate(f"{path}[{i}]", key))
        seen.add(key)
        if name not in claim_names:
            names = ": " + ", ".join(sorted(claim_names)) if claim_names else " which is empty"
            errs.append(FieldError("FieldValueNotFound", f"{path}[{i}]",
                                   f"must be one of the names in pod.spec.resourceClaims{names}", name, True))
    return errs


# --- resource claims -------------------------------------------------------------


def validate_pod_resource_claims(claims: list, path: str) -> tuple[set[str], list[FieldError]]:
    errs: list[FieldError] = []
    names: set[str] = set()
    for i, claim in enumerate(claims):
        p = f"{path}[{i}]"
        name = claim.get("name", "")
        if not name:
            errs.append(required(f"{p}.name"))
        elif name in names:
            errs.append(duplicate(f"{p}.name", name))
        else:
            msgs = dns1123_label(name)
            errs += [invalid(f"{p}.name", name, m) for m in msgs]
            if not msgs:
                names.add(name)
        rc, tmpl = claim.get("resourceClaimName"), claim.get("resourceClaimTemplateName")
        if rc is None and tmpl is None:
            errs.append(invalid(p, name, "at least one of `resourceClaimName` or `resourceClaimTemplateName` must be set"))
        elif rc is not None and tmpl is not None:
            errs.append(invalid(p, name, "at most one of `resourceClaimName` or `resourceClaimTemplateName` may be set"))
        else:
            field, value = ("resourceClaimName", rc) if rc is not None else ("resourceClaimTemplateName", tmpl)
            errs += [invalid(f"{p}.{field}", value, m) for m in dns1123_subdomain(value)]
    return names, errs


# --- tolerations -----------------------------------------------------------------


_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def validate_tolerations(tolerations: list, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for i, t in enumerate(tolerations):
        key, op, value, effect = t.get("key", ""), t.get("operator", ""), t.get("value", ""), t.get("effect", "")
        if key and (op == "Exists" and not value or op == "Equal" and not label_value(value)) \
                and effect in _EFFECTS and not qualified_name(key) \
                and (t.get("tolerationSeconds") is None or effect == "NoExecute"):
            continue  # the common toleration: what every check below finds valid, without its path
        p = f"{path}[{i}]"
        if key:
            errs += [invalid(f"{p}.key", key, m) for m in qualified_name(key)]
        if not key and op != "Exists":
            errs.append(invalid(f"{p}.operator", op,
                                "operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
        if t.get("tolerationSeconds") is not None and effect != "NoExecute":
            errs.append(invalid(f"{p}.effect", effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
        if op in ("Equal", ""):
            msgs = label_value(value)
            if msgs:
                errs.append(invalid(f"{p}.operator", value, ";".join(msgs)))
        elif op == "Exists":
            if value:
                internal = Struct(Key=key or "", Operator=op, Value=value, Effect=effect or "",
                                  TolerationSeconds=t.get("tolerationSeconds"))  # core.Toleration
                errs.append(invalid(f"{p}.operator", internal, "value must be empty when `operator` is 'Exists'"))
        elif op in ("Lt", "Gt"):
            if not re.fullmatch(r"-?[0-9]+", value or ""):
                errs.append(invalid(f"{p}.value", value, "must be a valid integer when `operator` is 'Lt' or 'Gt'"))
        else:
            errs.append(not_supported(f"{p}.operator", op, ["Equal", "Exists", "Lt", "Gt"]))
        if effect:
            errs += taint_effect(effect, f"{p}.effect")
    return errs


def taint_effect(effect: str, path: str) -> list[FieldError]:
    if effect in _EFFECTS:
        return []
    return [not_supported(path, effect, list(_EFFECTS))]


# --- volumes ---------------------------------------------------------------------


def validate_volumes(volumes: list, path: str) -> tuple[set[str], list[FieldError]]:
    errs: list[FieldError] = []
    names: set[str] = set()
    for i, vol in enumerate(volumes):
        p = f"{path}[{i}]"
        el = _validate_volume_source(vol, p)
        name = vol.get("name", "")
        if not name:
            el.append(required(f"{p}.name"))
        else:
            el += [invalid(f"{p}.name", name, m) for m in dns1123_label(name)]
        if name in names:
            el.append(duplicate(f"{p}.name", name))
        if not el:
            names.add(name)
        errs += el
    return names, errs


def _validate_volume_source(vol: dict, p: str) -> list[FieldError]:
    present = [s for s in vol if s in _SOURCE_ORDER and vol[s] is not None]
    if len(present) > 1:
        present.sort(key=_SOURCE_ORDER.__getitem__)
    if not present:
        return [required(p, "must specify a volume type")]
    errs = [forbidden(f"{p}.{s}", "may not specify more than 1 volume type") for s in present[1:]]
    src, body = present[0], vol[present[0]]
    sp = f"{p}.{src}"
    if src == "secret":
        if not body.get("secretName"):
            errs.append(required(f"{sp}.secretName"))
        errs += _file_mode_and_items(body, sp)
    elif src == "configMap":
        if not body.get("name"):
            errs.append(required(f"{sp}.name"))
        errs += _file_mode_and_items(body, sp)
    elif src == "hostPath":
        if not body.get("path"):
            errs.append(required(f"{sp}.path"))
        kinds = ["", "BlockDevice", "CharDevice", "Directory", "DirectoryOrCreate", "File", "FileOrCreate", "Socket"]
        if body.get("type") not in (None, *kinds):
            errs.append(not_supported(f"{sp}.type", body["type"], kinds))
    elif src == "persistentVolumeClaim":
        if not body.get("claimName"):
            errs.append(required(f"{sp}.claimName"))
    elif src == "ephemeral":
        template = body.get("volumeClaimTemplate")
        if template is None:
            errs.append(required(f"{sp}.volumeClaimTemplate"))
        else:
            errs += template_object_meta(template.get("metadata") or {}, f"{sp}.volumeClaimTemplate.metadata")
            errs += validate_claim_spec(template.get("spec") or {}, f"{sp}.volumeClaimTemplate.spec")
    elif src == "emptyDir":
        if _negative(body.get("sizeLimit")):
            errs.append(forbidden(f"{sp}.sizeLimit", "SizeLimit field must be a valid resource quantity"))
        medium = body.get("medium", "")
        if medium not in ("", "Memory", "HugePages") and not medium.startswith("HugePages-"):
            errs.append(not_supported(f"{sp}.medium", medium, ["", "Memory", "HugePages"]))
    elif src == "downwardAPI":
        errs += _downward_api_volume(body, sp)
    elif src == "projected":
        errs += _projected_volume(body, sp)
    elif src == "image" and not body.get("reference"):
        errs.append(required(f"{sp}.reference"))
    return errs


@remembers_clean
def _downward_api_volume(body: dict, p: str) -> list[FieldError]:
    errs = []
    mode = body.get("defaultMode")
    if mode is not None and not 0 <= mode <= 0o777:
        errs.append(invalid(f"{p}.defaultMode", mode, FILE_MODE_MSG))
    return errs + _downward_api_files(body.get("items") or [], p)


@remembers_clean
def _projected_volume(body: dict, p: str) -> list[FieldError]:
    """Remembered clean (by JSON) with the downwardAPI volume: ServiceAccount admission gives every
    pod the same projected token volume under its own name."""
    return _file_mode_and_items(body, p) + _validate_projection(body.get("sources") or [], f"{p}.sources")


def _negative(quantity: Any) -> bool:
    try:
        return quantity is not None and parse_quantity(quantity) < 0
    except QuantityError:
        return False  # the decoder reports it


def _file_mode_and_items(body: dict, p: str) -> list[FieldError]:
    errs: list[FieldError] = []
    mode = body.get("defaultMode")
    if mode is not None and not 0 <= mode <= 0o777:
        errs.append(invalid(f"{p}.defaultMode", mode, FILE_MODE_MSG))
    for i, item in enumerate(body.get("items") or []):
        ip = f"{p}.items[{i}]"
        if not item.get("key"):
            errs.append(required(f"{ip}.key"))
        if not item.get("path"):
            errs.append(required(f"{ip}.path"))
        else:
            errs += local_path(item["path"], f"{ip}.path")
        m = item.get("mode")
        if m is not None and not 0 <= m <= 0o777:
            errs.append(invalid(f"{ip}.mode", m, FILE_MODE_MSG))
    return errs


def _validate_projection(sources: list, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    kinds = ("secret", "configMap", "downwardAPI", "serviceAccountToken", "clusterTrustBundle", "podCertificate")
    for i, source in enumerate(sources):
        sp = f"{path}[{i}]"
        present = [k for k in kinds if source.get(k) is not None]
        for kind in present:
            body, pp = source[kind], f"{sp}.{kind}"
            if kind in ("secret", "configMap"):
                if not body.get("name"):
                    errs.append(required(f"{pp}.name"))
                errs += _file_mode_and_items(body, pp)
            elif kind == "downwardAPI":
                errs += _downward_api_files(body.get("items") or [], pp)
            elif kind == "serviceAccountToken":
                errs += _validate_token_projection(body, pp)
            elif kind == "clusterTrustBundle":
                errs += _validate_trust_bundle_projection(body, pp)
            else:
                errs += _validate_pod_certificate_projection(body, pp)
        if len(present) > 1:
            errs.append(forbidden(sp, "may not specify more than 1 volume type per source"))
    return errs


def _validate_token_projection(body: dict, p: str) -> list[FieldError]:
    errs: list[FieldError] = []
    exp = body.get("expirationSeconds", 3600)
    if exp < 600:
        errs.append(invalid(f"{p}.expirationSeconds", exp, "may not specify a duration less than 10 minutes"))
    elif exp > 1 << 32:
        errs.append(invalid(f"{p}.expirationSeconds", exp, "may not specify a duration larger than 2^32 seconds"))
    if not body.get("path"):
        errs.append(required(f"{p}.path"))
    else:
        errs += local_path(body["path"], f"{p}.path")
    return errs


def _validate_trust_bundle_projection(body: dict, p: str) -> list[FieldError]:
    """clusterTrustBundle: by name, or by signerName (+labelSelector); a path."""
    errs: list[FieldError] = []
    name, signer = body.get("name"), body.get("signerName")
    if name is not None and signer is not None:
        errs.append(invalid(p, body, "only one of name and signerName may be used"))
    elif name is not None:
        if not name:
            errs.append(required(f"{p}.name", "must be a valid object name"))
        if body.get("labelSelector") is not None:
            errs.append(invalid(f"{p}.labelSelector", body["labelSelector"], "labelSelector must be unset if name is specified"))
        if name:
            # A colon names a signer-linked bundle (`example.com:foo:ca`): checked against the signer it spells.
            from .certificates import bundle_name
            head, colon, _ = name.rpartition(":")
            errs += [invalid(f"{p}.name", name, f"not a valid clustertrustbundlename: {m}")
                     for m in bundle_name(name, head.replace(":", "/") if colon else "")]
    elif signer is not None:
        if not signer:
            errs.append(required(f"{p}.signerName", "must be a valid signer name"))
        else:
            errs += signer_name(signer, f"{p}.signerName")
    else:
        errs.append(required(p, "either name or signerName must be specified"))
    if not body.get("path"):
        errs.append(required(f"{p}.path"))
    else:
        errs += local_path(body["path"], f"{p}.path")
    return errs


def _validate_pod_certificate_projection(body: dict, p: str) -> list[FieldError]:
    """podCertificate (GA in 1.37): signer, key type, lifetime bounds, output paths."""
    errs: list[FieldError] = []
    signer = body.get("signerName", "")
    if not signer:
        errs.append(required(f"{p}.signerName"))
    else:
        errs += signer_name(signer, f"{p}.signerName")
    kt = body.get("keyType", "")
    if not kt:
        errs.append(required(f"{p}.keyType"))
    elif kt not in KEY_TYPES:
        errs.append(not_supported(f"{p}.keyType", kt, KEY_TYPES))
    mes = body.get("maxExpirationSeconds")
    if mes is not None:
        upper = 86400 if signer.startswith("kubernetes.io/") else 7862400
        if mes < 3600:
            errs.append(invalid(f"{p}.maxExpirationSeconds", mes, "if provided, maxExpirationSeconds must be >= 3600"))
        elif mes > upper:
            errs.append(invalid(f"{p}.maxExpirationSeconds", mes, f"if provided, maxExpirationSeconds must be <= {upper}"))
    bundle, key, chain = body.get("credentialBundlePath", ""), body.get("keyPath", ""), body.get("certificateChainPath", "")
    if not (bundle or key or chain):
        errs.append(required(p, "at least one of credentialBundlePath, keyPath, and certificateChainPath must be non-empty"))
    if bool(key) != bool(chain):
        missing = "certificateChainPath" if key else "keyPath"
        errs.append(required(f"{p}.{missing}", "keyPath and certificateChainPath must be specified together"))
    for f, v in (("credentialBundlePath", bundle), ("keyPath", key), ("certificateChainPath", chain)):
        if v:
            errs += local_path(v, f"{p}.{f}")
    errs += validate_annotations(body.get("userAnnotations"), f"{p}.userAnnotations")
    return errs
