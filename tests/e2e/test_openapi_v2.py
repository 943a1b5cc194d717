"""`kubectl apply -f` of a `kind: List`: kubectl validates it client-side against
`/openapi/v2` fetched as protobuf, so the server must speak gnostic's encoding."""

from __future__ import annotations

import hashlib
import json

import pytest
import yaml


NS = "openapi-v2"
PB = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"


@pytest.fixture(scope="module")
def cluster(session_cluster):
    """The session's cluster (conftest.session_cluster): its objects live in its own namespace (openapi-v2),
    which stays."""
    return session_cluster


def _list(*items: dict) -> str:
    return yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": list(items)})


def _cm(name: str, value: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NS},
            "data": {"key": value}}


def _deployment(name: str, spec_extra: dict) -> dict:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": NS},
            "spec": {"selector": {"matchLabels": labels}, **spec_extra, "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27", "ports": [{"containerPort": 80}]}]}}}}


@pytest.fixture(scope="module")
def ns(cluster):
    cluster.kubectl("create", "namespace", NS)
    return NS


def test_apply_list_creates_every_item(cluster, ns):
    r = cluster.kubectl("apply", "-f", "-", input=_list(
        _cm("list-a", "1"), _cm("list-b", "2"), _deployment("list-web", {"replicas": 2})))
    assert r.stdout.split("\n")[:3] == [
        "configmap/list-a created", "configmap/list-b created", "deployment.apps/list-web created"]
    assert cluster.kubectl_json("-n", ns, "get", "configmap", "list-a")["data"] == {"key": "1"}
    assert cluster.kubectl_json("-n", ns, "get", "configmap", "list-b")["data"] == {"key": "2"}
    assert cluster.kubectl_json("-n", ns, "get", "deployment", "list-web")["spec"]["replicas"] == 2
    again = cluster.kubectl("apply", "-f", "-", input=_list(_cm("list-a", "1"), _cm("list-b", "3")))
    assert again.stdout.split("\n")[:2] == ["configmap/list-a unchanged", "configmap/list-b configured"]


def test_unknown_field_in_a_list_is_refused_by_kubectl(cluster, ns):
    doc = _list(_cm("bad-cm", "1"), _deployment("bad-web", {"replicaz": 3}))
    r = cluster.kubectl("apply", "-f", "-", input=doc, check=False)
    assert r.returncode != 0
    assert ('error validating data: ValidationError(Deployment.spec): unknown field "replicaz" in '
            "io.k8s.api.apps.v1.DeploymentSpec") in r.stderr
    assert "turn validation off with --validate=false" in r.stderr
    # refused before any request: not even the valid ConfigMap was created
    assert cluster.kubectl("-n", ns, "get", "configmap", "bad-cm", check=False).returncode != 0

    r = cluster.kubectl("apply", "--validate=false", "-f", "-", input=doc)
    assert "deployment.apps/bad-web created" in r.stdout
    spec = cluster.kubectl_json("-n", ns, "get", "deployment", "bad-web")["spec"]
    assert "replicaz" not in spec and spec["replicas"] == 1


def test_wrong_type_and_missing_required_field_are_reported(cluster, ns):
    dep = _deployment("typed-web", {"replicas": "two"})
    del dep["spec"]["template"]["spec"]["containers"][0]["name"]
    r = cluster.kubectl("apply", "-f", "-", input=_list(dep), check=False)
    assert r.returncode != 0
    assert ('invalid type for io.k8s.api.apps.v1.DeploymentSpec.replicas: got "string", expected "integer"'
            in r.stderr)
    assert 'missing required field "name" in io.k8s.api.core.v1.Container' in r.stderr


def test_v2_headers_etag_and_media_types(cluster):
    api = cluster.client()

    def get(accept: str, **headers: str):
        # the pool manager answers every status; it carries the kubeconfig's client certificate
        return api.rest_client.pool_manager.request(
            "GET", api.configuration.host + "/openapi/v2", headers={"Accept": accept, **headers})

    as_json = get("application/json")
    assert as_json.status == 200 and json.loads(as_json.data)["swagger"] == "2.0"
    etag = '"' + hashlib.sha512(as_json.data).hexdigest().upper() + '"'
    # (gziphandler adds its Vary before the handler adds its own; urllib3 joins the two)
    assert as_json.headers["ETag"] == etag and as_json.headers["Vary"] == "Accept-Encoding, Accept"

    pb = get(PB)
    assert pb.status == 200
    assert pb.headers["Content-Type"] == "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    assert pb.headers["ETag"] == etag
    assert pb.data[:5] == b"\n\x032.0"  # Document.swagger
    assert get(PB, **{"If-None-Match": etag}).status == 304
    assert get("application/yaml").status == 406
