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

from ..machinery import configfile, goduration, validation
from ..machinery.configfile import ANY, DURATION, QUANTITY, Kind, Map, Struct

log = logging.getLogger(__name__)

API_VERSION, KIND = "kubelet.config.k8s.io/v1beta1", "KubeletConfiguration"
_DURATIONS = dict.fromkeys((
    "syncFrequency fileCheckFrequency httpCheckFrequency streamingConnectionIdleTimeout nodeStatusUpdateFrequency "
    "nodeStatusReportFrequency imageMinimumGCAge imageMaximumGCAge volumeStatsAggPeriod cpuManagerReconcilePeriod "
    "runtimeRequestTimeout cpuCFSQuotaPeriod evictionPressureTransitionPeriod containerLogMonitorInterval "
    "shutdownGracePeriod shutdownGracePeriodCriticalPods").split(), DURATION)
_INT32S = dict.fromkeys((
    "port readOnlyPort healthzPort registryPullQPS registryBurst eventRecordQPS eventBurst oomScoreAdj "
    "nodeLeaseDurationSeconds imageGCHighThresholdPercent imageGCLowThresholdPercent maxPods nodeStatusMaxImages "
    "kubeAPIQPS kubeAPIBurst maxParallelImagePulls evictionMaxPodGracePeriod podsPerCore iptablesMasqueradeBit "
    "iptablesDropBit containerLogMaxFiles containerLogMaxWorkers").split(), int)
_BOOLS = dict.fromkeys((
    "enableServer rotateCertificates serverTLSBootstrap enableDebuggingHandlers enableContentionProfiling "
    "cgroupsPerQOS singleProcessOOMKill runOnce cpuCFSQuota serializeImagePulls mergeDefaultEvictionSettings "
    "enableControllerAttachDetach protectKernelDefaults makeIPTablesUtilChains failSwapOn kernelMemcgNotification "
    "enableSystemLogHandler enableSystemLogQuery enableProfilingHandler enableDebugFlagsHandler seccompDefault "
    "registerNode localStorageCapacityIsolation failCgroupV1").split(), bool)
_STRINGS = dict.fromkeys((
    "apiVersion kind staticPodPath podLogsDir staticPodURL address tlsCertFile tlsPrivateKeyFile tlsMinVersion "
    "healthzBindAddress clusterDomain kubeletCgroups systemCgroups cgroupRoot cgroupDriver cpuManagerPolicy "
    "memoryManagerPolicy topologyManagerPolicy topologyManagerScope hairpinMode podCIDR resolvConf contentType "
    "containerLogMaxSize reservedSystemCPUs showHiddenMetricsForVersion systemReservedCgroup kubeReservedCgroup "
    "volumePluginDir providerID containerRuntimeEndpoint imageServiceEndpoint").split(), str)
_STRING_LISTS = dict.fromkeys((
    "tlsCipherSuites clusterDNS enforceNodeAllocatable allowedUnsafeSysctls "
    "preloadedImagesVerificationAllowlist").split(), [str])
_STRING_MAPS = dict.fromkeys((
    "evictionHard evictionSoft evictionSoftGracePeriod evictionMinimumReclaim systemReserved kubeReserved "
    "qosReserved cpuManagerPolicyOptions topologyManagerPolicyOptions").split(), Map(str))
#: v1beta1.KubeletConfiguration's fields and their Go types, as the decoder checks them: the fields
#: nanokube acts on (see above) and the rest, read and left alone (a value of the wrong type in any
#: is refused, as upstream's)
SCHEMA = Struct(f"v1beta1.{KIND}", {
    **_STRINGS, **_INT32S, **_BOOLS, **_DURATIONS, **_STRING_LISTS, **_STRING_MAPS,
    "podPidsLimit": "int64", "maxOpenFiles": "int64", "memoryThrottlingFactor": "float64",
    "featureGates": Map(bool), "staticPodURLHeader": Map([str]),
    "authentication": Struct("v1beta1.KubeletAuthentication", {
        "x509": Struct("v1beta1.KubeletX509Authentication", {"clientCAFile": str}),
        "webhook": Struct("v1beta1.KubeletWebhookAuthentication", {"enabled": bool, "cacheTTL": DURATION}),
        "anonymous": Struct("v1beta1.KubeletAnonymousAuthentication", {"enabled": bool})}),
    "authorization": Struct("v1beta1.KubeletAuthorization", {
        "mode": "v1beta1.KubeletAuthorizationMode",
        "webhook": Struct("v1beta1.KubeletWebhookAuthorization",
                          {"cacheAuthorizedTTL": DURATION, "cacheUnauthorizedTTL": DURATION})}),
    "imagePullCredentialsVerificationPolicy": "v1beta1.ImagePullCredentialsVerificationPolicy",
    "configMapAndSecretChangeDetectionStrategy": "v1beta1.ResourceChangeDetectionStrategy",
    "memorySwap": Struct("v1beta1.MemorySwapConfiguration", {"swapBehavior": str}),
    "logging": Struct("v1.LoggingConfiguration", {"format": str, "flushFrequency": ANY, "verbosity": ANY,
                                                  "vmodule": ANY, "options": ANY}),
    "shutdownGracePeriodByPodPriority": [Struct("v1beta1.ShutdownGracePeriodByPodPriority",
                                                {"priority": int, "shutdownGracePeriodSeconds": "int64"})],
    "crashLoopBackOff": Struct("v1beta1.CrashLoopBackOffConfig", {"maxContainerRestartPeriod": DURATION}),
    "reservedMemory": [Struct("v1beta1.MemoryReservation", {"numaNode": int, "limits": Map(QUANTITY)})],
    "registerWithTaints": [Struct("v1.Taint", {"key": str, "value": str, "effect": "v1.TaintEffect",
                                               "timeAdded": str})],
    "tracing": Struct("v1.TracingConfiguration", {"endpoint": str, "samplingRatePerMillion": int}),
    "userNamespaces": Struct("v1beta1.UserNamespaces", {"idsPerPod": "int64"}),
})
#: the file kind as the kubelet's scheme decodes it
FILE = Kind(API_VERSION, KIND, "pkg/kubelet/apis/config/scheme/scheme.go:34", SCHEMA)
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
        doc, strict = configfile.decode(data, FILE, lenient=True)
    except configfile.DecodeError as e:
        raise ConfigError(f"failed to decode: {e}") from None
    if strict:  # upstream decodes v1beta1 leniently after a strict error, and says so
        log.info("Using lenient decoding as strict decoding failed: err=%s", configfile.strict_error(strict))
    return doc


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
