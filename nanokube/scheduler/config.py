"""KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1): decoded
strictly, defaulted and validated as kube-scheduler does, then turned into
one Profile per schedulerName with the plugins of every extension point
(multiPoint expanded), score weights and defaulted plugin args."""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..client.leaderelection import LeaderElectionConfig
from ..machinery import configfile, goduration, gofmt
from ..machinery.configfile import ANY, DURATION, Kind, Map, Struct
from ..machinery.validation import invalid, not_supported
from . import plugins as registry
from .framework import Profile

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"
DEFAULT_SCHEDULER = "default-scheduler"
LEASE_NAME = "kube-scheduler"

#: config extension point -> (the method a plugin defines to take part, upstream's interface name)
POINTS = {
    "preEnqueue": ("pre_enqueue", "PreEnqueuePlugin"),
    "queueSort": ("sort_key", "QueueSortPlugin"),
    "preFilter": ("pre_filter", "PreFilterPlugin"),
    "filter": ("filter", "FilterPlugin"),
    "postFilter": ("post_filter", "PostFilterPlugin"),
    "preScore": ("pre_score", "PreScorePlugin"),
    "score": ("score", "ScorePlugin"),
    "reserve": ("reserve", "ReservePlugin"),
    "permit": ("permit", "PermitPlugin"),
    "preBind": ("pre_bind", "PreBindPlugin"),
    "bind": ("bind", "BindPlugin"),
    "postBind": ("post_bind", "PostBindPlugin"),
}
_STRATEGIES = ("LeastAllocated", "MostAllocated", "RequestedToCapacityRatio")
_LABEL_NAME = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                         r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
#: kube-scheduler's defaults for the leaderElection section
_LE = LeaderElectionConfig()
_LEADER_ELECTION_DEFAULTS = {"leaderElect": _LE.leader_elect, "leaseDuration": f"{_LE.lease_duration:g}s",
                             "renewDeadline": f"{_LE.renew_deadline:g}s", "retryPeriod": f"{_LE.retry_period:g}s",
                             "resourceLock": "leases", "resourceName": LEASE_NAME,
                             "resourceNamespace": _LE.resource_namespace}
#: kube-scheduler's defaults for the clientConnection section (RecommendedDefaultClientConnectionConfiguration)
_CLIENT_CONNECTION_DEFAULTS = {"kubeconfig": "", "acceptContentTypes": "",
                               "contentType": "application/vnd.kubernetes.protobuf", "qps": 50, "burst": 100}
_DEFAULT_RESOURCES = [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]
#: the file's fields and their Go types (configfile's schema; the inline DebuggingConfiguration's at
#: the top), and the args of the plugins whose args the scheme decodes, by plugin name
_PLUGIN = Struct("v1.Plugin", {"name": str, "weight": int})
_PLUGIN_SET = Struct("v1.PluginSet", {"enabled": [_PLUGIN], "disabled": [_PLUGIN]})
_TLS = Struct("v1.ExtenderTLSConfig", {"insecure": bool, "serverName": str, "certFile": str, "keyFile": str,
                                        "caFile": str, "certData": str, "keyData": str, "caData": str})
_EXTENDER = Struct("v1.Extender", {
    "urlPrefix": str, "filterVerb": str, "preemptVerb": str, "prioritizeVerb": str, "weight": "int64",
    "bindVerb": str, "enableHTTPS": bool, "tlsConfig": _TLS, "httpTimeout": DURATION, "nodeCacheCapable": bool,
    "managedResources": [Struct("v1.ExtenderManagedResource", {"name": str, "ignoredByScheduler": bool})],
    "ignorable": bool})
_SCHEMA = Struct("v1.KubeSchedulerConfiguration", {
    "apiVersion": str, "kind": str, "parallelism": int, "healthzBindAddress": str, "metricsBindAddress": str,
    "enableProfiling": bool, "enableContentionProfiling": bool, "percentageOfNodesToScore": int,
    "podInitialBackoffSeconds": "int64", "podMaxBackoffSeconds": "int64", "delayCacheUntilActive": bool,
    "extenders": [_EXTENDER],
    "leaderElection": Struct("v1alpha1.LeaderElectionConfiguration", {
        "leaderElect": bool, "leaseDuration": DURATION, "renewDeadline": DURATION, "retryPeriod": DURATION,
        "resourceLock": str,
        "resourceName": str, "resourceNamespace": str}),
    "clientConnection": Struct("v1alpha1.ClientConnectionConfiguration", {
        "kubeconfig": str, "acceptContentTypes": str, "contentType": str, "qps": "float32", "burst": int}),
    "profiles": [Struct("v1.KubeSchedulerProfile", {
        "schedulerName": str, "percentageOfNodesToScore": int,
        "plugins": Struct("v1.Plugins", {point: _PLUGIN_SET for point in (*POINTS, "multiPoint")}),
        "pluginConfig": [Struct("v1.PluginConfig", {"name": str, "args": ANY})]})],
})
#: the file kind as kube-scheduler's scheme (pkg/scheduler/apis/config/scheme) decodes it
FILE = Kind(API_VERSION, KIND, "pkg/scheduler/apis/config/scheme/scheme.go:29", _SCHEMA)
_TYPE_META = {"apiVersion": str, "kind": str}
_RESOURCES = [Struct("v1.ResourceSpec", {"name": str, "weight": "int64"})]
_SHAPE = [Struct("v1.UtilizationShapePoint", {"utilization": int, "score": int})]
_SELECTOR = Struct("v1.LabelSelector", {"matchLabels": Map(str), "matchExpressions": [Struct(
    "v1.LabelSelectorRequirement", {"key": str, "operator": "v1.LabelSelectorOperator", "values": [str]})]})
_ARG_SCHEMAS = {
    "NodeResourcesFit": Struct("v1.NodeResourcesFitArgs", {
        **_TYPE_META, "ignoredResources": [str], "ignoredResourceGroups": [str],
        "scoringStrategy": Struct("v1.ScoringStrategy", {
            "type": "v1.ScoringStrategyType", "resources": _RESOURCES,
            "requestedToCapacityRatio": Struct("v1.RequestedToCapacityRatioParam", {"shape": _SHAPE})})}),
    "NodeResourcesBalancedAllocation": Struct("v1.NodeResourcesBalancedAllocationArgs",
                                              {**_TYPE_META, "resources": _RESOURCES}),
    "PodTopologySpread": Struct("v1.PodTopologySpreadArgs", {
        **_TYPE_META, "defaultingType": "v1.PodTopologySpreadConstraintsDefaulting",
        "defaultConstraints": [Struct("v1.TopologySpreadConstraint", {
            "maxSkew": int, "topologyKey": str, "whenUnsatisfiable": "v1.UnsatisfiableConstraintAction",
            "labelSelector": _SELECTOR, "minDomains": int, "nodeAffinityPolicy": "v1.NodeInclusionPolicy",
            "nodeTaintsPolicy": "v1.NodeInclusionPolicy", "matchLabelKeys": [str]})]}),
    "InterPodAffinity": Struct("v1.InterPodAffinityArgs", {
        **_TYPE_META, "hardPodAffinityWeight": int, "ignorePreferredTermsOfExistingPods": bool}),
    "DefaultPreemption": Struct("v1.DefaultPreemptionArgs", {
        **_TYPE_META, "minCandidateNodesPercentage": int, "minCandidateNodesAbsolute": int}),
    "VolumeBinding": Struct("v1.VolumeBindingArgs", {**_TYPE_META, "bindTimeoutSeconds": "int64", "shape": _SHAPE}),
    "DynamicResources": Struct("v1.DynamicResourcesArgs", {**_TYPE_META, "filterTimeout": DURATION,
                                                                   "bindingTimeout": DURATION}),
    "NodeAffinity": Struct("v1.NodeAffinityArgs", {**_TYPE_META, "addedAffinity": Struct("v1.NodeAffinity", {
        "requiredDuringSchedulingIgnoredDuringExecution": ANY, "preferredDuringSchedulingIgnoredDuringExecution": ANY})}),
}


class ConfigError(ValueError):
    """A configuration file kube-scheduler would refuse, with its message."""


@dataclass
class SchedulerConfig:
    """What a Scheduler takes from a configuration file."""

    profiles: list[Profile]
    pod_initial_backoff: float = 1.0
    pod_max_backoff: float = 10.0
    leader_election: LeaderElectionConfig = field(
        default_factory=lambda: LeaderElectionConfig(resource_name=LEASE_NAME))
    #: the file's object after v1 defaulting (what /configz renders)
    document: dict = field(default_factory=dict)
    #: clientConnection.qps and burst: the rate limit of the scheduler's client, and of its event
    #: client apart (`client/ratelimit.py`); a negative qps sets none
    qps: float = float(_CLIENT_CONNECTION_DEFAULTS["qps"])
    burst: int = _CLIENT_CONNECTION_DEFAULTS["burst"]
    #: whether the file set qps or burst itself (`nanokube simulate` applies only such a limit)
    limit_set: bool = False


def load(path: str | Path) -> SchedulerConfig:
    """The file at `path`, decoded and validated as kube-scheduler's loadConfig does."""
    text = Path(path).read_text()
    try:
        doc, repeated = configfile.load(text)
    except yaml.YAMLError as e:
        raise ConfigError(str(e)) from None
    return parse(doc, repeated, text)


def parse(doc: dict, repeated: list[str] | None = None, text: str = "") -> SchedulerConfig:
    """Decodes, defaults and validates one KubeSchedulerConfiguration object; `repeated` holds what
    the strict decoder said of the file's repeated keys (`text`)."""
    doc = _decoded(doc, repeated or [], text)
    cfg = _defaulted(doc)
    errors = _validate(cfg)
    profiles = []
    if not errors:
        for i, prof in enumerate(cfg["profiles"]):
            try:
                profiles.append(_profile(prof, cfg.get("percentageOfNodesToScore")))
            except ConfigError as e:
                errors.append(f"initializing profiles: creating profile for scheduler name {prof['schedulerName']}: {e}")
                break
    if errors:
        raise ConfigError(errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")
    le = cfg["leaderElection"]
    election = LeaderElectionConfig(le["leaderElect"], *(goduration.parse(le[f]) for f in (
        "leaseDuration", "renewDeadline", "retryPeriod")), le["resourceName"], le["resourceNamespace"])
    conn = cfg["clientConnection"]
    return SchedulerConfig(profiles, float(cfg["podInitialBackoffSeconds"]), float(cfg["podMaxBackoffSeconds"]),
                           election, cfg, float(conn["qps"]), conn["burst"],
                           bool({"qps", "burst"} & set(doc.get("clientConnection") or {})))


# --- decoding and defaults ------------------------------------------------------------

def _decoded(doc: dict, repeated: list[str], text: str) -> dict:
    """The file's object as the scheme's codec decodes it: the object's own checks (configfile's), then
    the args of each plugin the scheme knows, decoded apart (DecodeNestedObjects): a type error there
    ends the decoding, named by its place; the args' unknown fields join the file's strict errors."""
    try:
        doc, strict = configfile.decode_object(doc, repeated, text, FILE, lenient=True)
    except configfile.DecodeError as e:
        raise ConfigError(str(e)) from None
    for i, prof in enumerate(doc.get("profiles") or ()):
        for j, pc in enumerate(prof.get("pluginConfig") or ()):
            schema = _ARG_SCHEMAS.get(pc.get("name"))
            if schema is None or pc.get("args") is None:
                continue
            where = f"decoding .profiles[{i}].pluginConfig[{j}]: decoding args for plugin {pc['name']}"
            args = pc["args"]
            wrong = configfile.kind_error(args, "", (API_VERSION, ""), pc["name"] + "Args", FILE.scheme) \
                if not isinstance(args, dict) else configfile.mistyped(args, schema, schema.go.rpartition(".")[2])
            if wrong:
                raise ConfigError(f"{where}: {wrong}")
            unknown = [f"unknown field {gofmt.quote(p)}" for p in configfile.unknown_fields(args, schema)]
            if unknown:
                strict.append(f"decoding args for plugin {pc['name']}: {configfile.strict_error(unknown)}")
            pc["args"] = configfile.zeroed(args, schema)
    if strict:
        raise ConfigError(configfile.strict_error(strict))
    return doc


def _defaulted(doc: dict) -> dict:
    cfg = copy.deepcopy(doc)
    cfg.setdefault("parallelism", 16)
    cfg.setdefault("podInitialBackoffSeconds", 1)
    cfg.setdefault("podMaxBackoffSeconds", 10)
    cfg["leaderElection"] = {**_LEADER_ELECTION_DEFAULTS, **(cfg.get("leaderElection") or {})}
    # a zero (or absent) qps or burst takes the default, as component-base's defaulting
    cfg["clientConnection"] = {**_CLIENT_CONNECTION_DEFAULTS,
                               **{k: v for k, v in (cfg.get("clientConnection") or {}).items() if v}}
    profiles = cfg.get("profiles") or [{}]
    cfg["profiles"] = profiles = [p or {} for p in profiles]
    if len(profiles) == 1 and profiles[0].get("schedulerName") is None:
        profiles[0]["schedulerName"] = DEFAULT_SCHEDULER
    for prof in profiles:
        prof["pluginConfig"] = [defaulted_args(pc or {}) for pc in prof.get("pluginConfig") or []]
    return cfg


def defaulted_args(pc: dict) -> dict:
    """Upstream's v1 defaulting of the args of the plugins implemented here."""
    name, args = pc.get("name", ""), dict(pc.get("args") or {})
    if name == "NodeResourcesFit":
        strategy = args.setdefault("scoringStrategy", {"type": "LeastAllocated"})
        strategy.setdefault("type", "LeastAllocated")
        strategy["resources"] = [{**r, "weight": r.get("weight") or 1} for r in strategy.get("resources") or []] \
            or list(_DEFAULT_RESOURCES)
    elif name == "NodeResourcesBalancedAllocation":
        args["resources"] = [{**r, "weight": r.get("weight") or 1} for r in args.get("resources") or []] \
            or list(_DEFAULT_RESOURCES)
    elif name == "PodTopologySpread":
        args.setdefault("defaultingType", "System")
    elif name == "InterPodAffinity":
        args.setdefault("hardPodAffinityWeight", 1)
    elif name == "DefaultPreemption":
        args.setdefault("minCandidateNodesPercentage", 10)
        args.setdefault("minCandidateNodesAbsolute", 100)
    elif name == "VolumeBinding":
        args.setdefault("bindTimeoutSeconds", 600)
    elif name == "DynamicResources":
        args.setdefault("filterTimeout", "10s")  # DRASchedulerFilterTimeout, beta and on since 1.34
        args.setdefault("bindingTimeout", "10m0s")
    return {**pc, "args": args}


# --- validation ---------------------------------------------------------------------

def _invalid(path: str, value, msg: str) -> str:
    return str(invalid(path, value, msg))


def _unsupported(path: str, value, supported) -> str:
    return str(not_supported(path, value, supported))


def _percentage(path: str, v) -> list[str]:
    return [_invalid(path, v, "not in valid range [0-100]")] if v is not None and not 0 <= v <= 100 else []


def _validate(cfg: dict) -> list[str]:
    errs: list[str] = []
    if cfg["clientConnection"]["burst"] < 0:  # component-base's ValidateClientConnectionConfiguration
        errs.append(_invalid("clientConnection.burst", cfg["clientConnection"]["burst"], "must be non-negative"))
    if cfg["parallelism"] <= 0:
        errs.append(_invalid("parallelism", cfg["parallelism"], "should be an integer value greater than zero"))
    seen: dict[str, int] = {}
    for i, prof in enumerate(cfg["profiles"]):
        path = f"profiles[{i}]"
        name = prof.get("schedulerName") or ""
        if not name:
            errs.append(f"{path}.schedulerName: Required value")
        errs += _percentage(f"{path}.percentageOfNodesToScore", prof.get("percentageOfNodesToScore"))
        errs += _validate_plugin_config(path, prof["pluginConfig"])
        if name in seen:
            errs.append(f'{path}.schedulerName: Duplicate value: "{name}"')
        seen[name] = i
    errs += _common_queue_sort(cfg["profiles"])
    errs += _percentage("percentageOfNodesToScore", cfg.get("percentageOfNodesToScore"))
    if cfg["podInitialBackoffSeconds"] <= 0:
        errs.append(_invalid("podInitialBackoffSeconds", cfg["podInitialBackoffSeconds"], "must be greater than 0"))
    if cfg["podMaxBackoffSeconds"] < cfg["podInitialBackoffSeconds"]:
        errs.append(_invalid("podMaxBackoffSeconds", cfg["podMaxBackoffSeconds"],
                             "must be greater than or equal to PodInitialBackoffSeconds"))
    return errs + _leader_election(cfg["leaderElection"])


def _leader_election(le: dict) -> list[str]:
    """component-base's checks, made only when leader election is on."""
    if not le["leaderElect"]:
        return []
    errs, secs = [], {}
    for f in ("leaseDuration", "renewDeadline", "retryPeriod"):
        secs[f] = goduration.parse(le[f])  # (the decoding parsed it)
        if secs[f] <= 0:
            errs.append(_invalid(f"leaderElection.{f}", le[f], "must be greater than zero"))
    if not errs and secs["leaseDuration"] <= secs["renewDeadline"]:
        errs.append(_invalid("leaderElection.leaseDuration", le["renewDeadline"],
                             "LeaseDuration must be greater than RenewDeadline"))
    for f in ("resourceLock", "resourceNamespace", "resourceName"):
        if not le[f]:
            errs.append(_invalid(f"leaderElection.{f}", le[f], f"{f} is required"))
    if le["resourceLock"] and le["resourceLock"] != "leases":
        errs.append(_unsupported("leaderElection.resourceLock", le["resourceLock"], ["leases"]))
    return errs


def _queue_sort(prof: dict) -> dict:
    return ((prof.get("plugins") or {}).get("queueSort")) or {}


def _common_queue_sort(profiles: list[dict]) -> list[str]:
    errs = []
    canon = _queue_sort(profiles[0])
    if len(canon.get("enabled") or []) > 1:
        errs.append(_invalid("profiles[0].plugins.queueSort.Enabled", len(canon["enabled"]),
                             "only one queue sort plugin can be enabled"))
    for i, prof in enumerate(profiles[1:], 1):
        if _queue_sort(prof) != canon:
            errs.append(_invalid(f"profiles[{i}].plugins.queueSort", _queue_sort(prof), "must be the same for all profiles"))
    return errs


def _validate_plugin_config(path: str, configs: list[dict]) -> list[str]:
    errs, seen = [], set()
    for i, pc in enumerate(configs):
        p = f"{path}.pluginConfig[{i}]"
        name = pc.get("name", "")
        if name in seen:
            errs.append(f'{p}: Duplicate value: "{name}"')
        seen.add(name)
        check = _ARG_CHECKS.get(name)
        if check is not None:
            errs += check(f"{p}.args", pc["args"])
    return errs


def _fit_args(path: str, args: dict) -> list[str]:
    errs = []
    for i, res in enumerate(args.get("ignoredResources") or []):
        if not _LABEL_NAME.match(res):
            errs.append(_invalid(f"{path}.ignoredResources[{i}]", res, "name part must consist of alphanumeric "
                                 "characters, '-', '_' or '.', and must start and end with an alphanumeric character"))
    for i, group in enumerate(args.get("ignoredResourceGroups") or []):
        if "/" in group:
            errs.append(_invalid(f"{path}.ignoredResourceGroups[{i}]", group, "resource group name can't contain '/'"))
    strategy = args["scoringStrategy"]
    sp = f"{path}.scoringStrategy"
    kind = strategy.get("type")
    if kind not in _STRATEGIES:
        errs.append(_unsupported(f"{sp}.type", kind, _STRATEGIES))
    for i, r in enumerate(strategy["resources"]):
        if not 0 < r["weight"] <= 100:
            errs.append(_invalid(f"{sp}.resources[{i}].weight", r["weight"],
                                 f"resource weight of {r.get('name', '')} not in valid range (0, 100]"))
    ratio = strategy.get("requestedToCapacityRatio")
    if kind == "RequestedToCapacityRatio":
        if ratio is None:
            errs.append(f"{sp}.requestedToCapacityRatio: Required value: must be specified when type is "
                        "RequestedToCapacityRatio")
        else:
            errs += _shape(f"{sp}.requestedToCapacityRatio.shape", ratio.get("shape") or [])
    elif ratio is not None:
        errs.append(f"{sp}.requestedToCapacityRatio: Forbidden: must be nil when type is not RequestedToCapacityRatio")
    return errs


def _shape(path: str, shape: list[dict]) -> list[str]:
    if not shape:
        return [f"{path}: Required value: at least one point must be specified"]
    errs = []
    for i in range(1, len(shape)):
        if shape[i - 1].get("utilization", 0) >= shape[i].get("utilization", 0):
            errs.append(_invalid(f"{path}[{i}].utilization", shape[i].get("utilization", 0),
                                 "values must be sorted in increasing order"))
            break
    for i, pt in enumerate(shape):
        if not 0 <= pt.get("utilization", 0) <= 100:
            errs.append(_invalid(f"{path}[{i}].utilization", pt.get("utilization"), "not in valid range [0, 100]"))
        if not 0 <= pt.get("score", 0) <= 10:
            errs.append(_invalid(f"{path}[{i}].score", pt.get("score"), "not in valid range [0, 10]"))
    return errs


def _balanced_args(path: str, args: dict) -> list[str]:
    errs, seen = [], set()
    for i, r in enumerate(args["resources"]):
        if r.get("name") in seen:
            errs.append(f'{path}.resources[{i}].name: Duplicate value: "{r.get("name")}"')
        seen.add(r.get("name"))
        if r["weight"] != 1:
            errs.append(_invalid(f"{path}.resources[{i}].weight", r["weight"], "must be 1"))
    return errs


def _spread_args(path: str, args: dict) -> list[str]:
    errs = []
    kind, constraints = args.get("defaultingType"), args.get("defaultConstraints") or []
    if kind not in ("System", "List"):
        errs.append(_unsupported(f"{path}.defaultingType", kind, ("System", "List")))
    elif kind == "System" and constraints:
        errs.append(_invalid(f"{path}.defaultingType", kind, "when .defaultConstraints are not empty"))
    for i, c in enumerate(constraints):
        p = f"{path}.defaultConstraints[{i}]"
        if (c.get("maxSkew") or 0) <= 0:
            errs.append(_invalid(f"{p}.maxSkew", c.get("maxSkew") or 0, "not in valid range (0, inf)"))
        key = c.get("topologyKey") or ""
        if not key:
            errs.append(f"{p}.topologyKey: Required value: can not be empty")
        elif not _LABEL_NAME.match(key):
            errs.append(_invalid(f"{p}.topologyKey", key, "name part must consist of alphanumeric characters, "
                                 "'-', '_' or '.', and must start and end with an alphanumeric character"))
        when = c.get("whenUnsatisfiable") or ""
        if not when:
            errs.append(f"{p}.whenUnsatisfiable: Required value: can not be empty")
        elif when not in ("DoNotSchedule", "ScheduleAnyway"):
            errs.append(_unsupported(f"{p}.whenUnsatisfiable", when, ("DoNotSchedule", "ScheduleAnyway")))
        if c.get("labelSelector") is not None:
            errs.append(f"{p}.labelSelector: Forbidden: constraint must not define a selector, as they deduced for "
                        "each pod")
        if any(o.get("topologyKey") == key and o.get("whenUnsatisfiable") == when for o in constraints[:i]):
            errs.append(f'{path}.defaultConstraints[{i}]: Duplicate value: "{{{key}, {when}}}"')
    return errs


def _affinity_args(path: str, args: dict) -> list[str]:
    w = args["hardPodAffinityWeight"]
    return [] if 0 <= w <= 100 else [_invalid(f"{path}.hardPodAffinityWeight", w, "not in valid range [0, 100]")]


def _preemption_args(path: str, args: dict) -> list[str]:
    errs = []
    pct, absolute = args["minCandidateNodesPercentage"], args["minCandidateNodesAbsolute"]
    if not 0 <= pct <= 100:
        errs.append(_invalid(f"{path}.minCandidateNodesPercentage", pct, "not in valid range [0, 100]"))
    if absolute < 0:
        errs.append(_invalid(f"{path}.minCandidateNodesAbsolute", absolute, "not in valid range [0, inf)"))
    if pct == 0 and absolute == 0:
        errs += [_invalid(f"{path}.minCandidateNodesPercentage", 0,
                          "cannot be zero at the same time as minCandidateNodesAbsolute"),
                 _invalid(f"{path}.minCandidateNodesAbsolute", 0,
                          "cannot be zero at the same time as minCandidateNodesPercentage")]
    return errs


def _volume_binding_args(path: str, args: dict) -> list[str]:
    timeout = args["bindTimeoutSeconds"]
    if not isinstance(timeout, int) or timeout < 0:
        return [_invalid(f"{path}.bindTimeoutSeconds", timeout, "invalid BindTimeoutSeconds, should not be a negative value")]
    return []


def _dra_args(path: str, args: dict) -> list[str]:
    """DynamicResourcesArgs' durations: filterTimeout zero or more, bindingTimeout at least 1 s."""
    errs = []
    for name, least, why in (("filterTimeout", 0.0, "must be zero or positive"),
                             ("bindingTimeout", 1.0, "must be at least 1 second")):
        value = args.get(name)
        if value is None:
            continue
        if goduration.parse(value) < least:  # (the decoding parsed it)
            errs.append(_invalid(f"{path}.{name}", value, why))
    return errs


def _fgd_args(path: str, args: dict) -> list[str]:
    """GPUFragmentationGradient's `workload`: task sizes (GPUs, thousandths of each, millicores) and their weights."""
    errs = []
    workload = args.get("workload")
    if workload is not None and not isinstance(workload, list):
        return [_invalid(f"{path}.workload", workload, "must be a list of {count, milli, cpu, weight}")]
    for i, e in enumerate(workload or []):
        p = f"{path}.workload[{i}]"
        if not isinstance(e, dict):
            errs.append(_invalid(p, e, "must be an object with count, milli and weight"))
            continue
        count, milli, weight, cpu = e.get("count", 1), e.get("milli", 1000), e.get("weight", 1), e.get("cpu", 0)
        if not isinstance(cpu, int) or cpu < 0:
            errs.append(_invalid(f"{p}.cpu", cpu, "must be millicores >= 0"))
        if not isinstance(count, int) or count < 1:
            errs.append(_invalid(f"{p}.count", count, "must be a positive integer"))
        if not isinstance(milli, int) or not 0 < milli <= 1000 or (count != 1 and milli != 1000):
            errs.append(_invalid(f"{p}.milli", milli, "must be in (0, 1000], and 1000 when count is not 1"))
        if not isinstance(weight, (int, float)) or weight < 0:
            errs.append(_invalid(f"{p}.weight", weight, "must be a number >= 0"))
    return errs


_ARG_CHECKS = {"NodeResourcesFit": _fit_args, "NodeResourcesBalancedAllocation": _balanced_args,
               "PodTopologySpread": _spread_args, "InterPodAffinity": _affinity_args,
               "DefaultPreemption": _preemption_args, "VolumeBinding": _volume_binding_args,
               "GPUFragmentationGradient": _fgd_args, "DynamicResources": _dra_args}


# --- profiles -----------------------------------------------------------------------

def _names(entries) -> list[dict]:
    return [e or {} for e in entries or []]


def default_plugins() -> list[dict]:
    """v1's default multiPoint plugins (of those implemented), with their score weights."""
    return [{"name": n, "weight": registry.DEFAULT_WEIGHTS.get(n, 0)} for n in registry.default_plugin_names()]


def merge_plugin_set(default: list[dict], custom: dict) -> tuple[list[dict], list[dict]]:
    """Upstream's mergePluginSet: (enabled, disabled). Custom entries replace a
    default-enabled plugin of the same name in place; '*' disables every default."""
    disabled = _names(custom.get("disabled"))
    off = {d.get("name") for d in disabled}
    custom_on = _names(custom.get("enabled"))
    replacing = {e.get("name"): e for e in custom_on}
    enabled, used = [], set()
    if "*" not in off:
        for d in default:
            if d["name"] in off:
                continue
            if d["name"] in replacing:
                enabled.append(replacing[d["name"]])
                used.add(d["name"])
            else:
                enabled.append(d)
    enabled += [e for e in custom_on if e.get("name") not in used]
    return enabled, disabled


def _implements(plugin_cls, point: str) -> bool:
    method = POINTS[point][0]
    return hasattr(plugin_cls, method) or point == "score" and hasattr(plugin_cls, "score_nodes")


def _profile(prof: dict, global_percentage) -> Profile:
    """Expands multiPoint into every extension point as upstream's framework
    does: plugins re-enabled at a point keep their place first, then the
    multiPoint ones, then the rest enabled at that point."""
    plugins = prof.get("plugins") or {}
    multi, _ = merge_plugin_set(default_plugins(), plugins.get("multiPoint") or {})
    points: dict[str, list[str]] = {}
    multi_weights: dict[str, int] = {}
    for e in multi:
        _lookup(e.get("name", ""), "MultiPoint")
        multi_weights[e["name"]] = e.get("weight") or 1
    weights: dict[str, int] = {}  # a weight given at the score point wins over multiPoint's
    for point, (method, iface) in POINTS.items():
        enabled, disabled = merge_plugin_set([], plugins.get(point) or {})
        off = {d.get("name") for d in disabled}
        explicit = [e.get("name", "") for e in enabled]
        for name in explicit:
            if not _implements(_lookup(name, iface), point):
                raise ConfigError(f'plugin "{name}" does not extend {iface} plugin')
        if len(set(explicit)) != len(explicit):
            dup = next(n for n in explicit if explicit.count(n) > 1)
            raise ConfigError(f'plugin "{dup}" already registered as "{iface}"')
        if point == "score":
            weights = {e["name"]: e.get("weight") or 1 for e in enabled}
        if "*" in off:
            points[method] = explicit
            continue
        override, from_multi = [], []
        for e in multi:
            name = e.get("name", "")
            if not _implements(_lookup(name, iface), point) or name in off:
                continue
            if name in explicit:
                override.append(name)
            elif name in from_multi:
                raise ConfigError(f'plugin "{name}" already registered as "{iface}"')
            else:
                from_multi.append(name)
        first = [n for n in explicit if n in override]
        points[method] = first + from_multi + [n for n in explicit if n not in override]
    used = {n for names in points.values() for n in names}
    order = [n for n in [e.get("name") for e in multi] + [n for names in points.values() for n in names] if n in used]
    names = list(dict.fromkeys(order))
    percentage = prof.get("percentageOfNodesToScore")
    if percentage is None:
        percentage = global_percentage
    return Profile(
        scheduler_name=prof["schedulerName"], plugins=names,
        weights={n: weights.get(n) or multi_weights.get(n) or 1 for n in points["score"]},
        args={pc.get("name", ""): pc["args"] for pc in prof["pluginConfig"]},
        percentage_of_nodes_to_score=percentage or 0, points=points)


def _lookup(name: str, iface: str):
    cls = registry.REGISTRY.get(name)
    if cls is None:
        raise ConfigError(f'{iface} "{name}" does not exist')
    return cls
