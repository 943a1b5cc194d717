"""Warnings gathered before a request fails go out with its error, as upstream's warning recorder
writes each Warning header as it is added: the unknown and duplicate fields of a refused write
(kubectl prints them above the error), a deprecated version's warning on a 404."""

import aiohttp

from nanokube.apiserver.app import APIServer
from nanokube.store.memory import MemoryStore

UNKNOWN = '299 - "unknown field \\"bogus\\""'


async def test_a_refused_write_carries_the_warnings_of_its_decoding():
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    base = f"http://127.0.0.1:{server.port}"
    cms = f"{base}/api/v1/namespaces/default/configmaps"
    bad = {"bad key!": "x"}
    try:
        async with aiohttp.ClientSession() as s:
            got = {}
            async with s.post(cms, json={"metadata": {"name": "a"}, "bogus": 1}) as r:
                got["created"] = r.status, r.headers.getall("Warning", [])
            async with s.post(cms, json={"metadata": {"name": "b"}, "bogus": 1, "data": bad}) as r:
                got["create"] = r.status, r.headers.getall("Warning", [])
            async with s.put(f"{cms}/a", json={"metadata": {"name": "a"}, "bogus": 1, "data": bad}) as r:
                got["update"] = r.status, r.headers.getall("Warning", [])
            async with s.patch(f"{cms}/a", data=b'{"data":{"k":"1","k":"2","bad key!":"x"}}',
                               headers={"Content-Type": "application/merge-patch+json"}) as r:
                got["patch"] = r.status, r.headers.getall("Warning", [])
            async with s.get(f"{base}/api/v1/namespaces/default/endpoints/missing") as r:
                got["deprecated"] = r.status, r.headers.getall("Warning", [])
        assert got == {
            "created": (201, [UNKNOWN]),
            "create": (422, [UNKNOWN]),
            "update": (422, [UNKNOWN]),
            "patch": (422, ['299 - "duplicate field \\"data.k\\""']),
            "deprecated": (404, ['299 - "v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice"']),
        }
    finally:
        await server.stop()


async def test_a_deprecated_versions_warning_comes_before_the_requests_own():
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    eps = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/endpoints"
    try:
        async with aiohttp.ClientSession() as s, s.post(eps, json={"metadata": {"name": "e"}, "bogus": 1}) as r:
            got = r.status, r.headers.getall("Warning", [])
        assert got == (201, ['299 - "v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice"', UNKNOWN])
    finally:
        await server.stop()


async def test_a_mutating_webhooks_warning_stays_on_a_write_refused_after_it():
    """A mutating webhook's warnings are recorded as it answers (upstream's recorder writes them then),
    so a create its object then fails validation for still carries them; a validating webhook's
    refusal carries its own (and the mutating one's) once each."""
    from tests.apiserver.admission.server import WebhookServer, allow, deny

    hooks = WebhookServer().start()
    hooks.handlers["/m"] = lambda r: allow(r, warnings=["mind the webhook"])
    hooks.handlers["/v"] = lambda r: (deny(r, "no", warnings=["second"]) if r["request"]["name"] == "refused"
                                      else allow(r))
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    base = f"http://127.0.0.1:{server.port}"
    rules = [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]

    def webhook(name, path):
        return {"name": name, "clientConfig": {"url": hooks.url(path), "caBundle": hooks.ca.bundle}, "rules": rules,
                "sideEffects": "None", "admissionReviewVersions": ["v1"]}
    try:
        async with aiohttp.ClientSession() as s:
            for plural, name, path in (("mutatingwebhookconfigurations", "m.example.com", "/m"),
                                       ("validatingwebhookconfigurations", "v.example.com", "/v")):
                async with s.post(f"{base}/apis/admissionregistration.k8s.io/v1/{plural}",
                                  json={"metadata": {"name": name}, "webhooks": [webhook(name, path)]}) as r:
                    assert r.status == 201, await r.text()
            cms = f"{base}/api/v1/namespaces/default/configmaps"
            async with s.post(cms, json={"metadata": {"name": "invalid"}, "data": {"bad key!": "x"}}) as r:
                invalid = r.status, r.headers.getall("Warning", [])
            async with s.post(cms, json={"metadata": {"name": "refused"}}) as r:
                refused = r.status, r.headers.getall("Warning", [])
        assert invalid == (422, ['299 - "mind the webhook"'])
        assert refused[0] == 403 and ",".join(refused[1]).count("mind the webhook") == 1 and "second" in refused[1][-1]
    finally:
        await server.stop()
        hooks.stop()
