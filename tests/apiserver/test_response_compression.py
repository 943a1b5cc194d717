"""APIResponseCompression: an answer of more than 128 KiB is gzipped for a client whose
Accept-Encoding names gzip (upstream's deferredResponseWriter), a smaller one or one for another
client is sent as it is."""

import asyncio
import json
import threading

import pytest

from nanokube.apiserver.rest import SYSTEM, WriteOptions
from nanokube.metrics.provider import CUSTOM_PREFIX
from tests.apiserver.test_rest_managedfields import call
from tests.served import served

CMS = "/api/v1/namespaces/default/configmaps"


async def _get(api, path: str, accept_encoding: str | None) -> tuple[dict, dict]:
    """The answer's headers and its body (urllib3 undoes a gzip)."""
    def send():
        headers = {"Accept": "application/json"} | ({"Accept-Encoding": accept_encoding} if accept_encoding else {})
        response = api.call_api(*api.param_serialize("GET", path, header_params=headers)[:4])
        response.read()
        assert response.status == 200
        return dict(response.getheaders()), json.loads(response.data)
    return await asyncio.to_thread(send)


async def test_an_answer_over_128_kib_is_gzipped_for_a_client_that_accepts_it(tmp_path):
    async with served(tmp_path) as (_, api):
        for name, size in (("big", 128 * 1024), ("small", 1024)):
            await call(api, "POST", CMS, {"metadata": {"name": name}, "data": {"k": "x" * size}})
        for path in (f"{CMS}/big", CMS):  # a GET and a LIST (the list's body is written in slices otherwise)
            plain_headers, plain = await _get(api, path, None)
            assert "Content-Encoding" not in plain_headers and int(plain_headers["Content-Length"]) > 128 * 1024
            headers, got = await _get(api, path, "deflate, gzip")
            assert headers["Content-Encoding"] == "gzip" and headers["Vary"] == "Accept-Encoding"
            assert int(headers["Content-Length"]) < 8 * 1024  # 128 KiB of one letter, gzipped
            for answer in (plain, got):
                if answer["kind"] == "ConfigMapList":
                    answer["metadata"].pop("resourceVersion")  # other namespaces' writes move it between the reads
            assert got == plain
        for path, accept_encoding in ((f"{CMS}/small", "gzip"), (f"{CMS}/big", "deflate"),
                                      (f"{CMS}/big", "gzip;q=0.5"), (f"{CMS}/big", "identity")):
            headers, _ = await _get(api, path, accept_encoding)
            assert "Content-Encoding" not in headers, (path, accept_encoding)


async def test_the_metrics_apis_answers_over_128_kib_are_gzipped_as_their_servers_gzip_them(tmp_path):
    """The metrics APIs answered in-process (routed apart from the built-in kinds) are gzipped as
    metrics-server's and an adapter's SerializeObject gzips them, kube-aggregator passing that on."""
    metric = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/configmaps/*/qps"
    async with served(tmp_path) as (server, api):
        configmaps = server.index.get("", "v1", "configmaps")
        for i in range(400):  # ~350 bytes each in the MetricValueList
            await server.rest.create(configmaps, "v1", "default", {"metadata": {
                "name": f"{i:03}-" + "m" * 200, "annotations": {CUSTOM_PREFIX + "qps": "1"}}}, WriteOptions(user=SYSTEM))
        plain_headers, plain = await _get(api, metric, None)
        assert "Content-Encoding" not in plain_headers and int(plain_headers["Content-Length"]) > 128 * 1024
        headers, got = await _get(api, metric, "gzip")
        assert headers["Content-Encoding"] == "gzip" and headers["Vary"] == "Accept-Encoding"
        assert int(headers["Content-Length"]) < 32 * 1024
        for answer in (plain, got):
            for item in answer["items"]:
                item.pop("timestamp")
        assert got == plain and len(got["items"]) == 400


async def test_openapi_v2_is_gzipped_as_gziphandler_gzips_it(tmp_path):
    """kube-openapi serves /openapi/v2 through NYTimes gziphandler: `Vary: Accept-Encoding` on every
    answer, the document gzipped for a client whose Accept-Encoding gives gzip a quality above 0,
    whatever its size past 1400 bytes, in JSON and in protobuf alike."""
    async with served(tmp_path) as (_, api):
        plain_headers, plain = await _get(api, "/openapi/v2", None)
        assert "Content-Encoding" not in plain_headers
        assert plain_headers["Vary"] == "Accept-Encoding, Accept"  # (urllib3 joins repeated headers)
        for accept_encoding in ("gzip", "deflate, gzip;q=0.5"):
            headers, got = await _get(api, "/openapi/v2", accept_encoding)
            assert headers["Content-Encoding"] == "gzip" and headers["ETag"] == plain_headers["ETag"]
            assert int(headers["Content-Length"]) < int(plain_headers["Content-Length"]) // 5
            assert got == plain
        headers, _ = await _get(api, "/openapi/v2", "gzip;q=0")
        assert "Content-Encoding" not in headers

        def protobuf(accept_encoding: str) -> tuple[dict, bytes]:
            headers = {"Accept": "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
                       "Accept-Encoding": accept_encoding}
            response = api.call_api(*api.param_serialize("GET", "/openapi/v2", header_params=headers)[:4])
            response.read()
            return dict(response.getheaders()), response.data
        (pb_headers, pb), (gz_headers, gz) = await asyncio.gather(
            asyncio.to_thread(protobuf, "identity"), asyncio.to_thread(protobuf, "gzip"))
        assert "Content-Encoding" not in pb_headers and gz_headers["Content-Encoding"] == "gzip" and gz == pb


async def test_response_sizes_observe_the_bytes_sent_gzipped(tmp_path):
    """apiserver_response_sizes observes what the ResponseWriterDelegator counted: the bytes written
    below the deferredResponseWriter's gzip writer, so a gzipped answer's compressed size."""
    series = ('apiserver_response_sizes_sum{component="apiserver",group="",resource="configmaps",'
              'scope="namespace",subresource="",verb="LIST",version="v1"}')

    async def observed() -> float:
        def scrape():
            response = api.call_api(*api.param_serialize("GET", "/metrics")[:4])
            response.read()
            return response.data.decode()
        text = await asyncio.to_thread(scrape)
        return next((float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(series + " ")), 0.0)

    async with served(tmp_path) as (_, api):
        await call(api, "POST", CMS, {"metadata": {"name": "big"}, "data": {"k": "x" * 128 * 1024}})
        before = await observed()
        headers, _ = await _get(api, CMS, "gzip")
        assert headers["Content-Encoding"] == "gzip"
        assert await observed() - before == int(headers["Content-Length"])


async def test_a_gzipped_openapi_v2_made_across_a_crd_change_is_not_served_after_it(tmp_path, monkeypatch):
    """A request's /openapi/v2 gzip, made from the document it read before a CRD came to be served,
    stays that request's: the next gzipped answer has the CRD (it kept serving the document
    without it until the next change)."""
    from nanokube.apiserver import app
    from tests.controllers import tries
    from tests.served import send

    started, go, real = threading.Event(), threading.Event(), app.gzipped

    def held(body, level):
        if not started.is_set():
            started.set()
            go.wait(60)
        return real(body, level)
    monkeypatch.setattr(app, "gzipped", held)
    async with served(tmp_path) as (_, api):
        first = asyncio.ensure_future(_get(api, "/openapi/v2", "gzip"))
        assert await asyncio.to_thread(started.wait, 60)
        code, got = await send(api, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", {
            "metadata": {"name": "gadgets.example.com"}, "spec": {
                "group": "example.com", "scope": "Namespaced", "names": {"plural": "gadgets", "kind": "Gadget"},
                "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                    "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}})
        assert code == 201, got
        for _ in tries():
            _, plain = await _get(api, "/openapi/v2", None)
            if "com.example.v1.Gadget" in plain["definitions"]:
                break
            await asyncio.sleep(0.05)
        else:
            pytest.fail("the CRD was never published")
        go.set()
        await first
        headers, gz = await _get(api, "/openapi/v2", "gzip")
        assert headers["Content-Encoding"] == "gzip" and "com.example.v1.Gadget" in gz["definitions"]
