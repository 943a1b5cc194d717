"""A field selection in a CRD rule reads the field as cel-go's does, over HTTP: a map whose values
are optional values keeps them optional when a field of it is selected (the engine's own selection
unwrapped them, so `.orValue()` on one was 'no such overload'). nanokube prints `a.f` as `a["f"]`
for the engine, whose selection also copied the whole value it selected from."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.rest import ApiException

from tests.apiserver.apiextensions import install
from tests.apiserver.apiextensions.test_cel_equality_types import crd
from tests.apiserver.test_rest_managedfields import call
from tests.served import served

THINGS = "/apis/eq.example.com/v1/namespaces/default/things"


async def test_a_selected_optional_value_stays_optional(tmp_path):
    rule = "{'least': self.?replicas}.least.orValue(1) >= 1 && self.sizes.all(s, s > 0)"
    async with served(tmp_path) as (_, c):
        await install(c, crd([rule]), THINGS)
        for name, spec in [("set", {"replicas": 3, "sizes": [1, 2]}), ("unset", {"sizes": []})]:
            made = await call(c, "POST", THINGS, {"apiVersion": "eq.example.com/v1", "kind": "Thing",
                                                  "metadata": {"name": name}, "spec": spec})
            assert made["spec"] == spec
        with pytest.raises(ApiException) as e:
            await call(c, "POST", THINGS, {"apiVersion": "eq.example.com/v1", "kind": "Thing",
                                           "metadata": {"name": "zero"}, "spec": {"replicas": 0}})
        assert [(c["field"], c["message"]) for c in json.loads(e.value.body)["details"]["causes"]] == [
            ("spec", f"Invalid value: failed rule: {rule}")]
