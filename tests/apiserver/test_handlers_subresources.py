"""What the HTTP handlers answer beside the verbs a resource serves: a watch negotiates only media
types that stream (YAML does not: 406, as upstream's NegotiateOutputMediaTypeStream), and a
subresource that serves its object (pods/status, pods/ephemeralcontainers, pods/resize) is read
and written, never deleted through."""

import aiohttp
import orjson
import yaml

from nanokube.apiserver.app import APIServer
from nanokube.apiserver.rest import SYSTEM, WriteOptions
from nanokube.store.memory import MemoryStore


async def _server():
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    return server


async def test_a_watch_that_negotiates_yaml_is_not_acceptable():
    server = await _server()
    try:
        url = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1"
        async with aiohttp.ClientSession(skip_auto_headers=["Accept"]) as s:
            for accept in ("application/yaml", "application/json;q=0.5, application/yaml"):
                async with s.get(url, headers={"Accept": accept}) as r:
                    assert r.status == 406, accept
                    assert r.content_type == "application/yaml"  # the error itself is negotiated as any
                    status = yaml.safe_load(await r.text())
                assert (status["kind"], status["reason"], status["code"]) == ("Status", "NotAcceptable", 406)
                assert status["message"] == ("only the following media types are accepted: application/json;stream=watch, "
                                             "application/vnd.kubernetes.protobuf;stream=watch")
            for accept in ("application/yaml;q=0.5, application/json", "*/*", "application/json;stream=watch"):
                async with s.get(url, headers={"Accept": accept}) as r:
                    assert (r.status, r.content_type) == (200, "application/json"), accept
                    await r.read()
    finally:
        await server.stop()


async def test_a_subresource_of_the_object_is_not_deleted_through():
    server = await _server()
    pods = server.index.get("", "v1", "pods")
    try:
        await server.rest.create(pods, "v1", "default", {"metadata": {"name": "p"}, "spec": {
            "containers": [{"name": "c", "image": "nginx"}]}}, WriteOptions(user=SYSTEM))
        base = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/pods/p"
        async with aiohttp.ClientSession() as s:
            for sub in ("status", "ephemeralcontainers", "resize"):
                async with s.delete(f"{base}/{sub}") as r:
                    got = orjson.loads(await r.read())
                assert (r.status, got["reason"]) == (405, "MethodNotAllowed"), sub
                async with s.get(f"{base}/{sub}") as r:
                    assert r.status == 200 and (await r.json())["kind"] == "Pod"
        assert (await server.rest.get(pods, "v1", "default", "p"))["metadata"]["name"] == "p"
    finally:
        await server.stop()
