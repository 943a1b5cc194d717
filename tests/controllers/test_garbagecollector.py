import pytest

from nanokube.apiserver.app import APIServer
from nanokube.apiserver.loopback import LocalClient
from nanokube.client.http import HTTPClient
from nanokube.client.kubeconfig import Credentials
from nanokube.client.metrics import REQUESTS
from nanokube.machinery.errors import APIError
from nanokube.store.memory import MemoryStore
from nanokube.controllers.garbagecollector import GarbageCollector
from nanokube.controllers.manager import MAPPER_RESET_PERIOD
from tests.controllers import eventually, make_stack
from tests.node import ManualClock

NS = "default"


@pytest.fixture
async def env():
    s = await make_stack()
    gc = GarbageCollector(s.client)
    await gc.start()
    yield s.client.resource("", "v1", "configmaps")
    await gc.stop()
    await s.close()


async def owner_and_dependent(cms, block=False, dep_finalizers=None):
    owner = await cms.create({"metadata": {"name": "owner", "namespace": NS}})
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
    if block:
        ref["blockOwnerDeletion"] = True
    md = {"name": "dep", "namespace": NS, "ownerReferences": [ref]}
    if dep_finalizers:
        md["finalizers"] = dep_finalizers
    await cms.create({"metadata": md})
    return owner


def gone(cms, name):
    async def check():
        try:
            await cms.get(name, NS)
        except APIError as e:
            return e.code == 404
        return False
    return check


async def test_background_deletion_collects_dependents(env):
    cms = env
    await owner_and_dependent(cms)
    await cms.delete("owner", NS)
    assert await eventually(gone(cms, "dep"))


async def test_dependent_of_a_never_existing_owner_is_collected(env):
    cms = env
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "ghost", "uid": "00000000-0000-0000-0000-000000000000"}
    await cms.create({"metadata": {"name": "orphaned", "namespace": NS, "ownerReferences": [ref]}})
    assert await eventually(gone(cms, "orphaned"))


async def test_foreground_deletion_keeps_owner_until_blocking_dependents_are_gone(env):
    cms = env
    await owner_and_dependent(cms, block=True, dep_finalizers=["example.com/hold"])
    await cms.delete("owner", NS, propagation_policy="Foreground")

    async def dependent_deleting():
        return (await cms.get("dep", NS))["metadata"].get("deletionTimestamp")

    await eventually(dependent_deleting)
    owner = await cms.get("owner", NS)
    assert owner["metadata"]["deletionTimestamp"]
    assert owner["metadata"]["finalizers"] == ["foregroundDeletion"]
    await cms.patch("dep", {"metadata": {"finalizers": None}}, namespace=NS)
    assert await eventually(gone(cms, "dep"))
    assert await eventually(gone(cms, "owner"))


async def test_orphan_deletion_strips_owner_references(env):
    cms = env
    await owner_and_dependent(cms)
    await cms.delete("owner", NS, propagation_policy="Orphan")
    assert await eventually(gone(cms, "owner"))
    dep = await cms.get("dep", NS)
    assert not dep["metadata"].get("ownerReferences")


async def test_events_are_ignored_as_upstream_ignores_them():
    """Upstream's graph builder never monitors events: one whose owner never existed stays, and no
    informer holds them (the scheduler writes one for every pod that fits nowhere)."""
    s = await make_stack()
    gc = GarbageCollector(s.client)
    await gc.start()
    try:
        ghost = {"apiVersion": "v1", "kind": "ConfigMap", "name": "ghost", "uid": "00000000-0000-0000-0000-000000000001"}
        events, cms = s.client.resource("", "v1", "events"), s.client.resource("", "v1", "configmaps")
        await events.create({"metadata": {"name": "ev", "namespace": NS, "ownerReferences": [ghost]},
                             "involvedObject": {"kind": "ConfigMap", "namespace": NS, "name": "ghost"},
                             "reason": "Test", "message": "m", "type": "Normal"})
        await cms.create({"metadata": {"name": "orphaned", "namespace": NS, "ownerReferences": [ghost]}})
        assert await eventually(gone(cms, "orphaned"))
        assert (await events.get("ev", NS))["metadata"]["name"] == "ev"
        assert "configmaps" in gc._monitored and not gc._monitored & {"events", "events.events.k8s.io"}
    finally:
        await gc.stop()
        await s.close()


async def test_a_graph_node_keeps_its_objects_owner_references_and_no_instance_dict():
    """One node per object of every resource (300,000 pods: 300,000 nodes): each is one object to the
    cycle collector, holding the informer object's own ownerReferences list rather than a copy."""
    s = await make_stack()
    gc = GarbageCollector(s.client)
    await gc.start()
    try:
        cms = s.client.resource("", "v1", "configmaps")
        owner = await cms.create({"metadata": {"name": "owner", "namespace": NS}})
        ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
        dep = await cms.create({"metadata": {"name": "dep", "namespace": NS, "ownerReferences": [ref]}})
        uid = dep["metadata"]["uid"]
        async def observed():
            return uid in gc.nodes
        assert await eventually(observed)
        node = gc.nodes[uid]
        seen = next(o for o in (i.get(f"{NS}/dep") for i in gc._infs) if o is not None)
        assert node.owners is seen["metadata"]["ownerReferences"] and node.owners == [ref]
        assert not hasattr(node, "__dict__")
        assert gc.nodes[owner["metadata"]["uid"]].owners == ()
    finally:
        await gc.stop()
        await s.close()


async def test_an_owner_of_another_namespace_is_absent_and_reported(env):
    """A dependent naming, by uid, an owner that lives in another namespace: upstream's graph builder
    reports OwnerRefInvalidNamespace on the dependent and its collector, asking the dependent's own
    namespace for the owner, finds it absent and deletes the dependent; the owner stays."""
    cms = env
    await cms.c.resource("", "v1", "namespaces").create({"metadata": {"name": "other"}})
    owner = await cms.create({"metadata": {"name": "owner", "namespace": "other"}})
    uid = owner["metadata"]["uid"]
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid}
    await cms.create({"metadata": {"name": "dep", "namespace": NS, "ownerReferences": [ref]}})
    assert await eventually(gone(cms, "dep"))
    assert (await cms.get("owner", "other"))["metadata"]["uid"] == uid

    async def reported():
        items, _ = await cms.c.resource("", "v1", "events").list(NS)
        return [e for e in items if e["reason"] == "OwnerRefInvalidNamespace"]
    (ev,) = await eventually(reported)
    assert (ev["type"], ev["involvedObject"]["name"], ev["source"]["component"]) == (
        "Warning", "dep", "garbage-collector-controller")
    assert ev["message"] == (f'ownerRef [v1/ConfigMap, namespace: {NS}, name: owner, uid: {uid}] '
                             f'does not exist in namespace "{NS}"')


async def test_an_owner_named_by_the_wrong_kind_is_absent(env):
    """An owner reference whose uid is a ConfigMap's but whose kind says Secret: upstream looks the
    Secret up by name, finds none, and collects the dependent."""
    cms = env
    owner = await cms.create({"metadata": {"name": "owner", "namespace": NS}})
    ref = {"apiVersion": "v1", "kind": "Secret", "name": "owner", "uid": owner["metadata"]["uid"]}
    await cms.create({"metadata": {"name": "dep", "namespace": NS, "ownerReferences": [ref]}})
    assert await eventually(gone(cms, "dep"))
    assert await cms.get("owner", NS)


async def test_a_dangling_reference_beside_a_solid_owner_is_removed(env):
    """attemptToDeleteItem: a dependent with one owner alive keeps living, and loses its reference to
    the owner that is gone."""
    cms = env
    owner = await cms.create({"metadata": {"name": "owner", "namespace": NS}})
    solid = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
    ghost = {"apiVersion": "v1", "kind": "ConfigMap", "name": "ghost", "uid": "00000000-0000-0000-0000-000000000002"}
    await cms.create({"metadata": {"name": "dep", "namespace": NS, "ownerReferences": [ghost, solid]}})

    async def stripped():
        refs = (await cms.get("dep", NS))["metadata"].get("ownerReferences")
        return refs if refs == [solid] else None
    assert await eventually(stripped)


async def test_a_cluster_scoped_dependent_of_a_namespaced_kind_is_left_alone(env):
    """A cluster-scoped object cannot name a namespaced owner (an owner reference has no namespace):
    upstream's collector leaves it as it is, even beside an owner that is gone."""
    cms = env
    owner = await cms.create({"metadata": {"name": "owner", "namespace": NS}})
    refs = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]},
            {"apiVersion": "v1", "kind": "Namespace", "name": "ghost", "uid": "00000000-0000-0000-0000-000000000003"}]
    roles = cms.c.resource("rbac.authorization.k8s.io", "v1", "clusterroles")
    await roles.create({"metadata": {"name": "dep", "ownerReferences": refs}, "rules": []})
    # a namespaced dependent of the same gone owner is collected: the collector has looked
    await cms.create({"metadata": {"name": "probe", "namespace": NS, "ownerReferences": refs[1:]}})
    assert await eventually(gone(cms, "probe"))
    assert (await roles.get("dep"))["metadata"]["ownerReferences"] == refs


async def test_a_foreground_deletion_of_an_ownership_cycle_ends(env):
    """a owned by b, b by c, c by a, each reference blocking: a deleted in the foreground waits on c,
    c on b, b on a. Upstream's attemptToDeleteItem breaks the cycle (b's dependent a is already
    waiting on its own dependents, so b's references stop blocking) and all three go."""
    cms = env
    made = {n: await cms.create({"metadata": {"name": n, "namespace": NS}}) for n in "abc"}
    for dep, owner in (("a", "b"), ("b", "c"), ("c", "a")):
        ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": owner, "uid": made[owner]["metadata"]["uid"],
               "blockOwnerDeletion": True}
        await cms.patch(dep, {"metadata": {"ownerReferences": [ref]}}, namespace=NS)
    await cms.delete("a", NS, propagation_policy="Foreground")
    for n in "abc":
        assert await eventually(gone(cms, n))


async def test_a_foreground_deletion_spares_a_dependent_with_another_owner(env):
    """A dependent of an owner deleted in the foreground that has a second, live owner is not deleted:
    it loses its reference to the deleting owner, which then goes."""
    cms = env
    owner = await owner_and_dependent(cms, block=True)
    other = await cms.create({"metadata": {"name": "other", "namespace": NS}})
    second = {"apiVersion": "v1", "kind": "ConfigMap", "name": "other", "uid": other["metadata"]["uid"]}
    first = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"],
             "blockOwnerDeletion": True}
    await cms.patch("dep", {"metadata": {"ownerReferences": [first, second]}}, namespace=NS)
    await cms.delete("owner", NS, propagation_policy="Foreground")
    assert await eventually(gone(cms, "owner"))
    dep = await cms.get("dep", NS)
    assert not dep["metadata"].get("deletionTimestamp") and dep["metadata"]["ownerReferences"] == [second]


async def test_a_cluster_scoped_dependent_naming_a_namespaced_objects_uid_is_reported_without_a_namespace(env):
    """A ClusterRole whose owner reference names a ClusterRole by the uid of a ConfigMap: upstream's
    graph builder reports OwnerRefInvalidNamespace with the dependent's namespace, none (its Event in
    "default"), and the collector, finding no such ClusterRole, deletes the dependent."""
    cms = env
    owner = await cms.create({"metadata": {"name": "owner", "namespace": NS}})
    uid = owner["metadata"]["uid"]
    ref = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "name": "owner", "uid": uid}
    roles = cms.c.resource("rbac.authorization.k8s.io", "v1", "clusterroles")
    await roles.create({"metadata": {"name": "dep", "ownerReferences": [ref]}, "rules": []})

    async def role_gone():
        try:
            await roles.get("dep")
        except APIError as e:
            return e.code == 404
        return False
    assert await eventually(role_gone)

    async def reported():
        items, _ = await cms.c.resource("", "v1", "events").list("default")
        return [e for e in items if e["reason"] == "OwnerRefInvalidNamespace"]
    (ev,) = await eventually(reported)
    assert ev["involvedObject"]["kind"] == "ClusterRole" and "namespace" not in ev["involvedObject"]
    assert ev["message"] == (f'ownerRef [rbac.authorization.k8s.io/v1/ClusterRole, namespace: , name: owner, '
                             f'uid: {uid}] does not exist in namespace ""')


async def test_a_dependent_of_a_gone_owner_with_the_orphan_finalizer_is_deleted_orphaning(env):
    """attemptToDeleteItem honours a finalizer the dependent already carries: with `orphan` it is
    deleted with propagationPolicy Orphan, so its own dependent stays, losing its reference to it."""
    cms = env
    ghost = {"apiVersion": "v1", "kind": "ConfigMap", "name": "ghost", "uid": "00000000-0000-0000-0000-000000000004"}
    dep = await cms.create({"metadata": {"name": "dep", "namespace": NS, "finalizers": ["orphan"],
                                         "ownerReferences": [ghost]}})
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "dep", "uid": dep["metadata"]["uid"]}
    await cms.create({"metadata": {"name": "grandchild", "namespace": NS, "ownerReferences": [ref]}})
    assert await eventually(gone(cms, "dep"))
    assert not (await cms.get("grandchild", NS))["metadata"].get("ownerReferences")


async def test_a_dependent_of_a_gone_owner_with_the_foreground_finalizer_is_deleted_in_the_foreground(env):
    """With `foregroundDeletion` the dependent is deleted in the foreground: it waits, deleting, on
    its own blocking dependent (held here by a finalizer), which is deleted first."""
    cms = env
    ghost = {"apiVersion": "v1", "kind": "ConfigMap", "name": "ghost", "uid": "00000000-0000-0000-0000-000000000005"}
    dep = await cms.create({"metadata": {"name": "dep", "namespace": NS, "finalizers": ["foregroundDeletion"],
                                         "ownerReferences": [ghost]}})
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "dep", "uid": dep["metadata"]["uid"],
           "blockOwnerDeletion": True}
    await cms.create({"metadata": {"name": "grandchild", "namespace": NS, "finalizers": ["example.com/hold"],
                                   "ownerReferences": [ref]}})

    async def held():
        child = await cms.get("grandchild", NS)
        return child if child["metadata"].get("deletionTimestamp") else None
    assert await eventually(held)
    assert (await cms.get("dep", NS))["metadata"]["deletionTimestamp"]
    await cms.patch("grandchild", {"metadata": {"finalizers": None}}, namespace=NS)
    assert await eventually(gone(cms, "dep"))


async def test_an_owner_of_another_namespace_is_reported_once_not_at_every_attempt(env):
    """Upstream's graph builder records OwnerRefInvalidNamespace when it sees the reference (the
    dependent's add, or a reference added later), not at each attemptToDeleteItem: a dependent kept
    by a reference nobody resolves, and then looked at again (its references changed: the other
    namespace's one stays), has one Event of count 1."""
    cms = env
    await cms.c.resource("", "v1", "namespaces").create({"metadata": {"name": "other"}})
    owner = await cms.create({"metadata": {"name": "owner", "namespace": "other"}})
    misplaced = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
    unserved = {"apiVersion": "example.com/v1", "kind": "Nothing", "name": "x", "uid": "00000000-0000-0000-0000-000000000006"}
    await cms.create({"metadata": {"name": "dep", "namespace": NS, "ownerReferences": [misplaced, unserved]}})

    async def reported(name):
        items, _ = await cms.c.resource("", "v1", "events").list(NS)
        return [e for e in items if e["reason"] == "OwnerRefInvalidNamespace" and e["involvedObject"]["name"] == name]
    assert await eventually(lambda: reported("dep"))
    solid = await cms.create({"metadata": {"name": "solid", "namespace": NS}})
    kept = {"apiVersion": "v1", "kind": "ConfigMap", "name": "solid", "uid": solid["metadata"]["uid"]}
    await cms.patch("dep", {"metadata": {"ownerReferences": [misplaced, kept]}}, namespace=NS)

    async def stripped():  # the second look has run: the reference to the other namespace is gone
        return (await cms.get("dep", NS))["metadata"]["ownerReferences"] == [kept]
    assert await eventually(stripped)
    # the recorder writes in order: once a later Event is there, a repeat of dep's would be too
    await cms.create({"metadata": {"name": "later", "namespace": NS, "ownerReferences": [misplaced]}})
    assert await eventually(lambda: reported("later"))
    assert [e["count"] for e in await reported("dep")] == [1]



class Undiscovered:
    """`client` whose discovery leaves out the resources `hidden` names, though their kinds resolve:
    the collector never monitors them (upstream: a REST mapper ahead of the monitors)."""

    def __init__(self, client, hidden: set[str]):
        self.client, self.hidden = client, hidden

    def __getattr__(self, name: str):
        return getattr(self.client, name)

    def resources(self):
        return [r for r in self.client.resources() if r.group_resource not in self.hidden]


async def test_a_dependent_of_an_owner_gone_unobserved_is_collected():
    """An owner the graph has not observed (upstream's issue 56121; here a Secret, a kind whose
    monitor never starts) is found by asking the server; its deletion then queues nothing, so the
    dependent is looked at again, later each time, until the owner is observed or gone."""
    s, clock = await make_stack(), ManualClock()
    gc = GarbageCollector(Undiscovered(s.client, {"secrets"}), clock=clock)
    await gc.start()
    try:
        secrets, cms = s.client.resource("", "v1", "secrets"), s.client.resource("", "v1", "configmaps")
        secret = await secrets.create({"metadata": {"name": "owner", "namespace": NS}})
        owner = {"apiVersion": "v1", "kind": "Secret", "name": "owner", "uid": secret["metadata"]["uid"]}
        ghost = {"apiVersion": "v1", "kind": "ConfigMap", "name": "ghost", "uid": "00000000-0000-0000-0000-000000000002"}
        dep = await cms.create({"metadata": {"name": "dep", "namespace": NS, "ownerReferences": [owner, ghost]}})
        uid = dep["metadata"]["uid"]

        async def looked():  # the ghost's reference dropped beside a solid owner, and the look that saw that done
            n = gc.nodes.get(uid)
            return n is not None and len(n.owners) == 1 and not gc.queue._dirty and not gc.queue._processing
        assert await eventually(looked)
        await clock.advance(10)
        assert (await cms.get("dep", NS))["metadata"]["ownerReferences"] == [owner]  # a solid owner keeps it
        assert secret["metadata"]["uid"] not in gc.nodes

        await secrets.delete("owner", NS)
        await clock.advance(10)
        assert await eventually(gone(cms, "dep"))

        async def dropped():
            return uid not in gc._unobserved and uid not in gc.nodes
        assert await eventually(dropped)
    finally:
        await gc.stop()
        await s.close()


async def crd_server() -> APIServer:
    """An API server whose CRD controllers serve custom resources."""
    server = APIServer(MemoryStore(), None, port=0)
    server.rest.admission.disable("ServiceAccount")
    await server.start()
    return server


async def establish_things(server: APIServer) -> None:
    """The CRD of `things.gc.example.com`, served and its status settled: no event of it comes after."""
    crds = LocalClient(server.rest).resource("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    await crds.create({"metadata": {"name": "things.gc.example.com"}, "spec": {
        "group": "gc.example.com", "scope": "Namespaced", "names": {"plural": "things", "kind": "Thing"},
        "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
            "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}})

    async def established():
        crd = await crds.get("things.gc.example.com")
        conds = {c["type"]: c["status"] for c in (crd.get("status") or {}).get("conditions") or []}
        return conds.get("Established") == "True" and server.rest.index.by_kind("gc.example.com", "Thing") is not None
    assert await eventually(established)


@pytest.fixture
async def over_http():
    """A server serving CRDs; an HTTP client of it that read discovery at start, on a clock that moves
    only when a test moves it, its read stale 30 s on (the controller manager's RESTMapper reset)."""
    server, clock = await crd_server(), ManualClock()
    client = HTTPClient(Credentials(f"http://127.0.0.1:{server.port}", None), "test", clock=clock)
    await client.start()
    client.reset_mapping_every(MAPPER_RESET_PERIOD)
    yield server, client, clock
    await client.close()
    await server.stop()


async def test_a_crd_established_while_the_collector_starts_is_monitored_from_its_start():
    """A CRD served after the collector first looked for resources, whose events reach it while its
    monitors sync, gets its monitor when the start is done (upstream's GC Sync looks at discovery as it
    starts), not at the next look 30 s on: the clock never moves here, and a custom resource's
    dependents go with it."""
    server = await crd_server()
    client, clock = LocalClient(server.rest), ManualClock()
    gc = GarbageCollector(client, clock=clock)  # before the CRD: its resource is not monitored yet
    await establish_things(server)
    assert "things.gc.example.com" not in gc._monitored
    await gc.start()
    try:
        assert "things.gc.example.com" in gc._monitored
        things, cms = client.resource("gc.example.com", "v1", "things"), client.resource("", "v1", "configmaps")
        thing = await things.create({"apiVersion": "gc.example.com/v1", "kind": "Thing",
                                     "metadata": {"name": "owner", "namespace": NS}})
        owner = {"apiVersion": "gc.example.com/v1", "kind": "Thing", "name": "owner", "uid": thing["metadata"]["uid"]}
        await cms.create({"metadata": {"name": "dep", "namespace": NS, "ownerReferences": [owner]}})

        async def observed():
            return thing["metadata"]["uid"] in gc.nodes
        assert await eventually(observed)
        await things.delete("owner", NS)
        assert await eventually(gone(cms, "dep"))
    finally:
        await gc.stop()
        await server.stop()


async def test_over_http_a_crd_served_later_is_monitored_at_its_event_and_its_objects_collected(over_http):
    """Over HTTP the client reads discovery at start and then when asked: a CRD served after the
    collector started is a miss its event shows, so discovery is read then and the resource monitored
    at once (upstream's collector waits for its next Sync, up to 30 s; here the clock never moves, so
    no periodic look helps). A custom parent's background and foreground deletions take its custom
    child along; a later change of the CRD, whose resource discovery lists, reads nothing."""
    server, client, clock = over_http
    gc = GarbageCollector(client, clock=clock)
    await gc.start()
    try:
        await establish_things(server)

        async def monitored():
            return "things.gc.example.com" in gc._monitored
        assert await eventually(monitored, timeout=10)
        things = client.resource("gc.example.com", "v1", "things")
        for policy in ("Background", "Foreground"):
            parent = await things.create({"apiVersion": "gc.example.com/v1", "kind": "Thing",
                                          "metadata": {"name": "parent", "namespace": NS}})
            ref = {"apiVersion": "gc.example.com/v1", "kind": "Thing", "name": "parent",
                   "uid": parent["metadata"]["uid"], "blockOwnerDeletion": True}
            await things.create({"apiVersion": "gc.example.com/v1", "kind": "Thing",
                                 "metadata": {"name": "child", "namespace": NS, "ownerReferences": [ref]}})

            async def observed():
                return parent["metadata"]["uid"] in gc.dependents
            assert await eventually(observed, timeout=10)
            await things.delete("parent", NS, propagation_policy=policy)
            assert await eventually(gone(things, "child"), timeout=10), policy
            assert await eventually(gone(things, "parent"), timeout=10), policy

        gets = REQUESTS.labels("200", "GET", client.host).value
        crds = LocalClient(server.rest).resource("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        await crds.patch("things.gc.example.com", {"metadata": {"labels": {"seen": "yes"}}})
        crd_monitor = next(i for i in gc.informers() if i.rc.res.plural == "customresourcedefinitions")

        async def seen():
            crd = crd_monitor.get("things.gc.example.com")
            return crd is not None and (crd["metadata"].get("labels") or {}).get("seen") == "yes"
        assert await eventually(seen, timeout=10)
        assert REQUESTS.labels("200", "GET", client.host).value == gets
    finally:
        await gc.stop()


async def test_a_dependent_whose_owner_kind_is_not_served_yet_is_looked_at_again(over_http):
    """A dependent naming an owner of a kind no server serves yet (restored before its owner's CRD) is
    not dropped: it is looked at again, later each time, as upstream requeues an item on a
    restMappingError; once the CRD is served its owner is found gone, and the dependent goes."""
    server, client, clock = over_http
    gc = GarbageCollector(client, clock=clock)
    await gc.start()
    try:
        cms = client.resource("", "v1", "configmaps")
        owner = {"apiVersion": "gc.example.com/v1", "kind": "Thing", "name": "gone",
                 "uid": "00000000-0000-0000-0000-000000000003"}
        dep = await cms.create({"metadata": {"name": "dep", "namespace": NS, "ownerReferences": [owner]}})

        async def looked():  # the look that found the kind unmapped, and its retry scheduled
            return dep["metadata"]["uid"] in gc._unobserved
        assert await eventually(looked, timeout=10)
        await establish_things(server)

        async def collected():
            await clock.advance(1)  # the retries' backoff
            return await gone(cms, "dep")()
        assert await eventually(collected, timeout=10)
    finally:
        await gc.stop()
