"""A CustomResourceDefinition's status is a Go struct to kube-apiserver (CustomResourceDefinitionStatus:
conditions, acceptedNames, storedVersions; its acceptedNames a CustomResourceDefinitionNames: plural,
singular, shortNames, kind, listKind, categories), so it is served in that order whoever wrote it and in
whatever order: the create's empty status, the naming controller's, a status writer's. Over HTTP."""

from __future__ import annotations

import asyncio

from tests.apiserver.apiextensions import CRDS, install
from tests.controllers import tries
from tests.served import send, served

GROUP = "names.example.com"
THINGS = f"/apis/{GROUP}/v1/namespaces/default/things"
CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
       "metadata": {"name": f"things.{GROUP}"},
       "spec": {"group": GROUP, "scope": "Namespaced",
                "names": {"kind": "Thing", "plural": "things", "shortNames": ["th"], "categories": ["all"]},
                "versions": [{"name": "v1", "served": True, "storage": True,
                              "schema": {"openAPIV3Schema": {"type": "object",
                                                             "x-kubernetes-preserve-unknown-fields": True}}}]}}
STATUS = ["conditions", "acceptedNames", "storedVersions"]
NAMES = ["plural", "singular", "shortNames", "kind", "listKind", "categories"]


async def test_a_crd_status_is_served_in_go_struct_order_whoever_wrote_it(tmp_path):
    async with served(tmp_path) as (_, api):
        code, dry = await send(api, "POST", f"{CRDS}?dryRun=All", CRD)
        assert code == 201 and list(dry["status"]) == STATUS, dry["status"]
        assert dry["status"]["acceptedNames"] == {"plural": "", "kind": ""}
        assert list(dry["status"]["acceptedNames"]) == ["plural", "kind"]

        await install(api, CRD, THINGS)
        url = f"{CRDS}/things.{GROUP}"
        for _ in tries():  # the naming controller's status: names accepted, then Established
            code, crd = await send(api, "GET", url)
            if len(crd["status"]["conditions"] or []) == 2:
                break
            await asyncio.sleep(0.02)
        assert list(crd["status"]) == STATUS, crd["status"]
        assert list(crd["status"]["acceptedNames"]) == NAMES, crd["status"]["acceptedNames"]
        code, listed = await send(api, "GET", CRDS)
        assert code == 200 and [list(o["status"]) for o in listed["items"]] == [STATUS]

        status = crd["status"]
        reversed_status = {"storedVersions": status["storedVersions"],
                           "acceptedNames": dict(reversed(list(status["acceptedNames"].items()))),
                           "conditions": status["conditions"]}
        code, written = await send(api, "PUT", f"{url}/status", {**crd, "status": reversed_status})
        assert code == 200 and list(written["status"]) == STATUS, written
        assert list(written["status"]["acceptedNames"]) == NAMES
        code, merged = await send(api, "PATCH", f"{url}/status",
                                  {"status": {"storedVersions": ["v1"], "acceptedNames": {"categories": ["all"]}}},
                                  "application/merge-patch+json")
        assert code == 200 and list(merged["status"]) == STATUS
        assert list(merged["status"]["acceptedNames"]) == NAMES
