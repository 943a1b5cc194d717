"""Deleting a CRD ends the watches on its custom resources, over HTTP with the official client's
watch: the watcher sees its objects deleted, then the stream ends, as kube-apiserver's crdHandler
tears the resource's storage (and with it every watch) down once the CRD is gone."""

from __future__ import annotations

import asyncio

from tests.apiserver.apiextensions import CRDS, install, watched
from tests.apiserver.test_rest_managedfields import call
from tests.served import served

GROUP = "gone.example.com"


async def test_the_watch_ends_when_the_crd_is_deleted(tmp_path):
    async with served(tmp_path) as (_, c):
        things = f"/apis/{GROUP}/v1/namespaces/default/things"
        await install(c, {
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"things.{GROUP}"},
            "spec": {"group": GROUP, "scope": "Namespaced", "names": {"plural": "things", "kind": "Thing"},
                     "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                         "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}, things)
        await call(c, "POST", things, {"apiVersion": f"{GROUP}/v1", "kind": "Thing", "metadata": {"name": "t"}})
        seen, done = await watched(c, GROUP, "things")
        await call(c, "DELETE", f"{CRDS}/things.{GROUP}")
        # the stream ends long before the watch's own 60 s timeout
        assert await asyncio.to_thread(done.wait, 30)
        assert seen == [("ADDED", "t"), ("DELETED", "t")]
