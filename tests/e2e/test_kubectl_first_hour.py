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


def test_a_dotted_dns_label_is_told_it_must_not_contain_dots(cluster):
    """IsDNS1123Label answers a valid subdomain that is not a label with "must not contain dots":
    `kubectl create ns my.team` is refused so, and a pod named web.1 (its name is its hostname) is
    created with the hostname warning naming the dots, not the label pattern."""
    r = cluster.kubectl("create", "namespace", "my.team", check=False)
    assert r.returncode == 1
    assert r.stderr.strip() == ('The Namespace "my.team" is invalid: metadata.name: Invalid value: "my.team": '
                                "must not contain dots")
    pod = ('{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web.1"}, '
           '"spec": {"containers": [{"name": "c", "image": "nginx"}]}}')
    r = cluster.kubectl("-n", NS, "create", "-f", "-", input=pod)
    assert r.stdout.strip() == "pod/web.1 created"
    assert r.stderr.strip() == ("Warning: metadata.name: this is used in the Pod's hostname, which can result in "
                                "surprising behavior; a DNS label is recommended: [must not contain dots]")
