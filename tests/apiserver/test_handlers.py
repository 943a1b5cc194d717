"""The HTTP rendering of lists and watches: a LIST body written in slices, watch events written
straight from the cache (`Watcher.direct`), those of one loop turn in one write."""

import asyncio

import aiohttp
import orjson
import yaml

from nanokube.apiserver.app import APIServer
from nanokube.apiserver import handlers
from nanokube.apiserver.handlers import JoinedPayload
from nanokube.apiserver.rest import SYSTEM, WriteOptions
from nanokube.store.memory import MemoryStore
from tests.controllers import eventually


async def _server():
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    return server, server.index.get("", "v1", "configmaps")


async def test_a_list_larger_than_a_slice_is_one_exact_body():
    server, cms = await _server()
    try:
        for i in range(12):
            await server.rest.create(cms, "v1", "default", {"metadata": {"name": f"cm-{i:02d}"},
                                                            "data": {"v": str(i) * 200_000}}, WriteOptions(user=SYSTEM))
        url = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps"
        # not gzipped (an answer over 128 KiB is, for a client that asks): the slices are an identity answer's
        async with aiohttp.ClientSession() as s, s.get(url, headers={"Accept-Encoding": "identity"}) as r:
            body = await r.read()
            assert r.headers["Content-Length"] == str(len(body)) and len(body) > 2 * JoinedPayload.SLICE
        got = orjson.loads(body)
        assert [o["metadata"]["name"] for o in got["items"]] == [f"cm-{i:02d}" for i in range(12)]
        assert got["items"][3] == await server.rest.get(cms, "v1", "default", "cm-03")
        assert body.endswith(b"]}\n")
    finally:
        await server.stop()


async def test_a_get_is_the_objects_json_as_written_back_and_follows_updates():
    server, cms = await _server()
    try:
        await server.rest.create(cms, "v1", "default", {"metadata": {"name": "a"}, "data": {"k": "1"}},
                                 WriteOptions(user=SYSTEM))
        url = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps/a"
        async with aiohttp.ClientSession() as s:
            for value in ("1", "2"):
                if value == "2":
                    await server.rest.patch(cms, "v1", "default", "a", "application/merge-patch+json",
                                            b'{"data":{"k":"2"}}', WriteOptions(user=SYSTEM))
                async with s.get(url) as r:
                    body = await r.read()
                stored = await server.rest.get(cms, "v1", "default", "a")
                assert stored["data"]["k"] == value and body == orjson.dumps(stored) + b"\n"
                assert r.headers["Content-Type"] == "application/json" and r.headers["Content-Length"] == str(len(body))
            async with s.get(url, headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}) as r:
                assert (await r.json())["kind"] == "Table"
    finally:
        await server.stop()


async def test_a_list_body_is_head_items_and_tail_in_slices_of_whole_items(monkeypatch):
    class Writer:
        def __init__(self):
            self.writes = []

        async def write(self, data):
            self.writes.append(bytes(data))

    monkeypatch.setattr(JoinedPayload, "SLICE", 10)
    for items in ([], [b"{}"], [b'{"a":1}', b"{}", b'{"bb":[2]}', b"{}", b'{"c":3}']):
        p, w = JoinedPayload(b'{"items":[', items, b"]}\n"), Writer()
        await p.write(w)
        body = b"".join(w.writes)
        assert body == b'{"items":[' + b",".join(items) + b"]}\n" and p.size == len(body)
        assert p.decode() == body.decode()
        if len(items) == 5:  # several slices, each of whole items
            assert len(w.writes) > 1 and all(x.startswith(b",{") for x in w.writes[1:])


async def test_watch_events_are_written_directly_in_order_and_the_watcher_goes_with_the_watch():
    server, cms = await _server()
    try:
        url = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps?watch=true&allowWatchBookmarks=true"
        async with aiohttp.ClientSession() as s, s.get(url) as r:
            async def parked():
                ws = [w for ws in server.cache._watchers.values() for w in ws if w.prefix.endswith("/configmaps/default/")]
                return ws if ws and ws[0].parked and ws[0].direct is not None else None
            (w,) = await eventually(parked)
            for i in range(20):
                await server.rest.create(cms, "v1", "default", {"metadata": {"name": f"cm-{i}"}}, WriteOptions(user=SYSTEM))
            await server.rest.delete(cms, "v1", "default", "cm-0", {}, WriteOptions(user=SYSTEM))
            # (a watch from "" is a watch-list: its initial events, none here, end with a bookmark)
            end, *events = [orjson.loads(await r.content.readline()) for _ in range(22)]
            assert w.queue.empty()
        assert (end["type"], end["object"]["metadata"]["annotations"]) == ("BOOKMARK", {"k8s.io/initial-events-end": "true"})
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == \
            [("ADDED", f"cm-{i}") for i in range(20)] + [("DELETED", "cm-0")]
        revs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
        assert revs == sorted(revs) and len(set(revs)) == 21
        assert events[5]["object"] == await server.rest.get(cms, "v1", "default", "cm-5")
        await eventually(lambda: _gone(server, w))
    finally:
        await server.stop()


async def _gone(server, w):
    return w not in {x for ws in server.cache._watchers.values() for x in ws}


async def _parked_watch(server, s):
    url = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps?watch=true"
    r = await s.get(url)

    async def parked():
        ws = [w for ws in server.cache._watchers.values() for w in ws if w.prefix.endswith("/configmaps/default/")]
        return ws if ws and ws[0].parked and ws[0].direct is not None else None

    (w,) = await eventually(parked)
    return r, w


def _record_writes(monkeypatch) -> list[int]:
    """How many events each write to a direct watch's connection carried."""
    writes, write = [], handlers._Batch.write

    def recorded(batch, data):
        writes.append(data.count(b'{"type":'))
        write(batch, data)

    monkeypatch.setattr(handlers._Batch, "write", recorded)
    return writes


async def _burst(server, cms, n: int) -> None:
    """`n` configmaps created at once: their events reach a watch in one loop turn."""
    await asyncio.gather(*(server.rest.create(cms, "v1", "default", {"metadata": {"name": f"cm-{i}"}},
                                              WriteOptions(user=SYSTEM)) for i in range(n)))


async def test_a_watchs_first_event_of_a_loop_turn_goes_out_at_once_and_the_turns_others_in_one_write(monkeypatch):
    writes = _record_writes(monkeypatch)
    server, cms = await _server()
    try:
        async with aiohttp.ClientSession() as s:
            r, _ = await _parked_watch(server, s)
            async with r:
                await _burst(server, cms, 20)
                first = [orjson.loads(await r.content.readline()) for _ in range(20)]
                await server.rest.create(cms, "v1", "default", {"metadata": {"name": "late"}}, WriteOptions(user=SYSTEM))
                last = orjson.loads(await r.content.readline())
        assert writes == [1, 19, 1]
        assert sorted(e["object"]["metadata"]["name"] for e in first) == sorted(f"cm-{i}" for i in range(20))
        revs = [int(e["object"]["metadata"]["resourceVersion"]) for e in first + [last]]
        assert revs == sorted(revs) and last["object"]["metadata"]["name"] == "late"
    finally:
        await server.stop()


async def test_a_watch_that_falls_behind_mid_turn_writes_the_turns_batch_before_its_queued_events(monkeypatch):
    writes = _record_writes(monkeypatch)
    server, cms = await _server()
    try:
        async with aiohttp.ClientSession() as s:
            r, w = await _parked_watch(server, s)
            async with r:
                handed, direct = [], w.direct

                def lagging(cev):  # the client stops keeping up after five events: the rest are queued
                    if len(handed) == 5:
                        return False
                    handed.append(cev)
                    return direct(cev)

                w.direct = lagging
                await _burst(server, cms, 12)
                events = [orjson.loads(await r.content.readline()) for _ in range(12)]
        assert writes[:2] == [1, 4]
        revs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
        assert revs == sorted(revs) and len(set(revs)) == 12
    finally:
        await server.stop()


async def test_a_burst_larger_than_a_watch_may_hold_goes_out_in_parts_in_order(monkeypatch):
    writes = _record_writes(monkeypatch)
    monkeypatch.setattr(handlers, "_HELD_MAX", 1000)  # three or four configmap events
    server, cms = await _server()
    try:
        async with aiohttp.ClientSession() as s:
            r, _ = await _parked_watch(server, s)
            async with r:
                await _burst(server, cms, 20)
                events = [orjson.loads(await r.content.readline()) for _ in range(20)]
        assert writes[0] == 1 and sum(writes) == 20 and len(writes) >= 5 and max(writes) < 19
        revs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
        assert revs == sorted(revs) and len(set(revs)) == 20
    finally:
        await server.stop()


async def test_a_write_answers_with_the_bytes_it_stored_and_its_revision_as_a_get_serves_them():
    server, cms = await _server()
    try:
        url = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps"
        async with aiohttp.ClientSession() as s:
            async with s.post(url, data=b'{"data":{"k":"1"},"metadata":{"labels":{"a":"b"},"name":"a"}}',
                              headers={"Content-Type": "application/json"}) as r:
                created = await r.read()
                assert r.status == 201 and r.content_type == "application/json"
            async with s.get(f"{url}/a") as r:
                assert await r.read() == created
            async with s.patch(f"{url}/a", data=b'{"data":{"k":"2"}}', headers={"Content-Type": "application/merge-patch+json"}) as r:
                patched = await r.read()
            async with s.get(f"{url}/a") as r:
                assert await r.read() == patched
        obj = orjson.loads(patched)
        assert patched == orjson.dumps(obj) + b"\n" and obj["data"] == {"k": "2"}
        assert list(obj["metadata"])[:4] == ["name", "namespace", "uid", "resourceVersion"]
    finally:
        await server.stop()


async def test_a_review_body_is_decoded_as_any_create_body():
    """Found by the fuzzer: `spec: false` was a 500 (AttributeError in the rules review); upstream's
    create handler decodes a review into its Go struct first, with fieldValidation."""
    server, _ = await _server()
    url = f"http://127.0.0.1:{server.port}/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"
    try:
        async with aiohttp.ClientSession() as s:
            async with s.post(url, json={"spec": False}) as r:
                assert r.status == 400 and (await r.json())["message"] == (
                    'SelfSubjectRulesReview in version "v1" cannot be handled as a SelfSubjectRulesReview: json: cannot '
                    "unmarshal bool into Go struct field SelfSubjectRulesReview.spec of type v1.SelfSubjectRulesReviewSpec")
            access = url.replace("selfsubjectrulesreviews", "selfsubjectaccessreviews")
            asked = {"nonResourceAttributes": {"path": "/healthz", "verb": "get"}}
            unknown = {"spec": {**asked, "bogus": 1}}
            async with s.post(access, json=unknown, params={"fieldValidation": "Strict"}) as r:
                assert r.status == 400 and "strict decoding error: unknown field \"spec.bogus\"" in (await r.json())["message"]
            async with s.post(access, json=unknown) as r:
                assert r.status == 201 and r.headers.getall("Warning") == ['299 - "unknown field \\"spec.bogus\\""']
                assert (await r.json())["spec"] == asked
    finally:
        await server.stop()


async def test_a_boolean_parameter_is_true_unless_absent_0_or_false():
    """Upstream's Convert_Slice_string_To_bool: `watch=yes`, `watch=TRUE` and a bare `watch` are watches
    (they were lists), `watch=0` and `watch=False` lists."""
    server, _ = await _server()
    try:
        url = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps"
        async with aiohttp.ClientSession() as s:
            for value, watch in (("yes", True), ("TRUE", True), ("", True), ("0", False), ("False", False)):
                async with s.get(f"{url}?watch={value}&timeoutSeconds=1") as r:
                    body = await r.read()
                    assert r.status == 200, body
                    assert (b'"kind":"ConfigMapList"' not in body) is watch, (value, body[:200])  # (a watch: no events)
            async with s.get(f"{url}?watch&timeoutSeconds=1") as r:
                assert b'"kind":"ConfigMapList"' not in await r.read(), "a bare watch parameter is a watch"
    finally:
        await server.stop()


async def test_a_negative_limit_lists_everything():
    """Upstream's storage pages only for a positive limit; limit=-1 was a 500 (list index out of range)."""
    server, cms = await _server()
    try:
        for name in ("a", "b"):
            await server.rest.create(cms, "v1", "default", {"metadata": {"name": name}}, WriteOptions(user=SYSTEM))
        url = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps?limit=-1"
        async with aiohttp.ClientSession() as s, s.get(url) as r:
            assert r.status == 200, await r.text()
            got = orjson.loads(await r.read())
        assert [o["metadata"]["name"] for o in got["items"]] == ["a", "b"] and "continue" not in got["metadata"]
    finally:
        await server.stop()


async def test_the_accept_header_is_negotiated_by_quality_and_only_for_conversions_served():
    """An empty Accept is JSON; clauses go by quality, the specific before wildcards; a conversion needs
    `as`, `g` and `v` together, of meta.k8s.io v1 or v1beta1; nothing served is a 406 Status."""
    server, cms = await _server()
    try:
        await server.rest.create(cms, "v1", "default", {"metadata": {"name": "a"}}, WriteOptions(user=SYSTEM))
        url = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps"
        table = "application/json;as=Table;v={};g=meta.k8s.io"
        want = {"": "ConfigMapList", table.format("v1"): "Table", table.format("v1beta1"): "Table",
                table.format("v9"): 406, "application/json;as=Table": 406, "application/json;v=v1": 406,
                "application/json;as=Bogus;v=v1;g=meta.k8s.io": 406,
                f"{table.format('v9')}, application/json": "ConfigMapList",
                f"{table.format('v1')};q=0.5, application/json": "ConfigMapList",
                f"*/*, {table.format('v1')}": "Table",
                "application/json;as=PartialObjectMetadataList;v=v1beta1;g=meta.k8s.io": "PartialObjectMetadataList",
                "text/html, application/json;q=0.1": "ConfigMapList", "text/html": 406}
        got = {}
        async with aiohttp.ClientSession(skip_auto_headers=["Accept"]) as s:
            for accept in want:
                async with s.get(url, headers={"Accept": accept}) as r:
                    body = await r.json()
                    got[accept] = r.status if r.status != 200 else body["kind"]
                    if r.status == 406:
                        assert body["reason"] == "NotAcceptable"
        assert got == want
    finally:
        await server.stop()


async def test_a_path_or_method_no_route_serves_is_a_status_with_empty_details():
    """As upstream's NewGenericServerResponse: kubectl debug reads the details of the 404 of a missing
    subresource (it dereferenced the absent ones and panicked)."""
    server, cms = await _server()
    try:
        await server.rest.create(cms, "v1", "default", {"metadata": {"name": "a"}}, WriteOptions(user=SYSTEM))
        base = f"http://127.0.0.1:{server.port}"
        async with aiohttp.ClientSession() as s:
            for method, path, code in [("PATCH", "/api/v1/namespaces/default/configmaps/a/ephemeralcontainers", 404),
                                       ("GET", "/api/v1/bogus", 404), ("GET", "/apis/apps/v9", 404),
                                       ("POST", "/api/v1/namespaces/default/configmaps/a", 405)]:
                async with s.request(method, base + path, json={}) as r:
                    got = await r.json()
                assert (r.status, got["code"], got["details"]) == (code, code, {}), (method, path, got)
    finally:
        await server.stop()


async def test_an_accept_of_yaml_answers_yaml_reads_writes_and_errors():
    """Accept: application/yaml (served, and named in the 406) is answered in YAML with keys sorted, as
    upstream's YAML serializer writes it; a Table too; JSON stays JSON. It answered JSON labelled JSON."""
    server, cms = await _server()
    try:
        url = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps"
        yml = {"Accept": "application/yaml"}
        async with aiohttp.ClientSession() as s:
            async with s.post(url, json={"metadata": {"name": "a"}, "data": {"z": "1", "b": "2"}}, headers=yml) as r:
                assert (r.status, r.content_type) == (201, "application/yaml")
                text = await r.text()
            assert yaml.safe_load(text)["data"] == {"z": "1", "b": "2"}
            assert text.index("apiVersion:") < text.index("data:") < text.index("kind:") < text.index("metadata:")
            async with s.get(url, headers=yml) as r:
                listed = yaml.safe_load(await r.text())
            assert (r.content_type, listed["kind"], [i["metadata"]["name"] for i in listed["items"]]) == \
                ("application/yaml", "ConfigMapList", ["a"])
            async with s.get(url + "/nope", headers={"Accept": "application/yaml, application/json;q=0.9"}) as r:
                assert (r.status, r.content_type) == (404, "application/yaml")
                assert yaml.safe_load(await r.text())["reason"] == "NotFound"
            async with s.get(url, headers={"Accept": "application/yaml;as=Table;v=v1;g=meta.k8s.io"}) as r:
                assert yaml.safe_load(await r.text())["kind"] == "Table"
            async with s.get(url + "/a", headers={"Accept": "application/json, application/yaml"}) as r:
                assert r.content_type == "application/json" and (await r.json())["metadata"]["name"] == "a"
    finally:
        await server.stop()



async def test_a_large_answer_is_written_in_yaml_or_protobuf_in_a_worker_thread(monkeypatch):
    """An answer's conversion to YAML (PyYAML) or protobuf leaves the event loop where its JSON is large: a
    list of one 3 MB ConfigMap asked for in YAML held the loop for 16 CPU s (fuzz50), in protobuf 0.2 s
    (only lists of over 100 items were encoded in a thread); a small one stays on it."""
    import threading
    threads: list[tuple[str, str, bool]] = []

    def recorded(fn, media):
        def call(obj, *args, **kwargs):
            threads.append((media, obj["kind"], threading.current_thread() is threading.main_thread()))
            return fn(obj, *args, **kwargs)
        return call
    monkeypatch.setattr(handlers.yaml, "safe_dump", recorded(handlers.yaml.safe_dump, "yaml"))
    monkeypatch.setattr(handlers.protobuf_encode, "encode", recorded(handlers.protobuf_encode.encode, "protobuf"))
    server, cms = await _server()
    try:
        url = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps"
        accepts = ("application/yaml", "application/vnd.kubernetes.protobuf")
        async with aiohttp.ClientSession() as s:
            async with s.post(url, json={"metadata": {"name": "a"}}) as r:
                assert r.status == 201
            for accept in accepts:
                async with s.get(url + "/a", headers={"Accept": accept}) as r:
                    assert (r.status, r.content_type) == (200, accept)
            async with s.post(url, json={"metadata": {"name": "b"}, "data": {f"k{i}": "v" * 10 for i in range(20_000)}}) as r:
                assert r.status == 201
            for path in ("/b", ""):
                for accept in accepts:
                    async with s.get(url + path, headers={"Accept": accept}) as r:
                        body = await r.read()
                    assert (r.status, r.content_type) == (200, accept)
            assert body[:4] == b"k8s\x00" and len(body) > 20_000 * 14
        assert threads == [("yaml", "ConfigMap", True), ("protobuf", "ConfigMap", True),
                           ("yaml", "ConfigMap", False), ("protobuf", "ConfigMap", False),
                           ("yaml", "ConfigMapList", False), ("protobuf", "ConfigMapList", False)]
    finally:
        await server.stop()