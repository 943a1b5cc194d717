"""The Eviction API against PodDisruptionBudgets, case by case as
kube-apiserver decides them."""

import json

import pytest

from nanokube.machinery.errors import APIError
from nanokube.apiserver.rest import PATCH_ATTEMPTS, WriteOptions
from nanokube.apiserver.subresources import Subresources
from nanokube.store.sqlite import SQLiteStore
from tests.apiserver.test_binding import race
from tests.controllers import make_stack


@pytest.fixture
async def env():
    s = await make_stack()
    yield s, Subresources(s.rest)
    await s.close()


async def running_pod(s, name, ready=True, labels=None):
    pods = s.client.resource("", "v1", "pods")
    p = await pods.create({"metadata": {"name": name, "namespace": "default", "labels": labels or {"app": "db"}},
                           "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x"}]}})
    await pods.patch(name, {"status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True" if ready else "False"}]}}, namespace="default", subresource="status")
    return p


async def budget(s, name="db", selector=None, status=None, **spec):
    pdbs = s.client.resource("policy", "v1", "poddisruptionbudgets")
    selector = {"matchLabels": {"app": "db"}} if selector is None else selector
    await pdbs.create({"metadata": {"name": name, "namespace": "default"},
                       "spec": {"selector": selector, "minAvailable": 1, **spec}})
    st = {"observedGeneration": 1, "disruptionsAllowed": 1, "desiredHealthy": 1, "currentHealthy": 2,
          "expectedPods": 2, **(status or {})}
    return await pdbs.patch(name, {"status": st}, namespace="default", subresource="status")


async def evict(sub, name, dry_run=False):
    return await sub.evict("default", name, {"metadata": {"name": name}}, WriteOptions(dry_run=dry_run))


async def gone(s, name):
    """Deleted, or being deleted gracefully (a bound pod waits for its kubelet)."""
    try:
        p = await s.client.resource("", "v1", "pods").get(name, "default")
    except APIError as e:
        return e.code == 404
    return bool(p["metadata"].get("deletionTimestamp"))


async def test_budget_spends_one_disruption_then_refuses(env):
    s, sub = env
    await running_pod(s, "a")
    await running_pod(s, "b")
    await budget(s)
    assert (await evict(sub, "a"))["code"] == 201 and await gone(s, "a")
    pdb = await s.client.resource("policy", "v1", "poddisruptionbudgets").get("db", "default")
    assert pdb["status"]["disruptionsAllowed"] == 0 and "a" in pdb["status"]["disruptedPods"]
    cond = next(c for c in pdb["status"]["conditions"] if c["type"] == "DisruptionAllowed")
    assert (cond["status"], cond["reason"]) == ("False", "InsufficientPods")
    with pytest.raises(APIError) as e:
        await evict(sub, "b")
    assert e.value.code == 429 and e.value.message == "Cannot evict pod as it would violate the pod's disruption budget."
    assert e.value.details["causes"] == [{"reason": "DisruptionBudget",
                                          "message": "The disruption budget db needs 1 healthy pods and has 2 currently"}]


async def test_empty_selector_covers_every_pod_and_a_stale_budget_refuses(env):
    s, sub = env
    await running_pod(s, "a", labels={"other": "x"})
    await budget(s, selector={}, status={"observedGeneration": 0})
    with pytest.raises(APIError) as e:
        await evict(sub, "a")
    assert e.value.code == 429
    assert e.value.details["causes"][0]["message"] == "The disruption budget db is still being processed by the server."


async def test_unready_pods_and_pending_pods_do_not_spend_the_budget(env):
    s, sub = env
    await running_pod(s, "sick", ready=False)
    await running_pod(s, "also-sick", ready=False)
    await budget(s, status={"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1})
    await evict(sub, "sick")
    assert await gone(s, "sick"), "unready pods go while the budget is met"
    pdbs = s.client.resource("policy", "v1", "poddisruptionbudgets")
    await pdbs.patch("db", {"status": {"currentHealthy": 0}}, namespace="default", subresource="status")
    with pytest.raises(APIError) as e:
        await evict(sub, "also-sick")
    assert e.value.code == 429, "IfHealthyBudget keeps unready pods while the budget is not met"
    await pdbs.patch("db", {"spec": {"unhealthyPodEvictionPolicy": "AlwaysAllow"}}, namespace="default")
    await pdbs.patch("db", {"status": {"observedGeneration": 2}}, namespace="default", subresource="status")
    await evict(sub, "also-sick")
    assert await gone(s, "also-sick")

    await s.client.resource("", "v1", "pods").create({"metadata": {"name": "pending", "namespace": "default",
                                                                   "labels": {"app": "db"}},
                                                      "spec": {"containers": [{"name": "c", "image": "x"}]}})
    await evict(sub, "pending")
    assert await gone(s, "pending")


async def test_dry_run_changes_nothing(env):
    s, sub = env
    await running_pod(s, "a")
    await budget(s)
    await evict(sub, "a", dry_run=True)
    assert not await gone(s, "a")
    pdb = await s.client.resource("policy", "v1", "poddisruptionbudgets").get("db", "default")
    assert pdb["status"]["disruptionsAllowed"] == 1 and not pdb["status"].get("disruptedPods")
    conditions = (await s.client.resource("", "v1", "pods").get("a", "default"))["status"]["conditions"]
    assert [c["type"] for c in conditions] == ["Ready"], "a dry run marks nothing"


async def test_an_evicted_pod_is_marked_disruption_target_before_it_goes(env, monkeypatch):
    """addConditionAndDeletePod: the pod being deleted carries DisruptionTarget (EvictionByEvictionAPI), with or
    without a budget, which a Job's podFailurePolicy reads; a resourceVersion precondition still holds."""
    s, sub = env
    pods = s.client.resource("", "v1", "pods")
    p = await running_pod(s, "a")
    await running_pod(s, "b", labels={"app": "free"})
    await budget(s)
    await evict(sub, "a")
    current = await pods.get("b", "default")
    await sub.evict("default", "b", {"metadata": {"name": "b"}, "deleteOptions": {"preconditions": {
        "resourceVersion": current["metadata"]["resourceVersion"]}}}, WriteOptions())
    for name in ("a", "b"):
        pod = await pods.get(name, "default")
        assert pod["metadata"].get("deletionTimestamp")
        [cond] = [c for c in pod["status"]["conditions"] if c["type"] == "DisruptionTarget"]
        assert (cond["status"], cond["reason"], cond["message"]) == ("True", "EvictionByEvictionAPI",
                                                                    "Eviction API: evicting")
        assert cond["lastTransitionTime"]
        # the generation the eviction saw (PodObservedGenerationTracking), not the one its delete moved on to
        assert (cond["observedGeneration"], pod["metadata"]["generation"]) == (1, 2)
    pauses = []

    async def paused(seconds):
        pauses.append(seconds)

    monkeypatch.setattr(s.rest.clock, "sleep", paused)
    with pytest.raises(APIError) as e:  # (a conflict, tried as often as evictions retry: the pod is being deleted)
        await sub.evict("default", "a", {"metadata": {"name": "a"}, "deleteOptions": {"preconditions": {"uid": "other"}}},
                        WriteOptions())
    assert e.value.code == 409 and f"UID in record ({p['metadata']['uid']})" in e.value.message and len(pauses) == 19


async def test_a_pending_pod_that_starts_before_its_eviction_is_judged_by_its_budget(env, monkeypatch):
    """eviction.go: a Pending pod skips the budgets but is deleted only as it was read (a resourceVersion
    precondition of the server's own); one its kubelet started in between is read again and, Running and
    Ready now, refused by a budget that allows no disruption (was: deleted all the same). A client's own
    resourceVersion precondition is not retried."""
    s, sub = env
    pods = s.client.resource("", "v1", "pods")
    await pods.create({"metadata": {"name": "p", "namespace": "default", "labels": {"app": "db"}},
                       "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x"}]}})
    await budget(s, status={"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1})
    key, real, started = s.rest.index.get("", "v1", "pods").key("default", "p"), s.rest.store.update, []

    async def kubelet_first(k, value, rev, prev=None):  # the pod's kubelet reports it started, just before
        if k == key and not started:
            started.append(k)
            await pods.patch("p", {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
                             namespace="default", subresource="status")
        return await real(k, value, rev, prev)

    monkeypatch.setattr(s.rest.store, "update", kubelet_first)
    with pytest.raises(APIError) as e:
        await evict(sub, "p")
    assert e.value.code == 429 and "needs 1 healthy pods and has 1 currently" in json.dumps(e.value.details)
    pod = await pods.get("p", "default")
    assert not pod["metadata"].get("deletionTimestamp") and pod["status"]["phase"] == "Running"
    await pods.create({"metadata": {"name": "q", "namespace": "default"}, "spec": {"containers": [{"name": "c", "image": "x"}]}})
    stale = (await pods.get("q", "default"))["metadata"]["resourceVersion"]
    await pods.patch("q", {"metadata": {"labels": {"x": "y"}}}, namespace="default")
    with pytest.raises(APIError) as e:
        await sub.evict("default", "q", {"metadata": {"name": "q"}, "deleteOptions": {"preconditions": {
            "resourceVersion": stale}}}, WriteOptions())
    assert e.value.code == 409 and not await gone(s, "q")
    await evict(sub, "q")
    assert await gone(s, "q")


async def test_an_eviction_that_loses_a_race_marks_the_pod_that_won(env, monkeypatch):
    """The DisruptionTarget write is read-modify-write: another write before it is kept and the pod
    marked again; a pod that changes under every one of its PATCH_ATTEMPTS tries is a 409 and stays."""
    s, sub = env
    pods = s.client.resource("", "v1", "pods")
    await running_pod(s, "a")
    await running_pod(s, "b")
    race(monkeypatch, s, "a", 1)
    await evict(sub, "a")
    pod = await pods.get("a", "default")
    assert pod["metadata"]["labels"]["raced"] == "0" and pod["metadata"].get("deletionTimestamp")
    assert "DisruptionTarget" in [c["type"] for c in pod["status"]["conditions"]]
    race(monkeypatch, s, "b", PATCH_ATTEMPTS)
    with pytest.raises(APIError) as e:
        await evict(sub, "b")
    assert (e.value.code, e.value.message) == (409, 'Operation cannot be fulfilled on pods "b": the object has been '
                                                    "modified; please apply your changes to the latest version and "
                                                    "try again")
    assert not await gone(s, "b")


async def test_an_unready_pod_written_before_its_delete_is_a_429_to_retry(env, monkeypatch):
    """updateDeletionOptions: an unready pod let go without spending the budget is deleted only while it
    is the pod judged (a resourceVersion precondition of the server's own); one written in between (it
    may have turned Ready) is createTooManyRequestsError's 429 and stays (was: deleted). Evicted again,
    it goes."""
    s, sub = env
    await running_pod(s, "sick", ready=False)
    await running_pod(s, "well")
    await budget(s, status={"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1})
    race(monkeypatch, s, "sick", 1)
    with pytest.raises(APIError) as e:
        await evict(sub, "sick")
    assert (e.value.code, e.value.details) == (429, {"causes": [{
        "reason": "DisruptionBudget", "message": "The disruption budget db is still being processed by the server."}],
        "retryAfterSeconds": 10})
    pod = await s.client.resource("", "v1", "pods").get("sick", "default")
    assert not pod["metadata"].get("deletionTimestamp")
    assert "DisruptionTarget" not in [c["type"] for c in pod["status"]["conditions"]]
    await evict(sub, "sick")
    assert await gone(s, "sick")


async def test_a_budget_update_that_loses_races_is_tried_as_often_as_evictions_retry(env, monkeypatch):
    """eviction.go's RetryOnConflict(EvictionsRetry): 20 tries of the budget's update, ~0.5 s apart
    (10% jitter); the pod is evicted on the 20th, and a budget changed under all 20 is a 409 naming it."""
    s, sub = env
    pdbs = s.client.resource("policy", "v1", "poddisruptionbudgets")
    await running_pod(s, "a")
    await running_pod(s, "b")
    await budget(s, status={"disruptionsAllowed": 2})
    key, real, left, pauses = s.rest.index.get("policy", "v1", "poddisruptionbudgets").key("default", "db"), \
        s.rest.store.update, [0], []

    async def raced(k, value, rev, prev=None):  # another writer's write of the budget lands first
        if k == key and left[0]:
            left[0] -= 1
            await real(k, (await s.rest.store.get(k)).value, rev)
        return await real(k, value, rev, prev)

    async def paused(seconds):
        pauses.append(seconds)

    monkeypatch.setattr(s.rest.store, "update", raced)
    monkeypatch.setattr(s.rest.clock, "sleep", paused)
    left[0] = 19
    assert (await evict(sub, "a"))["code"] == 201 and await gone(s, "a")
    assert len(pauses) == 19 and all(0.5 <= p <= 0.55 for p in pauses)
    assert (await pdbs.get("db", "default"))["status"]["disruptionsAllowed"] == 1
    left[0], pauses[:] = 20, []
    with pytest.raises(APIError) as e:
        await evict(sub, "b")
    assert e.value.code == 409 and 'poddisruptionbudgets.policy "db"' in e.value.message and len(pauses) == 19
    assert not await gone(s, "b")


async def test_a_pod_under_two_budgets_gets_the_eviction_rests_own_status_over_http():
    """eviction.go answers a pod more than one budget selects with a Status of its own: failure, code 500
    (the documented "500 Internal Server Error"), no reason (was reason InternalError, which kubectl shows as
    "Error from server (InternalError)"); the pod stays."""
    import aiohttp

    from nanokube.apiserver.app import APIServer
    from nanokube.store.memory import MemoryStore

    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    base = f"http://127.0.0.1:{server.port}"
    pods = f"{base}/api/v1/namespaces/default/pods"
    try:
        async with aiohttp.ClientSession() as s:
            async with s.post(pods, json={"metadata": {"name": "p", "labels": {"app": "db"}}, "spec": {
                    "nodeName": "n1", "containers": [{"name": "c", "image": "x"}]}}) as r:
                assert r.status == 201
            async with s.patch(f"{pods}/p/status", json={"status": {"phase": "Running"}},
                               headers={"Content-Type": "application/merge-patch+json"}) as r:
                assert r.status == 200
            for name in ("a", "b"):
                async with s.post(f"{base}/apis/policy/v1/namespaces/default/poddisruptionbudgets", json={
                        "metadata": {"name": name}, "spec": {"selector": {"matchLabels": {"app": "db"}}, "minAvailable": 0}}) as r:
                    assert r.status == 201
            async with s.post(f"{pods}/p/eviction", json={"apiVersion": "policy/v1", "kind": "Eviction",
                                                          "metadata": {"name": "p", "namespace": "default"}}) as r:
                assert r.status == 500
                assert await r.json() == {
                    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "code": 500,
                    "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."}
            async with s.get(f"{pods}/p") as r:
                assert r.status == 200 and "deletionTimestamp" not in (await r.json())["metadata"]
    finally:
        await server.stop()


async def test_an_eviction_named_for_another_pod_or_none_is_a_400_over_http():
    """EvictionREST.Create refuses an Eviction whose name is not the URL's before it reads a budget or the
    pod, and the create handler one of another namespace before that (slips found by fuzzing: each evicted
    the URL's pod, or answered its budget's 429)."""
    import aiohttp

    from nanokube.apiserver.app import APIServer
    from nanokube.store.memory import MemoryStore

    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    pods = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/pods"
    try:
        async with aiohttp.ClientSession() as s:
            async with s.post(pods, json={"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}) as r:
                assert r.status == 201
            for metadata in ({"name": "other"}, {}, {"name": ""}):
                async with s.post(f"{pods}/p/eviction", json={"apiVersion": "policy/v1", "kind": "Eviction",
                                                              "metadata": metadata}) as r:
                    got = await r.json()
                assert (r.status, got["reason"], got["message"]) == (
                    400, "BadRequest", "name in URL does not match name in Eviction object"), got
            async with s.post(f"{pods}/p/eviction", json={"apiVersion": "policy/v1", "kind": "Eviction",
                                                          "metadata": {"name": "p", "namespace": "other"}}) as r:
                got = await r.json()
            assert (r.status, got["message"]) == (
                400, "the namespace of the provided object does not match the namespace sent on the request"), got
            async with s.get(f"{pods}/p") as r:
                assert r.status == 200 and "deletionTimestamp" not in (await r.json())["metadata"]
            async with s.post(f"{pods}/p/eviction", json={"apiVersion": "policy/v1", "kind": "Eviction",
                                                          "metadata": {"name": "p"}}) as r:
                assert r.status == 201, await r.text()
    finally:
        await server.stop()


async def test_the_in_process_client_gets_the_same_checks(env):
    """The checks sit in evict itself, as upstream's in EvictionREST: a component's in-process client
    is refused an Eviction naming another pod, none, or another namespace, and bad deleteOptions, as
    an HTTP client is; the pod stays."""
    s, _ = env
    pods = s.client.resource("", "v1", "pods")
    await running_pod(s, "p")
    for body, message in (({"metadata": {"name": "other"}}, "name in URL does not match name in Eviction object"),
                          ({}, "name in URL does not match name in Eviction object"),
                          ({"metadata": {"name": "p", "namespace": "other"}},
                           "the namespace of the provided object does not match the namespace sent on the request"),
                          ({"metadata": {"name": "p"}, "deleteOptions": {"gracePeriodSeconds": "soon"}},
                           "json: cannot unmarshal string into Go struct field DeleteOptions.gracePeriodSeconds of "
                           "type int64")):
        with pytest.raises(APIError) as e:
            await pods.create_subresource("p", "eviction", {"apiVersion": "policy/v1", "kind": "Eviction", **body},
                                          "default")
        assert (e.value.code, e.value.reason, e.value.message) == (400, "BadRequest", message)
    assert not await gone(s, "p")


async def test_evictions_under_one_budget_hand_the_store_the_cached_kvs_and_read_no_row(tmp_path):
    """Each write of an eviction (the budget's, the pod's DisruptionTarget condition and its
    delete) hands SQLite the watch cache's KV: the second eviction under a budget reads no row,
    the budget's included (the first eviction's write of it left its KV in the cache), and each
    event's prev is what was stored."""
    s = await make_stack(store=SQLiteStore(str(tmp_path / "db")))
    try:
        sub = Subresources(s.rest)
        for name in "abc":
            await running_pod(s, name)
        await budget(s, status={"disruptionsAllowed": 2, "currentHealthy": 3, "expectedPods": 3})
        assert (await evict(sub, "a"))["code"] == 201
        pdb_key = "/registry/poddisruptionbudgets.policy/default/db"
        before = [await s.store.get(k) for k in (pdb_key, "/registry/pods/default/b")]
        events, statements = [], []
        s.store.follow(await s.store.current_revision(), events.append)
        s.store._db.set_trace_callback(statements.append)
        assert (await evict(sub, "b"))["code"] == 201 and await gone(s, "b")
        assert not [q for q in statements if q.startswith("SELECT")]
        assert [(e.kv.key, e.prev) for e in events] == [(pdb_key, before[0]), (before[1].key, before[1]),
                                                        (before[1].key, events[1].kv)]
        pdb = await s.client.resource("policy", "v1", "poddisruptionbudgets").get("db", "default")
        assert pdb["status"]["disruptionsAllowed"] == 0 and set(pdb["status"]["disruptedPods"]) == {"a", "b"}
    finally:
        await s.close()


async def test_an_evictions_own_dry_run_deletes_nothing_and_spends_no_budget(tmp_path):
    """`kubectl drain --dry-run=server` sends dryRun in the Eviction's deleteOptions, not the query:
    propagateDryRun makes that a dry run of the budget's check and the pod's delete (was: the pod
    deleted and the budget spent). A body's dryRun that differs from the query's is a 500."""
    import asyncio

    from kubernetes import client

    from tests.served import send, served

    async with served(tmp_path) as (_, api_client):
        core, policy = client.CoreV1Api(api_client), client.PolicyV1Api(api_client)

        def dry_run_eviction():
            core.create_namespaced_pod("default", {"metadata": {"name": "p", "labels": {"app": "db"}}, "spec": {
                "nodeName": "n1", "containers": [{"name": "c", "image": "x"}]}})
            core.patch_namespaced_pod_status("p", "default", {"status": {"phase": "Running", "conditions": [
                {"type": "Ready", "status": "True"}]}})
            policy.create_namespaced_pod_disruption_budget("default", {"metadata": {"name": "db"}, "spec": {
                "selector": {"matchLabels": {"app": "db"}}, "minAvailable": 0}})
            policy.patch_namespaced_pod_disruption_budget_status("db", "default", {"status": {
                "observedGeneration": 1, "disruptionsAllowed": 1, "desiredHealthy": 0, "currentHealthy": 1,
                "expectedPods": 1}})
            core.create_namespaced_pod_eviction("p", "default", client.V1Eviction(
                metadata=client.V1ObjectMeta(name="p", namespace="default"),
                delete_options=client.V1DeleteOptions(dry_run=["All"])))
            left = core.read_namespaced_pod("p", "default")
            assert left.metadata.deletion_timestamp is None
            assert "DisruptionTarget" not in [c.type for c in left.status.conditions]
            status = policy.read_namespaced_pod_disruption_budget("db", "default").status
            assert (status.disruptions_allowed, status.disrupted_pods) == (1, None)

        await asyncio.to_thread(dry_run_eviction)
        code, body = await send(api_client, "POST", "/api/v1/namespaces/default/pods/p/eviction?dryRun=All", {
            "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p"},
            "deleteOptions": {"dryRun": ["All", "All"]}})
        assert (code, body["message"]) == (500, "Internal error occurred: Non-matching dry-run options in request "
                                                "and content: [All] and [All All]"), body

        def eviction():
            assert core.read_namespaced_pod("p", "default").metadata.deletion_timestamp is None
            core.create_namespaced_pod_eviction("p", "default", client.V1Eviction(
                metadata=client.V1ObjectMeta(name="p", namespace="default")))
            assert core.read_namespaced_pod("p", "default").metadata.deletion_timestamp is not None
            assert "p" in policy.read_namespaced_pod_disruption_budget("db", "default").status.disrupted_pods

        await asyncio.to_thread(eviction)


async def test_a_budget_the_controller_has_not_judged_asks_for_a_retry_in_ten_seconds(tmp_path):
    """A budget whose status has not caught up with its generation (the disruption controller has not
    seen it yet, or failed on it: a Job's pods under maxUnavailable) refuses with createTooManyRequestsError:
    a 429 whose details and Retry-After header ask for a retry in 10 s (was: neither)."""
    import asyncio

    from kubernetes import client

    from tests.served import served

    async with served(tmp_path) as (_, api_client):
        core, policy = client.CoreV1Api(api_client), client.PolicyV1Api(api_client)

        def evict():
            core.create_namespaced_pod("default", {"metadata": {"name": "p", "labels": {"app": "db"}}, "spec": {
                "nodeName": "n1", "containers": [{"name": "c", "image": "x"}]}})
            core.patch_namespaced_pod_status("p", "default", {"status": {"phase": "Running"}})
            policy.create_namespaced_pod_disruption_budget("default", {"metadata": {"name": "db"}, "spec": {
                "selector": {"matchLabels": {"app": "db"}}, "maxUnavailable": 1}})
            with pytest.raises(client.ApiException) as e:
                core.create_namespaced_pod_eviction("p", "default", client.V1Eviction(
                    metadata=client.V1ObjectMeta(name="p", namespace="default")))
            return e.value

        e = await asyncio.to_thread(evict)
        assert (e.status, e.headers["Retry-After"]) == (429, "10")
        assert json.loads(e.body)["details"] == {"causes": [{
            "reason": "DisruptionBudget", "message": "The disruption budget db is still being processed by the server."}],
            "retryAfterSeconds": 10}
