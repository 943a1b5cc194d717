"""What access and rules reviews answer beyond `allowed`, as upstream's REST handlers fill their status
from the authorizer chain (its union: the first to allow or deny decides): `denied` only where a
webhook denies, not where none allows (AlwaysDeny and the Node authorizer have no opinion, so a later
authorizer may still allow), `evaluationError` where a webhook fails, which makes a refused request a
500; SelfSubjectRulesReview's `incomplete` and `evaluationError` for a node, whose Node-authorizer
rules cannot be listed, with and without --authorization-config, and RBAC's errors (a binding's
role not found), which leave the rules complete, all in the authorizer chain's order; and the
failing webhook's error where a WebSocket exec's `create` check meets it."""

from __future__ import annotations

import asyncio
import json
import tempfile

import pytest
from kubernetes import client
from kubernetes import config as kubeconfig
from kubernetes.client.rest import ApiException

from nanokube.pki.kubeconfig import write_kubeconfig
from tests.apiserver.auth.test_authorization_config import Webhook, config
from tests.apiserver.auth.test_authorization_config import served as served_with
from tests.served import served

NODE_GROUPS = "system:nodes"


def as_user(api: client.ApiClient, name: str, group: str) -> client.AuthorizationV1Api:
    """The admin's client impersonating `name` in `group`: the server answers as it would that user."""
    other = client.ApiClient(api.configuration)
    other.set_default_header("Impersonate-User", name)
    other.set_default_header("Impersonate-Group", group)
    return client.AuthorizationV1Api(other)


async def rules_review(authz: client.AuthorizationV1Api, namespace: str = "default"):
    return (await asyncio.to_thread(authz.create_self_subject_rules_review,
                                    {"spec": {"namespace": namespace}})).status


async def test_a_nodes_rules_review_is_incomplete_as_the_node_authorizer_cannot_list_them(tmp_path):
    async with served(tmp_path) as (_, api):
        node = await rules_review(as_user(api, "system:node:n1", NODE_GROUPS))
        assert node.incomplete is True
        assert node.evaluation_error == "node authorizer does not support user rule resolution"
        # RBAC's are listed all the same: the default ones of system:authenticated, none of system:node's
        assert any("selfsubjectaccessreviews" in (r.resources or ()) for r in node.resource_rules)
        assert not any("nodes" in (r.resources or ()) for r in node.resource_rules)
        # a member of system:nodes that is not a node identity, and anyone else, get complete rules
        for name, group in (("system:node-agents", NODE_GROUPS), ("alice", "devs")):
            status = await rules_review(as_user(api, name, group))
            assert (status.incomplete, status.evaluation_error) == (False, None), name
        # a binding whose role is not found is RBAC's error: the rules it lists stay complete
        rbac = client.RbacAuthorizationV1Api(api)
        for kind, create in (("ClusterRole", rbac.create_cluster_role_binding),
                             ("Role", lambda b: rbac.create_namespaced_role_binding("default", b))):
            await asyncio.to_thread(create, {
                "metadata": {"name": f"gone-{kind.lower()}"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": "gone"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "devs"}]})
        for _ in range(100):  # the bindings reach RBAC through the watch cache
            status = await rules_review(as_user(api, "alice", "devs"))
            if (status.evaluation_error or "").startswith("["):
                break
            await asyncio.sleep(0.05)
        assert status.incomplete is False
        assert status.evaluation_error == ('[clusterrole.rbac.authorization.k8s.io "gone" not found, '
                                           'role.rbac.authorization.k8s.io "gone" not found]')
        node = await rules_review(as_user(api, "system:node:n1", NODE_GROUPS))
        assert node.evaluation_error == "node authorizer does not support user rule resolution"  # not bound to devs



def admin_of(server) -> client.ApiClient:
    """A client for the server's admin (system:masters, whom every authorizer chain allows)."""
    with tempfile.TemporaryDirectory() as d:
        write_kubeconfig(f"{d}/k", server.url, server.pki)
        return kubeconfig.new_client_from_config(config_file=f"{d}/k")


async def access_review(admin: client.ApiClient, user: str, groups: list[str], resource: str, namespace: str) -> dict:
    """A SubjectAccessReview's status, as the server serializes it."""
    review = {"spec": {"user": user, "groups": groups,
                       "resourceAttributes": {"verb": "get", "resource": resource, "namespace": namespace, "name": "x"}}}
    answer = await asyncio.to_thread(client.AuthorizationV1Api(admin).create_subject_access_review, review)
    return admin.sanitize_for_serialization(answer.status)


async def test_only_a_webhook_denies_and_always_deny_leaves_the_decision_to_the_next(tmp_path):
    webhook = Webhook(tmp_path)
    text = config(webhook).replace("authorizers:\n", "authorizers:\n- type: AlwaysDeny\n  name: never\n", 1)
    try:
        async with served_with(tmp_path, text) as (server, _):
            admin = admin_of(server)
            try:
                devs = ["devs"]
                assert await access_review(admin, "dave", devs, "secrets", "team-a") == {  # the decider's reason alone
                    "allowed": False, "denied": True, "reason": "team-a keeps its secrets"}
                assert await access_review(admin, "dave", devs, "configmaps", "team-a") == {"allowed": True}
                # none allowing is no opinion, not a denial: every authorizer's reason, one a line
                assert await access_review(admin, "dave", devs, "pods", "default") == {
                    "allowed": False, "reason": "Everything is forbidden."}
                node = await access_review(admin, "system:node:n1", ["system:nodes"], "secrets", "default")
                assert node == {"allowed": False, "reason": "Everything is forbidden.\n"
                                                            "no relationship found between node 'n1' and this object"}
            finally:
                admin.close()
    finally:
        webhook.close()


async def test_a_failing_webhook_is_an_evaluation_error_and_a_500_where_none_allows(tmp_path):
    webhook = Webhook(tmp_path)
    webhook.close()  # nobody answers at its address
    port = webhook.httpd.server_address[1]
    # the REST client's error, as Go's url.Error gives it: the URL with the timeout it sends, the cause
    refused = f'Post "https://127.0.0.1:{port}/authorize?timeout=3s": dial tcp 127.0.0.1:{port}: connect: connection refused'
    async with served_with(tmp_path, config(webhook, "NoOpinion")) as (server, api):
        admin = admin_of(server)
        try:
            assert await access_review(admin, "dave", ["devs"], "pods", "team-a") == {
                "allowed": False, "evaluationError": refused}
        finally:
            admin.close()
        with pytest.raises(ApiException) as e:  # dave's own request: no authorizer allows, one failed
            await asyncio.to_thread(client.CoreV1Api(api).list_namespaced_pod, "team-a")
        assert (e.value.status, e.value.headers["Content-Type"]) == (500, "text/plain; charset=utf-8")
        assert e.value.body == f'Internal Server Error: "/api/v1/namespaces/team-a/pods": {refused}\n'


async def test_a_rules_reviews_errors_follow_the_authorizer_chains_order(tmp_path):
    """Upstream's union of rule resolvers aggregates their errors in the configured chain's order:
    RBAC's (a binding's role not found) before the webhook's where RBAC comes first."""
    webhook = Webhook(tmp_path)
    rbac_entry = "- type: RBAC\n  name: rbac\n"
    text = config(webhook).replace(rbac_entry, "").replace("authorizers:\n", "authorizers:\n" + rbac_entry, 1)
    try:
        async with served_with(tmp_path, text) as (server, api):
            admin = admin_of(server)
            try:
                await asyncio.to_thread(client.RbacAuthorizationV1Api(admin).create_cluster_role_binding, {
                    "metadata": {"name": "gone"},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gone"},
                    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "devs"}]})
            finally:
                admin.close()
            for _ in range(100):  # the binding reaches RBAC through the watch cache
                status = await rules_review(client.AuthorizationV1Api(api))
                if (status.evaluation_error or "").startswith("["):
                    break
                await asyncio.sleep(0.05)
            assert status.incomplete is True
            assert status.evaluation_error == ('[clusterrole.rbac.authorization.k8s.io "gone" not found, '
                                               'webhook authorizer does not support user rule resolution]')
    finally:
        webhook.close()


async def test_a_failing_webhook_makes_the_websocket_create_check_a_500(tmp_path):
    """A WebSocket exec is a GET, which RBAC allows here; its `create` check (ensureAuthorizedForVerb)
    meets the failing webhook and no one allowing: the authorizer's error, as a 500 Status."""
    webhook = Webhook(tmp_path)
    webhook.close()  # nobody answers at its address
    port = webhook.httpd.server_address[1]
    async with served_with(tmp_path, config(webhook, "NoOpinion")) as (server, api):
        admin = admin_of(server)
        try:
            await asyncio.to_thread(client.CoreV1Api(admin).create_namespace, {"metadata": {"name": "team-a"}})
            rbac = client.RbacAuthorizationV1Api(admin)
            await asyncio.to_thread(rbac.create_namespaced_role, "team-a", {
                "metadata": {"name": "exec-get"},
                "rules": [{"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["get"]}]})
            await asyncio.to_thread(rbac.create_namespaced_role_binding, "team-a", {
                "metadata": {"name": "exec-get"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "exec-get"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "devs"}]})
        finally:
            admin.close()
        request = api.param_serialize("GET", "/api/v1/namespaces/team-a/pods/web/exec",
                                      query_params=[("command", "ls"), ("stdout", "true")])
        for _ in range(100):  # the binding reaches RBAC through the watch cache: till then, the GET's plain-text 500
            response = await asyncio.to_thread(api.call_api, *request[:4])
            response.read()
            if response.getheader("Content-Type") == "application/json":
                break
            await asyncio.sleep(0.05)
        assert response.status == 500
        assert json.loads(response.data) == {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "code": 500,
            "message": f'Post "https://127.0.0.1:{port}/authorize?timeout=3s": dial tcp 127.0.0.1:{port}: '
                       "connect: connection refused"}


async def test_a_rules_review_lists_only_the_rules_of_the_configured_chain(tmp_path):
    """Upstream's union of rule resolvers: RBAC's rules where RBAC is in the chain only (here it is
    not: none of the defaults RBAC grants system:authenticated is listed), AlwaysAllow's everything."""
    text = ("apiVersion: apiserver.config.k8s.io/v1\nkind: AuthorizationConfiguration\nauthorizers:\n"
            "- type: Node\n  name: node\n- type: AlwaysAllow\n  name: open\n")
    async with served_with(tmp_path, text) as (server, api):
        status = await rules_review(client.AuthorizationV1Api(api))
        assert api.sanitize_for_serialization(status) == {
            "incomplete": False, "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}
        node = await rules_review(as_user(api, "system:node:n1", NODE_GROUPS))
        assert (node.incomplete, node.evaluation_error, len(node.resource_rules)) == (
            True, "node authorizer does not support user rule resolution", 1)
