import argparse

import pytest

from nanokube.cli import main
from nanokube.cli_proxy import address, duration


@pytest.mark.parametrize(("text", "seconds"), [("30s", 30.0), ("500ms", 0.5), ("1m", 60.0), ("2", 2.0), ("1h", 3600.0)])
def test_durations_read_as_go_writes_them(text, seconds):
    assert duration(text) == seconds


@pytest.mark.parametrize("bad", ["", "10x", "-1s"])
def test_bad_durations_are_refused(bad):
    with pytest.raises(argparse.ArgumentTypeError):
        duration(bad)


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
