"""A custom resource's watch history starts when its storage is built, as upstream's crdHandler
builds a new cacher for a CRD whose history begins at that cacher's first list: a watch from a
resourceVersion before it is 410 Expired "too old resource version: R (the list's)", not one that
starts with no events; so is one from before a spec change that rebuilt the storage. Over HTTP with
the official client's connection pool."""

from __future__ import annotations

import orjson

from tests.apiserver.apiextensions import CRDS, install, lines_until, open_watch
from tests.apiserver.test_rest_managedfields import call
from tests.served import served

GROUP = "history.example.com"
THINGS = f"/apis/{GROUP}/v1/namespaces/default/things"


def _crd() -> dict:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"things.{GROUP}"},
            "spec": {"group": GROUP, "scope": "Namespaced", "names": {"plural": "things", "kind": "Thing"},
                     "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                         "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}


async def _watch(c, rv: str, n: int) -> list[dict]:
    r = await open_watch(c, f"{THINGS}?watch=1&resourceVersion={rv}&timeoutSeconds=5")
    return [orjson.loads(line) for line in await lines_until(r, lambda lines: len(lines) >= n)]


def _expired(lines: list[dict]) -> tuple[str, int]:
    assert [(e["type"], e["object"]["reason"], e["object"]["code"]) for e in lines] == [("ERROR", "Expired", 410)]
    message = lines[0]["object"]["message"]
    assert message.startswith("too old resource version: ")
    rv, listed = message.removeprefix("too old resource version: ").split(" ")
    return rv, int(listed.strip("()"))


async def test_a_watch_from_before_the_crd_or_its_storage_change_is_expired(tmp_path):
    async with served(tmp_path) as (_, c):
        before = (await call(c, "POST", "/api/v1/namespaces/default/configmaps",
                             {"metadata": {"name": "before"}}))["metadata"]["resourceVersion"]
        await install(c, _crd(), THINGS)
        a = await call(c, "POST", THINGS, {"apiVersion": f"{GROUP}/v1", "kind": "Thing", "metadata": {"name": "a"}})
        a_rv = int(a["metadata"]["resourceVersion"])

        rv, listed = _expired(await _watch(c, before, 1))
        assert rv == before and int(before) < listed < a_rv
        # from the storage's first list on, the history has every event
        got = await _watch(c, str(listed), 1)
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in got] == [("ADDED", "a")]

        # a spec change rebuilds the storage: its history starts again, after `a`
        crd = await call(c, "GET", f"{CRDS}/things.{GROUP}")
        crd["spec"]["versions"][0]["additionalPrinterColumns"] = [{"name": "Size", "type": "integer",
                                                                   "jsonPath": ".spec.size"}]
        changed = int((await call(c, "PUT", f"{CRDS}/things.{GROUP}", crd))["metadata"]["resourceVersion"])
        rv, relisted = _expired(await _watch(c, str(a_rv), 1))
        assert rv == str(a_rv) and relisted >= changed
        b = await call(c, "POST", THINGS, {"apiVersion": f"{GROUP}/v1", "kind": "Thing", "metadata": {"name": "b"}})
        got = await _watch(c, str(relisted), 1)
        assert [(e["type"], e["object"]["metadata"]["resourceVersion"]) for e in got] == [
            ("ADDED", b["metadata"]["resourceVersion"])]
