"""A CRD update compiles the rules and messageExpressions the CRD already held in the stored-
expressions environment (upstream's preexistingExpressions): a CRD an older nanokube stored with a
rule today's checker refuses ('self.replicas == 'x'' on an integer) still takes updates, and its
objects are validated with it, while the same kind of rule added by the update is refused with
cel-go's 'found no matching overload' message. Over HTTP; the older server's write goes through the
store, as it would have written it."""

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
OLD_RULE = "self.replicas == 'x'"
OLD_MESSAGE = "self.on == 'true' ? 'on' : 'off'"


def _rules(obj: dict) -> list[dict]:
    return obj["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"]


async def _stored_by_an_older_server(server, c) -> dict:
    """The CRD as an older server wrote it: its rules replaced in the store, then served."""
    def older(obj: dict) -> None:
        _rules(obj)[0]["rule"] = OLD_RULE
        _rules(obj)[1]["messageExpression"] = OLD_MESSAGE

    return await rewritten_in_store(server, c, crd(["self.replicas >= 0", "self.mode != ''"]), older)


async def test_stored_rules_compile_on_update_and_new_ones_do_not(tmp_path):
    async with served(tmp_path) as (server, c):
        got = await _stored_by_an_older_server(server, c)
        # a label, then a schema change that keeps both stored expressions: accepted
        await call(c, "PATCH", f"{CRDS}/{NAME}", {"metadata": {"labels": {"team": "a"}}},
                   content_type="application/merge-patch+json")
        got = await call(c, "GET", f"{CRDS}/{NAME}")
        got["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["extra"] = {
            "type": "string"}
        got = await call(c, "PUT", f"{CRDS}/{NAME}", got)
        assert [r.get("rule") for r in _rules(got)] == [OLD_RULE, "self.mode != ''"]
        assert got["metadata"]["labels"] == {"team": "a"}
        # a new rule of the same kind is refused, as on create
        _rules(got).append({"rule": "self.on != 'true'"})
        with pytest.raises(ApiException) as e:
            await call(c, "PUT", f"{CRDS}/{NAME}", got)
        assert e.value.status == 422
        body = json.loads(e.value.body)
        assert "found no matching overload for '_!=_' applied to '(bool, string)'" in body["message"]
        assert [c["field"] for c in body["details"]["causes"]] == [
            "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[2].rule"]


async def test_a_new_message_expression_of_that_kind_is_refused(tmp_path):
    async with served(tmp_path) as (server, c):
        got = await _stored_by_an_older_server(server, c)
        _rules(got)[0]["messageExpression"] = OLD_MESSAGE  # stored, but as a messageExpression only
        _rules(got)[1]["rule"] = "self.mode != 'x'"
        got = await call(c, "PUT", f"{CRDS}/{NAME}", got)
        _rules(got)[1]["messageExpression"] = "self.replicas == 'y' ? 'a' : 'b'"
        with pytest.raises(ApiException) as e:
            await call(c, "PUT", f"{CRDS}/{NAME}", got)
        assert e.value.status == 422
        assert "found no matching overload for '_==_' applied to '(int, string)'" in json.loads(e.value.body)["message"]


async def test_objects_are_validated_with_the_stored_rule(tmp_path):
    async with served(tmp_path) as (server, c):
        await _stored_by_an_older_server(server, c)
        with pytest.raises(ApiException) as e:
            for _ in tries():
                try:
                    await call(c, "POST", THINGS, {"apiVersion": "eq.example.com/v1", "kind": "Thing",
                                                   "metadata": {"name": "t"}, "spec": {"replicas": 1, "mode": "", "on": True}})
                except ApiException as err:
                    if err.status != 404:  # not served yet
                        raise
                    await asyncio.sleep(0.05)
        assert e.value.status == 422
        causes = json.loads(e.value.body)["details"]["causes"]
        # the stored rule runs (ints never equal strings), and the stored messageExpression
        # is the message of the second
        assert [(c["field"], c["message"]) for c in causes] == [
            ("spec", f"Invalid value: failed rule: {OLD_RULE}"), ("spec", "Invalid value: off")]
