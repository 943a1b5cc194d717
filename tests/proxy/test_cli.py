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
