"""A CRD rule comparing values of two types cel-go's checker cannot unify is refused when the CRD
is written, as kube-apiserver refuses it ('found no matching overload for '_==_' applied to
'(int, string)''), over HTTP; comparisons cel-go accepts still compile."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.rest import ApiException

from tests.apiserver.test_rest_managedfields import call
from tests.served import served

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
PROPS = {"replicas": {"type": "integer"}, "mode": {"type": "string"}, "on": {"type": "boolean"},
         "sizes": {"type": "array", "items": {"type": "integer"}},
         "at": {"type": "string", "format": "date-time"}, "any": {"x-kubernetes-int-or-string": True}}


def crd(rules: list[str]) -> dict:
    spec = {"type": "object", "properties": PROPS, "x-kubernetes-validations": [{"rule": r} for r in rules]}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "things.eq.example.com"},
            "spec": {"group": "eq.example.com", "scope": "Namespaced", "names": {"plural": "things", "kind": "Thing"},
                     "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                         "type": "object", "properties": {"spec": spec}}}}]}}


@pytest.mark.parametrize(("rule", "shown"), [
    ("self.replicas == 'x'", "(int, string)"),
    ("self.on != 'true'", "(bool, string)"),
    ("self.sizes == ['a']", "(list(int), list(string))"),
    ("self.at == '2020-01-01'", "(timestamp, string)"),
])
async def test_uncomparable_types_are_refused(tmp_path, rule, shown):
    async with served(tmp_path) as (_, c):
        with pytest.raises(ApiException) as e:
            await call(c, "POST", CRDS, crd([rule]))
        assert e.value.status == 422
        op = "_!=_" if "!=" in rule else "_==_"
        assert f"found no matching overload for '{op}' applied to '{shown}'" in json.loads(e.value.body)["message"]


async def test_comparable_types_compile(tmp_path):
    rules = ["self.replicas == 1", "self.mode == 'a'", "self.sizes == []", "self.any == 'x' || self.any == 1",
             "self.at == timestamp('2020-01-01T00:00:00Z')", "type(self.any) == int"]
    async with served(tmp_path) as (_, c):
        made = await call(c, "POST", CRDS, crd(rules))  # a refused rule raises ApiException (422)
        schema = made["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        assert [v["rule"] for v in schema["x-kubernetes-validations"]] == rules
