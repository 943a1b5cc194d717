import argparse

import pytest
import yaml

from nanokube.cli import main
from nanokube.cli_proxy import address


@pytest.mark.parametrize(("value", "written"), [("1m30s", "1m30s"), ("500ms", "500ms"), ("2h", "2h0m0s")])
def test_sync_period_takes_a_go_duration(tmp_path, value, written):
    out = tmp_path / "written.yaml"
    assert main(["proxy", "--proxy-mode", "nftables", "--sync-period", value, "--min-sync-period", "0s",
                 "--write-config-to", str(out)]) == 0
    assert yaml.safe_load(out.read_text())["nftables"]["syncPeriod"] == written


@pytest.mark.parametrize(("bad", "error"), [("2", 'time: missing unit in duration "2"'),
                                            ("10x", 'time: unknown unit "x" in duration "10x"'),
                                            ("", 'time: invalid duration ""')])
def test_bad_durations_are_refused_in_gos_words(capsys, bad, error):
    with pytest.raises(SystemExit) as exited:
        main(["proxy", "--proxy-mode", "nftables", "--min-sync-period", bad])
    assert exited.value.code == 2
    assert error in capsys.readouterr().err


def test_addresses_need_a_port_and_empty_disables():
    assert address("") == ""
    assert address("0.0.0.0:10256") == "0.0.0.0:10256"
    with pytest.raises(argparse.ArgumentTypeError, match="HOST:PORT"):
        address("localhost")


def test_ipvs_is_refused_before_connecting(capsys):
    assert main(["proxy", "--kubeconfig", "/nonexistent", "--proxy-mode", "ipvs"]) == 2
    assert "ipvs proxy mode is deprecated" in capsys.readouterr().err


def test_an_unreadable_kubeconfig_fails_cleanly(tmp_path, capsys):
    assert main(["proxy", "--kubeconfig", str(tmp_path / "missing"), "--proxy-mode", "nftables"]) == 1
    assert f"nanokube proxy: kubeconfig {tmp_path / 'missing'} does not exist" in capsys.readouterr().err


@pytest.mark.parametrize(("flags", "error"), [
    (["--detect-local-mode", "Pods"], 'KubeProxyConfiguration.DetectLocalMode: Unsupported value: "Pods": supported '
                                      'values: "ClusterCIDR", "NodeCIDR", "BridgeInterface", "InterfaceNamePrefix", ""'),
    (["--detect-local-mode", "BridgeInterface"],
     'KubeProxyConfiguration.DetectLocal.InterfaceName: Invalid value: "": must not be empty'),
    (["--detect-local-mode", "InterfaceNamePrefix"],
     'KubeProxyConfiguration.DetectLocal.InterfacePrefix: Invalid value: "": must not be empty'),
    (["--cluster-cidr", "10.244.0.0/16,10.245.0.0/16"],
     'KubeProxyConfiguration.DetectLocal.ClusterCIDRs: Invalid value: ["10.244.0.0/16","10.245.0.0/16"]: must be a '
     'either a single CIDR or dual-stack pair of CIDRs (e.g. [10.100.0.0/16, fde4:8dba:82e1::/48]'),
    (["--cluster-cidr", "10.244.0.0"], 'KubeProxyConfiguration.DetectLocal.ClusterCIDRs[0]: Invalid value: '
                                       '"10.244.0.0": must be a valid CIDR block (e.g. 10.100.0.0/16 or fde4:8dba:82e1::/48)'),
])
def test_bad_local_detector_flags_are_refused_with_upstreams_validation_errors(flags, error, capsys):
    """Checked before the kubeconfig is read, as upstream validates its configuration first."""
    assert main(["proxy", "--kubeconfig", "/nonexistent", "--proxy-mode", "nftables", *flags]) == 2
    assert capsys.readouterr().err == f"nanokube proxy: failed validate: {error}\n"


def test_cluster_cidr_is_not_checked_in_another_mode(tmp_path, capsys):
    """Upstream validates the cluster CIDRs only for ClusterCIDR mode: this run gets as far as the kubeconfig."""
    assert main(["proxy", "--kubeconfig", str(tmp_path / "missing"), "--proxy-mode", "nftables",
                 "--detect-local-mode", "NodeCIDR", "--cluster-cidr", "nonsense"]) == 1
    assert "does not exist" in capsys.readouterr().err


# --- --config and --write-config-to (KubeProxyConfiguration, kubeproxy.config.k8s.io/v1alpha1) ---

def _config(tmp_path, text: str) -> str:
    path = tmp_path / "kube-proxy.yaml"
    path.write_text(text)
    return str(path)


HEAD = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"


def test_write_config_to_writes_the_flags_configuration_defaulted_as_v1alpha1(tmp_path):
    out = tmp_path / "written.yaml"
    assert main(["proxy", "--proxy-mode", "nftables", "--cluster-cidr", "10.244.0.0/16", "--min-sync-period", "250ms",
                 "--masquerade-all", "--metrics-bind-address", "0.0.0.0:10249", "--hostname-override", "Node-A",
                 "--write-config-to", str(out)]) == 0
    doc = yaml.safe_load(out.read_text())
    assert (doc["apiVersion"], doc["kind"], doc["mode"]) == ("kubeproxy.config.k8s.io/v1alpha1",
                                                             "KubeProxyConfiguration", "nftables")
    assert doc["nftables"] == {"masqueradeAll": True, "masqueradeBit": 14, "minSyncPeriod": "250ms",
                               "syncPeriod": "30s"}
    assert (doc["clusterCIDR"], doc["detectLocalMode"], doc["hostnameOverride"]) == ("10.244.0.0/16", "ClusterCIDR",
                                                                                      "node-a")
    assert (doc["healthzBindAddress"], doc["metricsBindAddress"], doc["bindAddress"]) == (
        "0.0.0.0:10256", "0.0.0.0:10249", "0.0.0.0")
    assert doc["configSyncPeriod"] == "15m0s" and doc["conntrack"]["tcpEstablishedTimeout"] == "24h0m0s"
    assert doc["nodePortAddresses"] == ["primary"], "the nftables mode's default (upstream's platformApplyDefaults)"
    assert doc["clientConnection"] == {"acceptContentTypes": "", "burst": 10, "contentType":
                                       "application/vnd.kubernetes.protobuf", "kubeconfig": "", "qps": 5}
    again = tmp_path / "again.yaml"  # the file read back with --config writes the same configuration
    assert main(["proxy", "--config", str(out), "--write-config-to", str(again)]) == 0
    assert again.read_text() == out.read_text()


def test_a_config_file_is_defaulted_and_its_modes_section_taken(tmp_path):
    path = _config(tmp_path, HEAD + "mode: nftables\nbindAddress: 10.0.0.5\nmetricsBindAddress: 127.0.0.1\n"
                               "iptables: {syncPeriod: 5s}\nnftables: {syncPeriod: 1m, masqueradeAll: true}\n"
                               "detectLocalMode: BridgeInterface\ndetectLocal: {bridgeInterface: cbr0}\n")
    out = tmp_path / "out.yaml"
    assert main(["proxy", "--config", path, "--write-config-to", str(out)]) == 0
    doc = yaml.safe_load(out.read_text())
    assert doc["nftables"] == {"masqueradeAll": True, "masqueradeBit": 14, "minSyncPeriod": "1s", "syncPeriod": "1m0s"}
    assert doc["metricsBindAddress"] == "127.0.0.1:10249" and doc["healthzBindAddress"] == "0.0.0.0:10256"
    assert (doc["detectLocalMode"], doc["detectLocal"]["bridgeInterface"]) == ("BridgeInterface", "cbr0")


def test_a_null_section_or_field_is_gos_zero_value_then_defaulted(tmp_path):
    """fuzz62: `nftables: null` was None.setdefault, a traceback; Go decodes it as the zero section."""
    path = _config(tmp_path, HEAD + "mode: nftables\nnftables: null\nconntrack: {min: null}\nnodePortAddresses: null\n")
    out = tmp_path / "out.yaml"
    assert main(["proxy", "--config", path, "--write-config-to", str(out)]) == 0
    doc = yaml.safe_load(out.read_text())
    assert doc["nftables"] == {"masqueradeAll": False, "masqueradeBit": 14, "minSyncPeriod": "1s", "syncPeriod": "30s"}
    assert doc["conntrack"]["min"] == 131072


def test_write_config_to_writes_the_files_other_fields_back(tmp_path):
    """As kube-proxy encodes the configuration it loaded: the fields nanokube only carries come back
    as the file has them; the other modes' sync periods and masqueradeAll, which its internal
    configuration holds once (the mode's), come back zero."""
    path = _config(tmp_path, HEAD + "mode: nftables\noomScoreAdj: -500\nnodePortAddresses: [primary]\n"
                               "iptables: {syncPeriod: 5s, minSyncPeriod: 2s, masqueradeAll: true, masqueradeBit: 15, "
                               "localhostNodePorts: false}\nipvs: {scheduler: rr, syncPeriod: 7s, strictARP: true}\n"
                               "nftables: {masqueradeBit: 13}\nconntrack: {min: 5, maxPerCore: 0}\n"
                               "featureGates: {EnvFiles: true}\nnotAField: 1\n")
    out = tmp_path / "out.yaml"
    assert main(["proxy", "--config", path, "--write-config-to", str(out)]) == 0
    doc = yaml.safe_load(out.read_text())
    assert doc["iptables"] == {"localhostNodePorts": False, "masqueradeAll": False, "masqueradeBit": 15,
                               "minSyncPeriod": "0s", "syncPeriod": "0s"}
    assert doc["ipvs"] == {"minSyncPeriod": "0s", "scheduler": "rr", "strictARP": True, "syncPeriod": "0s"}
    assert doc["nftables"] == {"masqueradeAll": False, "masqueradeBit": 13, "minSyncPeriod": "1s", "syncPeriod": "30s"}
    assert (doc["conntrack"]["min"], doc["conntrack"]["maxPerCore"], doc["conntrack"]["tcpCloseWaitTimeout"]) == (
        5, 0, "1h0m0s")
    assert (doc["oomScoreAdj"], doc["nodePortAddresses"], doc["featureGates"]) == (-500, ["primary"],
                                                                                   {"EnvFiles": True})
    assert "notAField" not in doc
    again = tmp_path / "again.yaml"  # read back, the same file again
    assert main(["proxy", "--config", str(out), "--write-config-to", str(again)]) == 0
    assert again.read_text() == out.read_text()


def test_the_client_limit_comes_from_the_flags_or_the_file_defaulted(tmp_path):
    """clientConnection.qps/burst (--kube-api-qps/--kube-api-burst): what the proxy's client is limited to."""
    out = tmp_path / "out.yaml"
    assert main(["proxy", "--kube-api-qps", "2.5", "--kube-api-burst", "4", "--write-config-to", str(out)]) == 0
    assert {k: v for k, v in yaml.safe_load(out.read_text())["clientConnection"].items() if k in ("qps", "burst")} \
        == {"qps": 2.5, "burst": 4}
    # a zero takes the default, as v1alpha1's defaulting has it
    path = _config(tmp_path, HEAD + "clientConnection: {qps: 50, burst: 0}\n")
    assert main(["proxy", "--config", path, "--write-config-to", str(out)]) == 0
    assert {k: v for k, v in yaml.safe_load(out.read_text())["clientConnection"].items() if k in ("qps", "burst")} \
        == {"qps": 50, "burst": 10}


def test_a_qps_without_a_burst_is_refused_as_client_go_refuses_it(capsys):
    assert main(["proxy", "--kube-api-qps", "5", "--kube-api-burst", "0", "--kubeconfig", "/nonexistent"]) == 2
    assert capsys.readouterr().err == ("nanokube proxy: burst is required to be greater than 0 when RateLimiter is "
                                       "not set and QPS is set to greater than 0\n")


@pytest.mark.parametrize(("body", "error"), [
    # a null address is Go's "" (it said `cannot unmarshal string into ... of type string`)
    ("nodePortAddresses: [null]\n", 'KubeProxyConfiguration.NodePortAddresses[0]: Invalid value: "": must be a valid CIDR'),
    ("clientConnection: {burst: -1}\n",
     "KubeProxyConfiguration.ClientConnection.Burst: Invalid value: -1: must be greater than or equal to 0"),
    ("mode: nftables\nnftables: {syncPeriod: 5s, minSyncPeriod: 10s}\n",
     "KubeProxyConfiguration.SyncPeriod: Invalid value: 10s: must be greater than or equal to "
     "KubeProxyConfiguration.MinSyncPeriod"),
    ("bindAddress: 10.0.0.1:80\n",
     'KubeProxyConfiguration.BindAddress: Invalid value: "10.0.0.1:80": not a valid textual representation of an '
     "IP address"),
    ("healthzBindAddress: localhost:10256\nmetricsBindAddress: 127.0.0.1:99999\n",
     '[KubeProxyConfiguration.HealthzBindAddress: Invalid value: "localhost": must be a valid IP, '
     'KubeProxyConfiguration.MetricsBindAddress: Invalid value: "99999": must be a valid port]'),
    ("detectLocalMode: Pods\n", 'KubeProxyConfiguration.DetectLocalMode: Unsupported value: "Pods": supported '
                                'values: "ClusterCIDR", "NodeCIDR", "BridgeInterface", "InterfaceNamePrefix", ""'),
    ("clusterCIDR: 10.244.0.0\n", 'KubeProxyConfiguration.DetectLocal.ClusterCIDRs[0]: Invalid value: '
                                  '"10.244.0.0": must be a valid CIDR block (e.g. 10.100.0.0/16 or fde4:8dba:82e1::/48)'),
    ("nodePortAddresses: [10.0.0.0/8, 10.0.0.1, fd00::/64]\n",
     'KubeProxyConfiguration.NodePortAddresses[1]: Invalid value: "10.0.0.1": must be a valid CIDR'),
    ("nodePortAddresses: [10.0.0.0/8, primary]\n",
     "KubeProxyConfiguration.NodePortAddresses[1]: Invalid value: \"primary\": can't use both 'primary' and CIDRs"),
])
def test_bad_values_in_a_config_file_are_refused_with_upstreams_validation_errors(tmp_path, capsys, body, error):
    assert main(["proxy", "--config", _config(tmp_path, HEAD + body), "--kubeconfig", "/nonexistent"]) == 2
    assert capsys.readouterr().err == f"nanokube proxy: failed validate: {error}\n"


@pytest.mark.parametrize(("text", "error"), [
    (None, "open {path}: no such file or directory"),
    ("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeletConfiguration\n",
     'failed to decode: no kind "KubeletConfiguration" is registered for version "kubeproxy.config.k8s.io/v1alpha1"'),
    (HEAD + "nftables: {syncPeriod: 30}\n", "failed to decode: json: cannot unmarshal number into Go struct field "
                                         "KubeProxyNFTablesConfiguration.nftables.syncPeriod of type string"),
    # (fuzz62: a field of another JSON type outside the sections checked before was a traceback)
    (HEAD + "conntrack: {min: {a: 1}}\n", "failed to decode: json: cannot unmarshal object into Go struct field "
                                          "KubeProxyConntrackConfiguration.conntrack.min of type int32"),
    (HEAD + "nftables: {syncPeriod: 30x}\n", 'failed to decode: time: unknown unit "x" in duration "30x"'),
    # a section of another type, and a document that is no object: encoding/json's type names, as the kubelet's
    (HEAD + "iptables: fast\n", "failed to decode: json: cannot unmarshal string into Go struct field "
                                "KubeProxyConfiguration.iptables of type v1alpha1.KubeProxyIPTablesConfiguration"),
    ("- 1\n", "failed to decode: couldn't get version/kind; json parse error: json: cannot unmarshal array into "
              "Go value of type struct {{ APIVersion string"),
    ("", "failed to decode: Object 'Kind' is missing in ''"),
    (HEAD + "clientConnection: {qps: fast}\n", "failed to decode: json: cannot unmarshal string into Go struct "
                                               "field ClientConnectionConfiguration.clientConnection.qps of type float32"),
    (HEAD + "nodePortAddresses: [1]\n", "failed to decode: json: cannot unmarshal number into Go struct "
                                      "field KubeProxyConfiguration.nodePortAddresses of type string"),
    (HEAD + "clientConnection: {burst: 1.5}\n", "failed to decode: json: cannot unmarshal number 1.5 into Go "
                                                 "struct field ClientConnectionConfiguration.clientConnection.burst of type int32"),
    (HEAD + "nodePortAddresses: primary\n", "failed to decode: json: cannot unmarshal string into Go struct "
                                            "field KubeProxyConfiguration.nodePortAddresses of type []string"),
])
def test_a_config_file_that_does_not_decode_is_refused(tmp_path, capsys, text, error):
    path = str(tmp_path / "kube-proxy.yaml") if text is None else _config(tmp_path, text)
    assert main(["proxy", "--config", path]) == 2
    assert capsys.readouterr().err.startswith(f"nanokube proxy: failed complete: {error.format(path=path)}")


def test_with_config_the_flags_are_ignored_but_hostname_override(tmp_path, capsys, caplog):
    """As kube-proxy: the file is the configuration (a bad --detect-local-mode is not even looked at,
    its clientConnection.kubeconfig is used over --kubeconfig); --hostname-override wins over the
    file's hostnameOverride; a warning names the flags ignored."""
    path = _config(tmp_path, HEAD + "hostnameOverride: from-file\nclientConnection: {kubeconfig: /from-file}\n"
                                    "clusterCIDR: 10.244.0.0/16\n")
    assert main(["proxy", "--config", path, "--kubeconfig", "/from-flag", "--detect-local-mode", "Pods",
                 "--cluster-cidr", "nonsense"]) == 1
    err = capsys.readouterr().err  # (the warning goes to the component's log handler, on stderr)
    assert "kubeconfig /from-file does not exist" in err
    assert "flags ignored as --config is given (the file's settings are used): --detect-local-mode, --cluster-cidr" \
        in caplog.text + err
    out = tmp_path / "out.yaml"
    assert main(["proxy", "--config", path, "--hostname-override", "From-Flag", "--write-config-to", str(out)]) == 0
    doc = yaml.safe_load(out.read_text())
    assert (doc["hostnameOverride"], doc["clusterCIDR"]) == ("from-flag", "10.244.0.0/16")
    assert main(["proxy", "--config", path, "--hostname-override", "  "]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == "nanokube proxy: failed complete: empty hostname-override is invalid"


def test_unknown_fields_in_a_config_file_are_decoded_leniently_with_a_warning(tmp_path, caplog, capsys):
    out = tmp_path / "out.yaml"
    path = _config(tmp_path, HEAD + "mode: nftables\nnotAField: 1\n")
    assert main(["proxy", "--config", path, "--write-config-to", str(out)]) == 0
    assert 'strict decoding error: unknown field "notAField"' in caplog.text + capsys.readouterr().err
    assert "notAField" not in out.read_text()


def test_a_repeated_key_in_a_config_file_is_warned_of_and_the_later_one_wins(tmp_path, caplog, capsys):
    """kube-proxy's strict decoding lists it in go-yaml's words; its lenient fallback takes the later value."""
    out = tmp_path / "out.yaml"
    path = _config(tmp_path, HEAD + "mode: iptables\nmode: nftables\n")
    assert main(["proxy", "--config", path, "--write-config-to", str(out)]) == 0
    logged = caplog.text + capsys.readouterr().err  # (the warning goes to the component's log handler)
    assert ("Using lenient decoding as strict decoding failed: err=strict decoding error: error converting YAML to "
            'JSON: yaml: unmarshal errors:\n  line 4: key "mode" already set in map') in logged
    assert yaml.safe_load(out.read_text())["mode"] == "nftables"


def test_nodeport_addresses_come_from_the_flag_or_the_file_primary_alone(tmp_path, capsys):
    """--nodeport-addresses (a comma-separated list) is the file's nodePortAddresses; `primary`
    goes alone, as upstream validates it."""
    out = tmp_path / "out.yaml"
    assert main(["proxy", "--nodeport-addresses", "10.0.0.0/8,fd00::/64", "--write-config-to", str(out)]) == 0
    assert yaml.safe_load(out.read_text())["nodePortAddresses"] == ["10.0.0.0/8", "fd00::/64"]
    path = _config(tmp_path, HEAD + "nodePortAddresses: [192.0.2.0/24]\n")
    assert main(["proxy", "--config", path, "--write-config-to", str(out)]) == 0
    assert yaml.safe_load(out.read_text())["nodePortAddresses"] == ["192.0.2.0/24"]
    assert main(["proxy", "--nodeport-addresses", "primary,10.0.0.0/8", "--kubeconfig", "/nonexistent"]) == 2
    # (the earlier runs' log lines come first on stderr)
    assert capsys.readouterr().err.splitlines()[-1] == (
        "nanokube proxy: failed validate: KubeProxyConfiguration.NodePortAddresses[0]: "
        "Invalid value: \"primary\": can't use both 'primary' and CIDRs")


@pytest.fixture
def own_gates(monkeypatch):
    """The process's feature gates, fresh for the test and put back after it (main() sets them)."""
    from nanokube.machinery import featuregates

    monkeypatch.setattr(featuregates, "GATES", featuregates.FeatureGates(featuregates.NANOKUBE_DEFAULTS))
    return featuregates


@pytest.mark.parametrize(("value", "error"), [
    ("Foo=true", "failed complete: unrecognized feature gate: Foo"),
    ("GenericWorkload", 'invalid argument "GenericWorkload" for "--feature-gates" flag: missing bool value for '
                        "GenericWorkload"),
])
def test_bad_feature_gates_are_refused_before_connecting(own_gates, capsys, value, error):
    assert main(["proxy", "--kubeconfig", "/nonexistent", "--proxy-mode", "nftables", "--feature-gates", value]) == 2
    assert capsys.readouterr().err == f"nanokube proxy: {error}\n"


def test_feature_gates_come_from_the_flag_or_the_files_feature_gates_and_are_written_back(own_gates, tmp_path):
    out = tmp_path / "written.yaml"
    assert main(["proxy", "--proxy-mode", "nftables", "--feature-gates", "GenericWorkload=false",
                 "--write-config-to", str(out)]) == 0
    assert yaml.safe_load(out.read_text())["featureGates"] == {"GenericWorkload": False}
    assert not own_gates.enabled("GenericWorkload")
    own_gates.GATES.set("GenericWorkload=true")
    again = tmp_path / "again.yaml"
    assert main(["proxy", "--config", str(out), "--write-config-to", str(again)]) == 0
    assert again.read_text() == out.read_text() and not own_gates.enabled("GenericWorkload")


async def test_kube_proxys_metrics_report_the_feature_gates(own_gates):
    from aiohttp.test_utils import TestClient, TestServer
    from prometheus_client import CollectorRegistry

    from nanokube.proxy.server import metrics_app

    own_gates.GATES.set("CompositePodGroup=false")
    async with TestClient(TestServer(metrics_app(CollectorRegistry(), "nftables"))) as http:
        text = await (await http.get("/metrics")).text()
    assert 'kubernetes_feature_enabled{name="CompositePodGroup",stage="ALPHA"} 0\n' in text
    assert 'kubernetes_feature_enabled{name="GenericWorkload",stage="BETA"} 1\n' in text
