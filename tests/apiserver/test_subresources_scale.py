"""managedFields of writes through /scale, over HTTP, as upstream's ScaleHandler maps them: the
parent's owners of its replicas path own the Scale's spec.replicas; an update or apply of the Scale
takes it from them (an apply conflicts unless forced) and the parent records the new owner at its
own apiVersion and replicas path, with subresource scale and, as upstream's, no time."""

from __future__ import annotations

import asyncio
import json

import pytest
from kubernetes.client.rest import ApiException

from tests.apiserver.test_rest_managedfields import call, refused
from tests.served import served
from tests.controllers import tries

DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
APPLY = "application/apply-patch+yaml"


def deployment(replicas: int) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "d"}},
                     "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}}


def by_manager(obj: dict) -> dict[str, dict]:
    return {e["manager"]: e for e in obj["metadata"]["managedFields"]}


def scale(replicas: int) -> dict:
    return {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "d"}, "spec": {"replicas": replicas}}


REPLICAS = {"f:spec": {"f:replicas": {}}}


async def test_an_update_through_scale_takes_the_replicas_from_their_applier(tmp_path):
    async with served(tmp_path) as (_, c):
        await call(c, "PATCH", f"{DEPLOYMENTS}/d", deployment(3), "app", APPLY)
        current = await call(c, "GET", f"{DEPLOYMENTS}/d/scale")
        current["spec"]["replicas"] = 5
        await call(c, "PUT", f"{DEPLOYMENTS}/d/scale", current, "kubectl")
        d = await call(c, "GET", f"{DEPLOYMENTS}/d")
        entries = by_manager(d)
        assert d["spec"]["replicas"] == 5 and "f:replicas" not in entries["app"]["fieldsV1"]["f:spec"]
        assert entries["kubectl"] == {"manager": "kubectl", "operation": "Update", "apiVersion": "apps/v1",
                                      "fieldsType": "FieldsV1", "fieldsV1": REPLICAS, "subresource": "scale"}


async def test_an_update_through_scale_to_zero_leaves_the_replicas_nobodys(tmp_path):
    """The Scale an update sends is decoded: its replicas (an omitempty int32) at 0 is no field, so the
    writer owns nothing and the owners of the parent's replicas lose them; a later non-zero is owned."""
    async with served(tmp_path) as (_, c):
        await call(c, "PATCH", f"{DEPLOYMENTS}/d", deployment(3), "app", APPLY)
        await call(c, "PUT", f"{DEPLOYMENTS}/d/scale", scale(0), "kubectl")
        d = await call(c, "GET", f"{DEPLOYMENTS}/d")
        entries = by_manager(d)
        assert d["spec"]["replicas"] == 0 and "kubectl" not in entries
        assert "f:replicas" not in entries["app"]["fieldsV1"]["f:spec"]
        await call(c, "PUT", f"{DEPLOYMENTS}/d/scale", scale(2), "kubectl")
        entries = by_manager(await call(c, "GET", f"{DEPLOYMENTS}/d"))
        assert entries["kubectl"]["fieldsV1"] == REPLICAS and entries["kubectl"]["subresource"] == "scale"


async def test_an_apply_through_scale_conflicts_and_forced_takes_the_replicas(tmp_path):
    async with served(tmp_path) as (_, c):
        await call(c, "PATCH", f"{DEPLOYMENTS}/d", deployment(3), "app", APPLY)
        code, message = await refused(c, "PATCH", f"{DEPLOYMENTS}/d/scale", scale(7), "hpa", APPLY)
        assert (code, message) == (409, 'Apply failed with 1 conflict: conflict with "app": .spec.replicas')
        out = await call(c, "PATCH", f"{DEPLOYMENTS}/d/scale", scale(7), "hpa", APPLY, force=True)
        assert out["spec"]["replicas"] == 7 and out["kind"] == "Scale"
        d = await call(c, "GET", f"{DEPLOYMENTS}/d")
        hpa = by_manager(d)["hpa"]
        assert (hpa["operation"], hpa["apiVersion"], hpa["subresource"], hpa["fieldsV1"]) == \
            ("Apply", "apps/v1", "scale", REPLICAS) and "time" not in hpa
        # the parent's applier now conflicts with the Scale's
        code, message = await refused(c, "PATCH", f"{DEPLOYMENTS}/d", deployment(3), "app", APPLY)
        assert message == 'Apply failed with 1 conflict: conflict with "hpa" with subresource "scale": .spec.replicas'


async def test_a_dry_run_through_scale_answers_the_scale_it_would_write(tmp_path):
    """As upstream's scale REST, a dry run answers the Scale of the object it would have written, and
    writes nothing; it answered the stored object's replicas (found by fuzz_sweep's subresources sweep)."""
    async with served(tmp_path) as (_, c):
        await call(c, "POST", DEPLOYMENTS, deployment(1))
        dry = await call(c, "PUT", f"{DEPLOYMENTS}/d/scale?dryRun=All", scale(3))
        assert dry["spec"] == {"replicas": 3} and dry["status"]["selector"] == "app=d"
        dry = await call(c, "PATCH", f"{DEPLOYMENTS}/d/scale?dryRun=All", {"spec": {"replicas": 4}},
                         content_type="application/merge-patch+json")
        assert dry["spec"] == {"replicas": 4}
        assert (await call(c, "GET", f"{DEPLOYMENTS}/d/scale"))["spec"] == {"replicas": 1}
        assert (await call(c, "GET", f"{DEPLOYMENTS}/d"))["spec"]["replicas"] == 1


async def test_a_custom_resource_scale_writer_owns_its_replicas_path(tmp_path):
    group = "example.com"
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": f"widgets.{group}"},
           "spec": {"group": group, "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "subresources": {"scale": {"specReplicasPath": ".spec.size",
                                                             "statusReplicasPath": ".status.size"}},
                                  "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                      "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                                      "status": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}]}}
    async with served(tmp_path) as (_, c):
        await call(c, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        widgets = f"/apis/{group}/v1/namespaces/default/widgets"
        for _ in tries():
            try:
                await call(c, "POST", widgets, {"apiVersion": f"{group}/v1", "kind": "Widget",
                                                "metadata": {"name": "d"}, "spec": {"size": 1}}, "app")
                break
            except ApiException:
                await asyncio.sleep(0.05)
        else:
            pytest.fail("the CRD was never served")
        dry = await call(c, "PUT", f"{widgets}/d/scale?dryRun=All", scale(7))  # (converted from storage, as written)
        assert dry["spec"]["replicas"] == 7 and (await call(c, "GET", f"{widgets}/d"))["spec"]["size"] == 1
        out = await call(c, "PUT", f"{widgets}/d/scale", scale(4), "kubectl")
        assert out["spec"]["replicas"] == 4
        w = await call(c, "GET", f"{widgets}/d")
        entries = by_manager(w)
        assert w["spec"]["size"] == 4 and entries["kubectl"]["fieldsV1"] == {"f:spec": {"f:size": {}}}
        assert entries["kubectl"]["subresource"] == "scale" and "time" not in entries["kubectl"]
        assert "app" not in entries  # its one field was taken
        # (a custom resource's patched Scale is held to no uid, unlike a built-in workload's; an update's
        # uid is the storage's precondition, as any update's)
        other = {"metadata": {"uid": "other-uid"}, "spec": {"replicas": 5}}
        assert (await call(c, "PATCH", f"{widgets}/d/scale", other, "kubectl",
                           "application/merge-patch+json"))["spec"]["replicas"] == 5
        code, message = await refused(c, "PUT", f"{widgets}/d/scale", {**scale(6), "metadata": {
            "name": "d", "uid": "other-uid"}}, "kubectl")
        assert code == 409 and message.startswith(f'Operation cannot be fulfilled on widgets.{group} "d": StorageError: '
                                                  f'invalid object, Code: 4, Key: /registry/{group}/widgets/default/d, '
                                                  'ResourceVersion: 0, ') and message.endswith(
            f'AdditionalErrorMsg: Precondition failed: UID in precondition: other-uid, UID in object meta: '
            f'{w["metadata"]["uid"]}'), message


async def test_a_write_through_scale_or_a_patch_that_names_another_object_is_a_bad_request(tmp_path):
    """The update and patch handlers judge the object they write, a /scale's Scale too, by
    EnsureObjectNamespaceMatchesRequestNamespace and checkName: another namespace or name is a 400
    and nothing changes (a Scale naming any object scaled this one; a patch moving the object to
    another namespace was the 422 of an immutable field)."""
    ns_words = "the namespace of the provided object does not match the namespace sent on the request"
    name_words = "the name of the object (other) does not match the name on the URL (d)"
    async with served(tmp_path) as (_, c):
        await call(c, "POST", DEPLOYMENTS, deployment(1), "app")
        elsewhere = {**scale(4), "metadata": {"name": "d", "namespace": "kube-system"}}
        other = {**scale(4), "metadata": {"name": "other"}}
        cases = [
            ("PUT", "d/scale", other, "application/json", name_words),
            ("PUT", "d/scale", elsewhere, "application/json", ns_words),
            ("PATCH", "d/scale", {"metadata": {"name": "other"}, "spec": {"replicas": 4}}, "application/merge-patch+json",
             name_words),
            ("PATCH", "d/scale", [{"op": "replace", "path": "/metadata/namespace", "value": "kube-system"}],
             "application/json-patch+json", ns_words),
            ("PATCH", "d/scale", other, APPLY, name_words),
            ("PATCH", "d/scale", elsewhere, APPLY, ns_words),
            ("PATCH", "d", {"metadata": {"namespace": "kube-system"}}, "application/merge-patch+json", ns_words),
            ("PATCH", "d", {**deployment(4), "metadata": {"name": "d", "namespace": "kube-system"}}, APPLY, ns_words),
        ]
        for method, path, body, ctype, words in cases:
            assert await refused(c, method, f"{DEPLOYMENTS}/{path}", body, "m", ctype, force=ctype == APPLY) == (
                400, words), (method, path, ctype)
        d = await call(c, "GET", f"{DEPLOYMENTS}/d")
        assert (d["metadata"]["namespace"], d["spec"]["replicas"]) == ("default", 1)
        assert (await call(c, "PUT", f"{DEPLOYMENTS}/d/scale", scale(2), "m"))["spec"]["replicas"] == 2



async def test_a_scale_naming_another_uid_is_a_conflict_and_changes_nothing(tmp_path):
    """A built-in workload's Scale carries its uid as a precondition (scaleUpdatedObjectInfo): one naming
    another uid by merge patch or apply is the 409 of deployments/scale, after the Scale's own validation
    and before the store's resourceVersion check; an update's uid is first the storage's precondition
    (DefaultUpdatedObjectInfo's), met before all of those, on the parent. Each leaves the replicas as they
    were. It was ignored (a 200), so a Scale read before the parent was deleted and made again scaled the
    new one (found by fuzz64's subresource probes)."""
    async with served(tmp_path) as (_, c):
        d = await call(c, "POST", DEPLOYMENTS, deployment(1), "app")
        uid = d["metadata"]["uid"]
        words = (f'Operation cannot be fulfilled on deployments/scale.apps "d": Precondition failed: UID in '
                 f'precondition: other-uid, UID in object meta: {uid}')
        stale = {**scale(4), "metadata": {"name": "d", "uid": "other-uid"}}
        merge = "application/merge-patch+json"
        for body, ctype in (({"metadata": {"uid": "other-uid"}, "spec": {"replicas": 4}}, merge), (stale, APPLY)):
            assert await refused(c, "PATCH", f"{DEPLOYMENTS}/d/scale", body, "m", ctype, force=ctype == APPLY) == (
                409, words), ctype
        # a patch's Scale: its validation, then its uid, then the store's resourceVersion: the first that fails answers
        old = {"metadata": {"uid": "other-uid", "resourceVersion": "1"}}
        assert (await refused(c, "PATCH", f"{DEPLOYMENTS}/d/scale", {**old, "spec": {"replicas": -1}}, "m",
                              merge))[0] == 422
        assert await refused(c, "PATCH", f"{DEPLOYMENTS}/d/scale", old, "m", merge) == (409, words)
        # an update's uid: the storage's precondition, before the Scale's validation
        for replicas in (4, -1):
            code, message = await refused(c, "PUT", f"{DEPLOYMENTS}/d/scale", {**stale, "spec": {"replicas": replicas}}, "m")
            assert code == 409 and message.startswith('Operation cannot be fulfilled on deployments.apps "d": '
                                                      'StorageError: invalid object, Code: 4, Key: '
                                                      '/registry/deployments/default/d, ') and message.endswith(
                f'AdditionalErrorMsg: Precondition failed: UID in precondition: other-uid, UID in object meta: {uid}'), message
        assert (await call(c, "GET", f"{DEPLOYMENTS}/d"))["spec"]["replicas"] == 1
        same = {**scale(4), "metadata": {"name": "d", "uid": uid}}
        assert (await call(c, "PUT", f"{DEPLOYMENTS}/d/scale", same, "m"))["spec"]["replicas"] == 4


async def test_a_scale_patch_that_leaves_no_object_metadata_is_the_scales_decode_error(tmp_path):
    """A patch of /scale whose result has a metadata that is no ObjectMeta (or is no object at all) is the
    patchers' 422 for a result that does not decode as a Scale (the JSON decoder's words for a json or
    merge patch, the unstructured converter's for a strategic merge patch), and an apply configuration's the
    400 of decoding it; its metadata was read first, a 500 ('int' object has no attribute 'get'), found by the
    fuzz helper's subresource probes."""
    words = "json: cannot unmarshal {} into Go struct field Scale.metadata of type v1.ObjectMeta"
    async with served(tmp_path) as (_, c):
        await call(c, "POST", DEPLOYMENTS, deployment(1), "app")
        cases = [({"metadata": "x"}, "application/merge-patch+json", words.format("string")),
                 ({"metadata": 1}, "application/strategic-merge-patch+json", "cannot restore struct from: int64"),
                 ([{"op": "replace", "path": "/metadata", "value": [1]}], "application/json-patch+json",
                  words.format("array"))]
        for body, ctype, error in cases:
            code, message = await refused(c, "PATCH", f"{DEPLOYMENTS}/d/scale", body, "m", ctype)
            assert code == 422 and message.startswith(' "" is invalid: patch: Invalid value: ') and \
                message.endswith(f'": {error}'), ctype
        assert await refused(c, "PATCH", f"{DEPLOYMENTS}/d/scale", {**scale(2), "metadata": True}, "m", APPLY,
                             force=True) == (400, 'Scale in version "v1" cannot be handled as a Scale: ' + words.format("bool"))
        root = [{"op": "replace", "path": "", "value": 1}]
        assert (await refused(c, "PATCH", f"{DEPLOYMENTS}/d/scale", root, "m", "application/json-patch+json"))[0] == 422
        assert (await call(c, "GET", f"{DEPLOYMENTS}/d"))["spec"]["replicas"] == 1


TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


async def test_a_builtin_scale_is_served_as_a_table_with_desired_and_available(tmp_path):
    """`kubectl get deployment/d --subresource=scale` asks for a Table: the workload's store prints the
    Scale with printScale's columns (Name, Desired, Available, Age); plain JSON is the Scale itself."""
    async with served(tmp_path) as (_, c):
        await call(c, "PATCH", f"{DEPLOYMENTS}/d", deployment(3), "app", APPLY)
        await call(c, "PATCH", f"{DEPLOYMENTS}/d/status", {"status": {"replicas": 2}}, "test",
                   "application/merge-patch+json")

        def get(accept: str) -> dict:
            request = c.param_serialize("GET", f"{DEPLOYMENTS}/d/scale", header_params={"Accept": accept})
            response = c.call_api(*request[:4])
            response.read()
            assert response.status == 200, response.data
            return json.loads(response.data)

        table = await asyncio.to_thread(get, TABLE)
        assert (table["kind"], table["apiVersion"]) == ("Table", "meta.k8s.io/v1")
        assert [(d["name"], d["type"]) for d in table["columnDefinitions"]] == [
            ("Name", "string"), ("Desired", "integer"), ("Available", "integer"), ("Age", "string")]
        assert table["columnDefinitions"][1]["description"].startswith("replicas is the desired number of instances")
        [row] = table["rows"]
        assert row["cells"][:3] == ["d", 3, 2] and row["cells"][3].endswith("s")
        assert row["object"]["kind"] == "PartialObjectMetadata" and row["object"]["metadata"]["name"] == "d"
        scale = await asyncio.to_thread(get, "application/json")
        assert (scale["kind"], scale["spec"], scale["status"]["replicas"]) == ("Scale", {"replicas": 3}, 2)
        assert table["metadata"] == {"resourceVersion": scale["metadata"]["resourceVersion"]}


async def test_a_scale_write_reports_unknown_fields_per_field_validation(tmp_path):
    """The update and patch handlers' strict decoding on /scale, as on any write: under Strict an
    unknown field is the update's 400 and the patch's 422, under Warn (the default) a Warning
    header each, under Ignore nothing."""
    def send(c, method: str, query: str, body: dict, ctype: str = "application/json"):
        r = c.rest_client.pool_manager.request(method, f"{c.configuration.host}{DEPLOYMENTS}/d/scale{query}",
                                               body=json.dumps(body).encode(), headers={"Content-Type": ctype})
        return r.status, json.loads(r.data), r.headers.get("Warning")
    async with served(tmp_path) as (_, c):
        await call(c, "POST", DEPLOYMENTS, deployment(1), "app")
        put = {**scale(2), "colour": "red"}
        code, status, _ = await asyncio.to_thread(send, c, "PUT", "?fieldValidation=Strict", put)
        assert (code, status["message"]) == (400, 'Scale in version "v1" cannot be handled as a Scale: strict decoding '
                                                  'error: unknown field "colour"')
        assert (await asyncio.to_thread(send, c, "PUT", "", put))[::2] == (200, '299 - "unknown field \\"colour\\""')
        assert (await asyncio.to_thread(send, c, "PUT", "?fieldValidation=Ignore", put))[::2] == (200, None)
        patch, merge = {"spec": {"replicas": 3}, "colour": "red"}, "application/merge-patch+json"
        code, status, _ = await asyncio.to_thread(send, c, "PATCH", "?fieldValidation=Strict", patch, merge)
        assert code == 422 and status["message"].endswith('": strict decoding error: unknown field "colour"')
        code, scaled, warned = await asyncio.to_thread(send, c, "PATCH", "", patch, merge)
        assert (code, scaled["spec"]["replicas"], warned) == (200, 3, '299 - "unknown field \\"colour\\""')
