"""A DELETE's status code, as upstream's DeleteResource: 200 for an object deleted or left in place,
202 only for one left in place (finalizers, a grace period) when the client asked for cascading with
orphanDependents=false."""

import aiohttp

from nanokube.apiserver.app import APIServer
from nanokube.store.memory import MemoryStore


async def test_only_orphan_dependents_false_on_an_object_left_in_place_is_a_202():
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    cms = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps"
    try:
        async with aiohttp.ClientSession() as s:
            got = {}
            for name, options, finalizers in [
                ("fg", {"propagationPolicy": "Foreground"}, ["example.com/x"]),
                ("bg", {"propagationPolicy": "Background"}, ["example.com/x"]),
                ("orphan", {"propagationPolicy": "Orphan"}, ["example.com/x"]),
                ("cascade", {"orphanDependents": False}, ["example.com/x"]),
                ("dry", {"orphanDependents": False, "dryRun": ["All"]}, ["example.com/x"]),
                ("gone", {"orphanDependents": False}, []),
            ]:
                async with s.post(cms, json={"metadata": {"name": name, "finalizers": finalizers}}) as r:
                    assert r.status == 201, await r.text()
                async with s.delete(f"{cms}/{name}", json=options) as r:
                    got[name] = r.status
            async with s.delete(f"{cms}/cascade", json={"orphanDependents": False}) as r:
                got["again"] = r.status  # already being deleted, nothing to change
        assert got == {"fg": 200, "bg": 200, "orphan": 200, "cascade": 202, "dry": 202, "gone": 200, "again": 202}
    finally:
        await server.stop()


async def test_a_delete_collection_answers_with_the_list_it_read():
    """DeleteCollection's answer is the list it read, with that list's metadata (its resourceVersion),
    not an empty ListMeta."""
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    cms = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps"
    try:
        async with aiohttp.ClientSession() as s:
            for name, labels in (("a", {"x": "1"}), ("b", {"x": "1"}), ("c", {})):
                async with s.post(cms, json={"metadata": {"name": name, "labels": labels}}) as r:
                    assert r.status == 201
            async with s.delete(f"{cms}?labelSelector=x%3D1") as r:
                assert r.status == 200
                got = await r.json()
            async with s.get(cms) as r:
                left = await r.json()
        assert got["kind"] == "ConfigMapList" and [o["metadata"]["name"] for o in got["items"]] == ["a", "b"]
        assert int(got["metadata"]["resourceVersion"]) <= int(left["metadata"]["resourceVersion"])
        assert [o["metadata"]["name"] for o in left["items"]] == ["c"]
    finally:
        await server.stop()


async def test_a_negative_grace_period_on_a_pod_is_one_second():
    """BeforeDelete (and the pod strategy's CheckGracefulDelete) treat a negative grace period as 1s:
    a pod on a node is marked for deletion in a second, not removed at once."""
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    pods = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/pods"
    spec = {"nodeName": "n1", "containers": [{"name": "c", "image": "nginx"}]}
    try:
        async with aiohttp.ClientSession() as s:
            async with s.post(pods, json={"metadata": {"name": "p"}, "spec": spec}) as r:
                assert r.status == 201, await r.text()
            async with s.delete(f"{pods}/p", json={"gracePeriodSeconds": -5}) as r:
                md = (await r.json())["metadata"]
                got = r.status, md.get("deletionGracePeriodSeconds"), "deletionTimestamp" in md
        assert got == (200, 1, True)
    finally:
        await server.stop()


async def test_a_status_leaves_out_its_empty_detail_fields():
    """StatusDetails' fields are all omitempty: the Success of deleting a core kind names no group
    (as kube-apiserver's finalizeDelete writes it), and an error's details of a core kind neither."""
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    base = f"http://127.0.0.1:{server.port}"
    try:
        async with aiohttp.ClientSession() as s:
            async with s.post(f"{base}/api/v1/namespaces/default/configmaps", json={"metadata": {"name": "a"}}) as r:
                uid = (await r.json())["metadata"]["uid"]
            async with s.delete(f"{base}/api/v1/namespaces/default/configmaps/a") as r:
                deleted = await r.json()
            async with s.get(f"{base}/api/v1/namespaces/default/configmaps/a") as r:
                missing = await r.json()
            async with s.get(f"{base}/apis/apps/v1/namespaces/default/deployments/d") as r:
                missing_apps = await r.json()
        assert deleted["details"] == {"name": "a", "kind": "configmaps", "uid": uid}
        assert missing["details"] == {"name": "a", "kind": "configmaps"}
        assert missing_apps["details"] == {"name": "d", "group": "apps", "kind": "deployments"}
    finally:
        await server.stop()


async def test_delete_options_come_from_the_body_when_there_is_one_else_from_the_query():
    """DeleteResource decodes DeleteOptions from the body when it has one and only otherwise from
    the query: with a body, the query's options (a bogus propagationPolicy, a dryRun) are not read."""
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    cms = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps"
    try:
        async with aiohttp.ClientSession() as s:
            for name in ("a", "b", "c"):
                async with s.post(cms, json={"metadata": {"name": name}}) as r:
                    assert r.status == 201
            async with s.delete(f"{cms}/a?propagationPolicy=Bogus", json={"kind": "DeleteOptions"}) as r:
                with_body = r.status
            async with s.delete(f"{cms}/b?propagationPolicy=Bogus") as r:
                query_only = r.status
            async with s.delete(f"{cms}/c?dryRun=All", json={}) as r:
                assert r.status == 200
            async with s.get(cms) as r:
                left = [o["metadata"]["name"] for o in (await r.json())["items"]]
        assert (with_body, query_only) == (200, 422)
        assert left == ["b"]  # "c" was deleted: the query's dryRun was not read
    finally:
        await server.stop()


async def test_an_empty_propagation_policy_in_the_query_is_refused():
    """`?propagationPolicy=` names a policy of "" (Convert_Slice_string_To_Pointer_v1_DeletionPropagation
    points at whatever the query holds), which ValidateDeleteOptions refuses: it was read as no policy
    and the object deleted (found by fuzz_sweep's `options` family)."""
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    cms = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps"
    try:
        async with aiohttp.ClientSession() as s:
            async with s.post(cms, json={"metadata": {"name": "a"}}) as r:
                assert r.status == 201
            for url in (f"{cms}/a?propagationPolicy=", f"{cms}?propagationPolicy="):
                async with s.delete(url) as r:
                    assert (r.status, (await r.json())["message"]) == (422, (
                        'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "": '
                        'supported values: "Foreground", "Background", "Orphan", "nil"')), url
            async with s.get(f"{cms}/a") as r:
                assert r.status == 200
    finally:
        await server.stop()


async def test_an_empty_precondition_is_compared_not_ignored():
    """Preconditions.Check compares a precondition that is set, even to "": a delete whose uid or
    resourceVersion precondition is empty is a 409 and deletes nothing; one left null checks nothing."""
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    cms = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps"
    try:
        async with aiohttp.ClientSession() as s:
            async with s.post(cms, json={"metadata": {"name": "a"}}) as r:
                assert r.status == 201
            got = []
            for pre in ({"uid": ""}, {"resourceVersion": ""}, {"uid": None, "resourceVersion": None}):
                async with s.delete(f"{cms}/a", json={"preconditions": pre, "dryRun": ["All"]}) as r:
                    status = await r.json()
                    got.append((r.status, status.get("reason"), status.get("message", "").split(": ", 1)[-1]))
            async with s.get(f"{cms}/a") as r:
                kept = r.status
        assert got[0][:2] == got[1][:2] == (409, "Conflict"), got
        assert got[0][2].startswith("the UID in the precondition () does not match the UID in record ("), got
        assert got[1][2].startswith("the ResourceVersion in the precondition () does not match the ResourceVersion "
                                    "in record ("), got
        assert got[2][0] == 200 and kept == 200
    finally:
        await server.stop()


async def test_a_stale_precondition_is_before_deletes_conflict_naming_the_kind():
    """Store.Delete checks the preconditions first in BeforeDelete, whose 409 names the object's kind (in
    its group) and says what may have happened; the storage layer's own "Precondition failed" text is only
    for a precondition an object written meanwhile fails (test_write_races). It was the storage's text."""
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    base = f"http://127.0.0.1:{server.port}/apis/apps/v1/namespaces/default/deployments"
    deployment = {"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
        "metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}}
    try:
        async with aiohttp.ClientSession() as s:
            async with s.post(base, json=deployment) as r:
                md = (await r.json())["metadata"]
            got = []
            for pre in ({"uid": "other"}, {"resourceVersion": "1"}):
                async with s.delete(f"{base}/d", json={"preconditions": pre}) as r:
                    status = await r.json()
                    got.append((r.status, status["message"], status["details"]))
            async with s.get(f"{base}/d") as r:
                kept = r.status
        details = {"name": "d", "group": "apps", "kind": "Deployment"}
        assert got == [
            (409, f'Operation cannot be fulfilled on Deployment.apps "d": the UID in the precondition (other) does '
                  f'not match the UID in record ({md["uid"]}). The object might have been deleted and then recreated',
             details),
            (409, f'Operation cannot be fulfilled on Deployment.apps "d": the ResourceVersion in the precondition (1) '
                  f'does not match the ResourceVersion in record ({md["resourceVersion"]}). The object might have '
                  f'been modified', details)]
        assert kept == 200
    finally:
        await server.stop()


async def test_a_grace_period_past_any_date_wraps_as_gos_duration_does():
    """BeforeDelete sets deletionTimestamp to now + time.Duration(grace) * time.Second: nanoseconds in an
    int64, whose overflow wraps. A grace period of centuries (2^62 s, 10^12 s, the largest int64) marks the
    pod with a date within 292 years of now, as upstream's does, where nanokube's date arithmetic failed
    with a 500; deletionGracePeriodSeconds keeps the number asked for."""
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    pods = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/pods"
    spec = {"nodeName": "n1", "containers": [{"name": "c", "image": "nginx"}]}
    try:
        async with aiohttp.ClientSession() as s:
            got = []
            for i, grace in enumerate((2**62, 10**12, 2**63 - 1)):
                async with s.post(pods, json={"metadata": {"name": f"p{i}"}, "spec": spec}) as r:
                    assert r.status == 201, await r.text()
                async with s.delete(f"{pods}/p{i}", json={"gracePeriodSeconds": grace}) as r:
                    md = (await r.json())["metadata"]
                    got.append((r.status, md.get("deletionGracePeriodSeconds"), md.get("deletionTimestamp", "")[:2]))
        assert got == [(200, 2**62, "20"), (200, 10**12, "21"), (200, 2**63 - 1, "20")], got
    finally:
        await server.stop()
