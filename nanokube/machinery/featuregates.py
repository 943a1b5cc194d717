"""Feature gates, as component-base's featuregate: the 1.37 gates of the features nanokube implements
(and of the DRA alpha features beside them it does not, NOT_IMPLEMENTED), with kube_features.go's
stage, default and lock; `--feature-gates Name=true,Other=false` parsed with
upstream's errors and warnings; the `kubernetes_feature_enabled` gauge every component serves.

One set of gates per process (upstream's DefaultFeatureGate): `nanokube up` runs every component in
one process from the same flags, and a standalone component sets its own. The API server drops
a disabled gate's fields on writes and components read `enabled()` where a feature switches."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client.metrics_core import GaugeMetricFamily

ALPHA, BETA, GA, DEPRECATED = "ALPHA", "BETA", "", "DEPRECATED"

#: the meta-gates that set every alpha or beta gate not named beside them
ALL_ALPHA, ALL_BETA = "AllAlpha", "AllBeta"


@dataclass(frozen=True, slots=True)
class Spec:
    default: bool
    stage: str
    locked: bool = False


_GA_LOCKED = Spec(True, GA, locked=True)
_BETA_ON = Spec(True, BETA)
_ALPHA_OFF = Spec(False, ALPHA)

#: 1.37's gates of the features nanokube implements (pkg/features' versioned specs at 1.37)
KNOWN: dict[str, Spec] = {
    ALL_ALPHA: Spec(False, ALPHA),
    ALL_BETA: Spec(False, BETA),
    # workload-aware scheduling
    "GenericWorkload": _BETA_ON,
    "TopologyAwareWorkloadScheduling": _BETA_ON,
    "DRAWorkloadResourceClaims": _BETA_ON,
    "CompositePodGroup": _ALPHA_OFF,
    "WorkloadWithJob": _ALPHA_OFF,
    # dynamic resource allocation
    "DynamicResourceAllocation": _GA_LOCKED,
    "DRAPrioritizedList": _GA_LOCKED,
    "DRAAdminAccess": _GA_LOCKED,
    "DRADeviceTaints": _GA_LOCKED,
    "DRADeviceTaintRules": _GA_LOCKED,
    "DRAResourceClaimDeviceStatus": _GA_LOCKED,
    "DRAExtendedResource": _GA_LOCKED,
    "DRASchedulerFilterTimeout": _BETA_ON,
    "DRAPartitionableDevices": _BETA_ON,
    "DRAConsumableCapacity": _BETA_ON,
    "DRADeviceBindingConditions": _BETA_ON,
    "DRAListTypeAttributes": _ALPHA_OFF,
    "DRADerivedAttributes": _ALPHA_OFF,
    "DRADeviceCompatibilityGroups": _ALPHA_OFF,
    "DRANodeAllocatableResources": _ALPHA_OFF,
    "DRAResourcePoolStatus": _ALPHA_OFF,
    "DRAOptionalNodePreparation": _ALPHA_OFF,
    "DRASharedConsumableCapacity": _ALPHA_OFF,
    "ClusterResourceClaimTemplates": _ALPHA_OFF,
    "DRAAdminControlledDeviceAttributes": _ALPHA_OFF,
    "DRAResourceSliceMixins": _ALPHA_OFF,
    # pod certificates and trust bundles
    "PodCertificateRequest": _GA_LOCKED,
    "ClusterTrustBundle": _GA_LOCKED,
    "ClusterTrustBundleProjection": _GA_LOCKED,
    # autoscaling, pods, scheduling
    "HPAScaleToZero": _BETA_ON,
    "ContainerRestartRules": _BETA_ON,
    "EnvFiles": _BETA_ON,
    "InPlacePodLevelResourcesVerticalScaling": _BETA_ON,
    "ClearingNominatedNodeNameAfterBinding": _BETA_ON,
    # pods/log: one stream of a container's output (KEP-3288, alpha since 1.32)
    "PodLogsQuerySplitStreams": _ALPHA_OFF,
    # encryption at rest: deleting what no provider reads (KEP-3926, beta in 1.37); KMS v1 plugins (deprecated
    # since 1.28, off since 1.29)
    "AllowUnsafeMalformedObjectDeletion": _BETA_ON,
    "KMSv1": Spec(False, DEPRECATED),
    # kube-proxy: the ipvs mode's way out (KEP-5495; nanokube's kube-proxy refuses ipvs whatever it says)
    "KubeProxyIPVS": Spec(True, DEPRECATED),
}

#: the gates of 1.37 whose features nanokube has not (DRA's alpha ones, KMS v1's plugins): known, so a
#: production-like command line is taken, but off by default here too, and setting one says it changes nothing
NOT_IMPLEMENTED = frozenset({"DRADerivedAttributes", "DRADeviceCompatibilityGroups", "DRANodeAllocatableResources",
                             "DRAOptionalNodePreparation", "DRASharedConsumableCapacity", "ClusterResourceClaimTemplates",
                             "DRAAdminControlledDeviceAttributes", "DRAResourceSliceMixins", "KMSv1"})

#: what `nanokube up` turns on beyond upstream's defaults: the alpha gates of the AI features it exists
#: to show (composite groups, Workloads from Jobs, DRA's list attributes and pool status), as a kind
#: cluster's featureGates would
NANOKUBE_DEFAULTS: dict[str, bool] = {name: True for name, spec in KNOWN.items()
                                      if spec.stage == ALPHA and name not in NOT_IMPLEMENTED and name != ALL_ALPHA
                                      and name != "PodLogsQuerySplitStreams"}  # not one of those: upstream's off

#: the gates whose off switch changes what nanokube does (fields dropped, a component's part off);
#: every other gate is only accepted and reported
HONOURED = frozenset({"GenericWorkload", "CompositePodGroup", "WorkloadWithJob", "DRADeviceBindingConditions",
                      "DRAResourcePoolStatus", "DRAWorkloadResourceClaims", "HPAScaleToZero",
                      "TopologyAwareWorkloadScheduling", "AllowUnsafeMalformedObjectDeletion",
                      "PodLogsQuerySplitStreams"})


def parse(value: str) -> dict[str, bool]:
    """`Name=true,Other=false` as featureGate.Set reads it: empty items skipped, names and values
    trimmed, values as strconv.ParseBool takes them."""
    out: dict[str, bool] = {}
    for item in value.split(","):
        if not item:
            continue
        name, eq, raw = item.partition("=")
        name = name.strip()
        if not eq:
            raise ValueError(f"missing bool value for {name}")
        raw = raw.strip()
        if raw not in BOOLS:
            raise ValueError(f'invalid value of {name}={raw}, err: {bool_error(raw)}')
        out[name] = BOOLS[raw]
    return out


def bool_error(raw: str) -> str:
    """strconv.ParseBool's error for what is not among BOOLS."""
    return f'strconv.ParseBool: parsing "{raw}": invalid syntax'


#: strconv.ParseBool's spellings
BOOLS = {**dict.fromkeys(("1", "t", "T", "TRUE", "true", "True"), True),
         **dict.fromkeys(("0", "f", "F", "FALSE", "false", "False"), False)}


class FeatureGates:
    """The gates' values: their 1.37 defaults, `overrides` (nanokube's) on top, then what `set` is given."""

    def __init__(self, overrides: dict[str, bool] | None = None, known: dict[str, Spec] | None = None) -> None:
        self.known = dict(KNOWN if known is None else known)
        self._on = {name: spec.default for name, spec in self.known.items()}
        if overrides:
            self._on.update(overrides)

    def enabled(self, name: str) -> bool:
        """A gate's value; an unknown name is a bug (upstream panics)."""
        return self._on[name]

    def set(self, value: str) -> list[str]:
        """Apply `--feature-gates`; a ValueError as upstream's, nothing changed, for the first refusal.
        Returns the warnings to log (a GA or deprecated gate set)."""
        return self.set_from_map(parse(value))

    def set_from_map(self, wanted: dict[str, bool]) -> list[str]:
        for name in wanted:
            if name not in self.known:
                raise ValueError(f"unrecognized feature gate: {name}")
        errors, warnings, on = [], [], dict(self._on)
        for name, value in wanted.items():
            spec = self.known[name]
            if spec.locked and spec.default != value:
                errors.append(f"cannot set feature gate {name} to {_go(value)}, feature is locked to {_go(spec.default)}")
                continue
            on[name] = value
            if name in (ALL_ALPHA, ALL_BETA):  # every gate of that stage not named beside it
                stage = ALPHA if name == ALL_ALPHA else BETA
                for other, s in self.known.items():
                    if s.stage == stage and other not in wanted and other not in (ALL_ALPHA, ALL_BETA):
                        on[other] = value
            elif spec.stage == DEPRECATED:
                warnings.append(f"Setting deprecated feature gate {name}={_go(value)}. It will be removed in a future release.")
            elif spec.stage == GA:
                warnings.append(f"Setting GA feature gate {name}={_go(value)}. It will be removed in a future release.")
        if errors:  # utilerrors' aggregate: one error alone, several in brackets
            raise ValueError(errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]")
        self._on = on
        return warnings

    def overridden(self) -> str:
        """`Name=value,...` of the gates whose value differs from upstream's default."""
        return ",".join(f"{n}={_go(v)}" for n, v in sorted(self._on.items()) if self.known[n].default != v)

    def collect(self):
        """component-base's featuremetrics: one series per gate, 1 where it is on."""
        family = GaugeMetricFamily("kubernetes_feature_enabled", "[BETA] This metric records the data about the stage "
                                   "and enablement of a k8s feature.", labels=("name", "stage"))
        for name in sorted(self.known):
            family.add_metric((name, self.known[name].stage), 1.0 if self._on[name] else 0.0)
        yield family


def _go(value: bool) -> str:
    return "true" if value else "false"


#: this process's gates (upstream's DefaultFeatureGate): nanokube's defaults until a command line sets them
GATES = FeatureGates(NANOKUBE_DEFAULTS)


def enabled(name: str) -> bool:
    return GATES.enabled(name)


def set_flag(value: str) -> list[str]:
    """Apply a command line's --feature-gates to this process's gates; its warnings (upstream's, then
    one naming the gates set whose features nanokube has not, one those it does not switch yet), or
    a ValueError worded as pflag words a refused flag."""
    before = {n: GATES.enabled(n) for n in GATES.known}
    try:
        warnings = GATES.set(value)
    except ValueError as e:
        raise ValueError(f'invalid argument "{value}" for "--feature-gates" flag: {e}') from None
    # the gates named, and those AllAlpha or AllBeta changed
    named = parse(value).keys() | {n for n, was in before.items() if GATES.enabled(n) != was}
    absent = sorted(n for n in named if n in NOT_IMPLEMENTED)
    inert = sorted(n for n in named if n not in HONOURED and n not in NOT_IMPLEMENTED and not GATES.known[n].locked
                   and n not in (ALL_ALPHA, ALL_BETA))
    if absent:
        warnings.append(f"nanokube does not implement these features: {', '.join(absent)}")
    if inert:
        warnings.append(f"nanokube does not switch these features by their gate yet: {', '.join(inert)}")
    return warnings
