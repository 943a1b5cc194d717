"""A subresource's body is decoded as any create's or update's, strictly per fieldValidation: its
unknown and repeated fields are one strict decoding error under Strict (a 400, before the subresource
looks up anything) or a warning each under Warn, in the order sigs.k8s.io/json's decoder meets them."""

import aiohttp

from nanokube.apiserver.app import APIServer
from nanokube.pki.ca import ensure_pki
from nanokube.store.memory import MemoryStore
from tests.apiserver.test_request_body import admin_context

DEPLOYMENT = {"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
    "metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}


async def test_subresource_bodies_report_unknown_and_repeated_fields_per_field_validation(tmp_path):
    pki = ensure_pki(str(tmp_path))
    server = APIServer(MemoryStore(), pki, port=0)
    server.rest.admission.disable("ServiceAccount")
    await server.start()
    ns = f"{server.url}/api/v1/namespaces/default"
    scale = f"{server.url}/apis/apps/v1/namespaces/default/deployments/d/scale"
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=admin_context(pki, tmp_path))) as s:
            async with s.post(scale.rsplit("/", 2)[0], json=DEPLOYMENT) as r:
                assert r.status == 201
            async with s.post(f"{ns}/serviceaccounts", json={"metadata": {"name": "sa"}}) as r:
                assert r.status == 201
            cases = [
                ("POST", f"{ns}/serviceaccounts/sa/token",
                 '{"spec": {"audiences": ["a"], "audiences": ["b"]}, "bogus": 1}', "TokenRequest",
                 ['duplicate field "spec.audiences"', 'unknown field "bogus"']),
                ("POST", f"{ns}/pods/missing/eviction",
                 '{"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "missing"}, "bogus": 1}', "Eviction",
                 ['unknown field "bogus"']),
                ("POST", f"{ns}/pods/missing/binding",
                 '{"metadata": {"name": "missing", "name": "missing"}, "target": {"name": "n", "bogus": 1}}', "Binding",
                 ['duplicate field "metadata.name"', 'unknown field "target.bogus"']),
                ("PUT", scale, '{"metadata": {"name": "d"}, "spec": {"replicas": 2, "replicas": 3}, "bogus": 1}', "Scale",
                 ['duplicate field "spec.replicas"', 'unknown field "bogus"']),
            ]
            got, warned = [], []
            for method, url, body, kind, texts in cases:
                h = {"Content-Type": "application/json"}
                async with s.request(method, url + "?dryRun=All&fieldValidation=Strict", data=body, headers=h) as r:
                    got.append((r.status, (await r.json()).get("message", "")))
                async with s.request(method, url + "?dryRun=All&fieldValidation=Warn", data=body, headers=h) as r:
                    warned.append([w[len('299 - "'):-1].replace('\\"', '"') for w in r.headers.getall("Warning", [])])
        for (code, message), (_, _, _, kind, texts), warnings in zip(got, cases, warned):
            version = "v1"
            assert (code, message) == (400, f'{kind} in version "{version}" cannot be handled as a {kind}: '
                                            f'strict decoding error: {", ".join(texts)}'), (code, message)
            assert warnings == texts, (kind, warnings)
    finally:
        await server.stop()
