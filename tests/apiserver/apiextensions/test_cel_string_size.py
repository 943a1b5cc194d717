"""size() of a string counts its code points, as cel-go's does: a CRD rule `self.size() <= 5` takes
'héllo' (five code points, six UTF-8 bytes) and refuses 'hélloo'; on a dyn value (an int-or-string
field) too. Over HTTP."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.rest import ApiException

from tests.apiserver.apiextensions import install
from tests.apiserver.apiextensions.test_cel_equality_types import crd
from tests.apiserver.test_rest_managedfields import call
from tests.served import served

THINGS = "/apis/eq.example.com/v1/namespaces/default/things"


def _crd() -> dict:
    body = crd([])
    spec = body["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec["properties"]["mode"]["x-kubernetes-validations"] = [{"rule": "self.size() <= 5", "message": "mode"}]
    spec["properties"]["any"]["x-kubernetes-validations"] = [
        {"rule": "type(self) == int || size(self) <= 5", "message": "any"}]
    return body


async def _create(c, name: str, spec: dict) -> None:
    await call(c, "POST", THINGS, {"apiVersion": "eq.example.com/v1", "kind": "Thing", "metadata": {"name": name}, "spec": spec})


async def test_string_size_counts_code_points(tmp_path):
    async with served(tmp_path) as (_, c):
        await install(c, _crd(), THINGS)
        await _create(c, "five", {"mode": "héllo", "any": "wörld"})
        with pytest.raises(ApiException) as e:
            await _create(c, "six", {"mode": "hélloo", "any": "wörldé"})
        assert e.value.status == 422
        causes = json.loads(e.value.body)["details"]["causes"]
        assert sorted((c["field"], c["message"]) for c in causes) == [
            ("spec.any", 'Invalid value: "wörldé": any'), ("spec.mode", 'Invalid value: "hélloo": mode')]
