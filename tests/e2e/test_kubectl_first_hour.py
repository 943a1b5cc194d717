"""What a new user's first hour of kubectl (session 63, explore63) found kube-apiserver 1.37 to
answer otherwise than `nanokube up` did, checked through kubectl on the session's shared cluster."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import own_namespace

NS = "first-hour"


@pytest.fixture(scope="module")
def cluster(session_cluster):
    """The session's cluster (conftest.session_cluster), in a namespace of this module's own."""
    with own_namespace(session_cluster, NS) as c:
        yield c


def test_label_limits_are_worded_in_bytes_as_kubectls_own_check(cluster):
    """apimachinery 1.37 checks label keys and values in its content package, whose limit reads
    'must be no more than 63 bytes' (kubectl's client-side check of a value says the same); the
    server's refusals of a long key, and of a long key or value in a selector, read so too."""
    cluster.kubectl("-n", NS, "create", "configmap", "labelled")
    key, value = "k" * 64, "v" * 64
    r = cluster.kubectl("-n", NS, "label", "configmap", "labelled", f"{key}=v", check=False)
    assert r.returncode == 1
    assert r.stderr.strip() == (f'The ConfigMap "labelled" is invalid: metadata.labels: Invalid value: "{key}": '
                                "name part must be no more than 63 bytes")
    r = cluster.kubectl("-n", NS, "label", "configmap", "labelled", f"a={value}", check=False)
    assert r.returncode == 1 and r.stderr.strip().endswith(": must be no more than 63 bytes")
    r = cluster.kubectl("-n", NS, "get", "configmaps", "-l", f"a={value}", check=False)
    assert r.returncode == 1
    assert r.stderr.strip() == (
        'Error from server (BadRequest): Unable to find "/v1, Resource=configmaps" that match label selector '
        f'"a={value}", field selector "": unable to parse requirement: values[0][a]: Invalid value: "{value}": '
        "must be no more than 63 bytes")
    r = cluster.kubectl("-n", NS, "get", "configmaps", "-l", "p" * 254 + "/k", check=False)
    assert r.returncode == 1 and r.stderr.strip().endswith(": prefix part must be no more than 253 bytes")
    # names stay util/validation's characters
    r = cluster.kubectl("-n", NS, "create", "configmap", "n" * 254, check=False)
    assert r.returncode == 1 and "metadata.name: Invalid value" in r.stderr
    assert "must be no more than 253 characters" in r.stderr
