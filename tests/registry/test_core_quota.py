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


async def test_a_scope_selector_is_judged_as_validateScopedResourceSelectorRequirement(tmp_path):
    """A pod-state scope (BestEffort, Terminating, ...) may only be selected with Exists, and the errors name
    spec.scopeSelector.matchExpressions, not an item of it, as upstream's (fuzz50: BestEffort `In ["a"]` and
    CrossNamespacePodAffinity `In ["a"]` were stored)."""
    async def causes(api, *exprs, hard=None):
        quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"},
                 "spec": {"hard": hard or {"pods": "1"}, "scopeSelector": {"matchExpressions": list(exprs)}}}
        code, status = await send(api, "POST", "/api/v1/namespaces/default/resourcequotas?dryRun=All", quota)
        return code, [(c["field"], c["message"]) for c in status.get("details", {}).get("causes", [])]
    p = "spec.scopeSelector.matchExpressions"
    exists_only = ("must be 'Exists' when scope is any of ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, "
                   "ResourceQuotaScopeBestEffort, ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity")
    async with served(tmp_path) as (_, api):
        for scope in ("BestEffort", "NotBestEffort", "Terminating", "NotTerminating", "CrossNamespacePodAffinity"):
            assert await causes(api, {"scopeName": scope, "operator": "In", "values": ["a"]}) == \
                (422, [(f"{p}.operator", f'Invalid value: "In": {exists_only}')]), scope
            assert (await causes(api, {"scopeName": scope, "operator": "Exists"}))[0] == 201
        assert await causes(api, {"scopeName": "Terminating", "operator": "DoesNotExist"}) == \
            (422, [(f"{p}.operator", f'Invalid value: "DoesNotExist": {exists_only}')])
        assert (await causes(api, {"scopeName": "PriorityClass", "operator": "NotIn", "values": ["a"]}))[0] == 201
        assert await causes(api, {"scopeName": "PriorityClass", "operator": "In"}) == \
            (422, [(f"{p}.values", "Required value: must be at least one value when `operator` is 'In' or 'NotIn' for scope selector")])
        assert await causes(api, {"scopeName": "Nope", "operator": "Near"}) == \
            (422, [(f"{p}.scopeName", 'Invalid value: "Nope": unsupported scope'),
                   (f"{p}.operator", 'Invalid value: "Near": not a valid selector operator')])
        assert await causes(api, {"scopeName": "BestEffort", "operator": "Exists"}, {"scopeName": "NotBestEffort", "operator": "Exists"}) == \
            (422, [(p, "Invalid value: null: conflicting scopes")])
        code, got = await causes(api, {"scopeName": "BestEffort", "operator": "Exists"}, hard={"cpu": "1"})
        assert (code, got) == (422, [(p, 'Invalid value: {"matchExpressions":[{"scopeName":"BestEffort","operator":"Exists"}]}: '
                                         "unsupported scope applied to resource")])


async def test_a_quotas_scopes_do_not_change(tmp_path):
    """ValidateResourceQuotaUpdate compares the scopes as sets: another scope, or none left, is `field is immutable`
    (fuzz50: both were stored), the new scopes as Go prints them (`[]` for an empty list, `null` for none); the same scopes reordered, or the hard limits changed, pass."""
    base = "/api/v1/namespaces/default/resourcequotas"
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"},
             "spec": {"hard": {"pods": "1"}, "scopes": ["NotBestEffort", "NotTerminating"]}}
    async with served(tmp_path) as (_, api):
        code, live = await send(api, "POST", base, quota)
        assert code == 201, live
        for spec, want in (({"hard": {"pods": "1"}, "scopes": ["BestEffort"]}, 'Invalid value: ["BestEffort"]: field is immutable'),
                           ({"hard": {"pods": "1"}, "scopes": []}, "Invalid value: []: field is immutable"),
                           ({"hard": {"pods": "1"}}, "Invalid value: null: field is immutable")):
            code, status = await send(api, "PUT", f"{base}/q?dryRun=All", {**live, "spec": spec})
            assert (code, status["details"]["causes"]) == (422, [{"reason": "FieldValueInvalid", "message": want, "field": "spec.scopes"}])
        code, _ = await send(api, "PUT", f"{base}/q?dryRun=All",
                             {**live, "spec": {"hard": {"pods": "2"}, "scopes": ["NotTerminating", "NotBestEffort"]}})
        assert code == 200
        # the empty list only reaches validation: a quota created with it is served without it
        code, made = await send(api, "POST", base, {**quota, "metadata": {"name": "empty"},
                                                    "spec": {"hard": {"pods": "1"}, "scopes": []}})
        assert (code, made["spec"]) == (201, {"hard": {"pods": "1"}})
