"""The ClusterRole aggregation controller: an aggregated ClusterRole's stored rules are the union
of the rules of the roles its selectors match (selected roles by name, each rule once), following
labels as they are added and removed; roles without an aggregationRule are left alone."""

import pytest

from nanokube.apiserver.auth import bootstrap_policy
from nanokube.controllers.clusterroleaggregation import ClusterRoleAggregationController
from nanokube.controllers.manager import ControllerManager
from tests.controllers import eventually, make_stack

G = "rbac.authorization.k8s.io"
SCALE = {"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["get", "scale"]}


@pytest.fixture
async def env():
    s = await make_stack()
    roles = s.client.resource(G, "v1", "clusterroles")
    policy, _ = bootstrap_policy()
    for role in policy:
        if role["metadata"]["name"] in ("admin", "edit", "view") or "aggregate-to" in role["metadata"]["name"]:
            await roles.create(role)
    ctrl = ClusterRoleAggregationController(s.client)
    await ctrl.start()
    yield roles
    await ctrl.stop()
    await s.close()


def rules_of(roles, name, check):
    """A check for `eventually`: `name`'s stored rules once `check` holds of them (in a list, so
    that no rules is a truthy answer too)."""
    async def got():
        rules = (await roles.get(name)).get("rules") or []
        return [rules] if check(rules) else None
    return got


async def test_bootstrap_roles_store_their_aggregated_rules(env):
    policy = {r["metadata"]["name"]: r for r in bootstrap_policy()[0]}
    view_rules = policy["system:aggregate-to-view"]["rules"]
    [view] = await eventually(rules_of(env, "view", lambda rules: rules))
    assert view == view_rules
    [edit] = await eventually(rules_of(env, "edit", lambda rules: len(rules) > len(view_rules)))
    # the selected roles by name: system:aggregate-to-edit, system:aggregate-to-view, view
    expected = list(policy["system:aggregate-to-edit"]["rules"])
    expected += [r for r in view_rules if r not in expected]
    assert edit == expected
    [admin] = await eventually(rules_of(env, "admin", lambda rules: len(rules) > len(edit)))
    # edit's stored rules come first ("edit" sorts before "system:..."), each rule once
    assert admin[:len(edit)] == edit
    assert all(r in admin for r in policy["system:aggregate-to-admin"]["rules"])
    assert len(admin) == len({repr(r) for r in admin})
    # written by a forced apply of the rules alone, as upstream's
    fields = (await env.get("admin"))["metadata"]["managedFields"]
    assert [(f["manager"], f["operation"], f["fieldsV1"]) for f in fields if f["operation"] == "Apply"] == [
        ("clusterrole-aggregation-controller", "Apply", {"f:rules": {}})]


async def test_a_labelled_role_joins_and_leaves(env):
    await eventually(rules_of(env, "edit", lambda rules: rules))
    await env.create({"metadata": {"name": "widgets-edit", "labels": {f"{G}/aggregate-to-edit": "true"}},
                      "rules": [SCALE]})
    [edit] = await eventually(rules_of(env, "edit", lambda rules: SCALE in rules))
    assert edit[-1] == SCALE  # "widgets-edit" sorts after the system: roles and "view"
    await eventually(rules_of(env, "admin", lambda rules: SCALE in rules))
    assert SCALE not in (await env.get("view")).get("rules")

    role = await env.get("widgets-edit")
    await env.update({**role, "metadata": {**role["metadata"], "labels": {}}})
    await eventually(rules_of(env, "edit", lambda rules: rules and SCALE not in rules))
    await eventually(rules_of(env, "admin", lambda rules: rules and SCALE not in rules))


async def test_user_aggregated_role_and_plain_roles(env):
    await env.create({"metadata": {"name": "plain", "labels": {"team": "a"}}, "rules": [SCALE]})
    await env.create({"metadata": {"name": "team-a"}, "rules": [],
                      "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"team": "a"}}]}})
    assert await eventually(rules_of(env, "team-a", lambda rules: rules)) == [[SCALE]]
    await env.delete("plain")
    await eventually(rules_of(env, "team-a", lambda rules: not rules))
    assert (await env.get("team-a"))["aggregationRule"] == {"clusterRoleSelectors": [{"matchLabels": {"team": "a"}}]}


async def test_manager_runs_it_by_upstream_name():
    s = await make_stack()
    manager = ControllerManager(s.client, controllers="clusterrole-aggregation")
    assert [c.name for c in manager.controllers] == ["clusterrole-aggregation-controller"]
    await s.close()
