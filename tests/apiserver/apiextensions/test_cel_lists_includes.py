"""`includes` (Kubernetes' lists library v1, new in 1.37) is in the stored-expressions environment
only: a 1.37 server's minimum compatibility version is 1.36, so a rule written now that calls it is
refused ('undeclared reference to 'includes''), while a CRD a newer server stored with such a rule
keeps validating its objects with it. Over HTTP; the newer server's write goes through the store."""

from __future__ import annotations

import asyncio
import json

import pytest
from kubernetes.client.rest import ApiException

from tests.apiserver.apiextensions import rewritten_in_store
from tests.apiserver.apiextensions.test_cel_equality_types import CRDS, crd
from tests.apiserver.test_rest_managedfields import call
from tests.served import served
from tests.controllers import tries

NAME = "things.eq.example.com"
THINGS = "/apis/eq.example.com/v1/namespaces/default/things"
RULE = "!self.sizes.includes(13) && !self.mode.includes('x')"


def _rules(obj: dict) -> list[dict]:
    return obj["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"]


async def test_a_new_rule_calling_includes_is_refused(tmp_path):
    async with served(tmp_path) as (_, c):
        with pytest.raises(ApiException) as e:
            await call(c, "POST", CRDS, crd([RULE]))
        assert e.value.status == 422
        assert "undeclared reference to 'includes' (in container '')" in json.loads(e.value.body)["message"]


async def _stored_by_a_newer_server(server, c) -> None:
    await rewritten_in_store(server, c, crd(["self.replicas >= 0"]), lambda obj: _rules(obj)[0].update(rule=RULE))


async def _create(c, name: str, spec: dict) -> dict:
    body = {"apiVersion": "eq.example.com/v1", "kind": "Thing", "metadata": {"name": name}, "spec": spec}
    for _ in tries():
        try:
            return await call(c, "POST", THINGS, body)
        except ApiException as err:
            if err.status != 404:  # 404: the new schema is not served yet
                raise
            await asyncio.sleep(0.05)
    raise AssertionError("never served")


async def test_a_stored_rule_calling_includes_validates_objects(tmp_path):
    async with served(tmp_path) as (server, c):
        await _stored_by_a_newer_server(server, c)
        await _create(c, "ok", {"replicas": 1, "mode": "a", "sizes": [1, 2]})
        for name, spec in (("list", {"replicas": 1, "mode": "a", "sizes": [1, 13]}),
                           ("string", {"replicas": 1, "mode": "x", "sizes": []})):
            with pytest.raises(ApiException) as e:
                await _create(c, name, spec)
            assert e.value.status == 422
            causes = json.loads(e.value.body)["details"]["causes"]
            assert [(c["field"], c["message"]) for c in causes] == [("spec", f"Invalid value: failed rule: {RULE}")]
        # and the CRD takes updates that keep the stored rule
        await call(c, "PATCH", f"{CRDS}/{NAME}", {"metadata": {"labels": {"team": "a"}}},
                   content_type="application/merge-patch+json")
