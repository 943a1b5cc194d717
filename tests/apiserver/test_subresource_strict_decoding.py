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


async def test_a_scale_patch_that_repeats_a_key_is_judged_as_any_patch(tmp_path):
    """The patchers' strict decoding of a /scale patch as of any patch: a merge or strategic merge patch's
    repeated key is the 422 of its result's strict errors under Strict and a warning under Warn; an
    apply configuration's is yaml.UnmarshalStrict's 400 under Strict."""
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    scale = f"http://127.0.0.1:{server.port}/apis/apps/v1/namespaces/default/deployments/d/scale"
    try:
        async with aiohttp.ClientSession() as s:
            async with s.post(scale.rsplit("/", 2)[0], json=DEPLOYMENT) as r:
                assert r.status == 201
            got = {}
            for ctype, body in [("application/merge-patch+json", '{"spec": {"replicas": 2, "replicas": 3}}'),
                                ("application/strategic-merge-patch+json", '{"spec": {"replicas": 2, "replicas": 3}}'),
                                ("application/apply-patch+yaml", "apiVersion: autoscaling/v1\nkind: Scale\n"
                                                                 "spec:\n  replicas: 2\n  replicas: 3\n")]:
                for fv in ("Strict", "Warn"):
                    url = f"{scale}?dryRun=All&fieldValidation={fv}&fieldManager=m&force=true" if "apply" in ctype else \
                        f"{scale}?dryRun=All&fieldValidation={fv}"
                    async with s.patch(url, data=body, headers={"Content-Type": ctype}) as r:
                        got[ctype.split("/")[1], fv] = r.status, (await r.json()).get("message", ""), \
                            r.headers.getall("Warning", [])
            async with s.get(scale) as r:
                replicas = (await r.json())["spec"]["replicas"]
        for kind in ("merge-patch+json", "strategic-merge-patch+json"):
            code, message, _ = got[kind, "Strict"]
            assert code == 422 and message.endswith('strict decoding error: duplicate field "spec.replicas"'), (kind, code, message)
            code, _, warnings = got[kind, "Warn"]
            assert code == 200 and warnings == ["299 - \"duplicate field \\\"spec.replicas\\\"\""], (kind, code, warnings)
        code, message, _ = got["apply-patch+yaml", "Strict"]
        assert code == 400 and message.startswith("error strict decoding YAML: error converting YAML to JSON: yaml: "
                                                  'unmarshal errors:\n  line 5: key "replicas" already set in map'), message
        assert got["apply-patch+yaml", "Warn"][0] == 200 and len(got["apply-patch+yaml", "Warn"][2]) == 1
        assert replicas == 1
    finally:
        await server.stop()
