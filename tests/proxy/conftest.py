"""A private network namespace per test, removed even when the test fails."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess

import pytest

from nanokube.proxy.nftables.nft import Nft


def _skip_reason() -> str:
    if os.geteuid() != 0:
        return "SKIPPED LOUDLY: nftables tests need root to create network namespaces"
    if not shutil.which("nft"):
        return "SKIPPED LOUDLY: no nft binary (run scripts/nftables.sh)"
    return ""


@pytest.fixture
def netns():
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    name = f"nk-test-{secrets.token_hex(4)}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        probe = subprocess.run(["ip", "netns", "exec", name, "nft", "-f", "-"], input=b"add table ip nk-probe\n",
                               capture_output=True, check=False)
        if probe.returncode != 0:
            pytest.skip(f"SKIPPED LOUDLY: the kernel refuses nftables: {probe.stderr.decode().strip()}")
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


@pytest.fixture
def nft(netns):
    return Nft(netns)
