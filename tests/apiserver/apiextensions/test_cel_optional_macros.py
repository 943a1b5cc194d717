"""The optional types' macros in CRD rules, as cel-go's OptionalTypes library declares them:
`self.?limits.optMap(l, l.max)` maps a present field's value and leaves an absent one none, and
optFlatMap's body is itself an optional (a body that is not is refused when the CRD is written).
Over HTTP."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.rest import ApiException

from tests.apiserver.apiextensions import install
from tests.apiserver.apiextensions.test_cel_equality_types import CRDS, crd
from tests.apiserver.test_rest_managedfields import call
from tests.served import served

THINGS = "/apis/eq.example.com/v1/namespaces/default/things"
LIMITS = {"type": "object", "properties": {"max": {"type": "integer"}}}


def _crd(rules: list[str]) -> dict:
    body = crd(rules)
    body["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["limits"] = LIMITS
    return body


async def _create(c, name: str, spec: dict) -> None:
    await call(c, "POST", THINGS, {"apiVersion": "eq.example.com/v1", "kind": "Thing", "metadata": {"name": name}, "spec": spec})


async def test_opt_map_and_opt_flat_map_in_rules(tmp_path):
    rules = ["self.?limits.optMap(l, l.max).orValue(10) >= self.replicas",
             "self.?limits.optFlatMap(l, l.?max).orValue(0) >= 0"]
    async with served(tmp_path) as (_, c):
        await install(c, _crd(rules), THINGS)
        await _create(c, "defaulted", {"replicas": 10})
        await _create(c, "limited", {"replicas": 2, "limits": {"max": 3}})
        with pytest.raises(ApiException) as e:
            await _create(c, "over", {"replicas": 4, "limits": {"max": 3}})
        assert [(c["field"], c["message"]) for c in json.loads(e.value.body)["details"]["causes"]] == [
            ("spec", f"Invalid value: failed rule: {rules[0]}")]


async def test_opt_flat_map_needs_an_optional_body(tmp_path):
    async with served(tmp_path) as (_, c):
        with pytest.raises(ApiException) as e:
            await call(c, "POST", CRDS, _crd(["self.?limits.optFlatMap(l, l.max).orValue(0) >= 0"]))
        assert e.value.status == 422
        # cel-go expands optFlatMap to a conditional whose branches then disagree
        assert "found no matching overload for '_?_:_' applied to '(bool, int, " in json.loads(e.value.body)["message"]
