"""A new user's first commands beyond the everyday ones (debug, cp, rollout, explain,
raw endpoints...) against `nanokube up`, checked against what kube-apiserver 1.37
answers them, on the session's shared cluster."""

from __future__ import annotations

import json
import re

import pytest


@pytest.fixture(scope="module")
def cluster(session_cluster):
    """The session's cluster (conftest.session_cluster): this module adds a completed pod, a
    ServiceAccount and its bindings."""
    return session_cluster


def _raw(cluster, path: str, **headers: str):
    """GET `path` with the admin's client certificate, not following a redirect."""
    pool = cluster.client().rest_client.pool_manager
    return pool.request("GET", cluster.url + path, headers=headers, redirect=False)


def test_openapi_v3_document_is_served_by_hash_as_kube_openapi_serves_it(cluster):
    """kubectl explain reads /openapi/v3, then each group-version's document at the
    `?hash=` URL the index names. kube-openapi's handler3 answers that URL with an ETag
    and, for the current hash only, `Cache-Control: public, immutable`; a stale hash
    (the document changed since the client read the index) is redirected (301) to the
    current one, and a client holding the ETag gets 304. nanokube sent every document
    as immutable whatever hash was asked for, so a client's cache kept a stale one."""
    index = json.loads(cluster.kubectl("get", "--raw", "/openapi/v3").stdout)["paths"]
    url = index["apis/apps/v1"]["serverRelativeURL"]
    digest = url.split("hash=", 1)[1]
    assert re.fullmatch(r"[0-9A-F]{128}", digest)

    # kubectl follows the redirect of a stale hash to the current one
    r = cluster.kubectl("get", "--raw", "/openapi/v3/apis/apps/v1?hash=stale", "-v=7")
    hops = re.findall(r'"Response" status="([^"]+)"', r.stderr)
    assert hops == ["301 Moved Permanently", "200 OK"]
    assert f'url="{cluster.url}{url}"' in r.stderr
    assert json.loads(r.stdout)["openapi"] == "3.0.0"

    stale = _raw(cluster, "/openapi/v3/apis/apps/v1?hash=stale")
    assert (stale.status, stale.headers["Location"]) == (301, url)
    current = _raw(cluster, url)
    assert current.status == 200
    assert current.headers["ETag"] == f'"{digest}"'
    assert current.headers["Cache-Control"] == "public, immutable"
    assert current.headers["Vary"] == "Accept"
    assert "Expires" in current.headers
    plain = _raw(cluster, "/openapi/v3/apis/apps/v1")
    assert plain.status == 200 and plain.data == current.data
    # (WithCacheControl's default, which only the current hash's answer replaces)
    assert plain.headers["ETag"] == f'"{digest}"' and plain.headers["Cache-Control"] == "no-cache, private"
    held = _raw(cluster, "/openapi/v3/apis/apps/v1", **{"If-None-Match": f'"{digest}"'})
    assert (held.status, held.data) == (304, b"")
    # the index has an ETag of its own
    index_tag = _raw(cluster, "/openapi/v3").headers["ETag"]
    assert _raw(cluster, "/openapi/v3", **{"If-None-Match": index_tag}).status == 304


def test_readyz_names_the_excludes_it_found_no_check_for(cluster):
    """healthz's root handler says which `?exclude=` names matched no check (a typo
    is otherwise silent); kube-apiserver prints the line before its verdict."""
    r = cluster.kubectl("get", "--raw", "/readyz?verbose&exclude=etcd&exclude=etdc&exclude=informer-sink")
    lines = r.stdout.splitlines()
    assert "[+]etcd excluded: ok" in lines
    assert lines[-2:] == ['warn: some health checks cannot be excluded: no matches for "etdc","informer-sink"',
                          "readyz check passed"]
    # matched ones only: no warning; not verbose: just ok
    assert "warn" not in cluster.kubectl("get", "--raw", "/livez?verbose&exclude=ping").stdout
    assert cluster.kubectl("get", "--raw", "/livez?exclude=nope").stdout == "ok"


def test_exec_into_a_completed_pod_is_the_kubelets_container_not_found(cluster):
    """kube-apiserver proxies pods/exec and pods/attach to the kubelet whatever the pod's
    phase (the 'cannot exec into a container in a completed pod' line is kubectl's own
    check); the kubelet finds no running container and answers `container not found`.
    nanokube refused a completed pod in the API server with a 400 of kubectl's wording,
    which clients without kubectl's check (and kubectl's run/debug attach fallback) saw."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException
    from kubernetes.stream import stream

    cluster.kubectl("run", "done-once", "--image=busybox", "--restart=Never", "--", "sh", "-c", "echo fin")
    cluster.kubectl("wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/done-once", "--timeout=30s")
    v1 = client.CoreV1Api(cluster.client())
    for connect, extra in ((v1.connect_get_namespaced_pod_exec, {"command": ["echo", "x"]}),
                           (v1.connect_get_namespaced_pod_attach, {})):
        with pytest.raises(ApiException) as e:
            stream(connect, "done-once", "default", stdout=True, stderr=True, stdin=False, tty=False, **extra)
        assert e.value.reason.endswith('-+-+- container not found ("done-once")'), e.value.reason
    # kubectl checks the phase itself first, as against any cluster
    r = cluster.kubectl("exec", "done-once", "--", "ls", check=False)
    assert r.stderr.strip() == "error: cannot exec into a container in a completed pod; current phase is Succeeded"


EXTENSION_SERVER_RBAC = """
apiVersion: v1
kind: ServiceAccount
metadata: {name: ext-metrics, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: ext-metrics-auth-reader, namespace: kube-system}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: extension-apiserver-authentication-reader}
subjects: [{kind: ServiceAccount, name: ext-metrics, namespace: kube-system}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "ext-metrics:system:auth-delegator"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:auth-delegator"}
subjects: [{kind: ServiceAccount, name: ext-metrics, namespace: kube-system}]
"""


def test_an_extension_api_servers_rbac_binds_the_bootstrap_roles_it_names(cluster):
    """metrics-server's (and KEDA's, prometheus-adapter's) manifests bind the kube-system Role
    extension-apiserver-authentication-reader and the ClusterRole system:auth-delegator, which
    kube-apiserver's bootstrap policy creates; nanokube created neither (nor any other
    namespaced bootstrap Role), so such a server could not read the client CA nor review tokens."""
    roles = cluster.kubectl("get", "roles", "-A", "--no-headers", "-o", "custom-columns=NS:.metadata.namespace,N:.metadata.name")
    # (the system namespaces only: a Role another module of the shared cluster made elsewhere is not
    # bootstrap's; kube-public's kubeadm Role is `up`'s, which publishes cluster-info as kubeadm does)
    assert [line.split() for line in roles.stdout.splitlines() if line.startswith("kube-")] == [
        ["kube-public", "kubeadm:bootstrap-signer-clusterinfo"],
        ["kube-public", "system:controller:bootstrap-signer"],
        ["kube-system", "extension-apiserver-authentication-reader"],
        ["kube-system", "system::leader-locking-kube-controller-manager"],
        ["kube-system", "system::leader-locking-kube-scheduler"],
        ["kube-system", "system:controller:bootstrap-signer"],
        ["kube-system", "system:controller:cloud-provider"],
        ["kube-system", "system:controller:token-cleaner"]]
    binding = cluster.kubectl_json("get", "rolebinding", "-n", "kube-system", "system::extension-apiserver-authentication-reader")
    assert binding["roleRef"]["name"] == "extension-apiserver-authentication-reader"
    assert binding["metadata"]["labels"] == {"kubernetes.io/bootstrapping": "rbac-defaults"}
    assert [s["name"] for s in binding["subjects"]] == ["system:kube-controller-manager", "system:kube-scheduler"]

    sa = ["--as=system:serviceaccount:kube-system:ext-metrics"]
    checks = (["get", "configmaps/extension-apiserver-authentication", "-n", "kube-system"],
              ["create", "tokenreviews.authentication.k8s.io"], ["create", "subjectaccessreviews.authorization.k8s.io"])
    for check in checks:
        assert cluster.kubectl("auth", "can-i", *check, *sa, check=False).stdout.strip() == "no"
    cluster.kubectl("apply", "-f", "-", input=EXTENSION_SERVER_RBAC)
    for check in checks:
        assert cluster.kubectl("auth", "can-i", *check, *sa).stdout.strip() == "yes"
    # the Role names one ConfigMap only
    assert cluster.kubectl("auth", "can-i", "get", "configmaps/other", "-n", "kube-system", *sa,
                           check=False).stdout.strip() == "no"
