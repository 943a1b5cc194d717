"""What of metadata a write through /status keeps, over HTTP, as upstream's status strategies decide:
those that reset spec alone keep the request's labels, annotations, finalizers and ownerReferences
(pods/status keeps the stored ownerReferences, deployments/status the stored labels), those that
call ResetObjectMetaForStatus keep none of them; the writer's managedFields name what it kept."""

from __future__ import annotations

import pytest
from tests.apiserver.test_rest_managedfields import call, refused
from tests.served import served

PODS = "/api/v1/namespaces/default/pods"
OWNER = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": "5c7d6a0e-0000-4000-8000-000000000001"}


def fields_of(obj: dict, manager: str) -> dict:
    return next(e["fieldsV1"] for e in obj["metadata"]["managedFields"] if e["manager"] == manager)


def relabelled(obj: dict) -> dict:
    """`obj` with one more label, an annotation, a finalizer and an owner."""
    md = obj["metadata"]
    return {**obj, "metadata": {**md, "labels": {**(md.get("labels") or {}), "b": "2"}, "annotations": {"x": "y"},
                                "finalizers": ["example.com/keep"], "ownerReferences": [OWNER]}}


async def test_pod_status_keeps_labels_annotations_finalizers_but_not_owners(tmp_path):
    async with served(tmp_path) as (_, c):
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "1"}},
               "spec": {"containers": [{"name": "c", "image": "x"}]}}
        created = await call(c, "POST", PODS, pod, manager="creator")
        body = relabelled(created)
        body["status"] = {**created["status"], "message": "hi"}
        out = await call(c, "PUT", f"{PODS}/p/status", body, manager="kubelet")
        md = out["metadata"]
        assert md["labels"] == {"a": "1", "b": "2"}
        assert md["annotations"] == {"x": "y"} and md["finalizers"] == ["example.com/keep"]
        assert "ownerReferences" not in md and out["status"]["message"] == "hi"
        owned = fields_of(out, "kubelet")
        assert set(owned["f:metadata"]) == {"f:labels", "f:annotations", "f:finalizers"}
        # a status write that leaves the labels out clears them, as it would through the main resource
        body = {**out, "metadata": {k: v for k, v in out["metadata"].items() if k != "labels"}}
        cleared = await call(c, "PUT", f"{PODS}/p/status", body, manager="kubelet")
        assert "labels" not in cleared["metadata"] and cleared["metadata"]["finalizers"] == ["example.com/keep"]
        await call(c, "PATCH", f"{PODS}/p", {"metadata": {"finalizers": None}},
                   content_type="application/merge-patch+json")


async def test_status_writes_validate_the_metadata_they_carry(tmp_path):
    async with served(tmp_path) as (_, c):
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "finalizers": ["example.com/f"]},
               "spec": {"containers": [{"name": "c", "image": "x"}], "nodeName": "n"}}
        created = await call(c, "POST", PODS, pod)
        bad = {**created, "metadata": {**created["metadata"], "finalizers": ["example.com/f", "unqualified"]}}
        code, message = await refused(c, "PUT", f"{PODS}/p/status", bad)
        assert code == 422 and 'metadata.finalizers[1]: Invalid value: "unqualified"' in message
        await call(c, "DELETE", f"{PODS}/p")
        live = await call(c, "GET", f"{PODS}/p")
        added = {**live, "metadata": {**live["metadata"], "finalizers": ["example.com/f", "example.com/g"]}}
        code, message = await refused(c, "PUT", f"{PODS}/p/status", added)
        assert code == 422 and message.endswith("metadata.finalizers: Forbidden: no new finalizers can be added if "
                                                "the object is being deleted, found new finalizers []string{\"example.com/g\"}")
        await call(c, "PATCH", f"{PODS}/p", {"metadata": {"finalizers": None}},
                   content_type="application/merge-patch+json")


async def test_deployment_status_keeps_the_stored_labels(tmp_path):
    async with served(tmp_path) as (_, c):
        path = "/apis/apps/v1/namespaces/default/deployments"
        d = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "labels": {"a": "1"}},
             "spec": {"selector": {"matchLabels": {"app": "d"}},
                      "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}}
        created = await call(c, "POST", path, d, manager="creator")
        body = {**relabelled(created), "status": {"replicas": 0, "observedGeneration": 1}}
        out = await call(c, "PUT", f"{path}/d/status", body, manager="ctl")
        md = out["metadata"]
        assert md["labels"] == {"a": "1"} and md["annotations"] == {"x": "y"}
        assert md["finalizers"] == ["example.com/keep"] and md["ownerReferences"][0]["name"] == "owner"
        assert set(fields_of(out, "ctl")["f:metadata"]) == {"f:annotations", "f:finalizers", "f:ownerReferences"}
        await call(c, "PATCH", f"{path}/d", {"metadata": {"finalizers": None}}, content_type="application/merge-patch+json")


@pytest.mark.parametrize("kind,path,body", [
    ("Service", "/api/v1/namespaces/default/services",
     {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}}),
    ("VolumeAttachment", "/apis/storage.k8s.io/v1/volumeattachments",
     {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": "s"},
      "spec": {"attacher": "csi.example.com", "nodeName": "n", "source": {"persistentVolumeName": "pv"}}}),
])
async def test_spec_only_status_strategies_keep_metadata_and_reset_ones_keep_none(tmp_path, kind, path, body):
    async with served(tmp_path) as (_, c):
        created = await call(c, "POST", path, body, manager="creator")
        out = await call(c, "PUT", f"{path}/s/status", relabelled(created), manager="ctl")
        md = out["metadata"]
        if kind == "Service":  # serviceStatusStrategy resets spec alone
            assert md["labels"] == {"b": "2"} and md["finalizers"] == ["example.com/keep"]
            assert md["ownerReferences"][0]["uid"] == OWNER["uid"] and md["annotations"] == {"x": "y"}
            await call(c, "PATCH", f"{path}/s", {"metadata": {"finalizers": None}},
                       content_type="application/merge-patch+json")
        else:  # ResetObjectMetaForStatus, metadata among its reset fields: nothing kept, nothing owned
            assert not {"labels", "annotations", "finalizers", "ownerReferences"} & md.keys()
            assert [e["manager"] for e in md["managedFields"]] == ["creator"]


async def test_an_apply_through_status_is_recorded_for_the_status_subresource(tmp_path):
    async with served(tmp_path) as (_, c):
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
               "spec": {"containers": [{"name": "c", "image": "x"}]}}
        await call(c, "POST", PODS, pod, manager="creator")
        applied = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                   "spec": {"containers": [{"name": "c", "image": "y"}]}, "status": {"message": "applied"}}
        out = await call(c, "PATCH", f"{PODS}/p/status", applied, manager="applier",
                         content_type="application/apply-patch+yaml")
        entry = next(e for e in out["metadata"]["managedFields"] if e["manager"] == "applier")
        assert (entry["operation"], entry.get("subresource")) == ("Apply", "status")
        assert entry["fieldsV1"] == {"f:status": {"f:message": {}}}  # spec is not a status applier's
        assert out["status"]["message"] == "applied" and out["spec"]["containers"][0]["image"] == "x"


async def test_an_apply_through_status_owns_none_of_the_metadata_its_strategy_keeps_as_stored(tmp_path):
    async with served(tmp_path) as (_, c):
        path = "/apis/storage.k8s.io/v1/volumeattachments"
        va = {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": "va"},
              "spec": {"attacher": "csi.example.com", "nodeName": "n", "source": {"persistentVolumeName": "pv"}}}
        await call(c, "POST", path, va, manager="creator")
        applied = {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment",
                   "metadata": {"name": "va", "labels": {"x": "y"}}, "status": {"attached": True}}
        out = await call(c, "PATCH", f"{path}/va/status", applied, manager="attacher",
                         content_type="application/apply-patch+yaml")
        entry = next(e for e in out["metadata"]["managedFields"] if e["manager"] == "attacher")
        assert entry["fieldsV1"] == {"f:status": {"f:attached": {}}} and entry["subresource"] == "status"
        assert "labels" not in out["metadata"] and out["status"] == {"attached": True}


MERGE = "application/merge-patch+json"
SOON = "2030-01-01T00:00:00Z"


async def test_pod_status_ignores_a_deletion_timestamp_but_not_a_grace_period(tmp_path):
    async with served(tmp_path) as (_, c):
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
               "spec": {"containers": [{"name": "c", "image": "x"}]}}
        await call(c, "POST", PODS, pod, manager="creator")
        patch = {"metadata": {"deletionTimestamp": SOON}, "status": {"message": "hi"}}
        out = await call(c, "PATCH", f"{PODS}/p/status", patch, manager="kubelet", content_type=MERGE)
        assert "deletionTimestamp" not in out["metadata"] and out["status"]["message"] == "hi"
        assert "f:metadata" not in fields_of(out, "kubelet")  # a reset field of podStatusStrategy
        code, message = await refused(c, "PATCH", f"{PODS}/p/status", {"metadata": {"deletionGracePeriodSeconds": 5}},
                                      content_type=MERGE)
        assert code == 422 and "metadata.deletionGracePeriodSeconds: Invalid value: 5: field is immutable" in message


async def test_a_status_strategy_keeping_the_stored_object_meta_ignores_both_deletion_fields(tmp_path):
    async with served(tmp_path) as (_, c):
        path = "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas"
        fs = {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": "fs"},
              "spec": {"priorityLevelConfiguration": {"name": "global-default"}, "matchingPrecedence": 5000}}
        await call(c, "POST", path, fs)
        patch = {"metadata": {"deletionTimestamp": SOON, "deletionGracePeriodSeconds": 5}, "status": {}}
        out = await call(c, "PATCH", f"{path}/fs/status", patch, content_type=MERGE)
        assert not {"deletionTimestamp", "deletionGracePeriodSeconds"} & out["metadata"].keys()


async def test_deployment_status_refuses_a_new_deletion_timestamp(tmp_path):
    async with served(tmp_path) as (_, c):
        path = "/apis/apps/v1/namespaces/default/deployments"
        d = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
             "spec": {"selector": {"matchLabels": {"app": "d"}},
                      "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}}
        await call(c, "POST", path, d)
        code, message = await refused(c, "PATCH", f"{path}/d/status", {"metadata": {"deletionTimestamp": SOON}},
                                      content_type=MERGE)
        assert code == 422 and "metadata.deletionTimestamp: Invalid value: " in message and "field is immutable" in message
