"""What access and rules reviews answer beyond `allowed`, as upstream's REST handlers fill their status
from the authorizer chain: SelfSubjectRulesReview's `incomplete` and `evaluationError` for a node,
whose Node-authorizer rules cannot be listed, with and without --authorization-config."""

from __future__ import annotations

import asyncio

from kubernetes import client

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
        assert any("nodes" in (r.resources or ()) for r in node.resource_rules)  # RBAC's are listed all the same
        # a member of system:nodes that is not a node identity, and anyone else, get complete rules
        for name, group in (("system:node-agents", NODE_GROUPS), ("alice", "devs")):
            status = await rules_review(as_user(api, name, group))
            assert (status.incomplete, status.evaluation_error) == (False, None), name
