"""A custom resource whose CRD's rules are expensive is validated off the event loop however small
it is: the server keeps answering other clients meanwhile (a rule accepted under upstream's cost
limits may take a second or more to run here)."""

from __future__ import annotations

import asyncio
import json

from kubernetes import config

from tests.apiserver.apiextensions.test_conversion_pruning import create_when_served
from tests.apiserver.test_rest_managedfields import call
from tests.served import served

GROUP = "costly.example.com"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
#: ~270,000 units of estimated cost whatever the object holds
COSTLY = "lists.range(500).map(x, lists.range(500)).size() > 0"


async def test_a_small_object_with_an_expensive_rule_leaves_the_loop_free(tmp_path):
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": f"things.{GROUP}"},
           "spec": {"group": GROUP, "scope": "Namespaced", "names": {"plural": "things", "kind": "Thing"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                        "type": "object", "x-kubernetes-validations": [{"rule": COSTLY}],
                        "properties": {"spec": {"type": "object", "properties": {"n": {"type": "integer"}}}}}}}]}}
    async with served(tmp_path) as (_, c):
        await call(c, "POST", CRDS, crd)
        things = f"/apis/{GROUP}/v1/namespaces/default/things"
        await create_when_served(c, things, {"apiVersion": f"{GROUP}/v1", "kind": "Thing",
                                             "metadata": {"name": "first"}, "spec": {"n": 0}})
        other = config.new_client_from_config(config_file=str(tmp_path / "kubeconfig"))
        try:
            write = asyncio.ensure_future(call(c, "POST", things, {"apiVersion": f"{GROUP}/v1", "kind": "Thing",
                                                                   "metadata": {"name": "second"}, "spec": {"n": 1}}))
            answered = 0
            while not write.done():
                ready = await asyncio.to_thread(other.call_api, "GET", other.configuration.host + "/readyz")
                ready.read()
                assert ready.status == 200 and ready.data == b"ok"
                answered += not write.done()
            created = await write
        finally:
            other.close()
        assert created["metadata"]["name"] == "second"
        # the loop held by the validation would have answered the first readyz at most
        assert answered >= 3, json.dumps({"answered while the write was validated": answered})
