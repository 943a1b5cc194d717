"""A change of a CRD's spec ends the watches on its custom resources, over HTTP with the official
client's watch, as kube-apiserver's crdHandler tears the resource's storage down when the spec (or
the accepted names) differ from what it was built from; a change of the CRD's metadata alone keeps
them open. The client then lists again and sees the objects under the new schema."""

from __future__ import annotations

import asyncio

from tests.apiserver.apiextensions import CRDS, install, watched
from tests.apiserver.test_rest_managedfields import call
from tests.served import served

GROUP = "changing.example.com"
THINGS = f"/apis/{GROUP}/v1/namespaces/default/things"


def _crd() -> dict:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"things.{GROUP}"},
            "spec": {"group": GROUP, "scope": "Namespaced", "names": {"plural": "things", "kind": "Thing"},
                     "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                         "type": "object", "properties": {"spec": {
                             "type": "object", "properties": {"size": {"type": "integer"}}}}}}}]}}


async def _create(c, name: str) -> None:
    await call(c, "POST", THINGS, {"apiVersion": f"{GROUP}/v1", "kind": "Thing", "metadata": {"name": name}})


async def test_a_spec_change_ends_the_watch_and_a_label_change_does_not(tmp_path):
    async with served(tmp_path) as (_, c):
        await install(c, _crd(), THINGS)
        await _create(c, "a")
        seen, done = await watched(c, GROUP, "things")
        # metadata only: the storage stays, the same stream delivers the next object
        await call(c, "PATCH", f"{CRDS}/things.{GROUP}", {"metadata": {"labels": {"team": "a"}}},
                   content_type="application/merge-patch+json")
        await _create(c, "b")
        while len(seen) < 2:
            await asyncio.sleep(0.02)
        assert not done.is_set()
        # a schema change (a default for spec.size): the stream ends long before its own 60 s timeout
        new = _crd()
        size = new["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        size["properties"]["size"]["default"] = 3
        size["default"] = {}
        crd = await call(c, "GET", f"{CRDS}/things.{GROUP}")
        crd["spec"] = new["spec"]
        await call(c, "PUT", f"{CRDS}/things.{GROUP}", crd)
        assert await asyncio.to_thread(done.wait, 30)
        assert seen == [("ADDED", "a"), ("ADDED", "b")]
        # listing again shows the stored objects under the new schema (defaulted as they are read)
        listed = await call(c, "GET", THINGS)
        assert [(o["metadata"]["name"], o["spec"]) for o in listed["items"]] == [("a", {"size": 3}), ("b", {"size": 3})]
