"""`nanokube kubelet --config` and --node-labels: a KubeletConfiguration the kubelet would not start
with is refused before it dials anything, in the kubelet's words (the file unread, empty, not
v1beta1's kind, a field of the wrong type, a value validation refuses, one a flag given overrides),
and so are node labels it may not set; through cli.main in-process, as the command line runs it."""

from __future__ import annotations

import os

import pytest

from nanokube.cli import main

HEAD = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"


def _refusal(tmp_path, capsys, text: str | None, *flags: str) -> str:
    path = tmp_path / "config.yaml"
    if text is not None:
        path.write_text(text)
    code = main(["kubelet", "--kubeconfig", str(tmp_path / "never.conf"), "--config", str(path), *flags])
    err = capsys.readouterr().err
    assert code == 2, err
    assert not (tmp_path / "never.conf").exists()
    return err


@pytest.mark.parametrize("text, flags, error", [
    (None, (), 'failed to read kubelet config file "{path}", error: open {path}: no such file or directory'),
    ("", (), 'kubelet config file "{path}" was empty'),
    ("apiVersion: kubelet.config.k8s.io/v1\nkind: KubeletConfiguration\n", (),
     'failed to decode: no kind "KubeletConfiguration" is registered for version "kubelet.config.k8s.io/v1" in '
     'scheme "pkg/kubelet/apis/config/scheme/scheme.go:34"'),
    (HEAD + "port: \"10250\"\n", (),
     "failed to decode: json: cannot unmarshal string into Go struct field KubeletConfiguration.port of type int32"),
    (HEAD + "authentication:\n  anonymous:\n    enabled: \"no\"\n", (),
     "failed to decode: json: cannot unmarshal string into Go struct field "
     "KubeletAnonymousAuthentication.authentication.anonymous.enabled of type bool"),
    # fields nanokube only carries are typed as upstream's: each Go type and innermost struct named
    (HEAD + "podPidsLimit: lots\n", (),
     "failed to decode: json: cannot unmarshal string into Go struct field KubeletConfiguration.podPidsLimit of type "
     "int64"),
    (HEAD + "registerWithTaints:\n- key: a\n  effect: 5\n", (),
     "failed to decode: json: cannot unmarshal number into Go struct field Taint.registerWithTaints.effect of type "
     "v1.TaintEffect"),
    (HEAD + "authentication:\n  webhook:\n    cacheTTL: soon\n", (), 'failed to decode: time: invalid duration "soon"'),
    (HEAD + "shutdownGracePeriod: 30\n", (),
     "failed to decode: json: cannot unmarshal number into Go struct field KubeletConfiguration.shutdownGracePeriod "
     "of type string"),
    (HEAD + "reservedMemory:\n- numaNode: 0\n  limits:\n    memory: 1Gb\n", (),
     "failed to decode: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"),
    (HEAD + "fileCheckFrequency: 20\n", (),
     "failed to decode: json: cannot unmarshal number into Go struct field KubeletConfiguration.fileCheckFrequency "
     "of type string"),
    (HEAD + "fileCheckFrequency: soon\n", (), 'failed to decode: time: invalid duration "soon"'),
    (HEAD + "featureGates:\n  NodeSwap: 1\n", (),
     "failed to decode: json: cannot unmarshal number into Go struct field KubeletConfiguration.featureGates of "
     "type bool"),
])
def test_a_file_the_kubelet_cannot_load_is_refused(tmp_path, capsys, text, flags, error):
    path = os.path.abspath(tmp_path / "config.yaml")
    err = _refusal(tmp_path, capsys, text, *flags)
    assert err.splitlines() == [f"nanokube kubelet: failed to load kubelet config file, path: {tmp_path}/config.yaml, "
                                f"error: failed to load Kubelet config file {tmp_path}/config.yaml, error "
                                + error.format(path=path)]


def test_the_merged_configuration_is_validated_a_flag_given_winning(tmp_path, capsys):
    err = _refusal(tmp_path, capsys, HEAD + "port: 70000\nmaxPods: -1\n")
    assert err.splitlines() == ["nanokube kubelet: failed to validate kubelet configuration, error: [invalid "
                                "configuration: maxPods (--max-pods) -1 must not be a negative number, invalid "
                                "configuration: port (--port) 70000 must be between 1 and 65535, inclusive]"]
    # the flag over the file's valid port; the file's maxPods over the flags' default
    err = _refusal(tmp_path, capsys, HEAD + "port: 10250\nreadOnlyPort: 10255\n", "--port", "0", "--read-only-port",
                   "65536")
    assert err.splitlines() == [f"Flag --{flag} has been deprecated, This parameter should be set via the config "
                                "file specified by the Kubelet's --config flag. See https://kubernetes.io/docs/tasks/"
                                "administer-cluster/kubelet-config-file/ for more information."
                                for flag in ("port", "read-only-port")] + [
                                "nanokube kubelet: failed to validate kubelet configuration, error: [invalid "
                                "configuration: port (--port) 0 must be between 1 and 65535, inclusive, invalid "
                                "configuration: readOnlyPort (--read-only-port) 65536 must be between 0 and 65535, "
                                "inclusive]"]


def test_without_a_file_the_command_line_s_defaults_are_validated(tmp_path, capsys):
    """No --config: the flags go over the command line's defaults, and the result is validated as a
    file's is (here the healthz port's default stands beside the flag's bad read-only port)."""
    assert main(["kubelet", "--kubeconfig", str(tmp_path / "never.conf"), "--read-only-port", "70000"]) == 2
    assert capsys.readouterr().err.splitlines()[1:] == [
        "nanokube kubelet: failed to validate kubelet configuration, error: invalid configuration: readOnlyPort "
        "(--read-only-port) 70000 must be between 0 and 65535, inclusive"]
    assert not (tmp_path / "never.conf").exists()


@pytest.mark.parametrize("text, flags, error", [
    # evictionHard's errors as upstream's run() returns them, evictionSoft's as NewMainKubelet's
    (HEAD + "evictionHard:\n  memory.free: 1Gi\n", (), "failed to run Kubelet: unsupported eviction signal memory.free"),
    (HEAD + "evictionHard:\n  nodefs.available: 120%\n", (),
     "failed to run Kubelet: eviction percentage threshold nodefs.available must be <= 100%: 120%"),
    (HEAD, ("--eviction-hard", "memory.available<0"),
     "failed to run Kubelet: eviction threshold memory.available must be positive: 0"),
    (HEAD + "evictionHard:\n  imagefs.inodesFree: 5 percent\n", (),
     "failed to run Kubelet: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"),
    (HEAD, ("--eviction-hard", "memory.available=1Gi"),
     'invalid argument "memory.available=1Gi" for "--eviction-hard" flag: malformed pair, expect string<string'),
    (HEAD + "evictionSoft:\n  memory.available: 1Gi\n", (),
     "failed to run Kubelet: failed to create kubelet: grace period must be specified for the soft eviction "
     "threshold memory.available"),
    (HEAD, ("--eviction-soft", "memory.available<1Gi", "--eviction-soft-grace-period", "memory.available=-1s"),
     "failed to run Kubelet: failed to create kubelet: invalid eviction grace period specified: -1s, must be a "
     "positive value"),
    (HEAD + "registerWithTaints:\n- key: dedicated\n  effect: NoWhere\n", (),
     "invalid taint effect: NoWhere, unsupported taint effect"),
    (HEAD, ("--register-with-taints", "dedicated=ml"),
     'invalid argument "dedicated=ml" for "--register-with-taints" flag: invalid taint spec: dedicated=ml'),
])
def test_eviction_thresholds_and_taints_the_kubelet_cannot_use_are_refused(tmp_path, capsys, text, flags, error):
    err = _refusal(tmp_path, capsys, text, *flags)
    assert err.splitlines()[-1] == f"nanokube kubelet: {error}"


def test_an_unknown_authorization_mode_and_a_missing_client_ca_are_refused(tmp_path, capsys):
    err = _refusal(tmp_path, capsys, HEAD + "authorization:\n  mode: RBAC\n")
    assert err.splitlines() == ["nanokube kubelet: unknown authorization mode RBAC"]
    missing = tmp_path / "ca.crt"
    err = _refusal(tmp_path, capsys, HEAD + f"authentication:\n  x509:\n    clientCAFile: {missing}\n")
    assert err.splitlines() == [f"nanokube kubelet: unable to load client CA file {missing}: open {missing}: no such "
                                "file or directory"]


def test_node_labels_the_kubelet_may_not_set_are_refused(tmp_path, capsys):
    """--node-labels: a node-role.kubernetes.io label (the kubelet may not give itself a role) and a
    value that is no label's are refused as ValidateKubeletFlags refuses them."""
    argv = ["kubelet", "--kubeconfig", str(tmp_path / "never.conf"), "--node-labels"]
    assert main([*argv, "team=ml,node-role.kubernetes.io/worker=,k8s.io/x=1,node.kubernetes.io/pool=a"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "nanokube kubelet: failed to validate kubelet flags: unknown 'kubernetes.io' or 'k8s.io' labels specified "
        "with --node-labels: [k8s.io/x node-role.kubernetes.io/worker]",
        "--node-labels in the 'kubernetes.io' namespace must begin with an allowed prefix (kubelet.kubernetes.io, "
        "node.kubernetes.io) or be in the specifically allowed set (beta.kubernetes.io/arch, "
        "beta.kubernetes.io/instance-type, beta.kubernetes.io/os, failure-domain.beta.kubernetes.io/region, "
        "failure-domain.beta.kubernetes.io/zone, kubernetes.io/arch, kubernetes.io/hostname, kubernetes.io/os, "
        "node.kubernetes.io/instance-type, topology.kubernetes.io/region, topology.kubernetes.io/zone)"]
    assert main([*argv, "team=m l"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "nanokube kubelet: failed to validate kubelet flags: invalid node labels: 'm l' - a valid label must be an "
        "empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
        "alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is "
        "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"]
    assert main([*argv, "team"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        'nanokube kubelet: invalid argument "team" for "--node-labels" flag: team must be formatted as key=value']
    assert not (tmp_path / "never.conf").exists()


def test_unknown_fields_are_logged_and_dropped_as_the_lenient_decoder_drops_them(tmp_path, caplog):
    """Unknown fields anywhere (the top, a nested struct, a list item) and a repeated key are one
    strict decoding error, logged; the file is then decoded leniently (the later key winning)."""
    from nanokube.node import kubelet_config

    (path := tmp_path / "config.yaml").write_text(
        HEAD + "fileCheckFrequency: 5s\nregisterWithTaints:\n- key: a\n  effect: NoSchedule\n  colour: red\n"
        "colour: blue\nauthentication:\n  webhook:\n    cacheTtl: 1m\nmaxPods: 5\nmaxPods: 7\n"
        "reservedMemory:\n- numaNode: 0\n  limits:\n    memory: 1Gi\n")
    with caplog.at_level("INFO", logger="nanokube.node.kubelet_config"):
        cfg = kubelet_config.load(str(path))
    assert (cfg["registerWithTaints"], cfg["fileCheckFrequency"], cfg["maxPods"], "colour" in cfg) == (
        [{"key": "a", "effect": "NoSchedule"}], "5s", 7, False)
    assert cfg["authentication"]["webhook"] == {"enabled": True, "cacheTTL": "2m0s"}
    assert cfg["reservedMemory"] == [{"numaNode": 0, "limits": {"memory": "1Gi"}}]
    assert ('Using lenient decoding as strict decoding failed: err=strict decoding error: error converting YAML to '
            'JSON: yaml: unmarshal errors:\n  line 13: key "maxPods" already set in map, unknown field "registerWithTaints[0].colour", '
            'unknown field "colour", unknown field "authentication.webhook.cacheTtl"') in caplog.text
