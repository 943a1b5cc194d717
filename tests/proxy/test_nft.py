"""The libnftables transport: one context per namespace, opened inside it."""

import secrets
import subprocess

import pytest

from nanokube.proxy.nftables.nft import Nft, NftError


def tables(netns=None):
    argv = ["nft", "list", "tables"]
    out = subprocess.run(["ip", "netns", "exec", netns, *argv] if netns else argv, capture_output=True, text=True,
                         check=True).stdout
    return {line.split()[-1] for line in out.splitlines()}


def test_transactions_land_in_the_namespace_only_and_errors_change_nothing(nft, netns):
    name = f"nk-probe-{secrets.token_hex(3)}"
    nft.apply(f"add table ip {name}\nadd chain ip {name} c\n")
    assert name in tables(netns) and name not in tables()
    with pytest.raises(NftError, match="No such file or directory"):
        nft.apply(f"add chain ip {name} d\nadd rule ip {name} nochain accept\n")
    assert [o["chain"]["name"] for o in nft.list_table("ip", name) if "chain" in o] == ["c"]
    nft.close()
    nft.apply(f"delete table ip {name}\n")  # a closed context reopens, in the same namespace
    assert name not in tables(netns)


def test_a_missing_namespace_is_an_nft_error():
    with pytest.raises(NftError, match="nk-absent"):
        Nft("nk-absent-namespace").apply("add table ip x\n")
