"""KubeSchedulerConfiguration: profiles, per-point plugin sets with
multiPoint, weights, defaulted args, and upstream's messages for bad files."""

import pytest
import yaml

from nanokube.scheduler import plugins
from nanokube.scheduler.config import ConfigError, load, parse
from nanokube.scheduler.cycle import Algorithm
from nanokube.scheduler.framework import CycleState, Framework
from nanokube.scheduler.metrics import Metrics
from tests.scheduler import FakeClock, info, node, node_info, pod

HEAD = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


def cfg(**fields):
    return parse({**HEAD, **fields})


def error(**fields) -> str:
    with pytest.raises(ConfigError) as e:
        cfg(**fields)
    return str(e.value)


def test_empty_file_is_the_default_profile(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text(yaml.safe_dump(HEAD))
    c = load(f)
    [p] = c.profiles
    assert p.scheduler_name == "default-scheduler" and p.percentage_of_nodes_to_score == 0
    assert p.points["score"] == [n for n in plugins.DEFAULT_PLUGINS if n in plugins.DEFAULT_WEIGHTS]
    assert p.weights == plugins.DEFAULT_WEIGHTS
    assert p.points["sort_key"] == ["PrioritySort"] and p.points["bind"] == ["DefaultBinder"]
    assert (c.pod_initial_backoff, c.pod_max_backoff) == (1.0, 10.0)


def test_profiles_with_disabled_score_plugins_weights_and_args():
    c = cfg(percentageOfNodesToScore=30, podInitialBackoffSeconds=2, podMaxBackoffSeconds=20, profiles=[
        {"schedulerName": "default-scheduler"},
        {"schedulerName": "bin-packing", "percentageOfNodesToScore": 70,
         "plugins": {"score": {"disabled": [{"name": "NodeResourcesBalancedAllocation"}],
                               "enabled": [{"name": "NodeResourcesFit", "weight": 5}]},
                     "multiPoint": {"disabled": [{"name": "InterPodAffinity"}]}},
         "pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}]}])
    default, packing = c.profiles
    assert default.percentage_of_nodes_to_score == 30 and packing.percentage_of_nodes_to_score == 70
    assert packing.points["score"] == ["NodeResourcesFit", "TaintToleration", "NodeAffinity", "PodTopologySpread",
                                     "ImageLocality"]
    assert "InterPodAffinity" not in packing.plugins and "InterPodAffinity" not in packing.points["filter"]
    assert packing.weights["NodeResourcesFit"] == 5
    assert packing.args["NodeResourcesFit"] == {"scoringStrategy": {"type": "MostAllocated", "resources": [
        {"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]}}
    assert (c.pod_initial_backoff, c.pod_max_backoff) == (2.0, 20.0)


def test_star_disables_a_point_and_multipoint_adds_a_plugin_with_weight():
    c = cfg(profiles=[{"plugins": {
        "score": {"disabled": [{"name": "*"}], "enabled": [{"name": "NodeAffinity"}]},
        "multiPoint": {"enabled": [{"name": "NodeResourcesFit", "weight": 7}]}}}])
    [p] = c.profiles
    assert p.points["score"] == ["NodeAffinity"] and p.weights == {"NodeAffinity": 1}
    assert "NodeResourcesFit" in p.points["filter"]


def test_most_allocated_profile_packs_pods():
    [p] = cfg(profiles=[{"pluginConfig": [
        {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}],
        "plugins": {point: {"disabled": [{"name": "*"}], "enabled": [{"name": "NodeResourcesFit"}]}
                    for point in ("preScore", "score")}}]).profiles
    fwk = Framework(p, plugins.build(p, None), Metrics(), FakeClock())
    busy, idle = node_info(node("busy"), pod("x", "2", "1Gi")), node_info(node("idle"))
    state, incoming = CycleState(), info(pod("p", "1", "1Gi"))
    fwk.run_pre_score(state, incoming, [busy, idle])
    totals = fwk.run_score(state, incoming, [busy, idle])
    assert Algorithm().select_host([busy, idle], totals) == "busy"


@pytest.mark.parametrize(("fields", "want"), [
    ({"percentageOfNodesToScore": 110}, "percentageOfNodesToScore: Invalid value: 110: not in valid range [0-100]"),
    ({"profiles": [{"schedulerName": "a"}, {}]}, "profiles[1].schedulerName: Required value"),
    ({"profiles": [{"schedulerName": "a"}, {"schedulerName": "a"}]},
     'profiles[1].schedulerName: Duplicate value: "a"'),
    ({"podInitialBackoffSeconds": 0}, "podInitialBackoffSeconds: Invalid value: 0: must be greater than 0"),
    ({"podInitialBackoffSeconds": 5, "podMaxBackoffSeconds": 2},
     "podMaxBackoffSeconds: Invalid value: 2: must be greater than or equal to PodInitialBackoffSeconds"),
    ({"parallelism": 0}, "parallelism: Invalid value: 0: should be an integer value greater than zero"),
    ({"profiles": [{"plugins": {"filter": {"enabled": [{"name": "NoSuchPlugin"}]}}}]},
     ('initializing profiles: creating profile for scheduler name default-scheduler: '
      'FilterPlugin "NoSuchPlugin" does not exist')),
    ({"profiles": [{"plugins": {"filter": {"enabled": [{"name": "PrioritySort"}]}}}]},
     ('initializing profiles: creating profile for scheduler name default-scheduler: '
      'plugin "PrioritySort" does not extend FilterPlugin plugin')),
    ({"profiles": [{"schedulerName": "a"}, {"schedulerName": "b", "plugins": {"queueSort": {
        "disabled": [{"name": "*"}]}}}]},
     'profiles[1].plugins.queueSort: Invalid value: {"disabled":[{"name":"*"}]}: must be the same for all profiles'),
    ({"profiles": [{"pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "Fancy"}}}]}]},
     ('profiles[0].pluginConfig[0].args.scoringStrategy.type: Unsupported value: "Fancy": supported values: '
      '"LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"')),
    ({"profiles": [{"pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {
        "type": "RequestedToCapacityRatio"}}}]}]},
     ("profiles[0].pluginConfig[0].args.scoringStrategy.requestedToCapacityRatio: Required value: "
      "must be specified when type is RequestedToCapacityRatio")),
    ({"profiles": [{"pluginConfig": [{"name": "PodTopologySpread", "args": {"defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]}}]}]},
     ('profiles[0].pluginConfig[0].args.defaultingType: Invalid value: "System": '
      "when .defaultConstraints are not empty")),
    ({"profiles": [{"pluginConfig": [{"name": "PodTopologySpread", "args": {"defaultingType": "List",
                                                                             "defaultConstraints": [
        {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]}}]}]},
     "profiles[0].pluginConfig[0].args.defaultConstraints[0].maxSkew: Invalid value: 0: not in valid range (0, inf)"),
    ({"profiles": [{"pluginConfig": [{"name": "InterPodAffinity"}, {"name": "InterPodAffinity"}]}]},
     'profiles[0].pluginConfig[1]: Duplicate value: "InterPodAffinity"'),
    ({"profiles": [{"schedulerName": "a", "foo": 1}]}, 'strict decoding error: unknown field "profiles[0].foo"'),
    # component-base's ValidateClientConnectionConfiguration: only burst is checked (a negative qps is no limit)
    ({"clientConnection": {"qps": 5, "burst": -1}}, "clientConnection.burst: Invalid value: -1: must be non-negative"),
    ({"clientConnection": {"qps": "fast"}}, ("json: cannot unmarshal string into Go struct field "
                                             "ClientConnectionConfiguration.clientConnection.qps of type float32")),
    ({"clientConnection": {"burst": 1.5}}, ("json: cannot unmarshal number 1.5 into Go struct field "
                                            "ClientConnectionConfiguration.clientConnection.burst of type int32")),
    ({"clientConnection": {"qpss": 5}}, 'strict decoding error: unknown field "clientConnection.qpss"'),
    ({"clientConnection": {"qpss": 5, "qps": "fast"}}, ("json: cannot unmarshal string into Go struct field "
                                                        "ClientConnectionConfiguration.clientConnection.qps of type float32")),
    # (fuzz62: a field of another JSON type was a TypeError out of the defaulting, a traceback from `up`)
    ({"profiles": [{"schedulerName": "a", "pluginConfig": True}]}, (
        "json: cannot unmarshal bool into Go struct field KubeSchedulerProfile.profiles.pluginConfig of type []v1.PluginConfig")),
    ({"profiles": [None, {"pluginConfig": [None, {"name": "NodeResourcesFit", "args": {"scoringStrategy": [1]}}]}]}, (
        "decoding .profiles[1].pluginConfig[1]: decoding args for plugin NodeResourcesFit: json: cannot unmarshal array "
        "into Go struct field NodeResourcesFitArgs.scoringStrategy of type v1.ScoringStrategy")),
    ({"leaderElection": {"leaseDuration": 15}, "foo": 1}, (
        "json: cannot unmarshal number into Go struct field LeaderElectionConfiguration.leaderElection.leaseDuration "
        "of type string")),
])
def test_validation_messages(fields, want):
    assert error(**fields) == want


def test_several_errors_are_listed_together():
    assert error(percentageOfNodesToScore=-1, parallelism=-2) == (
        "[parallelism: Invalid value: -2: should be an integer value greater than zero, "
        "percentageOfNodesToScore: Invalid value: -1: not in valid range [0-100]]")


def test_wrong_version_and_bad_yaml(tmp_path):
    with pytest.raises(ConfigError, match='no kind "KubeSchedulerConfiguration" is registered for version '
                                          '"kubescheduler.config.k8s.io/v2"'):
        parse({**HEAD, "apiVersion": "kubescheduler.config.k8s.io/v2"})
    f = tmp_path / "bad.yaml"
    f.write_text("profiles: [")
    with pytest.raises(ConfigError, match="^error converting YAML to JSON: yaml: line 1: did not find expected node content$"):
        load(f)



def test_a_repeated_key_is_a_strict_decoding_error_and_stops_up(tmp_path, capsys):
    """v1's codec is strict: a key given twice (before, the later one silently won) is reported with
    the unknown fields, in go-yaml's words; `up --scheduler-config` stops on it with that error."""
    from nanokube.cli import main

    f = tmp_path / "dup.yaml"
    f.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                 "parallelism: 4\nprofiles:\n- schedulerName: a\n  schedulerName: b\n  plugin: {}\nparallelism: 8\n")
    want = ('strict decoding error: error converting YAML to JSON: yaml: unmarshal errors:\n  line 6: key "schedulerName" '
            'already set in map\n  line 8: key "parallelism" already set in map, unknown field "profiles[0].plugin"')
    with pytest.raises(ConfigError) as e:
        load(f)
    assert str(e.value) == want
    assert main(["up", "--data-dir", str(tmp_path / "d"), "--scheduler-config", str(f)]) == 2
    assert capsys.readouterr().err == f"nanokube: --scheduler-config: {want}\n"
    assert not (tmp_path / "d").exists()

@pytest.mark.parametrize("body, want", [
    # (the shape of a kube-scheduler report: the innermost struct, the JSON field names, the Go type)
    ("profiles:\n- schedulerName: a\n  pluginConfig: {name: NodeResourcesFit}\n",
     "json: cannot unmarshal object into Go struct field KubeSchedulerProfile.profiles.pluginConfig of type "
     "[]v1.PluginConfig"),
    ("profiles:\n- plugins: {score: {enabled: [{name: A, weight: x}]}}\n",
     "json: cannot unmarshal string into Go struct field Plugin.profiles.plugins.score.enabled.weight of type int32"),
    ("podMaxBackoffSeconds: 1.5\n",
     "json: cannot unmarshal number 1.5 into Go struct field KubeSchedulerConfiguration.podMaxBackoffSeconds of type int64"),
    ("percentageOfNodeToScore: 100\n", 'strict decoding error: unknown field "percentageOfNodeToScore"'),
    ("profiles:\n- plugins: {score: {enabled: [{name: A, wieght: 2}]}}\n",
     'strict decoding error: unknown field "profiles[0].plugins.score.enabled[0].wieght"'),
    # a known plugin's args are decoded apart: their unknown fields join the file's, their type errors end it
    ("profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args: {scoringStrategy: {resourcess: []}}\n",
     'strict decoding error: decoding args for plugin NodeResourcesFit: strict decoding error: unknown field '
     '"scoringStrategy.resourcess"'),
    ("profiles:\n- pluginConfig:\n  - name: VolumeBinding\n    args: [1]\n",
     "decoding .profiles[0].pluginConfig[0]: decoding args for plugin VolumeBinding: couldn't get version/kind; json "
     "parse error: json: cannot unmarshal array into Go value of type struct { APIVersion string "
     '"json:\\"apiVersion,omitempty\\""; Kind string "json:\\"kind,omitempty\\"" }'),
    ("kind: KubeSchedulerConfiguration\n", "Object 'apiVersion' is missing in 'kind: KubeSchedulerConfiguration'"),
])
def test_a_mistaken_file_stops_up_with_kube_schedulers_words(body, want, tmp_path, capsys):
    from nanokube.cli import main

    f = tmp_path / "sched.yaml"
    f.write_text(("" if body.startswith("kind:") else
                  "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n") + body)
    assert main(["up", "--data-dir", str(tmp_path / "d"), "--scheduler-config", str(f)]) == 2
    assert capsys.readouterr().err == f"nanokube: --scheduler-config: {want}\n"


def test_a_version_the_scheme_does_not_register_names_kube_schedulers_scheme():
    with pytest.raises(ConfigError) as e:
        parse({**HEAD, "apiVersion": "kubescheduler.config.k8s.io/v1beta3"})
    assert str(e.value) == ('no kind "KubeSchedulerConfiguration" is registered for version '
                            '"kubescheduler.config.k8s.io/v1beta3" in scheme "pkg/scheduler/apis/config/scheme/scheme.go:29"')


async def test_scheduler_runs_every_configured_profile():
    from nanokube.scheduler.scheduler import Scheduler
    from tests.controllers import eventually, make_stack
    from tests.scheduler.test_scheduler import add_node, bound, strip_uid

    s = await make_stack()
    c = cfg(podInitialBackoffSeconds=3, podMaxBackoffSeconds=30, profiles=[
        {"schedulerName": "default-scheduler"},
        {"schedulerName": "packer", "pluginConfig": [
            {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}]}])
    for n in (node("busy", "4", "8Gi"), node("idle", "4", "8Gi")):
        await add_node(s.client, n)
    sched = Scheduler(s.client, seed=1, config=c)
    await sched.start()
    try:
        assert set(sched.frameworks) == {"default-scheduler", "packer"}
        assert (sched.queue.initial_backoff, sched.queue.max_backoff) == (3.0, 30.0)
        pods = s.client.resource("", "v1", "pods")
        await pods.create(strip_uid(pod("first", "2", "4Gi", nodeName="busy")))
        await pods.create(strip_uid(pod("packed", "1", "1Gi", schedulerName="packer")))
        assert await eventually(bound(pods, "packed")) == "busy"
    finally:
        await sched.stop()
        await s.close()


def test_leader_election_section_defaults_durations_and_upstream_checks():
    le = cfg().leader_election
    assert (le.leader_elect, le.lease_duration, le.renew_deadline, le.retry_period) == (True, 15.0, 10.0, 2.0)
    assert (le.resource_namespace, le.resource_name) == ("kube-system", "kube-scheduler")
    le = cfg(leaderElection={"leaseDuration": "1m30s", "renewDeadline": "45s", "retryPeriod": "500ms",
                             "resourceName": "batch-scheduler"}).leader_election
    assert (le.lease_duration, le.renew_deadline, le.retry_period, le.resource_name) == (90.0, 45.0, 0.5,
                                                                                         "batch-scheduler")
    assert error(leaderElection={"leaseDuration": "5s"}) == \
        'leaderElection.leaseDuration: Invalid value: "10s": LeaseDuration must be greater than RenewDeadline'
    assert error(leaderElection={"retryPeriod": "0s"}) == \
        'leaderElection.retryPeriod: Invalid value: "0s": must be greater than zero'
    assert error(leaderElection={"resourceLock": "endpoints"}) == \
        'leaderElection.resourceLock: Unsupported value: "endpoints": supported values: "leases"'
    assert error(leaderElection={"resourceLock": 'end"points\t'}) == \
        'leaderElection.resourceLock: Unsupported value: "end\\"points\\t": supported values: "leases"'  # %q
    # (a metav1.Duration parses itself as it decodes: its error ends the decoding)
    assert error(leaderElection={"leaseDuration": "fifteen"}) == 'time: invalid duration "fifteen"'
    assert error(leaderElection={"leaderElect": True, "lease": "15s"}) == \
        'strict decoding error: unknown field "leaderElection.lease"'
    assert cfg(leaderElection={"leaderElect": False, "leaseDuration": "1s"}).leader_election.leader_elect is False


def test_volume_binding_args_default_and_validate():
    from nanokube.scheduler.config import ConfigError, parse

    def cfg(args):
        return {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                "profiles": [{"schedulerName": "default-scheduler",
                              "pluginConfig": [{"name": "VolumeBinding", "args": args}]}]}

    assert parse(cfg({})).profiles[0].args["VolumeBinding"] == {"bindTimeoutSeconds": 600}
    with pytest.raises(ConfigError) as e:
        parse(cfg({"bindTimeoutSeconds": -1}))
    assert str(e.value) == ("profiles[0].pluginConfig[0].args.bindTimeoutSeconds: Invalid value: -1: invalid "
                            "BindTimeoutSeconds, should not be a negative value")
