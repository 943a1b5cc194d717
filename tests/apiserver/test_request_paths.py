"""How a request's path is routed, as kube-apiserver's router (go-restful's CurlyRouter) reads it:
trailing slashes are trimmed, but a doubled slash leaves an empty segment that no route matches."""

import aiohttp
import orjson
from yarl import URL

from nanokube.apiserver.app import APIServer
from nanokube.apiserver.rest import SYSTEM, WriteOptions
from nanokube.store.memory import MemoryStore


async def test_a_doubled_slash_matches_no_route_and_touches_nothing():
    """An empty segment is a 404 (kubernetes/kubernetes#70942: //version is not /version), for any
    method: DELETE /api/v1//namespaces/default/configmaps deleted every ConfigMap of the namespace.
    A trailing slash is trimmed, and a proxy's own path may hold empty segments."""
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    cms = server.index.get("", "v1", "configmaps")
    await server.rest.create(cms, "v1", "default", {"metadata": {"name": "a"}}, WriteOptions(user=SYSTEM))
    base = f"http://127.0.0.1:{server.port}"
    try:
        async with aiohttp.ClientSession() as s:
            got = {}
            for method, path in [("GET", "/api/v1/namespaces/default/configmaps/a/"),
                                 ("GET", "/api/v1/namespaces/default/configmaps/a%2F"),
                                 ("DELETE", "/api/v1//namespaces/default/configmaps"),
                                 ("DELETE", "//api/v1/namespaces/default/configmaps/a"),
                                 ("GET", "/api/v1/namespaces/default//configmaps/a"),
                                 ("GET", "/apis//apps/v1/namespaces/default/deployments"),
                                 ("GET", "/api/v1/watch/namespaces//configmaps?timeoutSeconds=1"),
                                 ("POST", "/api/v1/namespaces//default/configmaps")]:
                async with s.request(method, URL(base + path, encoded=True), json={"metadata": {"name": "b"}}) as r:
                    got[method, path] = r.status, orjson.loads(await r.read() or b"{}").get("reason") \
                        if r.content_type == "application/json" and not r.headers.get("Transfer-Encoding") else None
            async with s.get(f"{base}/api/v1/namespaces/default/configmaps") as r:
                left = [o["metadata"]["name"] for o in (await r.json())["items"]]
        assert [v for k, v in got.items() if k[1].endswith(("/a/", "%2F"))] == [(200, None)] * 2, got
        assert {v for k, v in got.items() if not k[1].endswith(("/a/", "%2F"))} == {(404, "NotFound")}, got
        assert left == ["a"]
    finally:
        await server.stop()


async def test_an_update_whose_body_names_no_object_is_a_400():
    """checkName: the update handler's ObjectName refuses an object with no name (errEmptyName), whether
    the body leaves metadata.name out or empty; the URL's name is not taken for it."""
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    cms = server.index.get("", "v1", "configmaps")
    await server.rest.create(cms, "v1", "default", {"metadata": {"name": "a"}, "data": {"k": "v"}}, WriteOptions(user=SYSTEM))
    url = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps/a"
    try:
        async with aiohttp.ClientSession() as s:
            got = []
            for body in ({"data": {"k": "x"}}, {"metadata": {}, "data": {"k": "x"}}, {"metadata": {"name": ""}, "data": {"k": "x"}}):
                async with s.put(url, json=body) as r:
                    got.append((r.status, (await r.json()).get("message")))
            async with s.get(url) as r:
                data = (await r.json())["data"]
        assert got == [(400, "the name of the object (a based on URL) was undeterminable: name must be provided")] * 3, got
        assert data == {"k": "v"}
    finally:
        await server.stop()


async def test_a_patch_or_scale_write_that_leaves_no_name_is_a_400():
    """The patch handler runs checkName on the patched object, and /scale's PUT and PATCH are the update
    and patch handlers: a result with its name removed or emptied, or a Scale that names none, is
    errEmptyName's 400 and changes nothing. An apply configuration that names nothing keeps the object's
    name (the merge of it with the live object holds it)."""
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    base = f"http://127.0.0.1:{server.port}"
    cm, deploy = f"{base}/api/v1/namespaces/default/configmaps/a", f"{base}/apis/apps/v1/namespaces/default/deployments/d"
    deployment = {"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
        "metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}
    try:
        async with aiohttp.ClientSession() as s:
            async with s.post(cm.rsplit("/", 1)[0], json={"metadata": {"name": "a"}}) as r:
                assert r.status == 201
            async with s.post(deploy.rsplit("/", 1)[0], json=deployment) as r:
                assert r.status == 201
            got = []
            for method, url, body, ctype in [
                    ("PATCH", cm, {"metadata": {"name": None}}, "application/merge-patch+json"),
                    ("PATCH", cm, [{"op": "replace", "path": "/metadata/name", "value": ""}], "application/json-patch+json"),
                    ("PUT", deploy + "/scale", {"spec": {"replicas": 3}}, "application/json"),
                    ("PATCH", deploy + "/scale", {"metadata": {"name": None}, "spec": {"replicas": 3}}, "application/merge-patch+json"),
                    ("PATCH", cm + "?fieldManager=m", {"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"}},
                     "application/apply-patch+yaml")]:
                async with s.request(method, url, json=body, headers={"Content-Type": ctype}) as r:
                    got.append((r.status, (await r.json()).get("message")))
            async with s.get(deploy) as r:
                replicas = (await r.json())["spec"]["replicas"]
        refused = [(400, f"the name of the object ({n} based on URL) was undeterminable: name must be provided")
                   for n in ("a", "a", "d", "d")]
        assert got[:4] == refused and got[4][0] == 200, got
        assert replicas == 1
    finally:
        await server.stop()
