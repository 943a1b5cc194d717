"""The ReplicationController controller is the ReplicaSet controller over
core/v1 RCs: owned pods, status, adoption by an equality selector."""

import pytest

from nanokube.controllers.replicationcontroller import ReplicationControllerController
from nanokube.machinery.errors import APIError
from tests.controllers import becomes, event_counts, eventually, make_stack, pod_quota
from tests.controllers.test_pod_update_handlers import informing, seen, stopped
from tests.controllers.test_replicaset import all_pods, make_ready, patch_retrying, pods_of, stop

LABELS = {"app": "legacy"}


@pytest.fixture
async def env():
    s = await make_stack()
    ctrl = ReplicationControllerController(s.client)
    await ctrl.start()
    yield s.client
    await stop(ctrl)
    await s.close()


def rc(replicas=3):
    return {"metadata": {"name": "legacy", "namespace": "default"},
            "spec": {"replicas": replicas, "selector": LABELS,
                     "template": {"metadata": {"labels": LABELS},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}


async def test_keeps_replicas_and_reports_status(env):
    client = env
    rcs = client.resource("", "v1", "replicationcontrollers")
    pods = client.resource("", "v1", "pods")
    await pods.create({"metadata": {"name": "orphan", "namespace": "default", "labels": LABELS},
                       "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
    created = await rcs.create(rc())
    got = await eventually(lambda: pods_of(client, 3))
    assert "orphan" in {p["metadata"]["name"] for p in got}, "a matching orphan is adopted"
    for p in got:
        assert p["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "ReplicationController",
                                                     "name": "legacy", "uid": created["metadata"]["uid"],
                                                     "controller": True, "blockOwnerDeletion": True}]
    await make_ready(client, got[0])

    async def status():
        st = (await rcs.get("legacy", "default"))["status"]
        return st if st.get("availableReplicas") == 1 else None
    assert await eventually(status) == {"replicas": 3, "fullyLabeledReplicas": 3, "readyReplicas": 1,
                                        "availableReplicas": 1, "observedGeneration": 1}
    await patch_retrying(rcs, "legacy", {"spec": {"replicas": 1}})
    await eventually(lambda: pods_of(client, 1))

    async def reporters():
        events, _ = await client.resource("", "v1", "events").list("default")
        return {e["source"]["component"] for e in events}
    await becomes(reporters, {"replication-controller"})


async def test_terminating_pod_is_replaced_at_once_and_a_predecessors_pod_is_not_counted():
    """As the ReplicaSet: a pod given its deletionTimestamp (30 s grace on its node) is replaced
    before it is gone; a pod naming an RC of this name with another uid is neither counted nor
    adopted."""
    s = await make_stack()
    ctrl = ReplicationControllerController(s.client)
    await ctrl.start()
    client = s.client
    rcs, pods = client.resource("", "v1", "replicationcontrollers"), client.resource("", "v1", "pods")
    try:
        body = rc(replicas=1)
        body["spec"]["template"]["spec"]["nodeName"] = "n1"
        await rcs.create(body)
        (first,) = await eventually(lambda: pods_of(client, 1))
        await pods.delete(first["metadata"]["name"], "default")
        (second,) = await eventually(lambda: pods_of(client, 1))
        assert second["metadata"]["name"] != first["metadata"]["name"]
        assert (await pods.get(first["metadata"]["name"], "default"))["metadata"]["deletionTimestamp"]

        stale_ref = {"apiVersion": "v1", "kind": "ReplicationController", "name": "legacy",
                     "uid": "0-predecessor", "controller": True}
        await pods.create({"metadata": {"name": "stale", "namespace": "default", "labels": LABELS,
                                        "ownerReferences": [stale_ref]},
                           "spec": {"containers": [{"name": "c", "image": "nginx"}]}})

        async def seen():
            return ctrl.pod_inf.get("default/stale")
        await eventually(seen)
        assert ctrl._owner_key(await seen(), stale_ref) is None
        await ctrl.sync("default/legacy")
        assert (await rcs.get("legacy", "default"))["status"]["replicas"] == 1
        assert (await pods.get("stale", "default"))["metadata"]["ownerReferences"] == [stale_ref]
    finally:
        await stop(ctrl)
        await s.close()


async def test_creates_in_slow_start_batches_and_reports_the_failure():
    """manageReplicas' slow start for an RC too: room for two of five pods, so batches of 1 and 2,
    the third create refused, the last two never tried; ReplicaFailure reports the refusal."""
    s = await make_stack()
    client = s.client
    ctrl = await informing(ReplicationControllerController(client))
    rcs = client.resource("", "v1", "replicationcontrollers")
    try:
        await pod_quota(client, 2)
        await seen(ctrl.rs_inf, await rcs.create(rc(replicas=5)))
        with pytest.raises(APIError) as e:
            await ctrl.sync("default/legacy")
        assert await becomes(lambda: event_counts(client, "ReplicationController"), {"SuccessfulCreate": 2, "FailedCreate": 1})
        assert len(await all_pods(client)) == 2
        cond = (await rcs.get("legacy", "default"))["status"]["conditions"]
        assert [(c["type"], c["reason"], c["message"]) for c in cond] == [("ReplicaFailure", "FailedCreate", e.value.message)]
    finally:
        await stopped(ctrl)
        await s.close()
