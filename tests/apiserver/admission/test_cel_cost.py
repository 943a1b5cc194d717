"""CEL limits of ValidatingAdmissionPolicies over HTTP, with the official client: the parser's
recursion limit, the per-call cost limit on what an expression actually does, and the
runtime cost budget a policy's expressions share."""

from __future__ import annotations

import asyncio
import json

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.served import served

RULES = [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}]


def policy(name: str, validations: list[dict], **spec) -> dict:
    return {"metadata": {"name": name}, "spec": {"matchConstraints": {"resourceRules": RULES},
                                                 "validations": validations, **spec}}


async def bind(admission, name: str, body: dict) -> None:
    await asyncio.to_thread(admission.create_validating_admission_policy, body)
    await asyncio.to_thread(admission.create_validating_admission_policy_binding, {
        "metadata": {"name": name}, "spec": {"policyName": name, "validationActions": ["Deny"]}})


async def test_a_long_operator_chain_is_the_parsers_recursion_error(tmp_path):
    """cel-go's parser counts one level per operator: 250 of them compile, 3,000 are refused with its
    'max recursion depth exceeded' at no location (was a Python RecursionError reported as the
    nesting limit at 1:1)."""
    chain = " + ".join(["1"] * 3000)
    async with served(tmp_path) as (_, api_client):
        admission = client.AdmissionregistrationV1Api(api_client)
        with pytest.raises(ApiException) as e:
            await asyncio.to_thread(admission.create_validating_admission_policy,
                                    policy("chain", [{"expression": f"{chain} > 0"}]))
        assert e.value.status == 422
        [cause] = json.loads(e.value.body)["details"]["causes"]
        assert cause["field"] == "spec.validations[0].expression"
        assert cause["message"].endswith(
            ": compilation failed: ERROR: <input>:-1:0: max recursion depth exceeded")
        made = await asyncio.to_thread(admission.create_validating_admission_policy,
                                       policy("fits", [{"expression": " + ".join(["1"] * 250) + " == 250"}]))
        assert made.metadata.name == "fits"
