"""CRD rules over a large value (a list past cel_rules.BOUND_FROM's 64 items), whose `self` and
`oldSelf` are set on the engine's context once per object instead of converted at every reference:
each rule still reads its own object's values, plain and optional `oldSelf` alike, rule after rule
and write after write, and a messageExpression reads them too. Over HTTP."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.rest import ApiException

from tests.apiserver.apiextensions import install
from tests.apiserver.test_rest_managedfields import call
from tests.served import served

GROUP = "big.example.com"
THINGS = f"/apis/{GROUP}/v1/namespaces/default/things"
GROWS = "self.l.size() >= oldSelf.l.size()"
RULES = [{"rule": " && ".join(["self.l.size() == self.n"] * 50), "message": "n is not the size"},
         {"rule": GROWS, "messageExpression": "'had ' + string(oldSelf.l.size()) + ', has ' + string(self.l.size())"},
         {"rule": "oldSelf.hasValue() ? oldSelf.value().n <= self.n : self.l.all(s, s == self.l[0])",
          "optionalOldSelf": True, "message": "first write: all alike; then n only grows"}]


def crd() -> dict:
    spec = {"type": "object", "x-kubernetes-validations": RULES, "properties": {
        "n": {"type": "integer"}, "l": {"type": "array", "maxItems": 10000, "items": {"type": "string", "maxLength": 8}}}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"things.{GROUP}"},
            "spec": {"group": GROUP, "scope": "Namespaced", "names": {"plural": "things", "kind": "Thing"},
                     "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                         "type": "object", "properties": {"spec": spec}}}}]}}


async def test_rules_over_a_large_list_read_each_writes_own_values(tmp_path):
    async with served(tmp_path) as (_, c):
        await install(c, crd(), THINGS)

        async def write(method: str, path: str, name: str, items: list[str], rv: str = "") -> dict:
            meta = {"name": name, **({"resourceVersion": rv} if rv else {})}
            return await call(c, method, path, {"apiVersion": f"{GROUP}/v1", "kind": "Thing", "metadata": meta,
                                                "spec": {"n": len(items), "l": items}})

        made = await write("POST", THINGS, "a", ["x"] * 1000)
        other = await write("POST", THINGS, "b", ["y"] * 200)  # another object: its own values
        assert (made["spec"]["n"], other["spec"]["n"]) == (1000, 200)
        grown = await write("PUT", f"{THINGS}/a", "a", ["x"] * 1000 + ["z"] * 5, made["metadata"]["resourceVersion"])
        assert grown["spec"]["n"] == 1005
        with pytest.raises(ApiException) as e:
            await write("PUT", f"{THINGS}/a", "a", ["x"] * 100, grown["metadata"]["resourceVersion"])
        assert [(c["field"], c["message"]) for c in json.loads(e.value.body)["details"]["causes"]] == [
            ("spec", "Invalid value: had 1005, has 100"),
            ("spec", "Invalid value: first write: all alike; then n only grows")]
        with pytest.raises(ApiException) as e:
            await write("POST", THINGS, "c", ["x"] * 99 + ["q"])
        assert [(c["field"], c["message"]) for c in json.loads(e.value.body)["details"]["causes"]] == [
            ("spec", "Invalid value: first write: all alike; then n only grows")]
