"""Write options validated as ValidateCreateOptions (and Update's, Patch's) does: fieldManager,
dryRun then fieldValidation, each a field error of one 422 on the options kind."""

from __future__ import annotations

import asyncio
import json

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.served import served


@pytest.fixture
async def core(tmp_path):
    async with served(tmp_path) as (_, api_client):
        yield client.CoreV1Api(api_client)


async def test_a_bad_field_validation_is_an_invalid_option_beside_the_others(core):
    body = {"metadata": {"name": "c"}}
    with pytest.raises(ApiException) as e:
        await asyncio.to_thread(core.create_namespaced_config_map, "default", body, dry_run="Some",
                                field_validation="Loud", field_manager="a\tb")
    assert e.value.status == 422
    status = json.loads(e.value.body)
    assert status["message"] == (
        'CreateOptions.meta.k8s.io "" is invalid: [fieldManager: Invalid value: "a\\tb": invalid character U+0009 '
        '(at position 1), dryRun: Unsupported value: ["Some"]: supported values: "All", fieldValidation: '
        'Unsupported value: "Loud": supported values: "", "Ignore", "Strict", "Warn"]')
    assert [c["field"] for c in status["details"]["causes"]] == ["fieldManager", "dryRun", "fieldValidation"]
    made = await asyncio.to_thread(core.create_namespaced_config_map, "default", body, field_validation="")
    assert made.metadata.name == "c"
