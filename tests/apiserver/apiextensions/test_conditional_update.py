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


async def test_an_update_reads_the_resource_version_as_a_number_and_refuses_one_that_is_none(tmp_path):
    """ObjectResourceVersion parses an update's or a patch's resourceVersion with strconv.ParseUint: "0" asks
    for no version (the Invalid where the strategy wants one, an unconditional update where it does not),
    leading zeros name the same revision, and one that does not parse ("1_0", "-1") is a 400, not the 409
    of a version that merely differs (fuzz47; upstream's raw strconv error is a 500)."""
    async with served(tmp_path) as (_, c):
        things = f"/apis/{GROUP}/v1/namespaces/default/things"
        await install(c, crd(), things)
        body = {"apiVersion": f"{GROUP}/v1", "kind": "Thing", "metadata": {"name": "t"}, "spec": {"a": 1}}
        rv = (await call(c, "POST", things, body))["metadata"]["resourceVersion"]
        status = await _refused(c, f"{things}/t", {**body, "metadata": {"name": "t", "resourceVersion": "0"}})
        assert status["details"]["causes"][0]["message"] == WHY
        updated = await call(c, "PUT", f"{things}/t", {**body, "metadata": {"name": "t", "resourceVersion": "00" + rv},
                                                       "spec": {"a": 2}})
        assert updated["spec"] == {"a": 2} and updated["metadata"]["resourceVersion"] != rv
        for bad in ("1_0", "-1", "+1", str(2**64)):
            for method, sent, ctype in (("PUT", {**body, "metadata": {"name": "t", "resourceVersion": bad}}, "application/json"),
                                        ("PATCH", {"metadata": {"resourceVersion": bad}}, "application/merge-patch+json")):
                try:
                    await call(c, method, f"{things}/t", sent, content_type=ctype)
                except ApiException as e:
                    assert (e.status, orjson.loads(e.body)["message"]) == (400, f'invalid resource version "{bad}"')
                else:
                    raise AssertionError(f"{method} with resourceVersion {bad!r} went through")
        cms = "/api/v1/namespaces/default/configmaps"
        await call(c, "POST", cms, {"metadata": {"name": "cm"}})
        unconditional = await call(c, "PUT", f"{cms}/cm", {"metadata": {"name": "cm", "resourceVersion": "0"}, "data": {"k": "v"}})
        assert unconditional["data"] == {"k": "v"}
