"""Validation ratcheting over HTTP: once a CRD's rules are tightened, an update that leaves an
existing value as it was succeeds, and the rule it still fails comes back as a Warning header,
as kube-apiserver's CEL validator adds a ratcheted rule's error to the request's warnings."""

from __future__ import annotations

import asyncio

from nanokube.apiserver.rest import OFF_LOOP_OBJECT
from tests.apiserver.apiextensions.test_conversion_pruning import create_when_served
from tests.apiserver.test_rest_managedfields import call
from tests.served import served

GROUP = "ratchet.example.com"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
LOWER = [{"rule": "self == self.lowerAscii()", "message": "lower only"}]


def crd(name_schema: dict) -> dict:
    spec = {"type": "object", "properties": {"name": name_schema, "other": {"type": "string"}}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"things.{GROUP}"},
            "spec": {"group": GROUP, "scope": "Namespaced", "names": {"plural": "things", "kind": "Thing"},
                     "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                                   "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                       "spec": spec, "status": {"type": "object", "properties": {
                                           "phase": {"type": "string"}}}}}}}]}}


async def test_a_ratcheted_rule_is_a_warning(tmp_path):
    async with served(tmp_path) as (_, c):
        await call(c, "POST", CRDS, crd({"type": "string"}))
        things = f"/apis/{GROUP}/v1/namespaces/default/things"
        await create_when_served(c, things, {"apiVersion": f"{GROUP}/v1", "kind": "Thing", "metadata": {"name": "t"},
                                             "spec": {"name": "Mixed", "other": "a"}})
        stored = await call(c, "GET", f"{CRDS}/things.{GROUP}")
        stored["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["name"] = {
            "type": "string", "x-kubernetes-validations": LOWER}
        await call(c, "PUT", f"{CRDS}/things.{GROUP}", stored)

        expected = '299 - "spec.name: Invalid value: \\"Mixed\\": lower only"'
        warnings: list[str] = []
        for _ in range(100):  # until the tightened schema is served
            warnings.clear()
            await call(c, "PATCH", f"{things}/t", {"spec": {"other": "b"}},
                       content_type="application/merge-patch+json", warnings=warnings)
            if warnings:
                break
        assert warnings == [expected]

        warnings.clear()
        patched = await call(c, "PATCH", f"{things}/t/status", {"status": {"phase": "Ready"}},
                             content_type="application/merge-patch+json", warnings=warnings)
        assert patched["status"] == {"phase": "Ready"} and warnings == [expected]

        warnings.clear()
        await call(c, "PATCH", f"{things}/t", {"spec": {"name": "lower"}},
                   content_type="application/merge-patch+json", warnings=warnings)
        assert warnings == []


async def test_concurrent_updates_each_get_their_own_ratcheting_warnings(tmp_path):
    """Updates validated at the same time, each in a worker thread (objects past OFF_LOOP_OBJECT):
    every response carries the warning of its own object's ratcheted value, none lost to another's."""
    names = ["Alpha", "Beta", "Gamma", "Delta"]
    async with served(tmp_path) as (_, c):
        await call(c, "POST", CRDS, crd({"type": "string"}))
        things = f"/apis/{GROUP}/v1/namespaces/default/things"
        for n in names:
            await create_when_served(c, things, {"apiVersion": f"{GROUP}/v1", "kind": "Thing",
                                                 "metadata": {"name": n.lower()},
                                                 "spec": {"name": n, "other": "a" * OFF_LOOP_OBJECT}})
        stored = await call(c, "GET", f"{CRDS}/things.{GROUP}")
        stored["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["name"] = {
            "type": "string", "x-kubernetes-validations": LOWER}
        await call(c, "PUT", f"{CRDS}/things.{GROUP}", stored)
        first: list[str] = []
        for _ in range(100):  # until the tightened schema is served
            await call(c, "PATCH", f"{things}/alpha", {"metadata": {"labels": {"try": "1"}}},
                       content_type="application/merge-patch+json", warnings=first)
            if first:
                break

        for attempt in range(3):
            warned: dict[str, list[str]] = {n: [] for n in names}
            await asyncio.gather(*(call(c, "PATCH", f"{things}/{n.lower()}", {"metadata": {"labels": {"round": f"{attempt}"}}},
                                        content_type="application/merge-patch+json", warnings=warned[n])
                                   for n in names))
            assert warned == {n: [f'299 - "spec.name: Invalid value: \\"{n}\\": lower only"'] for n in names}
