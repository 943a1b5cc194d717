"""A custom resource's number past the range of its schema's format is refused as kube-openapi's
numberValidator refuses it (IsValueValidAgainstRange): an int32 field past 2^31, a uint32 one below 0, an
integer past int64 or with a fraction, a float32 one past float32's largest. Its error is no kube-openapi
Validation, so it stands at the root with an empty value and names the field in its text ("Checked value
must be of type integer with format int32 in spec.replicas"). fuzz58 found such values stored wherever no
maximum stopped them."""

from __future__ import annotations

from tests.apiserver.apiextensions import install
from tests.served import send, served

GROUP = "formats.example.com"
CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
       "metadata": {"name": f"pools.{GROUP}"},
       "spec": {"group": GROUP, "scope": "Namespaced", "names": {"plural": "pools", "kind": "Pool"},
                "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                    "type": "object", "properties": {"spec": {"type": "object", "properties": {
                        "replicas": {"type": "integer", "format": "int32"},
                        "limit": {"type": "integer", "format": "int32", "maximum": 1000},
                        "port": {"type": "integer", "format": "uint32"},
                        "count": {"type": "integer"},
                        "ratio": {"type": "number", "format": "float"},
                        "weights": {"type": "array", "items": {"type": "integer", "format": "int32"}}}}}}}}]}}
PATH = f"/apis/{GROUP}/v1/namespaces/default/pools"


def pool(name: str, spec: dict) -> dict:
    return {"apiVersion": f"{GROUP}/v1", "kind": "Pool", "metadata": {"name": name}, "spec": spec}


async def test_a_number_past_its_formats_range_is_refused_at_the_root(tmp_path):
    async with served(tmp_path) as (_, api):
        await install(api, CRD, PATH)
        assert (await send(api, "POST", PATH, pool("p", {"replicas": 1})))[0] == 201
        for spec, checked in [({"replicas": 2**31}, "integer with format int32 in spec.replicas"),
                              ({"replicas": -(2**31) - 1}, "integer with format int32 in spec.replicas"),
                              ({"replicas": 1.5}, "integer with format int32 in spec.replicas"),
                              ({"port": -1}, "integer with format uint32 in spec.port"),
                              ({"count": 2**63}, "integer (default format) in spec.count"),
                              ({"ratio": 1e39}, "number with format float in spec.ratio"),
                              ({"weights": [1, 2**31]}, "integer with format int32 in spec.weights[1]")]:
            for code, got in [await send(api, "POST", f"{PATH}?dryRun=All", pool("q", spec)),
                              await send(api, "PATCH", f"{PATH}/p", {"spec": spec}, "application/merge-patch+json")]:
                assert code == 422 and got["reason"] == "Invalid", (spec, got)
                assert {"reason": "FieldValueInvalid", "field": "<nil>",
                        "message": f'Invalid value: "": Checked value must be of type {checked}'} in got["details"]["causes"]
        # nothing of them was kept; at the edges of the ranges a value is stored
        code, got = await send(api, "GET", f"{PATH}/p")
        assert code == 200 and got["spec"] == {"replicas": 1}
        edges = {"replicas": 2**31 - 1, "port": 2**32 - 1, "count": 2**63 - 1, "ratio": 3.4e38, "weights": [-(2**31), 2.0]}
        code, got = await send(api, "PATCH", f"{PATH}/p", {"spec": edges}, "application/merge-patch+json")
        assert code == 200 and got["spec"] == edges, got
