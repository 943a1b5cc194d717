"""LeaderWorkerSet's published CRD (../shared/data/crds) on a real `nanokube up`, driven
with kubectl and the `kubernetes` client as a user installing LWS would: server-side
apply of the 1.3 MB CRD, Established at once, then LeaderWorkerSets created,
listed with the CRD's printer columns, explained, patched (merge, JSON, server-side
apply), scaled through /scale, watched, refused with upstream's 422s, and deleted
with a finalizer honoured; finally the CRD's own deletion removes what is left."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
import yaml
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from .conftest import wait_for

#: LeaderWorkerSet's CRD as its project publishes it (Apache-2.0, tests/fixtures/crds/LICENSE)
CRD_FILE = Path(__file__).resolve().parents[1] / "fixtures" / "crds" / "leaderworkerset.x-k8s.io_leaderworkersets.yaml"
CRD_NAME = "leaderworkersets.leaderworkerset.x-k8s.io"
GROUP, VERSION, PLURAL = "leaderworkerset.x-k8s.io", "v1", "leaderworkersets"
NS = "lws"

#: the outcome depends on the store (a 1.3 MB object, watch, deletecollection): this module runs again on etcd
pytestmark = pytest.mark.store


def _lws(name: str, replicas: int = 2, **spec) -> dict:
    return {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "LeaderWorkerSet", "metadata": {"name": name},
        "spec": {"replicas": replicas, "leaderWorkerTemplate": {"size": 4, "workerTemplate": {"spec": {
            "containers": [{"name": "vllm", "image": "vllm/vllm-openai:latest", "ports": [{"containerPort": 8080}]}]}}},
            **spec},
    }


def _established(ext: client.ApiextensionsV1Api) -> bool:
    crd = ext.read_custom_resource_definition(CRD_NAME)
    return any(c.type == "Established" and c.status == "True" for c in crd.status.conditions or [])


def _install(cluster) -> client.ApiClient:
    out = cluster.kubectl("apply", "--server-side", "-f", str(CRD_FILE)).stdout
    assert "serverside-applied" in out
    api = cluster.client()
    ext = client.ApiextensionsV1Api(api)
    # how soon is test_crd_is_established_at_once's, on the server's clock
    wait_for(lambda: _established(ext), what="LeaderWorkerSet CRD Established", every=0.1)
    return api


@pytest.fixture(scope="module")
def installed(cluster):
    api = _install(cluster)
    cluster.kubectl("create", "namespace", NS)
    return api


def test_crd_is_established_at_once(cluster, installed):
    ext = client.ApiextensionsV1Api(installed)
    crd = ext.read_custom_resource_definition(CRD_NAME)
    conds = {c.type: (c.status, c.reason, c.message) for c in crd.status.conditions}
    assert conds["NamesAccepted"] == ("True", "NoConflicts", "no conflicts found")
    assert conds["Established"] == ("True", "InitialNamesAccepted", "the initial names have been accepted")
    assert crd.status.accepted_names.short_names == ["lws"]
    assert crd.status.stored_versions == ["v1"]
    assert crd.spec.conversion.strategy == "None"
    # at once, by the server's own clock (RFC 3339 seconds): no wait such as upstream's 5 s for several API
    # servers, only the naming and establishing controllers' writes of the 1.3 MB object (a second at most on
    # an idle machine; the whole suite with -n 2 on a busier one has been seen to take two)
    est = next(c for c in crd.status.conditions if c.type == "Established")
    assert (est.last_transition_time - crd.metadata.creation_timestamp).total_seconds() <= 3
    res = cluster.kubectl("api-resources", "--api-group", GROUP).stdout
    assert "leaderworkersets" in res and "lws" in res and "LeaderWorkerSet" in res


def test_create_list_with_printer_columns_and_defaults(cluster, installed):
    co = client.CustomObjectsApi(installed)
    created = co.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, _lws("vllm"))
    assert created["metadata"]["generation"] == 1
    # schema defaults, applied on write
    assert created["spec"]["startupPolicy"] == "LeaderCreated"
    assert created["spec"]["leaderWorkerTemplate"]["restartPolicy"] == "RecreateGroupOnPodRestart"
    assert created["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["ports"][0]["protocol"] == "TCP"
    listed = co.list_namespaced_custom_object(GROUP, VERSION, NS, PLURAL)
    assert "vllm" in [i["metadata"]["name"] for i in listed["items"]]  # (with other tests' sets, if they ran first)
    assert listed["kind"] == "LeaderWorkerSetList"
    table = cluster.kubectl("get", "lws", "-n", NS).stdout.splitlines()
    assert table[0].split() == ["NAME", "READY", "DESIRED", "UP-TO-DATE", "AGE"]
    # no status yet: READY and UP-TO-DATE are null cells, which kubectl prints empty
    cut = [table[0].index(h) for h in table[0].split()]
    row = next(line for line in table[1:] if line.startswith("vllm "))
    assert [row[a:b].strip() for a, b in zip(cut, cut[1:])] == ["vllm", "", "2", ""]
    assert "vllm" in cluster.kubectl("get", "leaderworkerset.leaderworkerset.x-k8s.io", "-A").stdout
    by_name = cluster.kubectl("get", "lws", "-n", NS, "--field-selector", "metadata.name=vllm", "-o", "name").stdout
    assert by_name.strip() == "leaderworkerset.leaderworkerset.x-k8s.io/vllm"


def test_explain_reads_the_crd_schema(cluster, installed):
    out = cluster.kubectl("explain", "lws.spec.leaderWorkerTemplate.size").stdout
    assert "KIND:       LeaderWorkerSet" in out and "<integer>" in out
    assert "size" in out


def test_merge_json_and_server_side_apply_patches(cluster, installed):
    co = client.CustomObjectsApi(installed)
    co.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, _lws("patched"))
    cluster.kubectl("patch", "lws", "patched", "-n", NS, "--type", "merge", "-p", '{"spec":{"replicas":3}}')
    got = co.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "patched")
    assert got["spec"]["replicas"] == 3 and got["metadata"]["generation"] == 2
    cluster.kubectl("patch", "lws", "patched", "-n", NS, "--type", "json",
                    "-p", '[{"op":"replace","path":"/spec/leaderWorkerTemplate/size","value":2}]')
    applied = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "LeaderWorkerSet",
               "metadata": {"name": "patched", "namespace": NS, "labels": {"team": "infer"}}, "spec": {"replicas": 5}}
    cluster.kubectl("apply", "--server-side", "--field-manager", "ops", "--force-conflicts", "-f", "-",
                    input=yaml.safe_dump(applied))
    got = co.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "patched")
    assert got["spec"]["replicas"] == 5 and got["spec"]["leaderWorkerTemplate"]["size"] == 2
    assert got["metadata"]["labels"] == {"team": "infer"}
    managers = {m["manager"] for m in got["metadata"]["managedFields"]}
    assert "ops" in managers
    # strategic merge is not offered for custom resources (415, upstream's list of patch types)
    r = cluster.kubectl("patch", "lws", "patched", "-n", NS, "--type", "strategic", "-p", '{"spec":{"replicas":1}}',
                        check=False)
    assert r.returncode != 0
    assert ("the body of the request was in an unknown format - accepted media types include: "
            "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml") in r.stderr


def test_scale_subresource(cluster, installed):
    co = client.CustomObjectsApi(installed)
    co.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, _lws("scaled", replicas=1))
    cluster.kubectl("scale", "lws", "scaled", "-n", NS, "--replicas=4")
    scale = co.get_namespaced_custom_object_scale(GROUP, VERSION, NS, PLURAL, "scaled")
    assert scale["kind"] == "Scale" and scale["apiVersion"] == "autoscaling/v1"
    assert scale["spec"]["replicas"] == 4 and scale["status"]["replicas"] == 0
    co.patch_namespaced_custom_object_scale(GROUP, VERSION, NS, PLURAL, "scaled", {"spec": {"replicas": 0}})
    assert co.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "scaled")["spec"]["replicas"] == 0
    # status is written through /status only, without bumping generation
    obj = co.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "scaled")
    gen = obj["metadata"]["generation"]
    co.patch_namespaced_custom_object_status(GROUP, VERSION, NS, PLURAL, "scaled",
                                             {"status": {"replicas": 0, "hpaPodSelector": "app=scaled"}})
    scale = co.get_namespaced_custom_object_scale(GROUP, VERSION, NS, PLURAL, "scaled")
    assert scale["status"]["selector"] == "app=scaled"
    obj = co.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "scaled")
    assert obj["metadata"]["generation"] == gen
    co.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "scaled", {"status": {"replicas": 9}})
    assert co.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "scaled")["status"]["replicas"] == 0


def test_bad_objects_get_upstreams_422(cluster, installed):
    co = client.CustomObjectsApi(installed)
    with pytest.raises(ApiException) as e:
        co.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, _lws("bad", startupPolicy="Whenever"))
    assert e.value.status == 422
    body = json.loads(e.value.body)
    assert body["message"] == ('LeaderWorkerSet.leaderworkerset.x-k8s.io "bad" is invalid: spec.startupPolicy: '
                               'Unsupported value: "Whenever": supported values: "LeaderCreated", "LeaderReady"')
    assert body["details"]["causes"][0]["field"] == "spec.startupPolicy"
    with pytest.raises(ApiException) as e:
        co.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, _lws("bad", replicas="many"))
    assert e.value.status == 422
    assert ('spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"'
            in json.loads(e.value.body)["message"])
    bad = _lws("bad")
    del bad["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["name"]
    with pytest.raises(ApiException) as e:
        co.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, bad)
    assert "spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].name: Required value" in json.loads(e.value.body)["message"]
    # unknown fields: kubectl's default (Strict) refuses, Warn answers with a Warning header
    extra = _lws("extra")
    extra["spec"]["colour"] = "blue"
    r = cluster.kubectl("create", "-n", NS, "-f", "-", input=yaml.safe_dump(extra), check=False)
    assert r.returncode != 0
    assert 'strict decoding error: unknown field "spec.colour"' in r.stderr
    r = cluster.kubectl("create", "-n", NS, "--validate=warn", "-f", "-", input=yaml.safe_dump(extra))
    assert 'unknown field "spec.colour"' in r.stderr
    got = co.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "extra")
    assert "colour" not in got["spec"]


def test_watch_and_delete_with_finalizer(cluster, installed):
    co = client.CustomObjectsApi(installed)
    events: list[tuple[str, str]] = []
    # the watch starts from this list's revision, so it sees every change after it however late it connects
    since = co.list_namespaced_custom_object(GROUP, VERSION, NS, PLURAL)["metadata"]["resourceVersion"]

    def run():
        w = watch.Watch()
        for ev in w.stream(co.list_namespaced_custom_object, GROUP, VERSION, NS, PLURAL,
                           field_selector="metadata.name=held", resource_version=since, timeout_seconds=20):
            events.append((ev["type"], bool(ev["object"]["metadata"].get("deletionTimestamp"))))
            if ev["type"] == "DELETED":
                w.stop()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    held = _lws("held")
    held["metadata"]["finalizers"] = ["example.com/hold"]
    co.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, held)
    co.delete_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "held")
    obj = co.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "held")
    assert obj["metadata"]["deletionTimestamp"]
    co.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "held", {"metadata": {"finalizers": None}})
    t.join(20)
    assert events[0] == ("ADDED", False)
    assert ("MODIFIED", True) in events
    assert events[-1][0] == "DELETED"
    with pytest.raises(ApiException) as e:
        co.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "held")
    assert e.value.status == 404


def test_client_side_apply_of_the_crd_is_refused_as_upstream(cluster, installed):
    r = cluster.kubectl("apply", "-f", str(CRD_FILE), check=False)
    assert r.returncode != 0
    assert (f'The CustomResourceDefinition "{CRD_NAME}" is invalid: metadata.annotations: Too long: '
            "may not be more than 262144 bytes") in r.stderr


def test_deleting_the_crd_deletes_its_objects_first(cluster, installed):
    co = client.CustomObjectsApi(installed)
    ext = client.ApiextensionsV1Api(installed)
    co.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, _lws("doomed"))  # whatever ran before
    cluster.kubectl("delete", "crd", CRD_NAME, "--wait=false")
    try:
        wait_for(lambda: _gone(ext), timeout=60, what="CRD removed after its objects")
        with pytest.raises(ApiException) as e:
            co.list_namespaced_custom_object(GROUP, VERSION, NS, PLURAL)
        assert e.value.status == 404
        assert "leaderworkersets" not in cluster.kubectl("api-resources").stdout
    finally:  # installed again, empty, for the module's tests that run after this one
        _install(cluster)
    assert co.list_namespaced_custom_object(GROUP, VERSION, NS, PLURAL)["items"] == []


def _gone(ext) -> bool:
    try:
        ext.read_custom_resource_definition(CRD_NAME)
    except ApiException as e:
        return e.status == 404
    return False
