"""The answer's media type is negotiated first, as every upstream handler calls NegotiateOutputMediaType
before it reads the body: an Accept header the endpoint cannot serve is a 406 and changes nothing. A
DELETE's answer is transformed as any write's (transformResponseObject): an object left in place, or a
DeleteCollection's list, as the Table or PartialObjectMetadata(List) asked for; a Status as it is."""

import aiohttp

from nanokube.apiserver.app import APIServer
from nanokube.pki.ca import ensure_pki
from nanokube.store.memory import MemoryStore
from tests.apiserver.test_request_body import admin_context

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
PARTIAL = "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"
PARTIAL_LIST = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
DEPLOYMENT = {"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
    "metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}


async def test_an_unacceptable_accept_is_a_406_before_any_write():
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    base = f"http://127.0.0.1:{server.port}"
    cms, deploys = f"{base}/api/v1/namespaces/default/configmaps", f"{base}/apis/apps/v1/namespaces/default/deployments"
    try:
        async with aiohttp.ClientSession() as s:
            for url, body in ((cms, {"metadata": {"name": "kept"}, "data": {"a": "b"}}), (deploys, DEPLOYMENT)):
                async with s.post(url, json=body) as r:
                    assert r.status == 201
            got = []
            for accept in ("text/html", "application/json;as=Bogus;v=v1;g=meta.k8s.io"):
                h = {"Accept": accept}
                for method, url, body, ctype in [
                        ("POST", cms, {"metadata": {"name": "new"}}, "application/json"),
                        ("PUT", f"{cms}/kept", {"metadata": {"name": "kept"}, "data": {"a": "c"}}, "application/json"),
                        ("PATCH", f"{cms}/kept", {"data": {"a": "d"}}, "application/merge-patch+json"),
                        ("DELETE", f"{cms}/kept", None, "application/json"),
                        ("DELETE", cms, None, "application/json"),
                        ("PATCH", f"{deploys}/d/scale", {"spec": {"replicas": 5}}, "application/merge-patch+json")]:
                    async with s.request(method, url, json=body, headers={**h, "Content-Type": ctype}) as r:
                        got.append((r.status, (await r.json()).get("reason")))
            async with s.get(cms) as r:
                left = {o["metadata"]["name"]: o.get("data") for o in (await r.json())["items"]}
            async with s.get(f"{deploys}/d") as r:
                replicas = (await r.json())["spec"]["replicas"]
        assert set(got) == {(406, "NotAcceptable")}, got
        assert left.get("kept") == {"a": "b"} and "new" not in left and replicas == 1
    finally:
        await server.stop()


async def test_a_delete_answers_in_the_form_asked_for():
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    cms = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps"
    try:
        async with aiohttp.ClientSession() as s:
            for name, finalizers in (("held", ["example.com/x"]), ("gone", [])):
                async with s.post(cms, json={"metadata": {"name": name, "finalizers": finalizers}}) as r:
                    assert r.status == 201
            got = {}
            for what, url, accept in [("held-table", f"{cms}/held", TABLE), ("held-partial", f"{cms}/held", PARTIAL),
                                      ("held-partiallist", f"{cms}/held", PARTIAL_LIST),
                                      ("gone-table", f"{cms}/gone", TABLE),
                                      ("all-table", cms, TABLE), ("all-partiallist", cms, PARTIAL_LIST),
                                      ("all-partial", cms, PARTIAL)]:
                async with s.delete(url, json={"dryRun": ["All"]}, headers={"Accept": accept}) as r:
                    got[what] = r.status, await r.json()
        kinds = {k: (code, body["kind"]) for k, (code, body) in got.items()}
        assert kinds == {"held-table": (200, "Table"), "held-partial": (200, "PartialObjectMetadata"),
                         "held-partiallist": (406, "Status"), "gone-table": (200, "Status"),
                         "all-table": (200, "Table"), "all-partiallist": (200, "PartialObjectMetadataList"),
                         "all-partial": (406, "Status")}, kinds
        assert [row["cells"][0] for row in got["all-table"][1]["rows"]] == ["gone", "held"]
        assert [o["metadata"]["name"] for o in got["all-partiallist"][1]["items"]] == ["gone", "held"]
        assert got["held-partial"][1]["metadata"]["finalizers"] == ["example.com/x"]
        assert "is a list" in got["all-partial"][1]["message"]
    finally:
        await server.stop()


async def test_a_scale_answers_in_the_form_asked_for_on_reads_and_writes():
    """The /scale handlers transform their answer as any other's: a built-in workload's Scale as the Table
    its ScaleREST.ConvertToTable prints on a read and on a write, any Scale as PartialObjectMetadata, and
    PartialObjectMetadataList of one Scale is asPartialObjectMetadataList's 406."""
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    scale = f"http://127.0.0.1:{server.port}/apis/apps/v1/namespaces/default/deployments/d/scale"
    try:
        async with aiohttp.ClientSession() as s:
            async with s.post(scale.rsplit("/", 2)[0], json=DEPLOYMENT) as r:
                assert r.status == 201
            got = {}
            for method, accept in [("GET", TABLE), ("PATCH", TABLE), ("GET", PARTIAL), ("PATCH", PARTIAL),
                                   ("GET", PARTIAL_LIST), ("PATCH", PARTIAL_LIST)]:
                async with s.request(method, scale + "?dryRun=All", json={"spec": {"replicas": 2}} if method == "PATCH" else None,
                                     headers={"Accept": accept, "Content-Type": "application/merge-patch+json"}) as r:
                    body = await r.json()
                    got[method, accept.split(";")[1]] = r.status, body["kind"]
        assert got == {("GET", "as=Table"): (200, "Table"), ("PATCH", "as=Table"): (200, "Table"),
                       ("GET", "as=PartialObjectMetadata"): (200, "PartialObjectMetadata"),
                       ("PATCH", "as=PartialObjectMetadata"): (200, "PartialObjectMetadata"),
                       ("GET", "as=PartialObjectMetadataList"): (406, "Status"),
                       ("PATCH", "as=PartialObjectMetadataList"): (406, "Status")}, got
    finally:
        await server.stop()


async def test_endpoints_without_a_table_convertor_refuse_a_table_first_and_convert_to_partial_metadata(tmp_path):
    """AllowsMediaTypeTransform serves a Table only where the endpoint's storage converts to one, which
    reviews, TokenRequests, bindings and evictions do not: a 406 before anything is done (the pod is not
    evicted). PartialObjectMetadata is served everywhere: a review's or TokenRequest's answer converted
    (a Status as it is); PartialObjectMetadataList of one object is the 406 of asPartialObjectMetadataList."""
    pki = ensure_pki(str(tmp_path))
    server = APIServer(MemoryStore(), pki, port=0)
    server.rest.admission.disable("ServiceAccount")
    await server.start()
    ns = f"{server.url}/api/v1/namespaces/default"
    review = f"{server.url}/apis/authentication.k8s.io/v1/tokenreviews"
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=admin_context(pki, tmp_path))) as s:
            async with s.post(f"{ns}/serviceaccounts", json={"metadata": {"name": "sa"}}) as r:
                assert r.status == 201
            async with s.post(f"{ns}/pods", json={"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}) as r:
                assert r.status == 201
            got = {}
            for what, url, body in [("review", review, {"spec": {"token": "x"}}),
                                    ("token", f"{ns}/serviceaccounts/sa/token", {"spec": {"audiences": ["a"]}}),
                                    ("eviction", f"{ns}/pods/p/eviction", {"apiVersion": "policy/v1", "kind": "Eviction",
                                                                           "metadata": {"name": "p"}})]:
                for accept in (TABLE, PARTIAL, PARTIAL_LIST):
                    if what == "eviction" and accept != TABLE:
                        continue
                    async with s.post(url, json=body, headers={"Accept": accept}) as r:
                        got[what, accept.split(";")[1]] = r.status, (await r.json())["kind"]
            async with s.get(f"{ns}/pods/p") as r:
                pod = await r.json()
        assert got == {("review", "as=Table"): (406, "Status"), ("review", "as=PartialObjectMetadata"): (201, "PartialObjectMetadata"),
                       ("review", "as=PartialObjectMetadataList"): (406, "Status"),
                       ("token", "as=Table"): (406, "Status"), ("token", "as=PartialObjectMetadata"): (201, "PartialObjectMetadata"),
                       ("token", "as=PartialObjectMetadataList"): (406, "Status"),
                       ("eviction", "as=Table"): (406, "Status")}, got
        assert "deletionTimestamp" not in pod["metadata"] and not (pod.get("status") or {}).get("conditions")
    finally:
        await server.stop()
