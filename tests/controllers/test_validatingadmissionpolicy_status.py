"""The ValidatingAdmissionPolicy status controller: expressions type-checked
against the matched kinds' schemas, warnings and observedGeneration written
to status, wildcard rules left unchecked."""

from __future__ import annotations

import copy

import orjson


from nanokube.controllers.validatingadmissionpolicy_status import ValidatingAdmissionPolicyStatusController
from tests.controllers import eventually

G = "admissionregistration.k8s.io"


def policy(name, rules, *validations, param_kind=None):
    spec = {"matchConstraints": {"resourceRules": rules},
            "validations": [{"expression": e} if isinstance(e, str) else e for e in validations]}
    if param_kind:
        spec["paramKind"] = param_kind
    return {"metadata": {"name": name}, "spec": spec}


DEPLOYMENTS = [{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["deployments"]}]


async def test_type_checking_warnings_and_observed_generation(stack):
    ctrl = ValidatingAdmissionPolicyStatusController(stack.client)
    await ctrl.start()
    vaps = stack.client.resource(G, "v1", "validatingadmissionpolicies")
    await vaps.create(policy("typed", DEPLOYMENTS, "object.spec.replicas <= 5",
                             {"expression": "object.spec.replica <= 5", "messageExpression": "string(params.data.msg)"},
                             param_kind={"apiVersion": "v1", "kind": "ConfigMap"}))

    async def checked():
        got = await vaps.get("typed")
        return got if (got.get("status") or {}).get("observedGeneration") == 1 else None

    got = await eventually(checked)
    assert got["status"]["typeChecking"]["expressionWarnings"] == [{
        "fieldRef": "spec.validations[1].expression",
        "warning": "apps/v1, Kind=Deployment: ERROR: <input>:1:13: undefined field 'replica'\n"
                   " | object.spec.replica <= 5\n | ............^\n"}]
    got = copy.deepcopy(got)
    got["spec"]["validations"] = [{"expression": "object.spec.replicas <= 5", "messageExpression": "string(params.dat.msg)"}]
    await vaps.update(got)

    async def rechecked():
        got = await vaps.get("typed")
        return got if (got.get("status") or {}).get("observedGeneration") == 2 else None

    got = await eventually(rechecked)
    assert [w["fieldRef"] for w in got["status"]["typeChecking"]["expressionWarnings"]] == [
        "spec.validations[0].messageExpression"]
    wild = [{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["CREATE"], "resources": ["*"]}]
    await vaps.create(policy("wild", wild, "object.anything == 1"))

    async def wild_checked():
        got = await vaps.get("wild")
        return got if (got.get("status") or {}).get("observedGeneration") == 1 else None

    # no warnings: upstream's omitempty leaves the empty list out
    assert (await eventually(wild_checked))["status"]["typeChecking"] == {}
    await ctrl.stop()


async def test_the_authorizer_is_declared_for_every_expression(stack):
    """upstream's type checker declares `authorizer` for all of a policy's expressions (buildEnvSet's
    hasAuthorizer is always true): a check through it is no warning, a misspelt field beside it is."""
    ctrl = ValidatingAdmissionPolicyStatusController(stack.client)
    await ctrl.start()
    vaps = stack.client.resource(G, "v1", "validatingadmissionpolicies")
    await vaps.create(policy("authz", DEPLOYMENTS,
                             "authorizer.group('apps').resource('deployments').check('delete').allowed()",
                             "authorizer.requestResource.check('update').allowed()",
                             "authorizer.requestResource.check('get').allowed() && object.spec.replica > 0"))

    async def checked():
        got = await vaps.get("authz")
        return got if (got.get("status") or {}).get("observedGeneration") == 1 else None

    warnings = (await eventually(checked))["status"]["typeChecking"]["expressionWarnings"]
    assert [w["fieldRef"] for w in warnings] == ["spec.validations[2].expression"]
    assert warnings[0]["warning"].startswith("apps/v1, Kind=Deployment: ERROR: <input>:1:66: undefined field 'replica'")
    await ctrl.stop()


async def test_request_and_namespace_object_are_typed(stack):
    """upstream's checker types `request` and `namespaceObject` (BuildRequestType,
    BuildNamespaceType): a field they lack is a warning. Today's server refuses such a policy
    when it is written, so the policy is one an older server stored (written to the store)."""
    ctrl = ValidatingAdmissionPolicyStatusController(stack.client)
    vaps = stack.client.resource(G, "v1", "validatingadmissionpolicies")
    await vaps.create(policy("typed-request", DEPLOYMENTS, "request.operation == 'CREATE'",
                             "namespaceObject.metadata.name != ''"))
    key = f"/registry/validatingadmissionpolicies.{G}/typed-request"
    kv = await stack.store.get(key)
    stored = orjson.loads(kv.value)
    stored["spec"]["validations"][1]["expression"] = "request.userinfo.username != '' && namespaceObject.metadata.uid != ''"
    await stack.store.update(key, orjson.dumps(stored), kv.mod_revision)
    await ctrl.start()

    async def checked():
        got = await vaps.get("typed-request")
        return got if (got.get("status") or {}).get("observedGeneration") == 1 else None

    warnings = (await eventually(checked))["status"]["typeChecking"]["expressionWarnings"]
    assert [w["fieldRef"] for w in warnings] == ["spec.validations[1].expression"]
    assert warnings[0]["warning"] == (
        "apps/v1, Kind=Deployment: ERROR: <input>:1:9: undefined field 'userinfo'\n"
        " | request.userinfo.username != '' && namespaceObject.metadata.uid != ''\n | ........^\n"
        "ERROR: <input>:1:61: undefined field 'uid'\n"
        " | request.userinfo.username != '' && namespaceObject.metadata.uid != ''\n"
        " | ............................................................^\n")
    await ctrl.stop()
