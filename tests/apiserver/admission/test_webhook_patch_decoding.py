"""A mutating webhook's patch that leaves a value of the wrong type for its field is refused as
kube-apiserver refuses it, when it decodes the patched JSON into the kind: a 500 carrying the JSON
decoder's words, and nothing is stored."""

from __future__ import annotations

import pytest

from nanokube.machinery.errors import APIError
from tests.apiserver.admission.server import json_patch
from tests.apiserver.admission.test_webhooks import cm, configure, hook, server, stack  # noqa: F401


@pytest.mark.parametrize(("ops", "message"), [
    ([{"op": "add", "path": "/data", "value": {"k": 5}}],
     "json: cannot unmarshal number into Go struct field ConfigMap.data of type string"),
    ([{"op": "add", "path": "/metadata/labels", "value": ["a"]}],
     "json: cannot unmarshal array into Go struct field ObjectMeta.metadata.labels of type map[string]string"),
])
async def test_a_patch_of_the_wrong_type_is_the_decoders_500(stack, server, ops, message):  # noqa: F811
    server.handlers["/m"] = lambda r: json_patch(r, ops)
    await configure(stack, "mutating", "m", hook(server, "m.example.com", "/m"))
    configmaps = stack.client.resource("", "v1", "configmaps")
    with pytest.raises(APIError) as e:
        await configmaps.create(cm("a"))
    assert (e.value.code, e.value.reason, e.value.message) == (500, "InternalError", f"Internal error occurred: {message}")
    with pytest.raises(APIError) as e:
        await configmaps.get("a", "default")
    assert e.value.code == 404


async def test_a_policy_mutation_of_the_wrong_type_is_its_failure(stack):  # noqa: F811
    policies = stack.client.resource("admissionregistration.k8s.io", "v1", "mutatingadmissionpolicies")
    await policies.create({"metadata": {"name": "numbers"}, "spec": {
        "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                                "resources": ["configmaps"]}]},
        "reinvocationPolicy": "Never",
        "mutations": [{"patchType": "JSONPatch", "jsonPatch": {
            "expression": '[JSONPatch{op: "add", path: "/data/n", value: 5}]'}}]}})
    await stack.client.resource("admissionregistration.k8s.io", "v1", "mutatingadmissionpolicybindings").create(
        {"metadata": {"name": "numbers"}, "spec": {"policyName": "numbers"}})
    with pytest.raises(APIError) as e:
        await stack.client.resource("", "v1", "configmaps").create(cm("a"))
    assert (e.value.code, e.value.reason, e.value.message) == (403, "Invalid", (
        "policy 'numbers' with binding 'numbers' denied request: "
        "json: cannot unmarshal number into Go struct field ConfigMap.data of type string"))


@pytest.mark.parametrize(("ops", "reason", "message"), [
    ([{"op": "replace", "path": "/kind", "value": "Secret"}], "",
     "converting (v1.Secret) to (core.ConfigMap): unknown conversion"),
    ([{"op": "replace", "path": "/kind", "value": "Foo"}], "InternalError",
     'Internal error occurred: no kind "Foo" is registered for version "v1" in scheme "pkg/api/legacyscheme/scheme.go:30"'),
    ([{"op": "replace", "path": "/kind", "value": 5}], "InternalError",
     "Internal error occurred: couldn't get version/kind; json parse error: json: cannot unmarshal number into Go "
     "struct field .kind of type string"),
])
async def test_a_patch_changing_the_kind_is_refused_as_the_dispatcher_decodes_it(stack, server, ops, reason, message):  # noqa: F811
    """The dispatcher decodes the patched JSON as its apiVersion and kind say (another registered kind is
    made, and fails to convert back at the end of Dispatch: Convert's own error, a 500 of no reason); ours
    put the kind back and created the ConfigMap, whatever its failurePolicy (Ignore here)."""
    server.handlers["/m"] = lambda r: json_patch(r, ops)
    await configure(stack, "mutating", "m", hook(server, "m.example.com", "/m", failurePolicy="Ignore"))
    configmaps = stack.client.resource("", "v1", "configmaps")
    with pytest.raises(APIError) as e:
        await configmaps.create(cm("a"))
    assert (e.value.code, e.value.reason, e.value.message) == (500, reason, message)
    with pytest.raises(APIError) as e:
        await configmaps.get("a", "default")
    assert e.value.code == 404


async def test_a_patch_emptying_the_kind_is_filled_in(stack, server):  # noqa: F811
    server.handlers["/m"] = lambda r: json_patch(r, [{"op": "remove", "path": "/kind"},
                                                     {"op": "add", "path": "/data/x", "value": "y"}])
    await configure(stack, "mutating", "m", hook(server, "m.example.com", "/m"))
    created = await stack.client.resource("", "v1", "configmaps").create(cm("a"))
    assert (created["kind"], created["data"]) == ("ConfigMap", {"k": "v", "x": "y"})
