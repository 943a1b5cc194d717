"""ValidatingAdmissionPolicy and MutatingAdmissionPolicy through the REST
layer: params (per-namespace ConfigMaps, selectors, not found), variables,
messageExpression, validationActions, matchConditions, failurePolicy, audit
annotations, ApplyConfiguration and JSONPatch mutations, configuration
validation."""

from __future__ import annotations

import asyncio
import copy

import orjson
import pytest

from nanokube.apiserver.admission import AUDIT_ANNOTATIONS
from nanokube.apiserver.rest import WriteOptions
from nanokube.machinery.errors import APIError
from tests.controllers import tries
from tests.served import send, served

G = "admissionregistration.k8s.io"

GPU_POLICY = {
    "metadata": {"name": "gpu-quota"},
    "spec": {
        "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        "matchConstraints": {"resourceRules": [{"apiGroups": ["resource.k8s.io"], "apiVersions": ["*"],
                                                "operations": ["CREATE", "UPDATE"], "resources": ["resourceclaims"]}]},
        "variables": [{"name": "gpus", "expression":
                       "object.spec.devices.requests.filter(r, has(r.exactly) && "
                       "r.exactly.deviceClassName == params.data.deviceClass)"
                       ".map(r, has(r.exactly.count) ? r.exactly.count : 1).sum()"}],
        "validations": [{"expression": "variables.gpus <= int(params.data.maxGPUs)",
                         "messageExpression": "'claim asks for ' + string(variables.gpus) + "
                                              "' GPUs; this namespace may use ' + params.data.maxGPUs",
                         "reason": "Forbidden"}],
    },
}


def gpu_binding(actions=("Deny",), **param_ref):
    return {"metadata": {"name": "gpu-quota-binding"},
            "spec": {"policyName": "gpu-quota", "validationActions": list(actions),
                     "paramRef": {"name": "gpu-quota", "parameterNotFoundAction": "Deny", **param_ref}}}


def claim(name, count, cls="gpu.example.com"):
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": cls, "count": count}}]}}}


def api(stack, plural, group=G, version="v1"):
    return stack.client.resource(group, version, plural)


async def quota_cm(stack, max_gpus="4"):
    await api(stack, "configmaps", "").create({"metadata": {"name": "gpu-quota", "namespace": "default"},
                                              "data": {"deviceClass": "gpu.example.com", "maxGPUs": max_gpus}})


async def test_param_configmap_quota_denies_with_upstreams_status(stack):
    await api(stack, "validatingadmissionpolicies").create(GPU_POLICY)
    await api(stack, "validatingadmissionpolicybindings").create(gpu_binding())
    claims = api(stack, "resourceclaims", "resource.k8s.io")
    with pytest.raises(APIError) as e:
        await claims.create(claim("early", 1))
    assert e.value.message == (
        "resourceclaims.resource.k8s.io \"early\" is forbidden: ValidatingAdmissionPolicy 'gpu-quota' with binding "
        "'gpu-quota-binding' denied request: failed to configure binding: no params found for policy binding with "
        "`Deny` parameterNotFoundAction")
    assert (e.value.code, e.value.reason) == (422, "Invalid")
    await quota_cm(stack)
    await claims.create(claim("small", 4))
    await claims.create(claim("other-class", 9, cls="nic.example.com"))
    with pytest.raises(APIError) as e:
        await claims.create(claim("big", 5))
    msg = ("ValidatingAdmissionPolicy 'gpu-quota' with binding 'gpu-quota-binding' denied request: "
           "claim asks for 5 GPUs; this namespace may use 4")
    assert (e.value.code, e.value.reason) == (403, "Forbidden")
    assert e.value.message == f'resourceclaims.resource.k8s.io "big" is forbidden: {msg}'
    assert e.value.details == {"name": "big", "group": "resource.k8s.io", "kind": "resourceclaims",
                               "causes": [{"message": msg}]}


async def test_warn_and_audit_actions(stack):
    await quota_cm(stack, "1")
    await api(stack, "validatingadmissionpolicies").create(GPU_POLICY)
    await api(stack, "validatingadmissionpolicybindings").create(gpu_binding(("Warn", "Audit")))
    audit: dict = {}
    AUDIT_ANNOTATIONS.set(audit)
    r = await stack.rest.create(stack.rest.index.get("resource.k8s.io", "v1", "resourceclaims"), "v1", "default",
                                claim("warned", 2), WriteOptions())
    assert r.warnings == ["Validation failed for ValidatingAdmissionPolicy 'gpu-quota' with binding "
                          "'gpu-quota-binding': claim asks for 2 GPUs; this namespace may use 1"]
    assert orjson.loads(audit["validation.policy.admission.k8s.io/validation_failure"]) == [
        {"message": "claim asks for 2 GPUs; this namespace may use 1", "policy": "gpu-quota",
         "binding": "gpu-quota-binding", "expressionIndex": 0, "validationActions": ["Warn", "Audit"]}]


async def test_params_by_selector_not_found_allow_and_failure_policy(stack):
    policy = {"metadata": {"name": "labels"},
              "spec": {"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"}, "failurePolicy": "Ignore",
                       "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                               "operations": ["CREATE"], "resources": ["secrets"]}]},
                       "matchConditions": [{"name": "labelled", "expression": "has(object.metadata.labels)"}],
                       "validations": [{"expression": "object.metadata.labels[params.data.required] != ''",
                                        "message": "required label missing"}],
                       "auditAnnotations": [{"key": "checked-by", "valueExpression": "string(params.metadata.name)"}]}}
    await api(stack, "validatingadmissionpolicies").create(policy)
    await api(stack, "validatingadmissionpolicybindings").create(
        {"metadata": {"name": "labels"}, "spec": {"policyName": "labels", "validationActions": ["Deny"],
                                                  "paramRef": {"selector": {"matchLabels": {"policy": "labels"}},
                                                               "namespace": "default",
                                                               "parameterNotFoundAction": "Allow"}}})
    secrets = api(stack, "secrets", "")
    await secrets.create({"metadata": {"name": "no-params", "namespace": "default", "labels": {"a": "b"}}})
    await api(stack, "configmaps", "").create({"metadata": {"name": "p1", "namespace": "default",
                                                            "labels": {"policy": "labels"}}, "data": {"required": "team"}})
    # unlabelled objects are skipped by the match condition
    await secrets.create({"metadata": {"name": "unlabelled", "namespace": "default"}})
    audit: dict = {}
    AUDIT_ANNOTATIONS.set(audit)
    await secrets.create({"metadata": {"name": "ok", "namespace": "default", "labels": {"team": "x"}}})
    assert audit["labels/checked-by"] == "p1"
    # a missing key is an evaluation error, which Ignore lets through; a failed rule still denies
    await secrets.create({"metadata": {"name": "err", "namespace": "default", "labels": {"other": "x"}}})
    with pytest.raises(APIError) as e:
        await secrets.create({"metadata": {"name": "empty", "namespace": "default", "labels": {"team": ""}}})
    assert e.value.message.endswith("ValidatingAdmissionPolicy 'labels' with binding 'labels' denied request: "
                                    "required label missing")
    policies = api(stack, "validatingadmissionpolicies")
    p = copy.deepcopy(await policies.get("labels"))
    p["spec"]["failurePolicy"] = "Fail"
    await policies.update(p)
    with pytest.raises(APIError) as e:
        await secrets.create({"metadata": {"name": "err2", "namespace": "default", "labels": {"other": "x"}}})
    assert e.value.message.endswith("denied request: expression 'object.metadata.labels[params.data.required] != ''' "
                                    "resulted in error: no such key: team")


async def test_policy_configuration_validation(stack):
    with pytest.raises(APIError) as e:
        await api(stack, "validatingadmissionpolicies").create({"metadata": {"name": "p"}, "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["GET"],
                                                    "resources": ["pods"]}]},
            "validations": [{"expression": "object.x ==", "reason": "Teapot"}]}})
    assert e.value.message == (
        'ValidatingAdmissionPolicy.admissionregistration.k8s.io "p" is invalid: ['
        'spec.matchConstraints.resourceRules[0].operations[0]: Unsupported value: "GET": supported values: '
        '"*", "CONNECT", "CREATE", "DELETE", "UPDATE", '
        'spec.validations[0].expression: Invalid value: "object.x ==": compilation failed: ERROR: <input>:1:12: '
        "Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', "
        "NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}\n | object.x ==\n | ...........^, "
        'spec.validations[0].reason: Unsupported value: "Teapot": supported values: "Forbidden", "Invalid", '
        '"RequestEntityTooLarge"]')
    with pytest.raises(APIError) as e:
        await api(stack, "validatingadmissionpolicybindings").create(
            {"metadata": {"name": "b"}, "spec": {"policyName": "p", "validationActions": ["Deny", "Warn"]}})
    assert e.value.message == (
        'ValidatingAdmissionPolicyBinding.admissionregistration.k8s.io "b" is invalid: spec.validationActions: '
        'Invalid value: ["Deny","Warn"]: must not contain both Deny and Warn (repeating the same validation failure '
        'information in the API response and headers serves no purpose)')
    for kind, version, actions in (("ValidatingAdmissionPolicyBinding", "v1", {"validationActions": ["Deny"]}),
                                   ("MutatingAdmissionPolicyBinding", "v1beta1", {})):
        with pytest.raises(APIError) as e:  # (the path was spelt "matchResouces", as 1.27's was)
            await api(stack, kind.lower() + "s", version=version).create({"metadata": {"name": "b"}, "spec": {
                "policyName": "p", "matchResources": {"matchPolicy": "Nope"}, **actions}})
        assert e.value.message == (
            f'{kind}.admissionregistration.k8s.io "b" is invalid: spec.matchResources.matchPolicy: Unsupported value: '
            '"Nope": supported values: "Equivalent", "Exact"')
    created = await api(stack, "validatingadmissionpolicies").create({"metadata": {"name": "ok"}, "spec": {
        "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["*"],
                                                "resources": ["pods"]}]},
        "validations": [{"expression": "true"}]}})
    assert created["spec"]["failurePolicy"] == "Fail"
    assert created["spec"]["matchConstraints"] == {
        "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["*"], "resources": ["pods"],
                           "scope": "*"}],
        "matchPolicy": "Equivalent", "namespaceSelector": {}, "objectSelector": {}}


async def test_a_policy_may_only_read_the_variables_it_declares(stack):
    """`variables` has the policy's variables as its fields (a variable only those before it), as
    upstream's composited compiler types it: the fuzzer stored a policy whose validation read a
    variable its patch had removed, which could only fail when evaluated."""
    rules = {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["*"], "resources": ["pods"]}]}
    policies = api(stack, "validatingadmissionpolicies")
    await policies.create({"metadata": {"name": "ok"}, "spec": {"matchConstraints": rules, "variables": [
        {"name": "a", "expression": "string(object.metadata.name)"}, {"name": "b", "expression": "variables.a + '!'"},
        {"name": "named", "expression": "variables.a != ''"}],
        "validations": [{"expression": "variables.named && variables.b != variables.a", "messageExpression": "variables.a"}]}})
    with pytest.raises(APIError) as e:
        await policies.create({"metadata": {"name": "p"}, "spec": {"matchConstraints": rules, "variables": [
            {"name": "a", "expression": "variables.b"}, {"name": "b", "expression": "1"}],
            "validations": [{"expression": "variables.n != ''"}]}})
    assert e.value.message == (
        'ValidatingAdmissionPolicy.admissionregistration.k8s.io "p" is invalid: ['
        "spec.variables[0].expression: Invalid value: \"variables.b\": compilation failed: ERROR: <input>:1:11: "
        "undefined field 'b'\n | variables.b\n | ..........^, "
        "spec.validations[0].expression: Invalid value: \"variables.n != ''\": compilation failed: ERROR: <input>:1:11: "
        "undefined field 'n'\n | variables.n != ''\n | ..........^]")
    with pytest.raises(APIError) as e:
        await api(stack, "mutatingadmissionpolicies").create({"metadata": {"name": "m"}, "spec": {
            "matchConstraints": rules, "reinvocationPolicy": "Never", "mutations": [{"patchType": "JSONPatch", "jsonPatch": {
                "expression": '[JSONPatch{op: "add", path: "/metadata/labels/a", value: variables.v}]'}}]}})
    assert e.value.code == 422 and "spec.mutations[0].jsonPatch.expression" in e.value.message
    assert "undefined field 'v'" in e.value.message


async def test_expressions_must_evaluate_to_their_type(stack):
    """Upstream's CompileCELExpression: a validation or match condition is a bool, a messageExpression a
    string, an audit annotation's value a string or null ('must evaluate to bool but got int'); a bare read of a dynamic value (object,
    params) is dyn, which cel-go refuses, while a bool variable is a bool (issue 120239). The fuzzer's
    probe stored "1 + 1" as a validation."""
    rules = {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["*"], "resources": ["pods"]}]}
    policies = api(stack, "validatingadmissionpolicies")
    with pytest.raises(APIError) as e:
        await policies.create({"metadata": {"name": "p"}, "spec": {
            "matchConstraints": rules, "matchConditions": [{"name": "m", "expression": "'yes'"}],
            "validations": [{"expression": "1 + 1", "messageExpression": "object.metadata.name"},
                            {"expression": "object.spec.enabled"}],
            "auditAnnotations": [{"key": "k", "valueExpression": "1"}]}})
    assert [c["field"] + ": " + c["message"] for c in e.value.details["causes"]] == [
        "spec.matchConditions[0].expression: Invalid value: \"'yes'\": must evaluate to bool but got string",
        'spec.validations[0].expression: Invalid value: "1 + 1": must evaluate to bool but got int',
        'spec.validations[0].messageExpression: Invalid value: "object.metadata.name": must evaluate to string '
        'but got dyn',
        'spec.validations[1].expression: Invalid value: "object.spec.enabled": must evaluate to bool but got dyn',
        'spec.auditAnnotations[0].valueExpression: Invalid value: "1": must evaluate to one of [string null_type] '
        'but got int']
    await policies.create({"metadata": {"name": "ok"}, "spec": {
        "matchConstraints": rules, "variables": [{"name": "prod", "expression": "object.metadata.name == 'prod'"}],
        "validations": [{"expression": "variables.prod", "messageExpression": "'not ' + string(object.metadata.name)"}],
        "auditAnnotations": [{"key": "k", "valueExpression": "null"}]}})


PODGROUP = {"metadata": {"name": "g", "namespace": "default"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}}


async def test_mutating_policy_apply_configuration_labels_every_podgroup(stack):
    await api(stack, "mutatingadmissionpolicies", version="v1beta1").create({"metadata": {"name": "team-label"}, "spec": {
        "matchConstraints": {"resourceRules": [{"apiGroups": ["scheduling.k8s.io"], "apiVersions": ["*"],
                                                "operations": ["CREATE"], "resources": ["podgroups"]}]},
        "reinvocationPolicy": "Never",
        "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
                       'Object{metadata: Object.metadata{labels: {"scheduling.example.com/managed": "true"}}}'}}]}})
    await api(stack, "mutatingadmissionpolicybindings").create(
        {"metadata": {"name": "team-label"}, "spec": {"policyName": "team-label"}})
    pg = {**PODGROUP, "metadata": {**PODGROUP["metadata"], "labels": {"keep": "me"}}}
    created = await api(stack, "podgroups", "scheduling.k8s.io", "v1beta1").create(pg)
    assert created["metadata"]["labels"] == {"keep": "me", "scheduling.example.com/managed": "true"}
    stored = await api(stack, "podgroups", "scheduling.k8s.io", "v1alpha3").get("g", "default")
    assert stored["metadata"]["labels"]["scheduling.example.com/managed"] == "true"


async def test_a_mutation_sees_the_object_the_previous_one_made(stack):
    """Each mutation's expression reads the object as the mutations before it left it (the
    engine's copy of the object is not reused past a mutation)."""
    await api(stack, "mutatingadmissionpolicies", version="v1beta1").create({"metadata": {"name": "two"}, "spec": {
        "matchConstraints": {"resourceRules": [{"apiGroups": ["scheduling.k8s.io"], "apiVersions": ["*"],
                                                "operations": ["CREATE"], "resources": ["podgroups"]}]},
        "reinvocationPolicy": "Never",
        "mutations": [
            {"patchType": "JSONPatch", "jsonPatch": {"expression":
             '[JSONPatch{op: "add", path: "/metadata/labels", value: {"first": "1"}}]'}},
            {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
             'Object{metadata: Object.metadata{labels: {"second": object.metadata.labels["first"] + "2"}}}'}}]}})
    await api(stack, "mutatingadmissionpolicybindings").create(
        {"metadata": {"name": "two"}, "spec": {"policyName": "two"}})
    created = await api(stack, "podgroups", "scheduling.k8s.io", "v1beta1").create(PODGROUP)
    assert created["metadata"]["labels"] == {"first": "1", "second": "12"}


async def test_mutating_policy_json_patch_with_params_and_variables(stack):
    await api(stack, "configmaps", "").create({"metadata": {"name": "defaults", "namespace": "default"},
                                              "data": {"team": "ml"}})
    await api(stack, "mutatingadmissionpolicies").create({"metadata": {"name": "annotate"}, "spec": {
        "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                                "resources": ["secrets"]}]},
        "variables": [{"name": "key", "expression": '"example.com/" + "team"'}],
        "reinvocationPolicy": "IfNeeded",
        "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression":
                       '[JSONPatch{op: "add", path: "/metadata/annotations", value: {}}, '
                       'JSONPatch{op: "add", path: "/metadata/annotations/" + jsonpatch.escapeKey(variables.key), '
                       'value: params.data.team}]'}}]}})
    await api(stack, "mutatingadmissionpolicybindings").create(
        {"metadata": {"name": "annotate"}, "spec": {"policyName": "annotate", "paramRef": {
            "name": "defaults", "namespace": "default", "parameterNotFoundAction": "Deny"}}})
    created = await api(stack, "secrets", "").create({"metadata": {"name": "s", "namespace": "default"}})
    assert created["metadata"]["annotations"] == {"example.com/team": "ml"}
    with pytest.raises(APIError) as e:
        await api(stack, "mutatingadmissionpolicies").create({"metadata": {"name": "bad"}, "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["*"],
                                                    "resources": ["pods"]}]},
            "mutations": [{"patchType": "JSONPatch"}]}})
    assert e.value.message == (
        'MutatingAdmissionPolicy.admissionregistration.k8s.io "bad" is invalid: ['
        "spec.reinvocationPolicy: Required value, "
        "spec.mutations[0].jsonPatch: Required value: must be specified when patchType is JSONPatch]")


async def test_authorizer_variable_checks_the_requesting_user(stack):
    from nanokube.apiserver.auth.authorizer import Decision
    from nanokube.machinery.user import User

    seen = []

    class Authorizer:
        def authorize(self, user, groups, attrs):
            seen.append((user, attrs.verb, attrs.group, attrs.resource, attrs.namespace))
            return Decision(user == "alice" and attrs.verb == "approve", "alice approves" if user == "alice" else "")

    stack.rest.admission.authorizer = Authorizer()
    await api(stack, "validatingadmissionpolicies").create({"metadata": {"name": "approvers"}, "spec": {
        "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                                "resources": ["configmaps"]}]},
        "validations": [{"expression": "authorizer.group('example.com').resource('approvals')"
                                       ".namespace(object.metadata.namespace).check('approve').allowed()",
                         "message": "only approvers may create configmaps"},
                        {"expression": "authorizer.requestResource.check('approve').reason() == 'alice approves'"}]}})
    await api(stack, "validatingadmissionpolicybindings").create(
        {"metadata": {"name": "approvers"}, "spec": {"policyName": "approvers", "validationActions": ["Deny"]}})
    res = stack.rest.index.get("", "v1", "configmaps")
    body = {"metadata": {"name": "a", "namespace": "default"}}
    await stack.rest.create(res, "v1", "default", copy.deepcopy(body), WriteOptions(user=User("alice")))
    with pytest.raises(APIError) as e:
        await stack.rest.create(res, "v1", "default", {"metadata": {"name": "b", "namespace": "default"}},
                                WriteOptions(user=User("bob")))
    assert e.value.message.endswith("denied request: only approvers may create configmaps")
    with pytest.raises(APIError) as e:
        await api(stack, "validatingadmissionpolicies").create({"metadata": {"name": "bad"}, "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                                    "resources": ["configmaps"]}]},
            "validations": [{"expression": "params.x == 1",
                             "messageExpression": "authorizer.requestResource.check('get').reason()"}]}})
    assert "spec.validations[0].expression: Invalid value: \"params.x == 1\": compilation failed: ERROR: <input>:1:1: " \
           "undeclared reference to 'params'" in e.value.message
    assert "spec.validations[0].messageExpression: Invalid value: \"authorizer.requestResource.check('get').reason()\": " \
           "compilation failed: ERROR: <input>:1:1: undeclared reference to 'authorizer'" in e.value.message
    assert ("bob", "approve", "example.com", "approvals", "default") in seen
    assert ("bob", "approve", "", "configmaps", "default") in seen


async def test_a_policy_whose_param_kind_is_unknown_fails_by_its_failure_policy(tmp_path):
    """Upstream's policy source cannot map the paramKind, so the policy carries a configuration error,
    found before any binding is looked at: a binding with or without a paramRef, denied alike (422)
    where the failurePolicy fails, and the policy not evaluated at all where it ignores."""
    admission = f"/apis/{G}/v1"
    cms = "/api/v1/namespaces/default/configmaps"
    unknown = "failed to configure policy: failed to find resource referenced by paramKind: 'nope.example.com/v1, Kind=Nope'"

    def policy(name, failure):
        return {"metadata": {"name": name}, "spec": {
            "paramKind": {"apiVersion": "nope.example.com/v1", "kind": "Nope"}, "failurePolicy": failure,
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                                    "resources": ["configmaps"]}]},
            "validations": [{"expression": "false", "message": "never"}]}}

    async def created(c, name):
        for _ in tries():
            code, status = await send(c, "POST", cms, {"metadata": {"name": name}})
            if code != 201:
                return code, status
            await send(c, "DELETE", f"{cms}/{name}")
            await asyncio.sleep(0.05)

    async with served(tmp_path) as (_, c):
        assert (await send(c, "POST", f"{admission}/validatingadmissionpolicies", policy("p", "Fail")))[0] == 201
        assert (await send(c, "POST", f"{admission}/validatingadmissionpolicybindings", {"metadata": {"name": "b"}, "spec": {
            "policyName": "p", "validationActions": ["Deny"]}}))[0] == 201  # no paramRef
        code, status = await created(c, "a")
        assert (code, status["reason"], status["message"]) == (
            422, "Invalid", f"configmaps \"a\" is forbidden: ValidatingAdmissionPolicy 'p' denied request: {unknown}")
        # a paramRef to the kind no server serves: the same policy-level denial, no binding named
        assert (await send(c, "PUT", f"{admission}/validatingadmissionpolicybindings/b", {
            "metadata": {"name": "b", "resourceVersion": (await send(c, "GET", f"{admission}/validatingadmissionpolicybindings/b"))[1]["metadata"]["resourceVersion"]},
            "spec": {"policyName": "p", "validationActions": ["Deny"],
                     "paramRef": {"name": "x", "parameterNotFoundAction": "Allow"}}}))[0] == 200
        assert (await send(c, "POST", cms, {"metadata": {"name": "b"}}))[1]["message"] == (
            f"configmaps \"b\" is forbidden: ValidatingAdmissionPolicy 'p' denied request: {unknown}")
        # Ignore: the policy is skipped whole, its validation ("false") never run
        assert (await send(c, "DELETE", f"{admission}/validatingadmissionpolicies/p"))[0] == 200
        assert (await send(c, "POST", f"{admission}/validatingadmissionpolicies", policy("p", "Ignore")))[0] == 201
        for _ in tries():
            code, _ = await send(c, "POST", cms, {"metadata": {"name": "c"}})
            if code == 201:
                break
            await asyncio.sleep(0.05)
        assert code == 201
        # a mutating policy alike, in PolicyError's words for a policy with no binding (its name as Go's %q)
        mutating = policy("m", "Fail")
        mutating["spec"] |= {"reinvocationPolicy": "Never", "mutations": [{"patchType": "JSONPatch", "jsonPatch": {
            "expression": '[JSONPatch{op: "add", path: "/metadata/labels", value: {"m": "1"}}]'}}]}
        del mutating["spec"]["validations"]
        assert (await send(c, "POST", f"{admission}/mutatingadmissionpolicies", mutating))[0] == 201
        assert (await send(c, "POST", f"{admission}/mutatingadmissionpolicybindings", {"metadata": {"name": "m"},
                                                                                    "spec": {"policyName": "m"}}))[0] == 201
        code, status = await created(c, "d")
        # (the generic dispatcher's configuration error: its message whole, NewForbidden's reason kept)
        assert (code, status["reason"], status["message"]) == (403, "Forbidden", f'policy "m" denied request: {unknown}')


@pytest.mark.parametrize("policy,seen", [("IfNeeded", "1"), ("Never", "0")])
async def test_mutating_policy_reinvoked_after_a_webhook_changes_the_object(stack, policy, seen):
    from tests.apiserver.admission.server import WebhookServer, json_patch

    server = WebhookServer().start()
    try:
        server.handlers["/m"] = lambda r: json_patch(r, [{"op": "add", "path": "/metadata/labels",
                                                          "value": {"added-by": "webhook"}}])
        await api(stack, "mutatingwebhookconfigurations").create({"metadata": {"name": "m"}, "webhooks": [{
            "name": "labels.example.com", "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "clientConfig": {"url": server.url("/m"), "caBundle": server.ca.bundle},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["secrets"]}]}]})
        await api(stack, "mutatingadmissionpolicies").create({"metadata": {"name": "count"}, "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                                    "resources": ["secrets"]}]},
            "reinvocationPolicy": policy,
            "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
                           'Object{metadata: Object.metadata{annotations: {"labels-seen": '
                           'string(has(object.metadata.labels) ? size(object.metadata.labels) : 0)}}}'}}]}})
        await api(stack, "mutatingadmissionpolicybindings").create(
            {"metadata": {"name": "count"}, "spec": {"policyName": "count"}})
        created = await api(stack, "secrets", "").create({"metadata": {"name": "s", "namespace": "default"}})
        assert created["metadata"]["annotations"] == {"labels-seen": seen}
        assert created["metadata"]["labels"] == {"added-by": "webhook"}
    finally:
        server.stop()


async def test_literals_are_validated_when_a_policy_is_written(stack):
    """cel-go's AST validators in the policy's environment: a bad regex literal and a list mixing
    types are compilation errors, while a format call's arguments may mix them."""
    rules = [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]
    with pytest.raises(APIError) as e:
        await api(stack, "validatingadmissionpolicies").create({"metadata": {"name": "p"}, "spec": {
            "matchConstraints": {"resourceRules": rules},
            "validations": [{"expression": "object.metadata.name.matches('[')"},
                            {"expression": "object.metadata.name in ['a', 1]",
                             "messageExpression": "'%s has %d'.format([object.metadata.name, 1])"}]}})
    assert e.value.message == (
        'ValidatingAdmissionPolicy.admissionregistration.k8s.io "p" is invalid: ['
        'spec.validations[0].expression: Invalid value: "object.metadata.name.matches(\'[\')": compilation failed: '
        "ERROR: <input>:1:30: invalid matches argument\n | object.metadata.name.matches('[')\n"
        " | .............................^, "
        'spec.validations[1].expression: Invalid value: "object.metadata.name in [\'a\', 1]": compilation failed: '
        "ERROR: <input>:1:31: expected type 'string' but found 'int'\n | object.metadata.name in ['a', 1]\n"
        " | ..............................^]")


async def test_request_and_namespace_object_are_typed(stack):
    """`request` and `namespaceObject` carry upstream's declared types (BuildRequestType,
    BuildNamespaceType), so a misspelt field is refused when the policy is written, in a
    validation and a matchCondition alike; the fields they declare compile."""
    rules = [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]
    with pytest.raises(APIError) as e:
        await api(stack, "validatingadmissionpolicies").create({"metadata": {"name": "p"}, "spec": {
            "matchConstraints": {"resourceRules": rules},
            "matchConditions": [{"name": "users", "expression": "request.userinfo.username != ''"}],
            "validations": [{"expression": "namespaceObject.metadata.uid != ''"}]}})
    assert e.value.message == (
        'ValidatingAdmissionPolicy.admissionregistration.k8s.io "p" is invalid: ['
        'spec.matchConditions[0].expression: Invalid value: "request.userinfo.username != \'\'": compilation failed: '
        "ERROR: <input>:1:9: undefined field 'userinfo'\n | request.userinfo.username != ''\n | ........^, "
        'spec.validations[0].expression: Invalid value: "namespaceObject.metadata.uid != \'\'": compilation failed: '
        "ERROR: <input>:1:26: undefined field 'uid'\n | namespaceObject.metadata.uid != ''\n"
        " | .........................^]")
    await api(stack, "validatingadmissionpolicies").create({"metadata": {"name": "ok"}, "spec": {
        "matchConstraints": {"resourceRules": rules},
        "matchConditions": [{"name": "users", "expression": "!request.userInfo.groups.exists(g, g == 'x')"}],
        "validations": [{"expression": "request.operation == 'CREATE' && request.kind.kind == 'Pod' && "
                                       "namespaceObject.metadata.labels.all(k, k != '') && "
                                       "namespaceObject.status.phase != 'Terminating'"}]}})


async def test_mutations_must_build_their_patch_types(stack):
    """Upstream's ApplyConfigurationWrapper and JSONPatchWrapper return types: an apply configuration
    is an `Object{...}` and a JSON patch a list of `JSONPatch{...}`; plain maps are refused when the
    MutatingAdmissionPolicy is written, as kube-apiserver refuses them."""
    rules = {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                "resources": ["configmaps"]}]}
    policies = api(stack, "mutatingadmissionpolicies")
    with pytest.raises(APIError) as e:
        await policies.create({"metadata": {"name": "p"}, "spec": {
            "matchConstraints": rules, "reinvocationPolicy": "Never", "mutations": [
                {"patchType": "ApplyConfiguration",
                 "applyConfiguration": {"expression": '{"metadata": {"labels": {"a": "b"}}}'}},
                {"patchType": "JSONPatch", "jsonPatch": {"expression": '[{"op": "add", "path": "/x"}]'}}]}})
    assert [c["field"] + ": " + c["message"] for c in e.value.details["causes"]] == [
        'spec.mutations[0].applyConfiguration.expression: Invalid value: "{\\"metadata\\": {\\"labels\\": '
        '{\\"a\\": \\"b\\"}}}": must evaluate to Object but got map(string, map(string, map(string, string)))',
        'spec.mutations[1].jsonPatch.expression: Invalid value: "[{\\"op\\": \\"add\\", \\"path\\": \\"/x\\"}]": '
        'must evaluate to list(JSONPatch) but got list(map(string, string))']
    await policies.create({"metadata": {"name": "ok"}, "spec": {
        "matchConstraints": rules, "reinvocationPolicy": "Never", "mutations": [
            {"patchType": "ApplyConfiguration", "applyConfiguration": {
                "expression": 'Object{metadata: Object.metadata{labels: {"a": "b"}}}'}},
            {"patchType": "JSONPatch", "jsonPatch": {
                "expression": 'has(object.data) ? [JSONPatch{op: "add", path: "/data/x", value: "1"}] : []'}}]}})



async def test_a_misused_escape_key_is_cel_gos_error_about_it(stack):
    """jsonpatch.escapeKey is a function of admission's environment, so a wrong call is cel-go's error naming
    it where it was written; it was rewritten into two `replace` calls before compiling, so the error named
    'replace' at a column of the rewritten text, and an unclosed call was an extraneous ')' the rewrite added
    (found by fuzz64's policy probes)."""
    rules = {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                "resources": ["configmaps"]}]}
    policies = api(stack, "mutatingadmissionpolicies")
    for expression, error in (
            ("[JSONPatch{op: 'add', path: jsonpatch.escapeKey(1), value: 'x'}]",
             "ERROR: <input>:1:39: found no matching overload for 'jsonpatch.escapeKey' applied to '(int)'"),
            ("[JSONPatch{op: 'add', path: jsonpatch.escapeKey('a'",
             "ERROR: <input>:1:52: Syntax error: mismatched input '<EOF>' expecting {'==', '!=', 'in', '<', '<=', "
             "'>=', '>', '&&', '||', '[', ')', '.', ',', '-', '?', '+', '*', '/', '%'}")):
        with pytest.raises(APIError) as e:
            await policies.create({"metadata": {"name": "p"}, "spec": {
                "matchConstraints": rules, "reinvocationPolicy": "Never", "mutations": [
                    {"patchType": "JSONPatch", "jsonPatch": {"expression": expression}}]}})
        assert e.value.details["causes"][0]["message"].startswith(
            f"Invalid value: {orjson.dumps(expression).decode()}: compilation failed: {error}\n"), e.value.details
    await policies.create({"metadata": {"name": "escapes"}, "spec": {
        "matchConstraints": rules, "reinvocationPolicy": "Never", "mutations": [{"patchType": "JSONPatch", "jsonPatch": {
            "expression": "[JSONPatch{op: 'add', path: '/metadata/annotations', value: {}}, JSONPatch{op: 'add', "
                          "path: '/metadata/annotations/' + jsonpatch.escapeKey('example.com/x'), value: 'x'}]"}}]}})
    await api(stack, "mutatingadmissionpolicybindings").create(
        {"metadata": {"name": "escapes"}, "spec": {"policyName": "escapes"}})
    made = await api(stack, "configmaps", "").create({"metadata": {"name": "x", "namespace": "default"}})
    assert made["metadata"]["annotations"] == {"example.com/x": "x"}

async def test_a_mutation_may_not_move_an_object_nor_leave_it_without_metadata(stack):
    """As BeforeCreate and BeforeUpdate after mutating admission: a namespace a mutation changed is the 400 of
    an object not in the request's namespace, one it removed is the request's again, and an object whose
    metadata a mutation removed has no name (the 422), as its ObjectMeta decodes empty. Found by fuzzing
    MutatingAdmissionPolicies: a JSONPatch setting /metadata/namespace created the ConfigMap in that namespace,
    and one removing /metadata was a 500 (NamespaceLifecycle read the object's namespace)."""
    configmaps = api(stack, "configmaps", "")
    await api(stack, "namespaces", "").create({"metadata": {"name": "elsewhere"}})
    await configmaps.create({"metadata": {"name": "moved", "namespace": "default"}})
    for name, patch in [("moved", '[JSONPatch{op: "add", path: "/metadata/namespace", value: "elsewhere"}]'),
                        ("unset", '[JSONPatch{op: "remove", path: "/metadata/namespace"}]'),
                        ("stripped", '[JSONPatch{op: "remove", path: "/metadata"}]')]:
        await api(stack, "mutatingadmissionpolicies", version="v1beta1").create({"metadata": {"name": name}, "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                    "operations": ["CREATE", "UPDATE"], "resources": ["configmaps"]}]},
            "matchConditions": [{"name": "named", "expression": f'has(object.metadata.name) && object.metadata.name == "{name}"'}],
            "reinvocationPolicy": "IfNeeded",
            "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": patch}}]}})
        await api(stack, "mutatingadmissionpolicybindings").create({"metadata": {"name": name}, "spec": {"policyName": name}})
    moved = "the namespace of the provided object does not match the namespace sent on the request"
    for write in (configmaps.create({"metadata": {"name": "moved", "namespace": "default"}, "data": {"a": "b"}}),
                  configmaps.update({"metadata": {"name": "moved", "namespace": "default"}, "data": {"a": "b"}})):
        with pytest.raises(APIError) as e:
            await write
        assert (e.value.code, e.value.message) == (400, moved)
    assert (await configmaps.list("elsewhere"))[0] == []
    created = await configmaps.create({"metadata": {"name": "unset", "namespace": "default"}})
    assert created["metadata"]["namespace"] == "default"
    with pytest.raises(APIError) as e:
        await configmaps.create({"metadata": {"name": "stripped", "namespace": "default"}})
    assert (e.value.code, e.value.message) == (
        422, 'ConfigMap "" is invalid: metadata.name: Required value: name or generateName is required')


def test_only_the_variables_a_policy_reads_are_evaluated():
    """Upstream evaluates variables lazily: one that no expression reads costs nothing. They were all
    evaluated for every admitted request, each on a budget of its own, so a policy of 40 unread variables
    costing ~300k each held the event loop 8 CPU s per write (found by fuzzing policies with pathological
    CEL). A variable read through another is evaluated; once those evaluated cost more than a budget
    together, the rest are charged past it unevaluated, so an expression reading one runs out of budget."""
    from nanokube.apiserver.admission.cel import RUNTIME_CEL_COST_BUDGET
    from nanokube.apiserver.admission.policies import compute_variables

    spec = {"variables": [{"name": "base", "expression": "object.data.size()"},
                          {"name": "twice", "expression": "variables.base * 2"},
                          {"name": "unread", "expression": "object.data.map(k, object.data.map(j, k + j)).size()"}],
            "validations": [{"expression": "variables.twice > 0"}]}
    act = {"object": {"data": {str(i): "x" for i in range(100)}}}
    costs = compute_variables(spec, act)
    assert act["variables"] == {"base": 100, "twice": 200} and set(costs) == {"base", "twice"}
    spec = {"variables": [{"name": f"v{i}", "expression": "object.s.contains('z')"} for i in range(40)],
            "validations": [{"expression": " || ".join(f"variables.v{i}" for i in range(40))}]}
    act = {"object": {"s": "a" * 4_000_000}}  # (each search of it costs 400k)
    costs = compute_variables(spec, act)
    evaluated = list(act["variables"])
    assert 0 < len(evaluated) < 40 and sum(costs[n][0] for n in evaluated) > RUNTIME_CEL_COST_BUDGET
    assert all(costs[f"v{i}"][0] > RUNTIME_CEL_COST_BUDGET for i in range(len(evaluated), 40))


async def test_a_policy_that_may_cost_seconds_is_evaluated_off_the_event_loop(stack, monkeypatch):
    """CEL runs here at about two million cost units a CPU second, so a policy within its budget (ten
    million) held the event loop for seconds and every other client waited (found by fuzzing policies:
    6.5 CPU s for 40 variables read by one validation). A policy whose expressions may be metered (a
    worst case past METER_FROM) is evaluated in a worker thread; a cheap one, or one reading the
    authorizer (which reads the server's state), on the loop; their decisions are the same."""
    import threading

    from nanokube.apiserver.admission import policies

    ran: dict[str, str] = {}
    decide = policies.ValidatingPolicies._decide

    def recorded(self, inv, act, annotations):
        ran[inv.names[0]] = threading.current_thread().name
        return decide(self, inv, act, annotations)
    monkeypatch.setattr(policies.ValidatingPolicies, "_decide", recorded)
    rules = {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}]}
    for name, expression in [("costly", "object.data.all(k, object.data.all(j, k + j != 'ab'))"),
                             ("cheap", "object.metadata.name != 'refused'"),
                             ("asks", "object.data.all(k, k != 'zz') || authorizer.path('/healthz').check('get').allowed()")]:
        await api(stack, "validatingadmissionpolicies").create({"metadata": {"name": name}, "spec": {
            "matchConstraints": rules, "validations": [{"expression": expression}]}})
        await api(stack, "validatingadmissionpolicybindings").create(
            {"metadata": {"name": name}, "spec": {"policyName": name, "validationActions": ["Deny"]}})
    configmaps = api(stack, "configmaps", "")
    await configmaps.create({"metadata": {"name": "a", "namespace": "default"}, "data": {"k": "v"}})
    loop = threading.current_thread().name
    assert ran["costly"] != loop and ran["cheap"] == loop and ran["asks"] == loop
    with pytest.raises(APIError) as e:
        await configmaps.create({"metadata": {"name": "b", "namespace": "default"}, "data": {"a": "", "b": ""}})
    assert "ValidatingAdmissionPolicy 'costly' with binding 'costly' denied request" in e.value.message


async def test_a_mutating_policy_that_may_cost_seconds_is_evaluated_off_the_event_loop(stack, monkeypatch):
    """As a validating one: the mutations of a MutatingAdmissionPolicy whose CEL may be metered are made in
    a worker thread, a cheap one's on the loop; the object is mutated the same."""
    import threading

    from nanokube.apiserver.admission import policies

    ran: dict[str, str] = {}
    mutated = policies.MutatingPolicies._mutated

    def recorded(self, inv, a, t, obj, act, failed):
        ran[inv.names[0]] = threading.current_thread().name
        return mutated(self, inv, a, t, obj, act, failed)
    monkeypatch.setattr(policies.MutatingPolicies, "_mutated", recorded)
    rules = {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}]}
    for name, expression in [("costly", '[JSONPatch{op: "add", path: "/data/pairs", '
                                        'value: string(object.data.map(k, object.data.map(j, k + j)).size())}]'),
                             ("cheap", '[JSONPatch{op: "add", path: "/data/name", value: object.metadata.name}]')]:
        await api(stack, "mutatingadmissionpolicies", version="v1beta1").create({"metadata": {"name": name}, "spec": {
            "matchConstraints": rules, "reinvocationPolicy": "Never",
            "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": expression}}]}})
        await api(stack, "mutatingadmissionpolicybindings").create({"metadata": {"name": name}, "spec": {"policyName": name}})
    created = await api(stack, "configmaps", "").create({"metadata": {"name": "a", "namespace": "default"},
                                                         "data": {"x": "1", "y": "2"}})
    assert created["data"]["pairs"] in ("2", "3") and created["data"]["name"] == "a"  # (keys, as the first saw them)
    loop = threading.current_thread().name
    assert ran["costly"] != loop and ran["cheap"] == loop


async def test_an_expression_reading_a_variable_that_failed_names_it_and_why(stack):
    """Upstream's lazy variable answers its reader with 'composited variable "t" fails to evaluate: ...';
    a variable that failed was left unset, so its reader said "no such key: t" (found by fuzzing policies:
    a variable past its cost limit read that way)."""
    rules = {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}]}
    await api(stack, "validatingadmissionpolicies").create({"metadata": {"name": "reads"}, "spec": {
        "matchConstraints": rules, "variables": [{"name": "t", "expression": "object.data.x"}],
        "validations": [{"expression": "variables.t == 'y'"}]}})
    await api(stack, "validatingadmissionpolicybindings").create(
        {"metadata": {"name": "reads"}, "spec": {"policyName": "reads", "validationActions": ["Deny"]}})
    with pytest.raises(APIError) as e:
        await api(stack, "configmaps", "").create({"metadata": {"name": "a", "namespace": "default"}, "data": {"k": "v"}})
    assert e.value.message == (
        "configmaps \"a\" is forbidden: ValidatingAdmissionPolicy 'reads' with binding 'reads' denied request: "
        "expression 'variables.t == 'y'' resulted in error: composited variable \"t\" fails to evaluate: no such key: x")


async def _kind_patching_policy(stack, name, group, plural, ops):
    rules = {"resourceRules": [{"apiGroups": [group], "apiVersions": ["*"], "operations": ["CREATE"], "resources": [plural]}]}
    await api(stack, "mutatingadmissionpolicies").create({"metadata": {"name": name}, "spec": {
        "matchConstraints": rules, "reinvocationPolicy": "Never", "failurePolicy": "Ignore",
        "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": ops}}]}})
    await api(stack, "mutatingadmissionpolicybindings").create({"metadata": {"name": name}, "spec": {"policyName": name}})


async def test_a_json_patch_mutation_changing_kind_or_apiversion_is_answered_as_upstreams_decoder_does(stack):
    """Upstream decodes a JSON patch mutation's result into the kind: a kind or apiVersion the scheme
    lacks is an InternalError, whatever the failurePolicy (the dispatcher returns a StatusError as it is);
    an emptied one is filled in. The mutation was reset silently (201). A custom resource's result is
    decoded as it is: another kind is refused by its validation (422), another group cannot convert
    back (500)."""
    cms = api(stack, "configmaps", "")
    await _kind_patching_policy(stack, "kind", "", "configmaps", '''object.metadata.name == "kind" ?
        [JSONPatch{op: "replace", path: "/kind", value: "Foo"}] : object.metadata.name == "version" ?
        [JSONPatch{op: "replace", path: "/apiVersion", value: "v2"}] : object.metadata.name == "other" ?
        [JSONPatch{op: "replace", path: "/kind", value: "Secret"}] :
        [JSONPatch{op: "remove", path: "/kind"}, JSONPatch{op: "replace", path: "/apiVersion", value: ""}]''')
    for name, message in [
            ("kind", 'no kind "Foo" is registered for version "v1" in scheme "pkg/api/legacyscheme/scheme.go:30"'),
            ("version", 'no kind "ConfigMap" is registered for version "v2" in scheme "pkg/api/legacyscheme/scheme.go:30"'),
            ("other", "failed to convert object: converting (v1.Secret) to (core.ConfigMap): unknown conversion")]:
        with pytest.raises(APIError) as e:
            await cms.create({"metadata": {"name": name, "namespace": "default"}})
        assert (e.value.code, e.value.reason, e.value.message) == (500, "InternalError", f"Internal error occurred: {message}")
    created = await cms.create({"metadata": {"name": "emptied", "namespace": "default"}})
    assert (created["apiVersion"], created["kind"]) == ("v1", "ConfigMap")


async def test_a_json_patch_mutation_changing_a_custom_resources_kind_or_apiversion(tmp_path):
    """A custom resource's mutated JSON is decoded as it is and converted back to the request's version:
    another kind is refused by its validation (422), another group or a version the CRD lacks cannot
    convert back, and a removed kind does not decode (500s, whatever the failurePolicy)."""
    group = "kinds.example.com"
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": f"widgets.{group}"}, "spec": {
               "group": group, "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
               "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                   "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}
    expression = f'''
        object.metadata.name == "kind" ? [JSONPatch{{op: "replace", path: "/kind", value: "Gadget"}}] :
        object.metadata.name == "group" ? [JSONPatch{{op: "replace", path: "/apiVersion", value: "other.example.com/v1"}}] :
        object.metadata.name == "version" ? [JSONPatch{{op: "replace", path: "/apiVersion", value: "{group}/v9"}}] :
        [JSONPatch{{op: "remove", path: "/kind"}}]'''
    rules = {"resourceRules": [{"apiGroups": [group], "apiVersions": ["*"], "operations": ["CREATE"], "resources": ["widgets"]}]}
    admission = f"/apis/{G}/v1"
    path = f"/apis/{group}/v1/namespaces/default/widgets"
    cases = [("kind", 422, f'Widget.{group} "kind" is invalid: kind: Invalid value: "Gadget": must be Widget'),
             ("group", 500, "Internal error occurred: failed to convert object: other.example.com/v1, Kind=Widget is "
                            f'unstructured and is not suitable for converting to "{group}/v1"'),
             ("version", 500, "Internal error occurred: failed to convert object: request to convert CR from an invalid "
                              f"group/version: {group}/v9"),
             ("removed", 500, f"Internal error occurred: Object 'Kind' is missing in '{{\"apiVersion\":\"{group}/v1\"")]
    async with served(tmp_path) as (_, c):
        assert (await send(c, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd))[0] == 201
        assert (await send(c, "POST", f"{admission}/mutatingadmissionpolicies", {"metadata": {"name": "k"}, "spec": {
            "matchConstraints": rules, "failurePolicy": "Ignore", "reinvocationPolicy": "Never",
            "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": expression}}]}}))[0] == 201
        assert (await send(c, "POST", f"{admission}/mutatingadmissionpolicybindings",
                           {"metadata": {"name": "k"}, "spec": {"policyName": "k"}}))[0] == 201
        for _ in tries():
            if (await send(c, "GET", path))[0] == 200:
                break
            await asyncio.sleep(0.05)
        for name, code, message in cases:
            got = await send(c, "POST", path, {"apiVersion": f"{group}/v1", "kind": "Widget",
                                               "metadata": {"name": name, "namespace": "default"}})
            assert (got[0], got[1]["message"][:len(message)]) == (code, message), (name, got)


async def test_mutating_policies_that_fail_are_denied_together_in_policy_errors_words(stack):
    """The generic policy dispatcher gathers the PolicyErrors of every invocation before it answers:
    NewForbidden's 403 and details, the message the first failure's whole (no `configmaps "x" is
    forbidden: ` before it), the reason the mutating dispatcher's for a failed mutation (Invalid), each
    failure of a policy that fails closed a cause, one that ignores failures left out."""
    def mutating(name, failure, value):
        return {"metadata": {"name": name}, "spec": {
            "failurePolicy": failure, "reinvocationPolicy": "Never",
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                                    "resources": ["configmaps"]}]},
            "mutations": [{"patchType": "JSONPatch", "jsonPatch": {
                "expression": f'[JSONPatch{{op: "add", path: "/data/n", value: {value}}}]'}}]}}

    for name, failure, value in [("a-first", "Fail", "5"), ("b-ignored", "Ignore", "6"),
                                 ("c-second", "Fail", "object.data.nope")]:
        await api(stack, "mutatingadmissionpolicies").create(mutating(name, failure, value))
        await api(stack, "mutatingadmissionpolicybindings").create({"metadata": {"name": name},
                                                                    "spec": {"policyName": name}})
    with pytest.raises(APIError) as e:
        await api(stack, "configmaps", "").create({"metadata": {"name": "x", "namespace": "default"}, "data": {"a": "1"}})
    first = ("policy 'a-first' with binding 'a-first' denied request: "
             "json: cannot unmarshal number into Go struct field ConfigMap.data of type string")
    assert (e.value.code, e.value.reason, e.value.message) == (403, "Invalid", first)
    causes = [c["message"] for c in e.value.details["causes"]]
    assert causes[0] == first and len(causes) == 2, causes
    assert causes[1].startswith("policy 'c-second' with binding 'c-second' denied request: "), causes
    assert {k: v for k, v in e.value.details.items() if k != "causes"} == {"name": "x", "kind": "configmaps"}


async def test_a_mutation_that_fails_is_skipped_and_the_policys_next_ones_apply(stack):
    """The mutating dispatcher goes on to a policy's next mutation after one fails: where the policy
    ignores failures, the mutations before and after the failed one are all made."""
    await api(stack, "mutatingadmissionpolicies").create({"metadata": {"name": "steps"}, "spec": {
        "failurePolicy": "Ignore", "reinvocationPolicy": "Never",
        "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                                "resources": ["configmaps"]}]},
        "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": expression}} for expression in (
            '[JSONPatch{op: "add", path: "/data/before", value: "1"}]',
            '[JSONPatch{op: "add", path: "/data/n", value: object.data.nope}]',
            '[JSONPatch{op: "add", path: "/data/after", value: "1"}]')]}})
    await api(stack, "mutatingadmissionpolicybindings").create({"metadata": {"name": "steps"},
                                                                "spec": {"policyName": "steps"}})
    made = await api(stack, "configmaps", "").create({"metadata": {"name": "s", "namespace": "default"},
                                                      "data": {"a": "1"}})
    assert made["data"] == {"a": "1", "before": "1", "after": "1"}


async def test_a_policy_naming_crds_created_after_it_is_enforced_once_they_are_served(tmp_path):
    """A policy whose paramKind and matched resource are CRDs created after it: until the paramKind is
    served every request it matches fails by its failurePolicy with the configuration error, then its
    params and the new resource are used (upstream's policy source maps the paramKind again at its
    next refresh; here the server's own index has it at once)."""
    admission, group = f"/apis/{G}/v1", "late.example.com"
    cms, widgets = "/api/v1/namespaces/default/configmaps", f"/apis/{group}/v1/namespaces/default/widgets"

    def crd(plural, kind, spec):
        return {"metadata": {"name": f"{plural}.{group}"}, "spec": {
            "group": group, "scope": "Namespaced", "names": {"plural": plural, "kind": kind},
            "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                "type": "object", "properties": {"spec": {"type": "object", "properties": spec}}}}}]}}

    rules = [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]},
             {"apiGroups": [group], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["widgets"]}]
    async with served(tmp_path) as (_, c):
        assert (await send(c, "POST", f"{admission}/validatingadmissionpolicies", {"metadata": {"name": "p"}, "spec": {
            "paramKind": {"apiVersion": f"{group}/v1", "kind": "Limit"}, "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": rules},
            "validations": [{"expression": "!has(object.spec) || object.spec.size <= params.spec.max",
                             "message": "too big"}]}}))[0] == 201
        assert (await send(c, "POST", f"{admission}/validatingadmissionpolicybindings", {"metadata": {"name": "b"}, "spec": {
            "policyName": "p", "validationActions": ["Deny"], "paramRef": {"name": "limit", "namespace": "default"}}}))[0] == 201
        for _ in tries(10):
            code, status = await send(c, "POST", cms, {"metadata": {"name": "before"}})
            if code != 201:
                break
            await send(c, "DELETE", f"{cms}/before")
            await asyncio.sleep(0.05)
        assert (code, status["message"]) == (422, 'configmaps "before" is forbidden: ValidatingAdmissionPolicy \'p\' '
                                                  "denied request: failed to configure policy: failed to find resource "
                                                  f"referenced by paramKind: '{group}/v1, Kind=Limit'")

        for plural, kind, spec in (("limits", "Limit", {"max": {"type": "integer"}}),
                                   ("widgets", "Widget", {"size": {"type": "integer"}})):
            assert (await send(c, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                               crd(plural, kind, spec)))[0] == 201
        limit = {"apiVersion": f"{group}/v1", "kind": "Limit", "metadata": {"name": "limit"}, "spec": {"max": 3}}
        for _ in tries(10):
            if (code := (await send(c, "POST", f"/apis/{group}/v1/namespaces/default/limits", limit))[0]) == 201:
                break
            await asyncio.sleep(0.05)
        assert code == 201
        assert (await send(c, "POST", cms, {"metadata": {"name": "after"}}))[0] == 201

        def widget(name, size):
            return {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": name}, "spec": {"size": size}}
        code, status = await send(c, "POST", widgets, widget("big", 5))
        assert (code, status["message"]) == (
            422, f'widgets.{group} "big" is forbidden: ValidatingAdmissionPolicy \'p\' with binding \'b\' denied request: too big')
        assert (await send(c, "POST", widgets, widget("small", 2)))[0] == 201
