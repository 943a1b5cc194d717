"""ResourceQuota validation through the API: a quota of 8,000 unsupported scopes, each refused
with the whole list (upstream's validateResourceQuotaScopes), answers 422 with a Status of a bounded
size: its identical causes collapsed (machinery/errors.invalid), not 8,000 copies of the list."""

import json

from tests.served import send, served


async def test_thousands_of_unsupported_scopes_answer_a_bounded_status(tmp_path):
    scopes = [f"NotAScope{i:05d}" for i in range(8000)]
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"},
             "spec": {"hard": {"pods": "1"}, "scopes": scopes}}
    async with served(tmp_path) as (_, api):
        code, status = await send(api, "POST", "/api/v1/namespaces/default/resourcequotas", quota)
        assert code == 422 and status["reason"] == "Invalid"
        printed = json.dumps(scopes, separators=(",", ":"))
        body = f"Invalid value: {printed}: unsupported scope"
        assert status["message"] == f'ResourceQuota "q" is invalid: spec.scopes: {body}'
        assert status["details"]["causes"] == [{"reason": "FieldValueInvalid", "message": body, "field": "spec.scopes"}]
        assert len(json.dumps(status)) < 3 * len(json.dumps(quota))  # 8,000 causes were 1.2 GB
        code, _ = await send(api, "GET", "/api/v1/namespaces/default/resourcequotas/q")
        assert code == 404


async def test_a_few_unsupported_scopes_keep_a_cause_each(tmp_path):
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"},
             "spec": {"hard": {"pods": "1"}, "scopes": ["Nope", "Terminating", "Nope"]}}
    async with served(tmp_path) as (_, api):
        code, status = await send(api, "POST", "/api/v1/namespaces/default/resourcequotas", quota)
        assert code == 422
        body = 'Invalid value: ["Nope","Terminating","Nope"]: unsupported scope'
        assert status["message"] == f'ResourceQuota "q" is invalid: spec.scopes: {body}'
        cause = {"reason": "FieldValueInvalid", "message": body, "field": "spec.scopes"}
        assert status["details"]["causes"] == [cause, cause]  # as upstream: one per error, repeats kept
