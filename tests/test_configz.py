"""/configz's renderings: the effective configuration as upstream's Go encoder writes the
internal configuration types."""

import argparse

from nanokube import configz
from nanokube.client.leaderelection import LeaderElectionConfig
from nanokube.scheduler.config import parse

ELECTION = LeaderElectionConfig(resource_name="kube-scheduler", lease_duration=90)


def test_a_configuration_file_is_served_defaulted_under_go_names():
    cfg = parse({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                 "podMaxBackoffSeconds": 30,
                 "profiles": [{"schedulerName": "gpu", "percentageOfNodesToScore": 40,
                               "plugins": {"multiPoint": {"disabled": [{"name": "ImageLocality"},
                                                                      {"name": "VolumeBinding"}]},
                                           "score": {"enabled": [{"name": "NodeResourcesFit", "weight": 5}]}},
                               "pluginConfig": [{"name": "NodeResourcesFit",
                                                 "args": {"scoringStrategy": {"type": "MostAllocated"}}}]}]})
    got = configz.scheduler(cfg, ELECTION, "/k")["componentconfig"]
    # the internal KubeSchedulerConfiguration's fields, DebuggingConfiguration's inlined; no
    # HealthzBindAddress or MetricsBindAddress, which the internal type no longer has
    assert list(got) == ["apiVersion", "Parallelism", "LeaderElection", "ClientConnection", "EnableProfiling",
                         "EnableContentionProfiling", "PercentageOfNodesToScore", "PodInitialBackoffSeconds",
                         "PodMaxBackoffSeconds", "Profiles", "Extenders", "DelayCacheUntilActive"]
    assert got["PodMaxBackoffSeconds"] == 30 and got["LeaderElection"]["LeaseDuration"] == "1m30s"
    assert got["ClientConnection"] == {"Kubeconfig": "/k", "AcceptContentTypes": "",
                                       "ContentType": "application/vnd.kubernetes.protobuf", "QPS": 50, "Burst": 100}
    [p] = got["Profiles"]
    assert (p["SchedulerName"], p["PercentageOfNodesToScore"]) == ("gpu", 40)
    assert list(p["Plugins"]) == ["PreEnqueue", "QueueSort", "PreFilter", "Filter", "PostFilter", "PreScore",
                                  "Score", "Reserve", "Permit", "PreBind", "Bind", "PostBind", "MultiPoint"]
    multi = p["Plugins"]["MultiPoint"]
    names = [e["Name"] for e in multi["Enabled"]]
    assert "VolumeBinding" not in names and "NodeResourcesFit" in names
    assert multi["Disabled"] == [{"Name": "ImageLocality", "Weight": 0}, {"Name": "VolumeBinding", "Weight": 0}]
    assert p["Plugins"]["Score"] == {"Enabled": [{"Name": "NodeResourcesFit", "Weight": 5}], "Disabled": None}
    configs = [pc["Name"] for pc in p["PluginConfig"]]
    assert configs[0] == "NodeResourcesFit" and configs[1:] == sorted(configs[1:]), \
        "the file's configs first, then defaults for enabled plugins with args, by name"
    assert "VolumeBinding" not in configs
    args = {pc["Name"]: pc["Args"] for pc in p["PluginConfig"]}
    # the internal args types, every field: what the v1 args leave unset is Go's zero value
    assert list(p["PluginConfig"][0]["Args"]) == ["IgnoredResources", "IgnoredResourceGroups", "ScoringStrategy"]
    assert args["NodeResourcesFit"]["ScoringStrategy"] == {
        "Type": "MostAllocated", "Resources": [{"Name": "cpu", "Weight": 1}, {"Name": "memory", "Weight": 1}],
        "RequestedToCapacityRatio": None}
    assert args["InterPodAffinity"] == {"HardPodAffinityWeight": 1, "IgnorePreferredTermsOfExistingPods": False}
    assert args["PodTopologySpread"] == {"DefaultConstraints": None, "DefaultingType": "System"}
    assert args["NodeAffinity"] == {"AddedAffinity": None}, "NodeAffinityArgs is defaulted for the profile too"


def test_client_connection_zeros_take_the_defaults_and_set_values_are_kept():
    doc = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
    for conn, want in (({"qps": 0, "burst": 0}, (50, 100)), ({"qps": 2.5, "burst": 3}, (2.5, 3)),
                       ({"qps": -1}, (-1, 100))):
        cfg = parse({**doc, "clientConnection": conn})
        got = configz.scheduler(cfg, ELECTION, "")["componentconfig"]["ClientConnection"]
        assert (got["QPS"], got["Burst"]) == want == (cfg.qps, cfg.burst)


def test_core_typed_args_keep_their_json_names():
    """AddedAffinity and DefaultConstraints are core/v1 types inside the internal args: their own
    fields are encoded under the v1 JSON names."""
    affinity = {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]}}
    spread = [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]
    cfg = parse({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                 "profiles": [{"schedulerName": "default-scheduler", "pluginConfig": [
                     {"name": "NodeAffinity", "args": {"addedAffinity": affinity}},
                     {"name": "PodTopologySpread", "args": {"defaultConstraints": spread, "defaultingType": "List"}}]}]})
    [p] = configz.scheduler(cfg, ELECTION, "")["componentconfig"]["Profiles"]
    args = {pc["Name"]: pc["Args"] for pc in p["PluginConfig"]}
    assert args["NodeAffinity"] == {"AddedAffinity": affinity}
    assert args["PodTopologySpread"] == {"DefaultConstraints": spread, "DefaultingType": "List"}


def test_the_controller_manager_serves_its_flags(monkeypatch):
    monkeypatch.delenv("NANOKUBE_NODE_MONITOR_GRACE", raising=False)
    files = {f"cluster_signing_{stem}_{part}_file": "" for stem in ("kubelet_serving", "kubelet_client",
                                                                     "kube_apiserver_client", "legacy_unknown")
             for part in ("cert", "key")}
    args = argparse.Namespace(bind_address="127.0.0.1", secure_port=10257, controllers="*,-job", **files,
                              cluster_signing_cert_file="/ca.crt", cluster_signing_key_file="/ca.key",
                              signing_duration=8760 * 3600.0, use_service_account_credentials=True,
                              kube_api_qps=20.0, kube_api_burst=30)
    got = configz.controller_manager(args, LeaderElectionConfig(resource_name="kube-controller-manager"))
    generic = got["kubecontrollermanager.config.k8s.io"]["Generic"]
    # --kube-api-qps/--kube-api-burst, upstream's defaults or as given (a float32, whole ones without a fraction)
    assert generic["ClientConnection"] == {"Kubeconfig": "", "AcceptContentTypes": "",
                                           "ContentType": "application/vnd.kubernetes.protobuf", "QPS": 20, "Burst": 30}
    given = configz.controller_manager(argparse.Namespace(**{**vars(args), "kube_api_qps": 2.5, "kube_api_burst": 4}),
                                       LeaderElectionConfig(resource_name="kube-controller-manager"))
    assert given["kubecontrollermanager.config.k8s.io"]["Generic"]["ClientConnection"]["QPS"] == 2.5
    assert (generic["Address"], generic["Port"], generic["Controllers"]) == ("127.0.0.1", 10257, ["*", "-job"])
    assert generic["LeaderElection"]["RetryPeriod"] == "2s" and generic["MinResyncPeriod"] == "12h0m0s"
    hpa = got["kubecontrollermanager.config.k8s.io"]["HPAController"]
    assert hpa["HorizontalPodAutoscalerSyncPeriod"] == "15s"
    assert hpa["HorizontalPodAutoscalerDownscaleStabilizationWindow"] == "5m0s"
    kcm = got["kubecontrollermanager.config.k8s.io"]
    assert list(kcm) == [
        "Generic", "KubeCloudShared", "AttachDetachController", "CSRSigningController", "DaemonSetController",
        "DeploymentController", "StatefulSetController", "DeprecatedController", "EndpointController",
        "EndpointSliceController", "EndpointSliceMirroringController", "EphemeralVolumeController",
        "GarbageCollectorController", "HPAController", "JobController", "CronJobController", "LegacySATokenCleaner",
        "NamespaceController", "NodeIPAMController", "NodeLifecycleController", "PersistentVolumeBinderController",
        "PodGCController", "ReplicaSetController", "ReplicationController", "ResourceQuotaController", "SAController",
        "ServiceController", "TTLAfterFinishedController", "ValidatingAdmissionPolicyStatusController",
        "DeviceTaintEvictionController", "ResourceClaimController"]
    # the worker counts and periods nanokube's controllers run with, upstream's fields
    assert kcm["DeploymentController"] == {"ConcurrentDeploymentSyncs": 2}
    assert kcm["ReplicationController"] == {"ConcurrentRCSyncs": 2} and kcm["DeprecatedController"] == {}
    # upstream's --concurrent-namespace-syncs default
    assert kcm["NamespaceController"] == {"NamespaceSyncPeriod": "5m0s", "ConcurrentNamespaceSyncs": 10}
    assert kcm["GarbageCollectorController"] == {
        "EnableGarbageCollector": True, "ConcurrentGCSyncs": 2,
        "GCIgnoredResources": [{"Group": "", "Resource": "events"}, {"Group": "events.k8s.io", "Resource": "events"}]}
    assert kcm["EndpointSliceController"] == {"ConcurrentServiceEndpointSyncs": 2, "MaxEndpointsPerSlice": 100,
                                              "EndpointUpdatesBatchPeriod": "0s"}
    assert kcm["ResourceQuotaController"]["ResourceQuotaSyncPeriod"] == "5m0s"
    assert kcm["PersistentVolumeBinderController"]["PVClaimBinderSyncPeriod"] == "15s"
    assert kcm["NodeLifecycleController"] == {
        "NodeEvictionRate": 0.1, "SecondaryNodeEvictionRate": 0.01, "NodeStartupGracePeriod": "1m0s",
        "NodeMonitorGracePeriod": "50s", "LargeClusterSizeThreshold": 50, "UnhealthyZoneThreshold": 0.55}
    assert kcm["KubeCloudShared"] == {
        "CloudProvider": {"Name": "", "CloudConfigFile": ""}, "ExternalCloudVolumePlugin": "",
        "UseServiceAccountCredentials": True, "AllowUntaggedCloud": False, "RouteReconciliationPeriod": "10s",
        "NodeMonitorPeriod": "5s", "ClusterName": "kubernetes", "ClusterCIDR": "", "AllocateNodeCIDRs": False,
        "CIDRAllocatorType": "RangeAllocator", "ConfigureCloudRoutes": True, "NodeSyncPeriod": "0s"}
    assert got["kubecontrollermanager.config.k8s.io"]["CSRSigningController"] == {
        "ClusterSigningCertFile": "/ca.crt", "ClusterSigningKeyFile": "/ca.key",
        **{f"{s}SignerConfiguration": {"CertFile": "", "KeyFile": ""}
           for s in ("KubeletServing", "KubeletClient", "KubeAPIServerClient", "LegacyUnknown")},
        "ClusterSigningDuration": "8760h0m0s"}
    # the monitor period the node lifecycle controller runs with, shortened with `up`'s grace period
    monkeypatch.setenv("NANOKUBE_NODE_MONITOR_GRACE", "10")
    shortened = configz.controller_manager(args, LeaderElectionConfig(resource_name="kube-controller-manager"))
    assert shortened["kubecontrollermanager.config.k8s.io"]["KubeCloudShared"]["NodeMonitorPeriod"] == "2s"
    assert shortened["kubecontrollermanager.config.k8s.io"]["NodeLifecycleController"]["NodeMonitorGracePeriod"] == "10s"


def test_dynamic_resources_args_are_served_with_their_timeouts():
    """DynamicResourcesArgs is defaulted for every profile that enables the plugin (filterTimeout
    10s, bindingTimeout 10m), and a file's durations are served as time.Duration text."""
    [p] = configz.scheduler(None, ELECTION, "")["componentconfig"]["Profiles"]
    args = {pc["Name"]: pc["Args"] for pc in p["PluginConfig"]}
    assert args["DynamicResources"] == {"FilterTimeout": "10s", "BindingTimeout": "10m0s"}
    cfg = parse({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                 "profiles": [{"schedulerName": "default-scheduler", "pluginConfig": [
                     {"name": "DynamicResources", "args": {"filterTimeout": "0s", "bindingTimeout": "90s"}}]}]})
    [p] = configz.scheduler(cfg, ELECTION, "")["componentconfig"]["Profiles"]
    assert p["PluginConfig"][0] == {"Name": "DynamicResources",
                                    "Args": {"FilterTimeout": "0s", "BindingTimeout": "1m30s"}}
