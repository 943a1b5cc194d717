"""Custom resources, CRDs and APIServices may not be updated without a resourceVersion
(AllowUnconditionalUpdate is false for their strategies): a PUT that leaves it out is the Invalid
Store.Update makes, naming the resource; one that names the stored version goes through. Built-in
kinds that allow it (ConfigMaps) still take a PUT without one."""

from __future__ import annotations

import orjson
from kubernetes.client.rest import ApiException

from tests.apiserver.apiextensions import CRDS, install
from tests.apiserver.test_rest_managedfields import call
from tests.served import served

GROUP = "cond.example.com"
WHY = "Invalid value: 0x0: must be specified for an update"


def crd() -> dict:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"things.{GROUP}"},
            "spec": {"group": GROUP, "scope": "Namespaced", "names": {"plural": "things", "kind": "Thing"},
                     "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                                   "schema": {"openAPIV3Schema": {"type": "object",
                                                                  "x-kubernetes-preserve-unknown-fields": True}}}]}}


async def _refused(c, path: str, body: dict) -> dict:
    try:
        await call(c, "PUT", path, body)
    except ApiException as e:
        assert e.status == 422
        return orjson.loads(e.body)
    raise AssertionError(f"PUT {path} without a resourceVersion went through")


async def test_an_update_without_a_resource_version_is_invalid_where_the_strategy_wants_one(tmp_path):
    async with served(tmp_path) as (_, c):
        things = f"/apis/{GROUP}/v1/namespaces/default/things"
        await install(c, crd(), things)
        body = {"apiVersion": f"{GROUP}/v1", "kind": "Thing", "metadata": {"name": "t"}, "spec": {"a": 1}}
        made = await call(c, "POST", things, body)
        for path in (f"{things}/t", f"{things}/t/status"):
            status = await _refused(c, path, {**body, "spec": {"a": 2}})
            assert status["message"] == f'things.{GROUP} "t" is invalid: metadata.resourceVersion: {WHY}'
            assert status["details"] == {"name": "t", "group": GROUP, "kind": "things", "causes": [
                {"reason": "FieldValueInvalid", "message": WHY, "field": "metadata.resourceVersion"}]}
        rv = made["metadata"]["resourceVersion"]
        updated = await call(c, "PUT", f"{things}/t", {**body, "metadata": {"name": "t", "resourceVersion": rv},
                                                       "spec": {"a": 2}})
        assert updated["spec"] == {"a": 2}
        stored = await call(c, "GET", f"{CRDS}/things.{GROUP}")
        del stored["metadata"]["resourceVersion"]
        status = await _refused(c, f"{CRDS}/things.{GROUP}", stored)
        assert status["message"].startswith(f'customresourcedefinitions.apiextensions.k8s.io "things.{GROUP}" is invalid')
        cms = "/api/v1/namespaces/default/configmaps"
        await call(c, "POST", cms, {"metadata": {"name": "cm"}})
        assert (await call(c, "PUT", f"{cms}/cm", {"metadata": {"name": "cm"}, "data": {"k": "v"}}))["data"] == {"k": "v"}
