"""Responses converted to meta.k8s.io kinds (Accept's as/g/v): Table options judged before a Table is
made, the version asked for kept, and PartialObjectMetadata(List) only for what it names, as upstream's
transformResponseObject."""

import aiohttp
import orjson

from nanokube.apiserver.app import APIServer
from nanokube.apiserver.rest import SYSTEM, WriteOptions
from nanokube.store.memory import MemoryStore

TABLE = "application/json;as=Table;v={};g=meta.k8s.io"
PARTIAL = "application/json;as=PartialObjectMetadata;v={};g=meta.k8s.io"
PARTIAL_LIST = "application/json;as=PartialObjectMetadataList;v={};g=meta.k8s.io"


async def _server():
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    cms = server.index.get("", "v1", "configmaps")
    await server.rest.create(cms, "v1", "default", {"metadata": {"name": "a"}}, WriteOptions(user=SYSTEM))
    return server, f"http://127.0.0.1:{server.port}"


async def _get(s, url, accept):
    async with s.get(url, headers={"Accept": accept}) as r:
        return r.status, orjson.loads(await r.read())


async def test_an_unknown_include_object_is_a_400_for_a_table_and_ignored_otherwise():
    server, base = await _server()
    cms = f"{base}/api/v1/namespaces/default/configmaps"
    want = ("Unable to convert to Table as requested: includeObject: Invalid value: \"Bogus\": "
            "must be 'Metadata', 'Object', 'None', or empty")
    try:
        async with aiohttp.ClientSession() as s:
            for url in (f"{cms}?includeObject=Bogus", f"{cms}/a?includeObject=Bogus",
                        f"{cms}?watch=1&includeObject=Bogus&timeoutSeconds=1"):
                code, body = await _get(s, url, TABLE.format("v1"))
                assert (code, body["reason"], body["message"]) == (400, "BadRequest", want), url
            code, body = await _get(s, f"{cms}?includeObject=Bogus", "application/json")
            assert (code, body["kind"]) == (200, "ConfigMapList")
            code, body = await _get(s, f"{cms}/a?includeObject=", TABLE.format("v1"))
            assert code == 200 and body["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    finally:
        await server.stop()


async def test_a_v1beta1_conversion_is_served_as_v1beta1():
    server, base = await _server()
    cms = f"{base}/api/v1/namespaces/default/configmaps"
    try:
        async with aiohttp.ClientSession() as s:
            for url in (cms, f"{cms}/a"):
                code, t = await _get(s, url, TABLE.format("v1beta1"))
                assert (code, t["apiVersion"], t["rows"][0]["object"]["apiVersion"]) == \
                    (200, "meta.k8s.io/v1beta1", "meta.k8s.io/v1beta1")
            code, p = await _get(s, f"{cms}/a", PARTIAL.format("v1beta1"))
            assert (code, p["kind"], p["apiVersion"]) == (200, "PartialObjectMetadata", "meta.k8s.io/v1beta1")
            code, p = await _get(s, cms, PARTIAL_LIST.format("v1beta1"))
            assert (code, p["apiVersion"], p["items"][0]["apiVersion"]) == \
                (200, "meta.k8s.io/v1beta1", "meta.k8s.io/v1beta1")
            code, t = await _get(s, cms, TABLE.format("v1"))
            assert (t["apiVersion"], t["rows"][0]["object"]["apiVersion"]) == ("meta.k8s.io/v1", "meta.k8s.io/v1")
    finally:
        await server.stop()


async def test_partial_object_metadata_of_a_list_or_a_list_of_one_object_is_not_acceptable():
    server, base = await _server()
    try:
        async with aiohttp.ClientSession() as s:
            for url, accept, message in [
                (f"{base}/api/v1/namespaces/default/configmaps", PARTIAL,
                 "you requested PartialObjectMetadata, but the requested object is a list (*core.ConfigMapList)"),
                (f"{base}/api/v1/namespaces/default/configmaps/a", PARTIAL_LIST,
                 "you requested PartialObjectMetadataList, but the requested object is not a list (*core.ConfigMap)"),
                (f"{base}/apis/events.k8s.io/v1/events", PARTIAL,
                 "you requested PartialObjectMetadata, but the requested object is a list (*core.EventList)"),
                (f"{base}/apis/apps/v1/deployments", PARTIAL,
                 "you requested PartialObjectMetadata, but the requested object is a list (*apps.DeploymentList)"),
            ]:
                code, body = await _get(s, url, accept.format("v1"))
                assert (code, body["reason"], body["message"]) == (406, "NotAcceptable", message), url
            # the object is read first: a missing one is a 404
            code, body = await _get(s, f"{base}/api/v1/namespaces/default/configmaps/zz", PARTIAL_LIST.format("v1"))
            assert code == 404
    finally:
        await server.stop()


async def test_a_metadata_watch_bookmark_is_partial_object_metadata():
    """A metadata informer's watch (as=PartialObjectMetadata, bookmarks allowed, as client-go's
    reflector asks) gets its BOOKMARK events transformed like its other events: a
    PartialObjectMetadata a metadata client can decode, not the resource's kind."""
    server, base = await _server()
    url = f"{base}/api/v1/namespaces/default/configmaps?watch=1&allowWatchBookmarks=true&timeoutSeconds=1"
    try:
        async with aiohttp.ClientSession() as s, s.get(url, headers={"Accept": PARTIAL.format("v1")}) as r:
            events = [orjson.loads(line) for line in (await r.read()).splitlines()]
        bookmark = events[-1]
        assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"]
        assert (bookmark["object"]["kind"], bookmark["object"]["apiVersion"]) == ("PartialObjectMetadata", "meta.k8s.io/v1")
        assert bookmark["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    finally:
        await server.stop()


async def test_a_table_watch_sends_column_definitions_with_its_first_event_only():
    """watchEmbeddedEncoder sets NoHeaders after the first event: the later Tables' columnDefinitions
    are null (the field has no omitempty)."""
    server, base = await _server()
    cms = server.index.get("", "v1", "configmaps")
    await server.rest.create(cms, "v1", "default", {"metadata": {"name": "b"}}, WriteOptions(user=SYSTEM))
    url = f"{base}/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1"
    try:
        async with aiohttp.ClientSession() as s, s.get(url, headers={"Accept": TABLE.format("v1")}) as r:
            tables = [orjson.loads(line)["object"] for line in (await r.read()).splitlines()]
        assert [len(t["rows"]) for t in tables] == [1, 1]
        assert tables[0]["columnDefinitions"] and tables[1]["columnDefinitions"] is None
    finally:
        await server.stop()


async def test_writes_are_converted_as_reads_are():
    """transformResponseObject serves create, update and patch too: a Table or PartialObjectMetadata is
    what the Accept header asks for (the object itself was served), with the write's code."""
    server, base = await _server()
    cms = f"{base}/api/v1/namespaces/default/configmaps"
    try:
        async with aiohttp.ClientSession() as s:
            async with s.post(cms, json={"metadata": {"name": "w"}, "data": {"k": "v"}},
                              headers={"Accept": PARTIAL.format("v1")}) as r:
                body = await r.json()
                assert (r.status, body["kind"], body["apiVersion"], body["metadata"]["name"], "data" in body) == (
                    201, "PartialObjectMetadata", "meta.k8s.io/v1", "w", False)
            async with s.put(f"{cms}/w", json={"metadata": {"name": "w"}, "data": {"k": "v", "j": "u"}},
                             headers={"Accept": TABLE.format("v1")}) as r:
                body = await r.json()
                assert (r.status, body["kind"], [c["name"] for c in body["columnDefinitions"]]) == (
                    200, "Table", ["Name", "Data", "Age"])
                assert (body["rows"][0]["cells"][:2], body["rows"][0]["object"]["kind"]) == (
                    ["w", 2], "PartialObjectMetadata")
            async with s.patch(f"{cms}/w", data=b'{"data":{"x":"y"}}', headers={
                    "Accept": PARTIAL.format("v1beta1"), "Content-Type": "application/merge-patch+json"}) as r:
                body = await r.json()
                assert (r.status, body["kind"], body["apiVersion"]) == (200, "PartialObjectMetadata", "meta.k8s.io/v1beta1")
    finally:
        await server.stop()


async def test_a_table_watch_bookmark_is_a_table_of_the_bookmark_object():
    """watchEmbeddedEncoder transforms a BOOKMARK's object as any event's: asTable of it is a Table with
    the bookmark's resourceVersion and one row whose PartialObjectMetadata carries the initial-events-end
    annotation; it takes the column definitions when it is the first event, and they are null after."""
    server, base = await _server()
    url = (f"{base}/api/v1/namespaces/{{}}/configmaps?watch=1&allowWatchBookmarks=true&sendInitialEvents=true"
           "&resourceVersionMatch=NotOlderThan&timeoutSeconds=1")
    try:
        async with aiohttp.ClientSession() as s:
            before = server.rest.cache.rev  # the server's own loops (its Lease) write meanwhile
            async with s.get(url.format("default"), headers={"Accept": TABLE.format("v1")}) as r:
                events = [orjson.loads(line) for line in (await r.read()).splitlines()]
            after = server.rest.cache.rev
            async with s.get(url.format("empty"), headers={"Accept": TABLE.format("v1beta1")}) as r:
                alone = [orjson.loads(line) for line in (await r.read()).splitlines()]
        assert [(e["type"], e["object"]["kind"]) for e in events] == [("ADDED", "Table"), ("BOOKMARK", "Table")]
        bookmark = events[1]["object"]
        rv = bookmark["metadata"]["resourceVersion"]
        assert before <= int(rv) <= after and bookmark["columnDefinitions"] is None
        assert [r["object"] for r in bookmark["rows"]] == [{
            "kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
            "metadata": {"resourceVersion": rv, "annotations": {"k8s.io/initial-events-end": "true"}}}]
        assert [(e["type"], e["object"]["apiVersion"]) for e in alone] == [("BOOKMARK", "meta.k8s.io/v1beta1")]
        assert [c["name"] for c in alone[0]["object"]["columnDefinitions"]] == ["Name", "Data", "Age"]
        assert alone[0]["object"]["rows"][0]["object"]["apiVersion"] == "meta.k8s.io/v1beta1"
    finally:
        await server.stop()


async def test_a_table_watch_bookmark_of_a_kind_with_a_row_order_is_a_table():
    """FlowSchemas' Tables are ordered by precedence and name, and a bookmark's object has no name: its
    Table is still made (it was an ERROR event ending the watch)."""
    server, base = await _server()
    url = (f"{base}/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas?watch=1&allowWatchBookmarks=true"
           "&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=1")
    try:
        async with aiohttp.ClientSession() as s, s.get(url, headers={"Accept": TABLE.format("v1")}) as r:
            events = [orjson.loads(line) for line in (await r.read()).splitlines()]
        assert len(events) > 1 and {e["type"] for e in events[:-1]} == {"ADDED"}
        assert (events[-1]["type"], events[-1]["object"]["kind"], len(events[-1]["object"]["rows"])) == (
            "BOOKMARK", "Table", 1)
    finally:
        await server.stop()


async def test_a_table_watch_row_is_the_row_a_get_serves():
    """A Table watch's cells read the event's stored object, as a list's do: an autoscaling/v1
    HorizontalPodAutoscaler's DELETED row showed its targets `<none>` (read from the v1 form served)."""
    server, base = await _server()
    hpas = f"{base}/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers"
    spec = {"scaleTargetRef": {"kind": "Deployment", "name": "d", "apiVersion": "apps/v1"}, "minReplicas": 2,
            "maxReplicas": 5, "targetCPUUtilizationPercentage": 70}
    try:
        async with aiohttp.ClientSession() as s:
            start = str(server.rest.cache.rev)
            gets = []
            async with s.post(hpas, json={"metadata": {"name": "h"}, "spec": spec}) as r:
                assert r.status == 201
            gets.append((await _get(s, f"{hpas}/h", TABLE.format("v1")))[1]["rows"][0]["cells"])
            async with s.patch(f"{hpas}/h", json={"spec": {"maxReplicas": 7}},
                               headers={"Content-Type": "application/merge-patch+json"}) as r:
                assert r.status == 200
            gets.append((await _get(s, f"{hpas}/h", TABLE.format("v1")))[1]["rows"][0]["cells"])
            async with s.delete(f"{hpas}/h") as r:
                assert r.status == 200
            gets.append(gets[-1])
            async with s.get(f"{hpas}?watch=1&resourceVersion={start}&timeoutSeconds=1",
                             headers={"Accept": TABLE.format("v1")}) as r:
                events = [orjson.loads(line) for line in (await r.read()).splitlines()]
        assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]
        # all but the age, which may have turned a second
        assert [e["object"]["rows"][0]["cells"][:-1] for e in events] == [g[:-1] for g in gets]
        assert gets[0][2] == "cpu: <unknown>/70%"
    finally:
        await server.stop()
