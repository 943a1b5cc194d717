import logging

import pytest

from nanokube.proxy.modes import DEFAULT_CHANGING, ModeError, select_mode


def test_unset_mode_warns_that_the_default_is_changing(caplog):
    with caplog.at_level(logging.WARNING):
        mode, warnings = select_mode(None)
    assert mode == "nftables" and warnings == [DEFAULT_CHANGING]
    assert "planned for 1.40" in caplog.text


def test_explicit_nftables_runs_without_warnings():
    assert select_mode("nftables") == ("nftables", [])


def test_ipvs_is_refused_with_the_supported_modes_and_the_one_nanokube_runs():
    """Told only "iptables, nftables", a user moving off ipvs tried iptables, refused in turn."""
    with pytest.raises(ModeError) as e:
        select_mode("ipvs")
    assert "deprecated" in str(e.value) and "iptables, nftables" in str(e.value)
    assert str(e.value).endswith('(nanokube implements only "nftables")')


@pytest.mark.parametrize("mode", ["userspace", "iptables"])
def test_unknown_or_unimplemented_modes_are_refused(mode):
    with pytest.raises(ModeError, match=mode):
        select_mode(mode)
