"""KubeletConfiguration (kubelet.config.k8s.io/v1beta1): the file `nanokube kubelet --config` reads,
as the kubelet's loadConfigFile does: read (an empty file refused), decoded (a strict decoding error,
a repeated or unknown field, logged and the file decoded leniently, as the kubelet does for v1beta1;
a value of the wrong type refused), defaulted as v1beta1 defaults it, then overridden by the flags
given on the command line (the kubelet's kubeletConfigFlagPrecedence; featureGates merged gate by
gate) and validated in ValidateKubeletConfiguration's words.

The fields nanokube's kubelet acts on: address, port, readOnlyPort, healthzPort, healthzBindAddress,
authentication (x509.clientCAFile, webhook.enabled, anonymous.enabled), authorization.mode (Webhook
or AlwaysAllow), rotateCertificates, serverTLSBootstrap, maxPods, clusterDNS, clusterDomain,
featureGates, registerNode, registerWithTaints, staticPodPath, fileCheckFrequency, evictionHard,
evictionSoft, evictionSoftGracePeriod and evictionMaxPodGracePeriod;
podCIDR (read only in standalone mode upstream) is reported by /configz. The rest of the file is read
and left alone."""

from __future__ import annotations

import logging
import os
from typing import Any

import yaml

from ..machinery import configfile, gofmt, goduration, validation

log = logging.getLogger(__name__)

API_VERSION, KIND = "kubelet.config.k8s.io/v1beta1", "KubeletConfiguration"
#: the kubelet's scheme, as a decoding error names it
_SCHEME = "pkg/kubelet/apis/config/scheme/scheme.go:34"
#: the schema of the fields nanokube acts on (configfile's: a type each; the decoder refuses another)
SCHEMA: dict[str, Any] = {
    "apiVersion": str, "kind": str, "address": str, "port": int, "readOnlyPort": int, "healthzPort": int,
    "healthzBindAddress": str, "maxPods": int, "podCIDR": str, "registerNode": bool, "rotateCertificates": bool,
    "serverTLSBootstrap": bool, "clusterDomain": str, "clusterDNS": [str], "staticPodPath": str,
    "fileCheckFrequency": configfile.DURATION, "mergeDefaultEvictionSettings": bool, "evictionMaxPodGracePeriod": int,
    "registerWithTaints": [{"key": str, "value": str, "effect": str, "timeAdded": str}],
    "authentication": {"x509": {"clientCAFile": str}, "webhook": {"enabled": bool, "cacheTTL": str},
                       "anonymous": {"enabled": bool}},
    "authorization": {"mode": str, "webhook": {"cacheAuthorizedTTL": str, "cacheUnauthorizedTTL": str}},
}
#: maps of string keys: featureGates' values are booleans, evictionHard's strings
_MAPS = {"featureGates": (bool, "bool"), "evictionHard": (str, "string"), "evictionSoft": (str, "string"),
         "evictionSoftGracePeriod": (str, "string")}
#: v1beta1's other fields, read and left alone
_OTHERS = frozenset("""
enableServer podLogsDir syncFrequency httpCheckFrequency staticPodURL staticPodURLHeader
tlsCertFile tlsPrivateKeyFile tlsCipherSuites tlsMinVersion registryPullQPS registryBurst
imagePullCredentialsVerificationPolicy preloadedImagesVerificationAllowlist eventRecordQPS eventBurst
enableDebuggingHandlers enableContentionProfiling oomScoreAdj streamingConnectionIdleTimeout
nodeStatusUpdateFrequency nodeStatusReportFrequency nodeLeaseDurationSeconds imageMinimumGCAge imageMaximumGCAge
imageGCHighThresholdPercent imageGCLowThresholdPercent volumeStatsAggPeriod kubeletCgroups systemCgroups cgroupRoot
cgroupsPerQOS cgroupDriver cpuManagerPolicy singleProcessOOMKill cpuManagerPolicyOptions cpuManagerReconcilePeriod
memoryManagerPolicy topologyManagerPolicy topologyManagerScope topologyManagerPolicyOptions qosReserved
runtimeRequestTimeout hairpinMode podPidsLimit resolvConf runOnce cpuCFSQuota cpuCFSQuotaPeriod nodeStatusMaxImages
maxOpenFiles contentType kubeAPIQPS kubeAPIBurst serializeImagePulls maxParallelImagePulls
evictionPressureTransitionPeriod evictionMinimumReclaim
podsPerCore enableControllerAttachDetach protectKernelDefaults makeIPTablesUtilChains
iptablesMasqueradeBit iptablesDropBit failSwapOn memorySwap containerLogMaxSize containerLogMaxFiles
containerLogMaxWorkers containerLogMonitorInterval configMapAndSecretChangeDetectionStrategy systemReserved
kubeReserved reservedSystemCPUs showHiddenMetricsForVersion systemReservedCgroup kubeReservedCgroup
enforceNodeAllocatable allowedUnsafeSysctls volumePluginDir providerID kernelMemcgNotification logging
enableSystemLogHandler enableSystemLogQuery shutdownGracePeriod shutdownGracePeriodCriticalPods
shutdownGracePeriodByPodPriority crashLoopBackOff reservedMemory enableProfilingHandler enableDebugFlagsHandler
seccompDefault memoryThrottlingFactor tracing localStorageCapacityIsolation
containerRuntimeEndpoint imageServiceEndpoint failCgroupV1 userNamespaces
""".split())
#: evictionHard when the file sets none (the kubelet's DefaultEvictionHard on Linux)
DEFAULT_EVICTION_HARD = {"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%",
                         "imagefs.available": "15%", "imagefs.inodesFree": "5%"}
AUTHORIZATION_MODES = ("AlwaysAllow", "Webhook")


class ConfigError(ValueError):
    """A configuration the kubelet would not start with, in its words."""


def load(path: str) -> dict:
    """The file at `path`, decoded and defaulted (v1beta1 names); ConfigError as the kubelet's
    `failed to load kubelet config file, path: ..., error: ...`."""
    absolute = os.path.abspath(path)
    try:
        return defaulted(_decode(absolute))
    except ConfigError as e:
        raise ConfigError(f"failed to load kubelet config file, path: {path}, error: "
                          f"failed to load Kubelet config file {path}, error {e}") from None


def _decode(path: str) -> dict:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        why = e.strerror.lower() if e.strerror else str(e)
        raise ConfigError(f'failed to read kubelet config file "{path}", error: open {path}: {why}') from None
    if not data:
        raise ConfigError(f'kubelet config file "{path}" was empty')
    try:
        doc, strict = configfile.load(data)
    except yaml.YAMLError as e:
        raise ConfigError(f"failed to decode: {e}") from None
    if wrong := configfile.kind_error(doc, data.decode(errors="replace"), API_VERSION, KIND, _SCHEME):
        raise ConfigError(f"failed to decode: {wrong}")
    acted = {k: v for k, v in doc.items() if k in SCHEMA}
    wrong = configfile.mistyped(acted, SCHEMA, KIND) or _map_mistyped(doc)
    if wrong:
        raise ConfigError(f"failed to decode: {wrong}")
    unknown = [k for k in doc if k not in SCHEMA and k not in _MAPS and k not in _OTHERS]
    unknown += configfile.unknown_fields({k: v for k, v in acted.items() if isinstance(SCHEMA[k], dict | list)},
                                        SCHEMA)
    strict += [f"unknown field {gofmt.quote(k)}" for k in unknown]
    if strict:  # upstream decodes v1beta1 leniently after a strict error, and says so
        log.info("Using lenient decoding as strict decoding failed: err=%s", configfile.strict_error(strict))
    return configfile.zeroed({k: configfile.known(v, SCHEMA[k]) if k in SCHEMA else v for k, v in doc.items()
                              if k in SCHEMA or k in _MAPS or k in _OTHERS}, SCHEMA)


def _map_mistyped(doc: dict) -> str | None:
    for key, (want, go) in _MAPS.items():
        value = doc.get(key)
        if value is None:
            continue
        if not isinstance(value, dict):
            return (f"json: cannot unmarshal {configfile.json_type(value)} into Go struct field {KIND}.{key} of type "
                    f"map[string]{go}")
        for k, v in value.items():
            if v is not None and (not isinstance(v, want) or (want is str and isinstance(v, bool))):
                return (f"json: cannot unmarshal {configfile.json_type(v)} into Go struct field {KIND}.{key} of "
                        f"type {go}")
    return None


def defaulted(doc: dict) -> dict:
    """SetDefaults_KubeletConfiguration for the fields nanokube reports (a copy)."""
    out = dict(doc)
    out["address"] = out.get("address") or "0.0.0.0"
    out["port"] = out.get("port") or 10250
    out.setdefault("readOnlyPort", 0)
    if out.get("healthzPort") is None:
        out["healthzPort"] = 10248
    out["healthzBindAddress"] = out.get("healthzBindAddress") or "127.0.0.1"
    out["maxPods"] = out.get("maxPods") or 110
    if out.get("registerNode") is None:
        out["registerNode"] = True
    auth = {k: dict(v or {}) for k, v in (out.get("authentication") or {}).items()}
    auth.setdefault("x509", {})
    webhook = auth.setdefault("webhook", {})
    if webhook.get("enabled") is None:
        webhook["enabled"] = True
    webhook["cacheTTL"] = webhook.get("cacheTTL") or "2m0s"
    anonymous = auth.setdefault("anonymous", {})
    if anonymous.get("enabled") is None:
        anonymous["enabled"] = False
    out["authentication"] = auth
    authz = {k: (dict(v or {}) if isinstance(v, dict) else v) for k, v in (out.get("authorization") or {}).items()}
    authz["mode"] = authz.get("mode") or "Webhook"
    authz_webhook = authz.setdefault("webhook", {})
    authz_webhook["cacheAuthorizedTTL"] = authz_webhook.get("cacheAuthorizedTTL") or "5m0s"
    authz_webhook["cacheUnauthorizedTTL"] = authz_webhook.get("cacheUnauthorizedTTL") or "30s"
    out["authorization"] = authz
    if out.get("evictionHard") is None:
        out["evictionHard"] = dict(DEFAULT_EVICTION_HARD)
    elif out.get("mergeDefaultEvictionSettings"):  # the defaults fill in the signals the file leaves out
        out["evictionHard"] = {**DEFAULT_EVICTION_HARD, **out["evictionHard"]}
    out["fileCheckFrequency"] = out.get("fileCheckFrequency") or "20s"
    out["featureGates"] = dict(out.get("featureGates") or {})
    return out


def flag_defaults() -> dict:
    """The configuration a kubelet started without --config begins from (NewKubeletConfiguration):
    v1beta1's defaults, then the command line's legacy ones over them (anonymous requests allowed,
    no token webhook, authorization AlwaysAllow, the read-only port 10255 open)."""
    cfg = defaulted({})
    cfg["authentication"]["anonymous"]["enabled"] = True
    cfg["authentication"]["webhook"]["enabled"] = False
    cfg["authorization"]["mode"] = "AlwaysAllow"
    cfg["readOnlyPort"] = 10255
    return cfg


def validate(cfg: dict) -> None:
    """ValidateKubeletConfiguration's checks of the fields nanokube acts on; ConfigError as the
    kubelet's start refuses them (upstream appends the whole configuration's Go dump, left out)."""
    errs = []
    if cfg["healthzPort"] != 0 and not 1 <= cfg["healthzPort"] <= 65535:
        errs.append(f"invalid configuration: healthzPort (--healthz-port) {cfg['healthzPort']} must be between 1 and "
                    "65535, inclusive")
    if cfg["maxPods"] < 0:
        errs.append(f"invalid configuration: maxPods (--max-pods) {cfg['maxPods']} must not be a negative number")
    if not 1 <= cfg["port"] <= 65535:
        errs.append(f"invalid configuration: port (--port) {cfg['port']} must be between 1 and 65535, inclusive")
    if cfg["readOnlyPort"] != 0 and not 1 <= cfg["readOnlyPort"] <= 65535:
        errs.append(f"invalid configuration: readOnlyPort (--read-only-port) {cfg['readOnlyPort']} must be between 0 "
                    "and 65535, inclusive")
    if errs:
        joined = errs[0] if len(errs) == 1 else f"[{', '.join(errs)}]"
        raise ConfigError(f"failed to validate kubelet configuration, error: {joined}")
    if cfg["authorization"]["mode"] not in AUTHORIZATION_MODES:  # (BuildAuthz's, at start)
        raise ConfigError(f"unknown authorization mode {cfg['authorization']['mode']}")
    for taint in cfg.get("registerWithTaints") or ():
        if taint.get("effect") not in TAINT_EFFECTS:
            raise ConfigError(f"invalid taint effect: {taint.get('effect', '')}, unsupported taint effect")


#: the effects a taint may have
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
#: the signals an eviction threshold may name (the eviction manager's signalToResource)
EVICTION_SIGNALS = ("memory.available", "allocatableMemory.available", "nodefs.available", "nodefs.inodesFree",
                    "imagefs.available", "imagefs.inodesFree", "containerfs.available", "containerfs.inodesFree",
                    "pid.available")


def thresholds(statements: dict[str, str]) -> dict[str, tuple[int | None, float | None]]:
    """evictionHard's or evictionSoft's statements as the eviction manager parses them: each
    signal's (quantity, None) or (None, fraction of the capacity); "0%" and "100%" disable a
    signal. ConfigError in its words for an unknown signal or a value no threshold's."""
    from ..machinery.quantity import QuantityError, parse_quantity

    out: dict[str, tuple[int | None, float | None]] = {}
    for signal, value in statements.items():
        if signal not in EVICTION_SIGNALS:
            raise ConfigError(f"unsupported eviction signal {signal}")
        if value.endswith("%"):
            if value in ("0%", "100%"):
                continue
            try:
                fraction = float(value[:-1]) / 100
            except ValueError:
                raise ConfigError(f'strconv.ParseFloat: parsing "{value[:-1]}": invalid syntax') from None
            if fraction < 0:
                raise ConfigError(f"eviction percentage threshold {signal} must be >= 0%: {value}")
            if fraction > 1:
                raise ConfigError(f"eviction percentage threshold {signal} must be <= 100%: {value}")
            out[signal] = (None, fraction)
            continue
        try:
            amount = parse_quantity(value)
        except QuantityError as e:
            raise ConfigError(str(e)) from None
        if amount <= 0:
            raise ConfigError(f"eviction threshold {signal} must be positive: {value}")
        out[signal] = (int(amount), None)
    return out


def soft_thresholds(statements: dict[str, str], grace_periods: dict[str, str]) -> dict[str, tuple]:
    """evictionSoft's thresholds (see `thresholds`), each with its evictionSoftGracePeriod in
    seconds: ConfigError in the eviction manager's words for a signal without one, or a grace period
    that is no duration or a negative one."""
    periods = {}
    for signal, text in grace_periods.items():
        if signal not in EVICTION_SIGNALS:
            raise ConfigError(f"unsupported eviction signal {signal}")
        try:
            periods[signal] = goduration.parse(text)
        except ValueError as e:
            raise ConfigError(str(e)) from None
        if periods[signal] < 0:
            raise ConfigError(f"invalid eviction grace period specified: {text}, must be a positive value")
    out = {}
    for signal, threshold in thresholds(statements).items():
        if signal not in periods:
            raise ConfigError(f"grace period must be specified for the soft eviction threshold {signal}")
        out[signal] = (*threshold, periods[signal])
    return out


def taints(text: str) -> list[dict]:
    """--register-with-taints (`key[=value]:effect,...`) as the kubelet's taints flag reads it;
    ValueError in pflag's words for a malformed one."""
    out = []
    for spec in text.split(",") if text else ():
        head, colon, effect = spec.rpartition(":")
        key, _, value = head.partition("=")
        if not colon or not key or effect not in TAINT_EFFECTS or validation.qualified_name(key) or \
                (value and validation.label_value(value)):
            raise ValueError(f'invalid argument "{text}" for "--register-with-taints" flag: invalid taint spec: {spec}')
        out.append({"key": key, **({"value": value} if value else {}), "effect": effect})
    return out


#: the label namespaces and labels of kubernetes.io and k8s.io a kubelet may set on its Node
#: (kubeletapis.KubeletLabelNamespaces and KubeletLabels, sorted as their lists are)
KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")
KUBELET_LABELS = (
    "beta.kubernetes.io/arch", "beta.kubernetes.io/instance-type", "beta.kubernetes.io/os",
    "failure-domain.beta.kubernetes.io/region", "failure-domain.beta.kubernetes.io/zone", "kubernetes.io/arch",
    "kubernetes.io/hostname", "kubernetes.io/os", "node.kubernetes.io/instance-type", "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone")


def node_labels(text: str) -> dict[str, str]:
    """--node-labels (`key=value,...`) as the kubelet's ValidateKubeletFlags takes them; ValueError
    in its words for a malformed pair, a kubernetes.io or k8s.io label not the kubelet's to set
    (node-role.kubernetes.io/* among them), or a key or value that is not a label's."""
    labels: dict[str, str] = {}
    for pair in text.split(",") if text else ():
        key, eq, value = pair.partition("=")
        if not eq:
            raise ValueError(f'invalid argument "{text}" for "--node-labels" flag: {pair} must be formatted as key=value')
        labels[key.strip()] = value.strip()
    unknown = sorted(k for k in labels if _kubernetes_namespace(k) and not _kubelet_label(k))
    if unknown:
        raise ValueError(f"failed to validate kubelet flags: unknown 'kubernetes.io' or 'k8s.io' labels specified with "
                         f"--node-labels: [{' '.join(unknown)}]\n--node-labels in the 'kubernetes.io' namespace must "
                         f"begin with an allowed prefix ({', '.join(KUBELET_LABEL_NAMESPACES)}) or be in the "
                         f"specifically allowed set ({', '.join(KUBELET_LABELS)})")
    invalid = [f"'{k}' - {', '.join(errs)}" for k, errs in
               [(k, validation.qualified_name(k)) for k in labels] + [(v, validation.label_value(v)) for v in
                                                                       labels.values()] if errs]
    if invalid:
        raise ValueError(f"failed to validate kubelet flags: invalid node labels: {'; '.join(invalid)}")
    return labels


def _namespace(key: str) -> str:
    return key.split("/", 1)[0] if "/" in key else ""


def _kubernetes_namespace(key: str) -> bool:
    ns = _namespace(key)
    return any(ns == d or ns.endswith("." + d) for d in ("kubernetes.io", "k8s.io"))


def _kubelet_label(key: str) -> bool:
    ns = _namespace(key)
    return key in KUBELET_LABELS or any(ns == d or ns.endswith("." + d) for d in KUBELET_LABEL_NAMESPACES)
