"""The informer's namespace index (list_namespace) against its store, through adds, updates,
deletes, and a relist after the watch expires, driven by a scripted list/watch client."""

import asyncio
from types import SimpleNamespace

from nanokube.client.informer import Informer
from nanokube.machinery.errors import APIError


def obj(ns, name, rv="1"):
    return {"metadata": {"namespace": ns, "name": name, "resourceVersion": rv}}


class ScriptedClient:
    """Each list answers the next snapshot; each watch yields what the test puts on `events`
    until a None ends it with a 410 (as an expired watch does), and the informer relists."""

    def __init__(self, snapshots):
        self.res = SimpleNamespace(plural="pods")
        self.snapshots = list(snapshots)
        self.events: asyncio.Queue = asyncio.Queue()
        self.lists = 0

    async def list(self, namespace, label_selector, field_selector, resource_version=""):
        self.lists += 1
        return self.snapshots.pop(0), str(self.lists)

    async def watch(self, namespace, rv, label_selector, field_selector, timeout_seconds=None):
        async def stream():
            while (ev := await self.events.get()) is not None:
                yield ev
            raise APIError(410, "Expired", "too old resource version")
        return stream()


def consistent(inf: Informer) -> dict[str, list[str]]:
    """Each namespace's list_namespace is list() filtered to it, in the same order, and the index
    keeps no namespace that has emptied; returns the names by namespace."""
    by_ns: dict[str, list[dict]] = {}
    for o in inf.list():
        by_ns.setdefault(o["metadata"]["namespace"], []).append(o)
    for ns, objs in by_ns.items():
        got = inf.list_namespace(ns)
        assert len(got) == len(objs) and all(a is b for a, b in zip(got, objs, strict=True))
    assert set(inf._by_ns) == set(by_ns)
    return {ns: [o["metadata"]["name"] for o in objs] for ns, objs in by_ns.items()}


async def settle(rc: ScriptedClient) -> None:
    while not rc.events.empty():
        await asyncio.sleep(0)
    await asyncio.sleep(0)


async def test_the_namespace_index_follows_adds_updates_deletes_and_a_relist():
    rc = ScriptedClient([
        [obj("a", "p1"), obj("b", "p2"), obj("a", "p3")],
        # the relist after the watch ended: a/p1 went and d/p6 came while no watch ran
        [obj("a", "p3"), obj("b", "p5", "9"), obj("d", "p6")],
        [],
    ])
    inf = Informer(rc)
    task = asyncio.create_task(inf.run())
    try:
        await asyncio.wait_for(inf.synced.wait(), 5)
        assert consistent(inf) == {"a": ["p1", "p3"], "b": ["p2"]}
        assert inf.list_namespace("c") == []

        for ev in [("ADDED", obj("c", "p4")), ("MODIFIED", obj("a", "p1", "2")), ("DELETED", obj("b", "p2"))]:
            rc.events.put_nowait(ev)
        await settle(rc)
        assert consistent(inf) == {"a": ["p1", "p3"], "c": ["p4"]}
        assert inf.list_namespace("a")[0]["metadata"]["resourceVersion"] == "2"
        assert inf.list_namespace("b") == []

        for ev in [("ADDED", obj("b", "p5")), ("DELETED", obj("c", "p4")), ("DELETED", obj("c", "never-seen")),
                   ("BOOKMARK", obj("", ""))]:
            rc.events.put_nowait(ev)
        await settle(rc)
        assert consistent(inf) == {"a": ["p1", "p3"], "b": ["p5"]}

        rc.events.put_nowait(None)
        while rc.lists < 2:
            await asyncio.sleep(0)
        await settle(rc)
        assert consistent(inf) == {"a": ["p3"], "b": ["p5"], "d": ["p6"]}
        assert inf.list_namespace("b")[0]["metadata"]["resourceVersion"] == "9"

        rc.events.put_nowait(None)
        while rc.lists < 3:
            await asyncio.sleep(0)
        await settle(rc)
        assert consistent(inf) == {}
        assert inf.list_namespace("a") == []
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_cluster_scoped_objects_are_indexed_under_the_empty_namespace():
    rc = ScriptedClient([[{"metadata": {"name": "n1", "resourceVersion": "1"}}]])
    inf = Informer(rc)
    task = asyncio.create_task(inf.run())
    try:
        await asyncio.wait_for(inf.synced.wait(), 5)
        assert [o["metadata"]["name"] for o in inf.list_namespace("")] == ["n1"]
        rc.events.put_nowait(("DELETED", {"metadata": {"name": "n1", "resourceVersion": "2"}}))
        await settle(rc)
        assert inf.list_namespace("") == [] and inf._by_ns == {}
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def on(ns, name, node, rv="1"):
    return {"metadata": {"namespace": ns, "name": name, "resourceVersion": rv}, "spec": {"nodeName": node}}


def node_of(o):
    return o["spec"].get("nodeName") or None


def by_node(inf: Informer) -> dict[str, list[str]]:
    """Each node's by_index holds the very objects of list() on it, and the index keeps no emptied
    value; returns the names by node, in by_index's order."""
    want: dict[str, list[dict]] = {}
    for o in inf.list():
        if node_of(o):
            want.setdefault(node_of(o), []).append(o)
    for node, objs in want.items():
        assert sorted(map(id, inf.by_index("node", node))) == sorted(map(id, objs))
    assert set(inf._indexers["node"].keys) == set(want)
    return {n: [o["metadata"]["name"] for o in inf.by_index("node", n)] for n in want}


async def test_a_custom_index_follows_a_value_that_changes_and_a_relist():
    rc = ScriptedClient([[on("a", "p1", "n1"), on("a", "p2", None)], [on("a", "p2", "n2", "7"), on("b", "p9", "n1")]])
    inf = Informer(rc)
    task = asyncio.create_task(inf.run())
    try:
        await asyncio.wait_for(inf.synced.wait(), 5)
        inf.add_index("node", node_of)  # added to a synced informer: built from what it holds
        assert by_node(inf) == {"n1": ["p1"]}
        assert inf.by_index("node", "n2") == []

        for ev in [("MODIFIED", on("a", "p2", "n2", "2")), ("ADDED", on("b", "p3", "n2")),
                   ("MODIFIED", on("a", "p1", "n1", "3")), ("ADDED", on("b", "p4", None))]:
            rc.events.put_nowait(ev)
        await settle(rc)
        assert by_node(inf) == {"n1": ["p1"], "n2": ["p2", "p3"]}
        assert inf.by_index("node", "n1")[0]["metadata"]["resourceVersion"] == "3"

        for ev in [("DELETED", on("a", "p1", "n1")), ("MODIFIED", on("b", "p3", "n1", "4")),
                   ("MODIFIED", on("b", "p4", "n2", "5"))]:
            rc.events.put_nowait(ev)
        await settle(rc)
        assert by_node(inf) == {"n1": ["p3"], "n2": ["p2", "p4"]}

        rc.events.put_nowait(None)
        while rc.lists < 2:
            await asyncio.sleep(0)
        await settle(rc)
        assert by_node(inf) == {"n2": ["p2"], "n1": ["p9"]}
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def gpus(ns, name, devices, rv="1"):
    return {"metadata": {"namespace": ns, "name": name, "resourceVersion": rv}, "devices": devices}


def devices_of(o):
    return tuple(o["devices"]) or None


async def test_a_tuple_value_files_an_object_under_each_of_its_values():
    """client-go's IndexFunc returning several values: an object is found under each, leaves the ones
    an update drops, and leaves the index on delete; an empty value keeps no entry."""
    rc = ScriptedClient([[gpus("a", "c1", ["g0", "g1"]), gpus("a", "c2", ["g1"])]])
    inf = Informer(rc)
    inf.add_index("gpu", devices_of)
    task = asyncio.create_task(inf.run())

    def names(gpu):
        return sorted(o["metadata"]["name"] for o in inf.by_index("gpu", gpu))
    try:
        await asyncio.wait_for(inf.synced.wait(), 5)
        assert (names("g0"), names("g1")) == (["c1"], ["c1", "c2"])

        for ev in [("MODIFIED", gpus("a", "c1", ["g1", "g2"], "2")), ("ADDED", gpus("b", "c3", ["g0"]))]:
            rc.events.put_nowait(ev)
        await settle(rc)
        assert (names("g0"), names("g1"), names("g2")) == (["c3"], ["c1", "c2"], ["c1"])
        assert inf.by_index("gpu", "g2")[0]["metadata"]["resourceVersion"] == "2"

        for ev in [("DELETED", gpus("a", "c1", ["g1", "g2"])), ("MODIFIED", gpus("a", "c2", [], "3"))]:
            rc.events.put_nowait(ev)
        await settle(rc)
        assert (names("g0"), names("g1"), names("g2")) == (["c3"], [], [])
        assert set(inf._indexers["gpu"].keys) == {"g0"}
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
