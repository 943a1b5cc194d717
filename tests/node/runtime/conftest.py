"""Root-only fixtures: a cluster network of its own per test, removed even when the test fails."""

from __future__ import annotations

import os
import secrets
import shutil

import pytest

from nanokube.node.runtime.netns import ClusterNetwork, list_netns


@pytest.fixture
def network():
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("SKIPPED LOUDLY: the process runtime needs root and iproute2")
    net = ClusterNetwork("t" + secrets.token_hex(3))
    try:
        yield net
    finally:
        net.close()
        assert [n for n in list_netns() if n.startswith(net.prefix)] == []
