"""Feature gates as component-base's featuregate parses and reports them: --feature-gates'
errors and warnings word for word, AllAlpha/AllBeta, nanokube's defaults on top of 1.37's, the
kubernetes_feature_enabled gauge a standalone component's /metrics serves, and a standalone
component refusing a bad flag before it starts."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry

from nanokube import component_server
from nanokube.machinery import featuregates
from nanokube.machinery.featuregates import (ALL_ALPHA, ALL_BETA, ALPHA, HONOURED, KNOWN, NANOKUBE_DEFAULTS, NOT_IMPLEMENTED,
                                             FeatureGates)
from tests.test_component_server import AllowAll


def test_upstream_defaults_and_nanokubes():
    upstream, nanokube = FeatureGates(), FeatureGates(NANOKUBE_DEFAULTS)
    assert upstream.enabled("GenericWorkload") and not upstream.enabled("CompositePodGroup")
    assert not upstream.enabled("DRAResourcePoolStatus") and upstream.enabled("DRADeviceBindingConditions")
    assert nanokube.enabled("CompositePodGroup") and nanokube.enabled("WorkloadWithJob")
    assert nanokube.overridden() == ",".join(f"{n}=true" for n in sorted(NANOKUBE_DEFAULTS))
    assert all(KNOWN[n].stage == "ALPHA" for n in NANOKUBE_DEFAULTS)
    assert not nanokube.enabled("DRAResourceSliceMixins"), "a feature nanokube has not stays off"


def test_set_parses_as_featuregate_set():
    gates = FeatureGates()
    assert gates.set(" CompositePodGroup = true ,,GenericWorkload=F") == []
    assert gates.enabled("CompositePodGroup") and not gates.enabled("GenericWorkload")
    assert gates.overridden() == "CompositePodGroup=true,GenericWorkload=false"


@pytest.mark.parametrize("value, error", [
    ("Foo=true", "unrecognized feature gate: Foo"),
    ("GenericWorkload", "missing bool value for GenericWorkload"),
    ("GenericWorkload=yes", 'invalid value of GenericWorkload=yes, err: strconv.ParseBool: parsing "yes": invalid syntax'),
    ("DynamicResourceAllocation=false", "cannot set feature gate DynamicResourceAllocation to false, feature is locked to true"),
])
def test_refusals_word_upstreams_errors_and_change_nothing(value, error):
    gates = FeatureGates()
    with pytest.raises(ValueError) as e:
        gates.set(f"CompositePodGroup=true,{value}")
    assert str(e.value) == error
    assert not gates.enabled("CompositePodGroup")


def test_several_locked_gates_are_one_aggregate_error():
    with pytest.raises(ValueError) as e:
        FeatureGates().set("DRAAdminAccess=false,PodCertificateRequest=false")
    assert str(e.value) == ("[cannot set feature gate DRAAdminAccess to false, feature is locked to true, "
                            "cannot set feature gate PodCertificateRequest to false, feature is locked to true]")


def test_a_ga_gate_set_to_its_value_warns():
    assert FeatureGates().set("DRAAdminAccess=true") == [
        "Setting GA feature gate DRAAdminAccess=true. It will be removed in a future release."]


def test_kube_proxys_deprecated_ipvs_gate_is_known_on_and_warned_of():
    """1.37 adds KubeProxyIPVS (deprecated, default true) for the ipvs mode's removal (KEP-5495): a
    production kube-proxy's --feature-gates naming it must be taken, with the deprecation warning."""
    gates = FeatureGates()
    assert gates.enabled("KubeProxyIPVS")
    assert gates.set("KubeProxyIPVS=false") == [
        "Setting deprecated feature gate KubeProxyIPVS=false. It will be removed in a future release."]
    assert not gates.enabled("KubeProxyIPVS")


def test_all_alpha_and_all_beta_set_every_gate_of_their_stage_not_named_beside_them():
    gates = FeatureGates(NANOKUBE_DEFAULTS)
    gates.set("AllAlpha=false,WorkloadWithJob=true,AllBeta=false")
    assert not gates.enabled("CompositePodGroup") and not gates.enabled("DRAResourcePoolStatus")
    assert gates.enabled("WorkloadWithJob") and gates.enabled("AllAlpha") is False
    assert not gates.enabled("GenericWorkload") and not gates.enabled("HPAScaleToZero")
    assert gates.enabled("DynamicResourceAllocation"), "GA gates keep their value"


async def test_a_standalone_components_metrics_report_every_gate():
    saved = featuregates.GATES
    featuregates.GATES = FeatureGates(NANOKUBE_DEFAULTS)
    try:
        featuregates.set_flag("GenericWorkload=false")
        app = component_server.app(component_server.DelegatedAuth(AllowAll()), CollectorRegistry(), {}, list, list, list)
        async with TestClient(TestServer(app)) as http:
            text = await (await http.get("/metrics")).text()
    finally:
        featuregates.GATES = saved
    assert "# TYPE kubernetes_feature_enabled gauge\n" in text
    assert 'kubernetes_feature_enabled{name="GenericWorkload",stage="BETA"} 0\n' in text
    assert 'kubernetes_feature_enabled{name="CompositePodGroup",stage="ALPHA"} 1\n' in text
    assert 'kubernetes_feature_enabled{name="DynamicResourceAllocation",stage=""} 1\n' in text
    assert 'kubernetes_feature_enabled{name="AllAlpha",stage="ALPHA"} 0\n' in text
    assert text.count("kubernetes_feature_enabled{") == len(KNOWN)


@pytest.mark.parametrize("command", ["scheduler", "controller-manager"])
def test_a_standalone_component_refuses_a_bad_gate_before_it_starts(command, tmp_path):
    r = subprocess.run([sys.executable, "-m", "nanokube.cli", command, "--kubeconfig", str(tmp_path / "none"),
                        "--feature-gates", "GenericWorkload=true,Gang=true"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.strip().endswith(f'nanokube {command}: invalid argument "GenericWorkload=true,Gang=true" for '
                                     '"--feature-gates" flag: unrecognized feature gate: Gang')


def test_the_flag_warns_of_gates_nanokube_does_not_switch_yet():
    saved = featuregates.GATES
    featuregates.GATES = FeatureGates(NANOKUBE_DEFAULTS)
    try:
        warned = featuregates.set_flag("EnvFiles=false,DRAAdminAccess=true,AllBeta=true,DRAResourceSliceMixins=true")
    finally:
        featuregates.GATES = saved
    assert warned == ["Setting GA feature gate DRAAdminAccess=true. It will be removed in a future release.",
                      "nanokube does not implement these features: DRAResourceSliceMixins",
                      "nanokube does not switch these features by their gate yet: EnvFiles"]


@pytest.mark.parametrize("value, absent, inert", [
    ("AllAlpha=true", sorted(n for n in NOT_IMPLEMENTED if KNOWN[n].stage == ALPHA), []),
    ("AllBeta=false,DRAConsumableCapacity=true", [],
     ["ClearingNominatedNodeNameAfterBinding", "ContainerRestartRules", "DRAConsumableCapacity",
      "DRAPartitionableDevices", "DRASchedulerFilterTimeout", "EnvFiles", "InPlacePodLevelResourcesVerticalScaling"]),
])
def test_the_gates_a_meta_gate_switches_are_warned_of_as_if_named(value, absent, inert):
    """AllAlpha turns on the alpha gates of features nanokube has not, AllBeta=false turns off beta gates
    it does not switch yet: each is named in the warnings, as when the flag names it."""
    saved = featuregates.GATES
    featuregates.GATES = FeatureGates(NANOKUBE_DEFAULTS)
    try:
        warned = featuregates.set_flag(value)
    finally:
        featuregates.GATES = saved
    assert warned == ([f"nanokube does not implement these features: {', '.join(absent)}"] if absent else []) + (
        [f"nanokube does not switch these features by their gate yet: {', '.join(inert)}"] if inert else [])


def test_the_readme_lists_every_gate_nanokube_does_not_switch_yet():
    """No gate accepted and ignored without the README saying so, nor one listed that switches now."""
    text = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    def listed(heading: str) -> set[str]:
        return set(re.findall(r"`(\w+)`", text.split(heading, 1)[1].split("\n- ", 1)[0]))
    inert = {n for n, s in KNOWN.items() if n not in HONOURED and not s.locked and n not in (ALL_ALPHA, ALL_BETA)}
    assert listed("**Accepted and reported, not switched yet**") == inert - NOT_IMPLEMENTED
    assert listed("**Features nanokube does not implement**") == NOT_IMPLEMENTED
