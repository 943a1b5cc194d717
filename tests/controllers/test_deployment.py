import asyncio

import pytest

from nanokube.controllers.base import TURN
from nanokube.controllers.deployment import (
    DESIRED,
    MAX_REPLICAS,
    DeploymentController,
    _with_old_revision,
    new_rs_replicas,
    resolve_int_or_percent,
    surge_and_unavailable,
    template_hash,
    terminating_replicas,
)
from nanokube.controllers.replicaset import ReplicaSetController
from nanokube.machinery.errors import APIError
from tests.controllers import eventually, make_stack, turns_during
from tests.controllers.test_replicaset import make_ready, patch_retrying, stop

LABELS = {"app": "web"}


def deployment(replicas=3, image="nginx:1", strategy=None):
    d = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
         "spec": {"replicas": replicas, "selector": {"matchLabels": LABELS},
                  "template": {"metadata": {"labels": LABELS},
                               "spec": {"containers": [{"name": "c", "image": image}]}}}}
    if strategy:
        d["spec"]["strategy"] = strategy
    return d


@pytest.fixture
async def env():
    s = await make_stack()
    ctrls = [ReplicaSetController(s.client), DeploymentController(s.client)]
    for c in ctrls:
        await c.start()
    yield s.client
    for c in ctrls:
        await stop(c)
    await s.close()


async def ready_all(client):
    """Play the kubelet: every live pod becomes Ready. A pod the controllers deleted (a rollout
    scaling its old ReplicaSet down) or changed since the list is left to the next poll."""
    pods = client.resource("", "v1", "pods")
    items, _ = await pods.list("default")
    for p in items:
        if not p["metadata"].get("deletionTimestamp") and p.get("status", {}).get("phase") != "Running":
            try:
                await make_ready(client, p)
            except APIError as e:
                if e.code not in (404, 409):
                    raise


async def rollout_done(client, revision):
    await ready_all(client)
    d = await client.resource("apps", "v1", "deployments").get("web", "default")
    st = d.get("status") or {}
    conds = {c["type"]: c for c in st.get("conditions") or []}
    done = (d["metadata"].get("annotations", {}).get("deployment.kubernetes.io/revision") == revision
            and st.get("observedGeneration") == d["metadata"]["generation"]
            and st.get("updatedReplicas") == st.get("replicas") == st.get("availableReplicas") == d["spec"]["replicas"]
            and conds.get("Progressing", {}).get("reason") == "NewReplicaSetAvailable")
    return (d, conds) if done else None


async def test_rollout_creates_hashed_replicaset_and_completes(env):
    client = env
    await client.resource("apps", "v1", "deployments").create(deployment())
    _, conds = await eventually(lambda: rollout_done(client, "1"))
    rss, _ = await client.resource("apps", "v1", "replicasets").list("default")
    assert len(rss) == 1
    rs = rss[0]
    h = rs["metadata"]["labels"]["pod-template-hash"]
    assert rs["metadata"]["name"] == f"web-{h}"
    assert rs["spec"]["selector"]["matchLabels"] == {"app": "web", "pod-template-hash": h}
    assert rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
    assert rs["metadata"]["ownerReferences"][0]["kind"] == "Deployment"
    assert conds["Available"]["reason"] == "MinimumReplicasAvailable"
    assert conds["Progressing"]["message"] == f'ReplicaSet "web-{h}" has successfully progressed.'


async def test_image_change_rolls_to_revision_two(env):
    client = env
    deps = client.resource("apps", "v1", "deployments")
    await deps.create(deployment())
    await eventually(lambda: rollout_done(client, "1"))
    await patch_retrying(deps, "web", {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}}})
    await eventually(lambda: rollout_done(client, "2"))
    rss, _ = await client.resource("apps", "v1", "replicasets").list("default")
    by_rev = {r["metadata"]["annotations"]["deployment.kubernetes.io/revision"]: r for r in rss}
    assert by_rev["1"]["spec"]["replicas"] == 0
    assert by_rev["2"]["spec"]["replicas"] == 3
    assert by_rev["2"]["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:2"


async def test_unavailable_replicas_count_every_replicaset_replica_not_available(env):
    """calculateStatus: unavailableReplicas is the sets' spec.replicas summed less the available ones, so
    a rollout stuck on its surge pod reports it (`kubectl describe deploy`: '... | 1 unavailable')."""
    client = env
    deps = client.resource("apps", "v1", "deployments")
    await deps.create(deployment(replicas=2))
    await eventually(lambda: rollout_done(client, "1"))
    await patch_retrying(deps, "web", {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}}})

    async def stuck():
        st = (await deps.get("web", "default")).get("status") or {}
        return st if st.get("replicas") == 3 and st.get("updatedReplicas") == 1 else None
    st = await eventually(stuck)
    assert (st["availableReplicas"], st.get("unavailableReplicas")) == (2, 1)


async def test_a_rollback_out_of_a_stuck_rollout_is_progressing_again(env):
    """syncRolloutStatus weighs progress before the deadline: rolling a rollout that exceeded its
    progressDeadlineSeconds back to its ready ReplicaSet (`kubectl rollout undo`) reports progress, so
    `kubectl rollout status` no longer fails on a ProgressDeadlineExceeded kept until the end."""
    client = env
    deps = client.resource("apps", "v1", "deployments")
    await deps.create(deployment(replicas=2))
    await eventually(lambda: rollout_done(client, "1"))
    await patch_retrying(deps, "web", {"spec": {"progressDeadlineSeconds": 1,
                                                "template": {"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}}})

    async def exceeded():
        got = await deps.get("web", "default")
        st = got.get("status") or {}
        cond = next((c for c in st.get("conditions") or [] if c["type"] == "Progressing"), {})
        return got if cond.get("reason") == "ProgressDeadlineExceeded" else None
    await eventually(exceeded)
    # time enough for the rollback on a loaded machine; an exceeded deadline stays exceeded
    stuck = await patch_retrying(deps, "web", {"spec": {"progressDeadlineSeconds": 600}})
    _, rv = await deps.list("default")
    stream = await deps.watch("default", rv)
    seen: list[tuple[str, str]] = []

    async def collect():
        async for _, obj in stream:
            st = obj.get("status") or {}
            if st.get("observedGeneration") == stuck["metadata"]["generation"] + 1:
                seen.extend((c["status"], c["reason"]) for c in st.get("conditions") or [] if c["type"] == "Progressing")
    collector = asyncio.create_task(collect())
    try:
        await patch_retrying(deps, "web", {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}}})
        await eventually(lambda: rollout_done(client, "3"))

        async def reported_done():
            return seen and seen[-1] == ("True", "NewReplicaSetAvailable")
        await eventually(reported_done)
    finally:
        collector.cancel()
    assert set(seen) <= {("True", "ReplicaSetUpdated"), ("True", "NewReplicaSetAvailable")}, seen


async def test_scaling_a_completed_deployment_keeps_its_progressing_condition(env):
    """A scale is no rollout: upstream's sync writes the counts only, and syncRolloutStatus leaves the
    NewReplicaSetAvailable of a deployment with one ReplicaSet as it is, message and times included
    (`kubectl describe deploy` after `kubectl scale`)."""
    client = env
    deps = client.resource("apps", "v1", "deployments")
    await deps.create(deployment(replicas=2))
    _, conds = await eventually(lambda: rollout_done(client, "1"))
    await patch_retrying(deps, "web", {"spec": {"replicas": 3}})

    async def counted():
        got = await deps.get("web", "default")
        st = got.get("status") or {}
        return st if st.get("observedGeneration") == got["metadata"]["generation"] and st.get("replicas") == 3 else None
    st = await eventually(counted)
    assert st.get("availableReplicas") == 2
    assert next(c for c in st["conditions"] if c["type"] == "Progressing") == conds["Progressing"]
    _, done = await eventually(lambda: rollout_done(client, "1"))
    assert done["Progressing"] == conds["Progressing"]


async def test_without_a_progress_deadline_there_is_no_progressing_condition(env):
    """HasProgressDeadline: progressDeadlineSeconds 2147483647 never times out, and upstream then keeps
    no Progressing condition (none on the new ReplicaSet, any removed); given a deadline later, the
    deployment finds its ReplicaSet (FoundNewReplicaSet) and, complete, reports NewReplicaSetAvailable."""
    client = env
    deps = client.resource("apps", "v1", "deployments")
    d = deployment(replicas=2)
    d["spec"]["progressDeadlineSeconds"] = 2**31 - 1
    await deps.create(d)

    async def available():
        await ready_all(client)
        got = await deps.get("web", "default")
        st = got.get("status") or {}
        return st if st.get("observedGeneration") == got["metadata"]["generation"] and st.get("availableReplicas") == 2 else None
    st = await eventually(available)
    assert [c["type"] for c in st["conditions"]] == ["Available"]
    await patch_retrying(deps, "web", {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}}})

    async def rolled_out():
        await ready_all(client)
        got = await deps.get("web", "default")
        st = got.get("status") or {}
        done = got["metadata"]["annotations"].get("deployment.kubernetes.io/revision") == "2" and \
            st.get("observedGeneration") == got["metadata"]["generation"] and \
            st.get("updatedReplicas") == st.get("replicas") == st.get("availableReplicas") == 2
        return st if done else None
    st = await eventually(rolled_out)
    assert [c["type"] for c in st["conditions"]] == ["Available"]
    await patch_retrying(deps, "web", {"spec": {"progressDeadlineSeconds": 600}})
    _, conds = await eventually(lambda: rollout_done(client, "2"))
    assert conds["Progressing"]["status"] == "True"


async def test_template_back_to_revision_one_revives_its_replicaset_with_history_and_events(env):
    client = env
    deps = client.resource("apps", "v1", "deployments")
    await deps.create(deployment())
    await eventually(lambda: rollout_done(client, "1"))
    await patch_retrying(deps, "web", {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}}})
    await eventually(lambda: rollout_done(client, "2"))
    await patch_retrying(deps, "web", {"metadata": {"annotations": {"kubernetes.io/change-cause": "undo"}},
                                       "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}}})
    await eventually(lambda: rollout_done(client, "3"))
    rss, _ = await client.resource("apps", "v1", "replicasets").list("default")
    assert len(rss) == 2
    revived = next(r for r in rss if r["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1")
    ann = revived["metadata"]["annotations"]
    assert (ann["deployment.kubernetes.io/revision"], ann["deployment.kubernetes.io/revision-history"],
            ann["kubernetes.io/change-cause"], revived["spec"]["replicas"]) == ("3", "1", "undo", 3)
    name = revived["metadata"]["name"]

    async def scaled():  # the recorder writes its Events from a queue: maybe after the rollout is seen done
        events, _ = await client.resource("", "v1", "events").list("default")
        msgs = {e["message"] for e in events if e["reason"] == "ScalingReplicaSet"}
        return {f"Scaled up replica set {name} from 0 to 3", f"Scaled down replica set {name} from 1 to 0"} <= msgs \
            and events
    events = await eventually(scaled)
    assert all(e["source"]["component"] == "deployment-controller" and e["involvedObject"]["kind"] == "Deployment"
               for e in events if e["reason"] == "ScalingReplicaSet")


def test_revision_history_keeps_the_newest_within_2000_characters():
    assert _with_old_revision("", "1") == "1"
    assert _with_old_revision("1,3", "5") == "1,3,5"
    long = ",".join(str(i) for i in range(1000, 1400))
    got = _with_old_revision(long, "9999")
    assert len(got) <= 2000 and got.endswith(",1399,9999") and not got.startswith("1000,")


async def test_revision_history_limit_deletes_oldest(env):
    client = env
    deps = client.resource("apps", "v1", "deployments")
    body = deployment(replicas=1)
    body["spec"]["revisionHistoryLimit"] = 0
    await deps.create(body)
    await eventually(lambda: rollout_done(client, "1"))
    await patch_retrying(deps, "web", {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}}})
    await eventually(lambda: rollout_done(client, "2"))

    async def one_rs():
        rss, _ = await client.resource("apps", "v1", "replicasets").list("default")
        return rss if len(rss) == 1 else None
    rss = await eventually(one_rs)
    assert rss[0]["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"


def test_fenceposts_round_surge_up_and_unavailable_down():
    d = deployment(replicas=10, strategy={"type": "RollingUpdate",
                                          "rollingUpdate": {"maxSurge": "15%", "maxUnavailable": "15%"}})
    assert surge_and_unavailable(d) == (2, 1)
    zero = deployment(replicas=3, strategy={"rollingUpdate": {"maxSurge": 0, "maxUnavailable": "0%"}})
    assert surge_and_unavailable(zero) == (0, 1)
    assert resolve_int_or_percent(4, 100, True) == 4


def test_new_replicaset_grows_only_within_surge():
    d = deployment(replicas=4, strategy={"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}})
    old = {"spec": {"replicas": 4}}
    new = {"spec": {"replicas": 0}}
    assert new_rs_replicas(d, [old, new], new) == 1
    assert new_rs_replicas(d, [{"spec": {"replicas": 5}}, new], new) == 0
    assert new_rs_replicas(d, [{"spec": {"replicas": 0}}, new], new) == 4


def test_template_hash_is_stable_and_collision_sensitive():
    t = deployment()["spec"]["template"]
    assert template_hash(t, None) == template_hash(dict(t), None)
    assert template_hash(t, None) != template_hash(t, 1)
    assert set(template_hash(t, None)) <= set("bcdfghjklmnpqrstvwxz2456789")


async def test_pausing_and_resuming_show_in_progressing(env):
    client = env
    deps = client.resource("apps", "v1", "deployments")
    await deps.create(deployment())
    await eventually(lambda: rollout_done(client, "1"))
    await patch_retrying(deps, "web", {"spec": {"paused": True}})

    async def progressing(reason):
        d = await deps.get("web", "default")
        c = next((c for c in (d.get("status") or {}).get("conditions") or [] if c["type"] == "Progressing"), None)
        return c if c and c["reason"] == reason else None
    paused = await eventually(lambda: progressing("DeploymentPaused"))
    assert (paused["status"], paused["message"]) == ("Unknown", "Deployment is paused")
    await patch_retrying(deps, "web", {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}}})
    await eventually(lambda: progressing("DeploymentPaused"))
    rss, _ = await client.resource("apps", "v1", "replicasets").list("default")
    assert len(rss) == 1
    await patch_retrying(deps, "web", {"spec": {"paused": False}})
    await eventually(lambda: rollout_done(client, "2"))


async def test_scaling_mid_rollout_grows_both_replicasets_in_proportion(env):
    client = env
    deps, rsets = client.resource("apps", "v1", "deployments"), client.resource("apps", "v1", "replicasets")
    await deps.create(deployment(replicas=4, strategy={"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}))
    await eventually(lambda: rollout_done(client, "1"))
    await patch_retrying(deps, "web", {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}}})

    async def sizes():
        items, _ = await rsets.list("default")
        return {r["spec"]["template"]["spec"]["containers"][0]["image"]: r["spec"]["replicas"] for r in items}

    async def surged():
        return await sizes() == {"nginx:1": 4, "nginx:2": 1}
    await eventually(surged)
    await patch_retrying(deps, "web", {"spec": {"replicas": 8}})

    async def proportional():
        return await sizes() == {"nginx:1": 7, "nginx:2": 2}
    await eventually(proportional)
    items, _ = await rsets.list("default")
    assert {r["metadata"]["annotations"]["deployment.kubernetes.io/desired-replicas"] for r in items} == {"8"}
    assert {r["metadata"]["annotations"]["deployment.kubernetes.io/max-replicas"] for r in items} == {"9"}
    await eventually(lambda: rollout_done(client, "2"))
    assert await sizes() == {"nginx:1": 0, "nginx:2": 8}


async def test_a_replicaset_failure_shows_on_the_deployment():
    s = await make_stack()
    ctrl = DeploymentController(s.client)
    await ctrl.start()
    try:
        deps, rsets = s.client.resource("apps", "v1", "deployments"), s.client.resource("apps", "v1", "replicasets")
        await deps.create(deployment())

        async def the_rs():
            items, _ = await rsets.list("default")
            return items and items[0]
        rs = await eventually(the_rs)
        failure = {"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate",
                   "message": 'pods "web-x" is forbidden: exceeded quota', "lastTransitionTime": "2026-01-01T00:00:00Z"}
        await rsets.update({**rs, "status": {"replicas": 0, "conditions": [failure]}}, subresource="status")

        async def shown():
            d = await deps.get("web", "default")
            return next((c for c in d.get("status", {}).get("conditions") or [] if c["type"] == "ReplicaFailure"), None)
        cond = await eventually(shown)
        assert (cond["status"], cond["reason"], cond["message"]) == ("True", "FailedCreate", failure["message"])
    finally:
        await stop(ctrl)
        await s.close()


async def test_recreate_starts_the_new_pods_only_once_the_old_ones_are_gone(env):
    client = env
    deps, pods = client.resource("apps", "v1", "deployments"), client.resource("", "v1", "pods")
    d = deployment(replicas=1, strategy={"type": "Recreate"})
    d["spec"]["template"]["metadata"]["finalizers"] = ["example.com/hold"]  # old pods stay terminating
    await deps.create(d)
    await eventually(lambda: rollout_done(client, "1"))
    [old] = (await pods.list("default"))[0]
    await patch_retrying(deps, "web", {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}}})

    rs_api = client.resource("apps", "v1", "replicasets")

    async def old_terminating():
        p = await pods.get(old["metadata"]["name"], "default")
        rs = await rs_api.get(old["metadata"]["ownerReferences"][0]["name"], "default")
        st = rs.get("status") or {}
        return p["metadata"].get("deletionTimestamp") and rs["spec"]["replicas"] == 0 and not st.get("replicas")
    await eventually(old_terminating)
    for _ in range(20):  # the old ReplicaSet counts no replica once its pod terminates; still no new one
        assert len((await rs_api.list("default"))[0]) == 1 and len((await pods.list("default"))[0]) == 1
        await asyncio.sleep(0.01)
    await pods.patch(old["metadata"]["name"], {"metadata": {"finalizers": None}}, namespace="default")
    await eventually(lambda: rollout_done(client, "2"))
    [p] = (await pods.list("default"))[0]
    assert p["spec"]["containers"][0]["image"] == "nginx:2"


def test_terminating_replicas_sum_skips_unsynced_sets_and_is_unknown_without_the_field():
    synced = [{"status": {"observedGeneration": 1, "terminatingReplicas": 3}},
              {"status": {"observedGeneration": 2, "terminatingReplicas": 1}}]
    unsynced = {"status": {"replicas": 0}}
    assert terminating_replicas(synced) == 4
    assert terminating_replicas([unsynced]) == 0
    assert terminating_replicas(synced + [unsynced]) == 4
    assert terminating_replicas(synced + [{"status": {"observedGeneration": 1, "replicas": 1}}]) is None


async def test_status_reports_the_replicasets_terminating_pods(env):
    """Pods bound to a node stay terminating through their grace period (no kubelet here): the
    Deployment's status.terminatingReplicas sums its ReplicaSets', 0 included."""
    client = env
    deps = client.resource("apps", "v1", "deployments")
    d = deployment(replicas=3)
    d["spec"]["template"]["spec"]["nodeName"] = "n1"
    await deps.create(d)
    done, _ = await eventually(lambda: rollout_done(client, "1"))
    assert done["status"]["terminatingReplicas"] == 0
    await patch_retrying(deps, "web", {"spec": {"replicas": 1}})

    async def terminating():
        st = (await deps.get("web", "default")).get("status") or {}
        return st.get("replicas") == 1 and st.get("terminatingReplicas") == 2 and st
    st = await eventually(terminating)
    assert (st["availableReplicas"], st["observedGeneration"]) == (1, 2)


def _replicaset_of(owner_uid: str) -> dict:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "web-x", "namespace": "default", "uid": "rs-uid", "labels": LABELS,
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                                              "uid": owner_uid, "controller": True}]},
            "spec": {"replicas": 1, "selector": {"matchLabels": LABELS}, "template": deployment()["spec"]["template"]}}


async def test_a_replicaset_naming_the_deployment_with_another_uid_does_not_sync_it():
    """resolveControllerRef: a ReplicaSet whose controller reference has the Deployment's name but not
    its uid (one of a deleted namesake) enqueues it on no add, update or delete; one with its uid does."""
    s = await make_stack()
    ctrl = DeploymentController(s.client)
    await ctrl.start()
    try:
        uid = (await s.client.resource("apps", "v1", "deployments").create(deployment()))["metadata"]["uid"]

        async def cached():
            return ctrl.dep_inf.get("default/web")
        await eventually(cached)

        def enqueued(handler, *args) -> list:
            got: list = []
            add, ctrl.queue.add = ctrl.queue.add, got.append
            try:
                handler(*args)
            finally:
                ctrl.queue.add = add
            return got

        for owner_uid, want in (("other-uid", []), (uid, ["default/web"])):
            rs = _replicaset_of(owner_uid)
            relabeled = {**rs, "metadata": {**rs["metadata"], "labels": {**LABELS, "x": "y"}}}
            assert enqueued(ctrl._rs_added, rs) == want
            assert enqueued(ctrl._rs_updated, rs, relabeled) == want
            assert enqueued(ctrl._rs_deleted, rs) == want
    finally:
        await stop(ctrl)
        await s.close()


async def test_recreate_passes_over_many_pods_in_turns():
    """rolloutRecreate waits while a pod of the old ReplicaSets runs: its pass over the namespace's
    pods lets the loop run every TURN pods (the in-process controllers share the API server's
    loop), and still finds the one old pod left running, last of 3 * TURN + 1."""
    s = await make_stack()
    ctrl = DeploymentController(s.client)
    try:
        d = deployment(replicas=1, strategy={"type": "Recreate"})
        d["metadata"].update(uid="d-uid", generation=1)
        want = d["spec"]["replicas"]
        old = {"metadata": {"name": "web-old", "namespace": "default", "uid": "rs-uid",
                            "annotations": {DESIRED: str(want), MAX_REPLICAS: str(want)},
                            "ownerReferences": [{"kind": "Deployment", "name": "web", "uid": "d-uid", "controller": True}]},
                "spec": {"replicas": 0}, "status": {"replicas": 0}}
        ref = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-old", "uid": "rs-uid", "controller": True}
        n = 3 * TURN + 1
        pods = [{"metadata": {"name": f"web-{i}", "namespace": "default", "uid": f"u{i}", "labels": LABELS,
                              "ownerReferences": [ref]}, "spec": {},
                 "status": {"phase": "Running" if i == n - 1 else "Succeeded"}} for i in range(n)]
        ctrl.pod_inf.list_namespace = lambda ns: pods if ns == "default" else []
        during, new_rs = await turns_during(ctrl._recreate(d, None, [old]))
        assert new_rs is None and (await s.client.resource("apps", "v1", "replicasets").list("default"))[0] == []
        assert during >= 3
        pods[-1]["status"]["phase"] = "Failed"
        assert await ctrl._old_pods_running(d, [old]) is False
    finally:
        await s.close()


async def test_scaling_from_a_stale_replicaset_copy_changes_nothing_records_no_event_and_fails_the_sync():
    """The size is written on the ReplicaSet as read (its resourceVersion a precondition, as
    upstream's Update): a copy the informer has not yet replaced scales nothing, so one scaling
    is not recorded twice; its conflict is raised, for the work queue to retry the sync (it was
    dropped, the sync going on to write the status from the stale copies)."""
    s = await make_stack()
    ctrl = DeploymentController(s.client)
    rs_api = s.client.resource("apps", "v1", "replicasets")
    d = {**deployment(replicas=2), "metadata": {"name": "web", "namespace": "default", "uid": "u1"}}
    stale = await rs_api.create({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                 "metadata": {"name": "web-1", "namespace": "default", "labels": LABELS},
                                 "spec": {"replicas": 1, "selector": {"matchLabels": LABELS},
                                          "template": d["spec"]["template"]}})
    await ctrl._scale(d, stale, 2)
    fresh = await rs_api.get("web-1", "default")
    assert fresh["spec"]["replicas"] == 2
    for copy, replicas in ((stale, 2), ({**stale, "spec": {**stale["spec"], "replicas": 2}}, 3)):
        with pytest.raises(APIError) as refused:  # the copy from before that scaling
            await ctrl._scale(d, copy, replicas)
        assert refused.value.code == 409
    assert (await rs_api.get("web-1", "default"))["metadata"]["resourceVersion"] == fresh["metadata"]["resourceVersion"]
    events = await eventually(lambda: _scaling_events(s.client))
    assert [e["message"] for e in events] == ["Scaled up replica set web-1 from 1 to 2"]
    await s.close()


async def _scaling_events(client) -> list[dict]:
    events, _ = await client.resource("", "v1", "events").list("default")
    return [e for e in events if e["reason"] == "ScalingReplicaSet"]
