"""APIResponseCompression: an answer of more than 128 KiB is gzipped for a client whose
Accept-Encoding names gzip (upstream's deferredResponseWriter), a smaller one or one for another
client is sent as it is."""

import asyncio
import json

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
