"""The ValidatingAdmissionPolicy status controller: expressions type-checked
against the matched kinds' schemas, warnings and observedGeneration written
to status, wildcard rules left unchecked."""

from __future__ import annotations

import copy

import orjson

from nanokube.apiserver.loopback import LocalClient
from nanokube.controllers.validatingadmissionpolicy_status import ValidatingAdmissionPolicyStatusController
from tests.controllers import eventually
from tests.controllers.test_garbagecollector import over_http  # noqa: F401 (the fixture)

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


async def test_over_http_a_crd_served_after_the_last_discovery_read_is_checked_against(over_http):  # noqa: F811 (the fixture)
    """Over HTTP the controller's client reads discovery at start. A policy written before the CRD it
    matches is checked then, against nothing; the CRD's arrival checks no policy again (upstream's
    controller checks a generation once). A policy written after it misses in the client's copy, which
    is read again at once (upstream's type checker resets its RESTMapper on a miss): checked against the
    CRD's schema, as is the first policy's next generation. The clock never moves: no periodic read."""
    server, client, _ = over_http
    ctrl = ValidatingAdmissionPolicyStatusController(client)
    await ctrl.start()
    vaps = client.resource(G, "v1", "validatingadmissionpolicies")
    rules = [{"apiGroups": ["late.example.com"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["gizmos"]}]
    warning = ("late.example.com/v1, Kind=Gizmo: ERROR: <input>:1:13: undefined field 'sise'\n"
               " | object.spec.sise > 1\n | ............^\n")

    def checked(name, generation):
        async def check():
            got = await vaps.get(name)
            return got if (got.get("status") or {}).get("observedGeneration") == generation else None
        return check
    try:
        await vaps.create(policy("early", rules, "object.spec.sise > 1"))
        early = await eventually(checked("early", 1), timeout=10)
        assert early["status"]["typeChecking"] == {}
        crds = LocalClient(server.rest).resource("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        await crds.create({"metadata": {"name": "gizmos.late.example.com"}, "spec": {
            "group": "late.example.com", "scope": "Namespaced", "names": {"plural": "gizmos", "kind": "Gizmo"},
            "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                "type": "object", "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}]}})

        async def served():
            return server.rest.index.by_kind("late.example.com", "Gizmo") is not None
        assert await eventually(served, timeout=10)
        assert client.index.by_kind("late.example.com", "Gizmo") is None

        await vaps.create(policy("late", rules, "object.spec.sise > 1"))
        late = await eventually(checked("late", 1), timeout=10)
        assert late["status"]["typeChecking"]["expressionWarnings"] == [
            {"fieldRef": "spec.validations[0].expression", "warning": warning}]
        assert (await vaps.get("early"))["status"] == early["status"]
        early = copy.deepcopy(await vaps.get("early"))
        early["spec"]["validations"].append({"expression": "object.spec.size > 0"})
        await vaps.update(early)
        early = await eventually(checked("early", 2), timeout=10)
        assert early["status"]["typeChecking"]["expressionWarnings"] == [
            {"fieldRef": "spec.validations[0].expression", "warning": warning}]
    finally:
        await ctrl.stop()

