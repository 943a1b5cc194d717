"""What `/configz` serves (component-base's configz): each component's effective
configuration under the name it registers it with, rendered as upstream's Go
encoder writes the internal configuration type: Go field names, durations as
time.Duration text, nil slices and pointers as null."""

from __future__ import annotations

import inspect

from .machinery import goduration
from .machinery.goduration import string as go_duration
from .client.leaderelection import LeaderElectionConfig
from .controllers import endpointslice, garbagecollector, nodelifecycle, persistentvolume, resourcequota
from .controllers.cronjob import CronJobController
from .controllers.daemonset import DaemonSetController
from .controllers.deployment import DeploymentController
from .controllers.device_taint_eviction import DeviceTaintEvictionController
from .controllers.ephemeral_volume import EphemeralVolumeController
from .controllers.hpa import HPAController, options_from_env
from .controllers.job import JobController
from .controllers.namespace import NamespaceController
from .controllers.replicaset import ReplicaSetController
from .controllers.replicationcontroller import ReplicationControllerController
from .controllers.resourceclaim import ResourceClaimController
from .controllers.service_lb import ServiceLBController
from .controllers.statefulset import StatefulSetController
from .controllers.ttl_after_finished import TTLAfterFinishedController
from .controllers.validatingadmissionpolicy_status import ValidatingAdmissionPolicyStatusController
from .scheduler import config as scheduler_config

#: kube-scheduler's configz name; kube-controller-manager's is its config group
SCHEDULER = "componentconfig"
CONTROLLER_MANAGER = "kubecontrollermanager.config.k8s.io"
_PROTOBUF = "application/vnd.kubernetes.protobuf"
#: the internal Plugins type's extension points, in its field order
_POINTS = [*scheduler_config.POINTS, "multiPoint"]
#: the in-tree plugins' internal args types, each field (in order) with its Go zero value: what the v1
#: args leave unset is zero there. The scheduler's defaulting adds args for each of them a profile enables.
_ARGS = {
    "DefaultPreemption": {"MinCandidateNodesPercentage": 0, "MinCandidateNodesAbsolute": 0},
    "DynamicResources": {"FilterTimeout": None, "BindingTimeout": None},
    "InterPodAffinity": {"HardPodAffinityWeight": 0, "IgnorePreferredTermsOfExistingPods": False},
    "NodeAffinity": {"AddedAffinity": None},
    "NodeResourcesBalancedAllocation": {"Resources": None},
    "NodeResourcesFit": {"IgnoredResources": None, "IgnoredResourceGroups": None, "ScoringStrategy": None},
    "PodTopologySpread": {"DefaultConstraints": None, "DefaultingType": ""},
    "VolumeBinding": {"BindTimeoutSeconds": 0, "Shape": None},
}
_SCORING_STRATEGY = {"Type": "", "Resources": None, "RequestedToCapacityRatio": None}
#: args fields of core/v1 types, which keep the v1 JSON names inside the internal args
_CORE_TYPED = frozenset({"addedAffinity", "defaultConstraints"})
#: args fields of type *metav1.Duration: whatever the file wrote, encoded as time.Duration text
_DURATIONS = frozenset({"FilterTimeout", "BindingTimeout"})


def _duration(seconds: float) -> str:
    return go_duration(round(seconds * 1e9))


def _go_name(key: str) -> str:
    return "QPS" if key == "qps" else key[:1].upper() + key[1:]


def _go(value):
    """A v1 object's fields under the internal type's (Go) names."""
    if isinstance(value, dict):
        return {_go_name(k): _go(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_go(v) for v in value]
    return value


def _complete(given: dict, fields: dict) -> dict:
    """`fields` in order, with what `given` sets, then anything else it sets."""
    return {**{k: given.get(k, zero) for k, zero in fields.items()}, **given}


def _args(name: str, args: dict) -> dict:
    """A plugin's v1 args as its internal type encodes: Go field names (a core/v1 typed field's
    own stay), every field of a known type."""
    go = {_go_name(k): v if k in _CORE_TYPED else _go(v) for k, v in args.items()}
    if name not in _ARGS:
        return go
    if isinstance(go.get("ScoringStrategy"), dict):
        go["ScoringStrategy"] = _complete(go["ScoringStrategy"], _SCORING_STRATEGY)
    for key in _DURATIONS.intersection(go):
        if go[key] is not None:
            go[key] = _duration(goduration.parse(str(go[key])))
    return _complete(go, _ARGS[name])


def leader_election(cfg: LeaderElectionConfig) -> dict:
    return {"LeaderElect": cfg.leader_elect, "LeaseDuration": _duration(cfg.lease_duration),
            "RenewDeadline": _duration(cfg.renew_deadline), "RetryPeriod": _duration(cfg.retry_period),
            "ResourceLock": "leases", "ResourceName": cfg.resource_name,
            "ResourceNamespace": cfg.resource_namespace}


def _client_connection(kubeconfig: str, qps: float, burst: int) -> dict:
    """ClientConnectionConfiguration; QPS a float32, which Go writes without a fraction when whole."""
    return {"Kubeconfig": kubeconfig, "AcceptContentTypes": "", "ContentType": _PROTOBUF,
            "QPS": int(qps) if float(qps).is_integer() else qps, "Burst": burst}


def _plugin_list(entries) -> list[dict] | None:
    return [{"Name": e.get("name", ""), "Weight": e.get("weight") or 0} for e in entries] if entries else None


def _profile(prof: dict) -> dict:
    """A profile after v1 defaulting: multiPoint holds the default plugins merged with the
    file's, each other point what the file gave, and every enabled plugin with args has them."""
    plugins = prof.get("plugins") or {}
    multi, _ = scheduler_config.merge_plugin_set(scheduler_config.default_plugins(), plugins.get("multiPoint") or {})
    sets = {}
    for point in _POINTS:
        given = plugins.get(point) or {}
        enabled = multi if point == "multiPoint" else given.get("enabled")
        sets[_go_name(point)] = {"Enabled": _plugin_list(enabled), "Disabled": _plugin_list(given.get("disabled"))}
    configs = list(prof.get("pluginConfig") or [])
    have = {pc.get("name") for pc in configs}
    enabled_names = {e["Name"] for s in sets.values() for e in s["Enabled"] or []}
    configs += [scheduler_config.defaulted_args({"name": n}) for n in sorted(enabled_names)
                if n in _ARGS and n not in have]
    return {"SchedulerName": prof["schedulerName"], "PercentageOfNodesToScore": prof.get("percentageOfNodesToScore"),
            "Plugins": sets, "PluginConfig": [{"Name": pc["name"], "Args": _args(pc["name"], pc.get("args") or {})}
                                              for pc in configs]}


def scheduler(cfg: scheduler_config.SchedulerConfig | None, election: LeaderElectionConfig,
              kubeconfig: str) -> dict:
    """kube-scheduler's KubeSchedulerConfiguration (defaults without a --config file)."""
    doc = (cfg or scheduler_config.parse({"apiVersion": scheduler_config.API_VERSION,
                                          "kind": scheduler_config.KIND})).document
    conn = doc.get("clientConnection") or {}
    return {SCHEDULER: {
        "apiVersion": scheduler_config.API_VERSION,
        "Parallelism": doc["parallelism"],
        "LeaderElection": leader_election(election),
        "ClientConnection": _client_connection(conn.get("kubeconfig") or kubeconfig, conn.get("qps", 50),
                                               conn.get("burst", 100)),
        "EnableProfiling": doc.get("enableProfiling", True),
        "EnableContentionProfiling": doc.get("enableContentionProfiling", True),
        "PercentageOfNodesToScore": doc.get("percentageOfNodesToScore", 0),
        "PodInitialBackoffSeconds": doc["podInitialBackoffSeconds"],
        "PodMaxBackoffSeconds": doc["podMaxBackoffSeconds"],
        "Profiles": [_profile(p) for p in doc["profiles"]],
        "Extenders": None,
        "DelayCacheUntilActive": doc.get("delayCacheUntilActive", False),
    }}


def _kube_cloud_shared(args) -> dict:
    """KubeCloudSharedConfiguration: no cloud provider, the node monitor period the node lifecycle
    controller runs with, --use-service-account-credentials; the rest as SetDefaults and the
    flags' defaults leave them (--cidr-allocator-type RangeAllocator)."""
    monitor = nodelifecycle.options_from_env().get("monitor_period", nodelifecycle.DEFAULT_MONITOR_PERIOD)
    return {"CloudProvider": {"Name": "", "CloudConfigFile": ""}, "ExternalCloudVolumePlugin": "",
            "UseServiceAccountCredentials": bool(getattr(args, "use_service_account_credentials", False)),
            "AllowUntaggedCloud": False, "RouteReconciliationPeriod": "10s", "NodeMonitorPeriod": _duration(monitor),
            "ClusterName": "kubernetes", "ClusterCIDR": "", "AllocateNodeCIDRs": False,
            "CIDRAllocatorType": "RangeAllocator", "ConfigureCloudRoutes": True, "NodeSyncPeriod": "0s"}


def _ignored_resource(group_resource: str) -> dict:
    resource, _, group = group_resource.partition(".")
    return {"Group": group, "Resource": resource}


#: KubeControllerManagerConfiguration's sections, in the internal type's field order
_SECTIONS = ("Generic", "KubeCloudShared", "AttachDetachController", "CSRSigningController", "DaemonSetController",
             "DeploymentController", "StatefulSetController", "DeprecatedController", "EndpointController",
             "EndpointSliceController", "EndpointSliceMirroringController", "EphemeralVolumeController",
             "GarbageCollectorController", "HPAController", "JobController", "CronJobController",
             "LegacySATokenCleaner", "NamespaceController", "NodeIPAMController", "NodeLifecycleController",
             "PersistentVolumeBinderController", "PodGCController", "ReplicaSetController", "ReplicationController",
             "ResourceQuotaController", "SAController", "ServiceController", "TTLAfterFinishedController",
             "ValidatingAdmissionPolicyStatusController", "DeviceTaintEvictionController", "ResourceClaimController")


def _controller_sections() -> dict:
    """The sections of single controllers but the CSR signer's and the HPA's: the worker counts
    and periods nanokube's controllers run with; for a controller nanokube does not run
    (attach/detach, node IPAM, pod GC, ...) upstream's defaults, as a disabled one shows."""
    grace = nodelifecycle.options_from_env().get("grace_period", nodelifecycle.DEFAULT_GRACE)
    return {
        "AttachDetachController": {"DisableAttachDetachReconcilerSync": False, "ReconcilerSyncLoopPeriod": "1m0s",
                                   "DisableForceDetachOnTimeout": False},
        "DaemonSetController": {"ConcurrentDaemonSetSyncs": DaemonSetController.workers},
        "DeploymentController": {"ConcurrentDeploymentSyncs": DeploymentController.workers},
        "StatefulSetController": {"ConcurrentStatefulSetSyncs": StatefulSetController.workers},
        "DeprecatedController": {},
        # nanokube's EndpointSlice controller writes the Endpoints too
        "EndpointController": {"ConcurrentEndpointSyncs": endpointslice.EndpointSliceController.workers,
                               "EndpointUpdatesBatchPeriod": "0s"},
        "EndpointSliceController": {"ConcurrentServiceEndpointSyncs": endpointslice.EndpointSliceController.workers,
                                    "MaxEndpointsPerSlice": endpointslice.MAX_ENDPOINTS_PER_SLICE,
                                    "EndpointUpdatesBatchPeriod": "0s"},
        "EndpointSliceMirroringController": {"MirroringConcurrentServiceEndpointSyncs": 5,
                                             "MirroringMaxEndpointsPerSubset": 1000,
                                             "MirroringEndpointUpdatesBatchPeriod": "0s"},
        "EphemeralVolumeController": {"ConcurrentEphemeralVolumeSyncs": EphemeralVolumeController.workers},
        "GarbageCollectorController": {
            "EnableGarbageCollector": True, "ConcurrentGCSyncs": garbagecollector.GarbageCollector.workers,
            "GCIgnoredResources": [_ignored_resource(r) for r in sorted(garbagecollector.IGNORED)]},
        "JobController": {"ConcurrentJobSyncs": JobController.workers},
        "CronJobController": {"ConcurrentCronJobSyncs": CronJobController.workers},
        "LegacySATokenCleaner": {"CleanUpPeriod": "8760h0m0s"},
        "NamespaceController": {"NamespaceSyncPeriod": "5m0s", "ConcurrentNamespaceSyncs": NamespaceController.workers},
        "NodeIPAMController": {"ServiceCIDR": "", "SecondaryServiceCIDR": "", "NodeCIDRMaskSize": 0,
                               "NodeCIDRMaskSizeIPv4": 0, "NodeCIDRMaskSizeIPv6": 0},
        "NodeLifecycleController": {"NodeEvictionRate": 0.1, "SecondaryNodeEvictionRate": 0.01,
                                    "NodeStartupGracePeriod": "1m0s", "NodeMonitorGracePeriod": _duration(grace),
                                    "LargeClusterSizeThreshold": 50, "UnhealthyZoneThreshold": 0.55},
        "PersistentVolumeBinderController": {
            "PVClaimBinderSyncPeriod": _duration(persistentvolume.RESYNC),
            "VolumeConfiguration": {
                "EnableHostPathProvisioning": False, "EnableDynamicProvisioning": True,
                "PersistentVolumeRecyclerConfiguration": {
                    "MaximumRetry": 3, "MinimumTimeoutNFS": 300, "PodTemplateFilePathNFS": "", "IncrementTimeoutNFS": 30,
                    "PodTemplateFilePathHostPath": "", "MinimumTimeoutHostPath": 60, "IncrementTimeoutHostPath": 30},
                "FlexVolumePluginDir": "/usr/libexec/kubernetes/kubelet-plugins/volume/exec/"},
            "VolumeHostCIDRDenylist": None, "VolumeHostAllowLocalLoopback": True},
        "PodGCController": {"TerminatedPodGCThreshold": 12500},
        "ReplicaSetController": {"ConcurrentRSSyncs": ReplicaSetController.workers},
        "ReplicationController": {"ConcurrentRCSyncs": ReplicationControllerController.workers},
        "ResourceQuotaController": {"ResourceQuotaSyncPeriod": _duration(resourcequota.RESYNC),
                                    "ConcurrentResourceQuotaSyncs": resourcequota.ResourceQuotaController.workers},
        "SAController": {"ServiceAccountKeyFile": "", "ConcurrentSATokenSyncs": 5, "RootCAFile": ""},
        "ServiceController": {"ConcurrentServiceSyncs": ServiceLBController.workers},
        "TTLAfterFinishedController": {"ConcurrentTTLSyncs": TTLAfterFinishedController.workers},
        "ValidatingAdmissionPolicyStatusController": {
            "ConcurrentPolicySyncs": ValidatingAdmissionPolicyStatusController.workers},
        "DeviceTaintEvictionController": {"ConcurrentSyncs": DeviceTaintEvictionController.workers},
        "ResourceClaimController": {"ConcurrentSyncs": ResourceClaimController.workers},
    }


def controller_manager(args, election: LeaderElectionConfig) -> dict:
    """kube-controller-manager's KubeControllerManagerConfiguration, every section."""
    hpa = {n: p.default for n, p in inspect.signature(HPAController.__init__).parameters.items()
           if p.default is not inspect.Parameter.empty}
    hpa.update(options_from_env())
    serving = {"Address": args.bind_address, "Port": args.secure_port} if args.secure_port else \
        {"Address": "0.0.0.0", "Port": 0}
    sections = {
        **_controller_sections(),
        "Generic": {
            **serving,
            "MinResyncPeriod": "12h0m0s",
            "ClientConnection": _client_connection("", args.kube_api_qps, args.kube_api_burst),
            "ControllerStartInterval": "0s",
            "LeaderElection": leader_election(election),
            "Controllers": [c.strip() for c in args.controllers.split(",") if c.strip()],
            "Debugging": {"EnableProfiling": True, "EnableContentionProfiling": False},
            "LeaderMigrationEnabled": False,
            "LeaderMigration": {"LeaderName": "", "ResourceLock": "", "ControllerLeaders": None},
        },
        "KubeCloudShared": _kube_cloud_shared(args),
        "CSRSigningController": {
            "ClusterSigningCertFile": args.cluster_signing_cert_file,
            "ClusterSigningKeyFile": args.cluster_signing_key_file,
            **{f"{section}SignerConfiguration": {
                "CertFile": getattr(args, f"cluster_signing_{stem}_cert_file"),
                "KeyFile": getattr(args, f"cluster_signing_{stem}_key_file")}
               for section, stem in (("KubeletServing", "kubelet_serving"), ("KubeletClient", "kubelet_client"),
                                     ("KubeAPIServerClient", "kube_apiserver_client"),
                                     ("LegacyUnknown", "legacy_unknown"))},
            "ClusterSigningDuration": _duration(args.signing_duration),
        },
        "HPAController": {
            "ConcurrentHorizontalPodAutoscalerSyncs": HPAController.workers,
            "HorizontalPodAutoscalerSyncPeriod": _duration(hpa["sync_period"]),
            "HorizontalPodAutoscalerDownscaleStabilizationWindow": _duration(hpa["downscale_window"]),
            "HorizontalPodAutoscalerTolerance": hpa["tolerance"],
            "HorizontalPodAutoscalerCPUInitializationPeriod": _duration(hpa["cpu_initialization_period"]),
            "HorizontalPodAutoscalerInitialReadinessDelay": _duration(hpa["initial_readiness_delay"]),
        },
    }
    return {CONTROLLER_MANAGER: {name: sections[name] for name in _SECTIONS}}
