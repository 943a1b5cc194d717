"""Bound ServiceAccount tokens end to end: `kubectl create token`, bearer
requests authorized by RBAC, and the tokens the server must refuse."""

from __future__ import annotations

import json
import ssl
import time
import urllib.error
import urllib.request

from nanokube.apiserver.auth.serviceaccount import ServiceAccountTokens, load_or_create_key
from nanokube.clock import Clock
from tests.e2e.manifests import to_yaml

PODS = "/api/v1/namespaces/default/pods"


def _get(cluster, path: str, token: str) -> tuple[int, dict]:
    ctx = ssl.create_default_context(cafile=str(cluster.data_dir / "pki" / "ca.crt"))
    req = urllib.request.Request(cluster.url + path, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _token(cluster, *args: str) -> str:
    deadline = time.monotonic() + 30
    while True:  # the namespace controller creates the default ServiceAccount shortly after start
        r = cluster.kubectl("create", "token", "default", "-n", "default", *args, check=False)
        if r.returncode == 0 or time.monotonic() > deadline:
            assert r.returncode == 0, r.stderr
            return r.stdout.strip()
        time.sleep(0.5)


def test_token_is_authorized_by_rbac(cluster):
    token = _token(cluster)
    code, body = _get(cluster, PODS, token)
    assert code == 403
    assert body["message"] == ('pods is forbidden: User "system:serviceaccount:default:default" cannot list resource '
                               '"pods" in API group "" in the namespace "default"')
    g = "rbac.authorization.k8s.io"
    binding = {"apiVersion": f"{g}/v1", "kind": "RoleBinding", "metadata": {"name": "sa-view", "namespace": "default"},
               "roleRef": {"apiGroup": g, "kind": "ClusterRole", "name": "view"},
               "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": "default"}]}
    cluster.kubectl("apply", "-f", "-", input=to_yaml([binding]))
    deadline = time.monotonic() + 60
    while (code := _get(cluster, PODS, token)[0]) == 403 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert code == 200


def test_tampered_and_expired_tokens_are_unauthorized(cluster):
    token = _token(cluster)
    header, payload, sig = token.split(".")
    tampered = f"{header}.{payload}.{sig[:-4]}{'AAAA' if sig[-4:] != 'AAAA' else 'BBBB'}"
    code, body = _get(cluster, PODS, tampered)
    assert (code, body["reason"], body["message"]) == (401, "Unauthorized", "Unauthorized")

    class LongAgo(Clock):
        def now(self) -> float:
            return time.time() - 7200

    sa = cluster.kubectl_json("get", "serviceaccount", "default", "-n", "default")
    key = load_or_create_key(str(cluster.data_dir / "pki"))
    expired = ServiceAccountTokens(key, lambda *_: sa, LongAgo()).token_request("default", "default", {})
    assert _get(cluster, PODS, expired["status"]["token"])[0] == 401


def test_token_bound_to_a_deleted_pod_is_unauthorized(cluster):
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "holder", "namespace": "default"},
           "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sleep", "infinity"]}]}}
    cluster.kubectl("apply", "-f", "-", input=to_yaml([pod]))
    token = _token(cluster, "--bound-object-kind", "Pod", "--bound-object-name", "holder")
    code, _ = _get(cluster, "/api/v1/namespaces/default/pods/holder", token)
    assert code in (200, 403)
    cluster.kubectl("delete", "pod", "holder", "-n", "default", "--force", "--grace-period=0")
    deadline = time.monotonic() + 30
    while (code := _get(cluster, PODS, token)[0]) != 401 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert code == 401
