"""RBAC escalation prevention through the API: a writer of Roles, ClusterRoles and bindings grants only
what it holds, unless it may `escalate` or `bind` (a user allowed to create RoleBindings bound itself
cluster-admin before)."""

import asyncio
import json

from tests.served import send, served

RBAC = "/apis/rbac.authorization.k8s.io/v1"
MALLORY = {"Impersonate-User": "mallory"}


async def _as_mallory(api, method, path, body):
    """A request the admin sends as mallory (the impersonated user is the one judged, as upstream's)."""
    def call():
        r = api.rest_client.pool_manager.request(method, api.configuration.host + path, body=json.dumps(body),
                                                 headers={"Content-Type": "application/json", **MALLORY})
        return r.status, json.loads(r.data)
    return await asyncio.to_thread(call)


def _role(name, rules, kind="Role", **extra):
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": {"name": name}, "rules": rules, **extra}


def _binding(name, kind, role):
    return {"metadata": {"name": name}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
            "subjects": [{"kind": "User", "name": "mallory"}]}


async def test_roles_and_bindings_grant_only_what_the_writer_holds(tmp_path):
    async with served(tmp_path) as (_, api):
        assert (await send(api, "POST", "/api/v1/namespaces", {"metadata": {"name": "f"}}))[0] == 201
        maker = [{"verbs": ["create", "update"], "apiGroups": ["rbac.authorization.k8s.io"],
                  "resources": ["roles", "rolebindings", "clusterroles"]}]
        assert (await send(api, "POST", f"{RBAC}/clusterroles", _role("role-maker", maker, "ClusterRole")))[0] == 201
        assert (await send(api, "POST", f"{RBAC}/clusterrolebindings",
                           _binding("role-maker", "ClusterRole", "role-maker")))[0] == 201
        roles = f"{RBAC}/namespaces/f/roles"

        code, status = await _as_mallory(api, "POST", roles, _role("r", [
            {"verbs": ["get", "list"], "apiGroups": [""], "resources": ["secrets"]},
            {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["p"]}]))
        assert (code, status["reason"]) == (403, "Forbidden")
        assert status["message"] == (
            'roles.rbac.authorization.k8s.io "r" is forbidden: user "mallory" (groups=["system:authenticated"]) is '
            "attempting to grant RBAC permissions not currently held:\n"
            '{APIGroups:[""], Resources:["pods"], ResourceNames:["p"], Verbs:["get"]}\n'
            '{APIGroups:[""], Resources:["secrets"], Verbs:["get" "list"]}')
        # what it holds it may grant
        assert (await _as_mallory(api, "POST", roles, _role("ok", [
            {"verbs": ["create"], "apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"]}])))[0] == 201

        code, status = await _as_mallory(api, "POST", f"{RBAC}/clusterroles", _role("agg", [], "ClusterRole", aggregationRule={
            "clusterRoleSelectors": [{"matchLabels": {"kubernetes.io/bootstrapping": "rbac-defaults"}}]}))
        assert (code, status["message"]) == (403, 'clusterroles.rbac.authorization.k8s.io "agg" is forbidden: '
                                                  "must have cluster-admin privileges to use the aggregationRule")

        bindings = f"{RBAC}/namespaces/f/rolebindings"
        code, status = await _as_mallory(api, "POST", bindings, _binding("b", "ClusterRole", "cluster-admin"))
        assert code == 403 and "is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"*\"], " \
                               "Resources:[\"*\"], Verbs:[\"*\"]}" in status["message"]
        code, status = await _as_mallory(api, "POST", bindings, _binding("b", "Role", "nope"))
        assert (code, status["message"]) == (404, 'roles.rbac.authorization.k8s.io "nope" not found')

        # `bind` on the role named, and `escalate` on roles, let it through
        power = [{"verbs": ["bind"], "apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"],
                  "resourceNames": ["cluster-admin"]},
                 {"verbs": ["escalate"], "apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"]}]
        assert (await send(api, "POST", f"{RBAC}/namespaces/f/roles", _role("power", power)))[0] == 201
        assert (await send(api, "POST", bindings, _binding("power", "Role", "power")))[0] == 201
        assert (await _as_mallory(api, "POST", bindings, _binding("b", "ClusterRole", "cluster-admin")))[0] == 201
        assert (await _as_mallory(api, "POST", roles, _role("any", [{"verbs": ["*"], "apiGroups": ["*"],
                                                                       "resources": ["*"]}])))[0] == 201


async def test_dropping_an_aggregation_rule_takes_full_authority_too(tmp_path):
    """A ClusterRole update that removes its aggregationRule is judged as one that sets it (upstream's
    hasAggregationRule of the new or the old role): mallory, allowed to update ClusterRoles, may not."""
    async with served(tmp_path) as (_, api):
        maker = [{"verbs": ["update"], "apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"]}]
        assert (await send(api, "POST", f"{RBAC}/clusterroles", _role("updater", maker, "ClusterRole")))[0] == 201
        assert (await send(api, "POST", f"{RBAC}/clusterrolebindings",
                           _binding("updater", "ClusterRole", "updater")))[0] == 201
        gathers = {"clusterRoleSelectors": [{"matchLabels": {"gathered-by": "agg"}}]}
        assert (await send(api, "POST", f"{RBAC}/clusterroles", _role("agg", [], "ClusterRole", aggregationRule=gathers)))[0] == 201
        code, status = await _as_mallory(api, "PUT", f"{RBAC}/clusterroles/agg", _role("agg", [], "ClusterRole"))
        assert (code, status["message"]) == (403, 'clusterroles.rbac.authorization.k8s.io "agg" is forbidden: '
                                                  "must have cluster-admin privileges to use the aggregationRule")
        # a ClusterRole that never had one it may update within what it holds
        assert (await send(api, "POST", f"{RBAC}/clusterroles", _role("plain", [], "ClusterRole")))[0] == 201
        assert (await _as_mallory(api, "PUT", f"{RBAC}/clusterroles/plain", _role("plain", maker, "ClusterRole")))[0] == 200


async def test_escalation_is_judged_before_validation_and_names_unresolved_bindings(tmp_path):
    """As upstream's storage wrappers, which judge escalation before their inner storage validates: a
    role or binding both invalid and escalating is 403, not 422; a binding of mallory's whose role is
    missing shows in the message (RulesFor's resolution errors)."""
    async with served(tmp_path) as (_, api):
        assert (await send(api, "POST", "/api/v1/namespaces", {"metadata": {"name": "f"}}))[0] == 201
        maker = [{"verbs": ["create", "update"], "apiGroups": ["rbac.authorization.k8s.io"],
                  "resources": ["roles", "rolebindings"]}]
        assert (await send(api, "POST", f"{RBAC}/clusterroles", _role("role-maker", maker, "ClusterRole")))[0] == 201
        assert (await send(api, "POST", f"{RBAC}/clusterrolebindings",
                           _binding("role-maker", "ClusterRole", "role-maker")))[0] == 201
        roles, bindings = f"{RBAC}/namespaces/f/roles", f"{RBAC}/namespaces/f/rolebindings"
        secrets = [{"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"]}]
        code, status = await _as_mallory(api, "POST", roles, _role("bad%name", secrets))
        assert (code, status["reason"]) == (403, "Forbidden")
        assert status["message"].endswith('\n{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}')
        bad_subject = {**_binding("b", "ClusterRole", "cluster-admin"), "subjects": [{"kind": "Robot", "name": "x"}]}
        assert (await _as_mallory(api, "POST", bindings, bad_subject))[0] == 403
        # what it holds, invalid, is refused by validation as before
        code, status = await _as_mallory(api, "POST", roles, _role("bad%name", maker))
        assert (code, status["reason"]) == (422, "Invalid")
        # a roleRef of no role kind: upstream's GetRoleReferenceRules error is a 500; validation answers here
        code, status = await _as_mallory(api, "POST", bindings, _binding("p", "Pod", "x"))
        assert (code, status["reason"]) == (422, "Invalid")

        for name, kind in (("gone", "Role"), ("gone-too", "Role")):
            assert (await send(api, "POST", bindings, {**_binding(name, kind, name)}))[0] == 201
        code, status = await _as_mallory(api, "POST", roles, _role("r", secrets))
        assert code == 403 and status["message"].endswith(
            '\n{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}; resolution errors: '
            '[[roles.rbac.authorization.k8s.io "gone" not found, roles.rbac.authorization.k8s.io "gone-too" not found]]')
        assert (await send(api, "DELETE", f"{bindings}/gone-too"))[0] == 200
        code, status = await _as_mallory(api, "POST", roles, _role("r", secrets))
        assert code == 403 and status["message"].endswith(
            '; resolution errors: [roles.rbac.authorization.k8s.io "gone" not found]')
