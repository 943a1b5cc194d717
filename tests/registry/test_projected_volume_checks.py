"""A projected volume's validation and overlapping-path warnings are remembered for the volumes found
clean (every pod carries the same token volume under its own name): a volume that differs in any
value is still checked, its errors and warnings name its own place and volume, and a clean one
repeats no finding of another. Over HTTP, as a client sees them."""

from __future__ import annotations

import aiohttp
import pytest

from nanokube.apiserver.app import APIServer
from nanokube.store.memory import MemoryStore


def _token_volume(name: str, expiration: int = 3607, namespace_path: str = "namespace") -> dict:
    return {"name": name, "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": expiration, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": namespace_path,
                                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
    ]}}


def _pod(name: str, *volumes: dict) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"serviceAccountName": "default", "containers": [{"name": "c", "image": "busybox"}],
                     "volumes": list(volumes)}}


@pytest.fixture
async def pods():
    srv = APIServer(MemoryStore(), None, port=0)
    srv.rest.admission.disable("ServiceAccount")  # the volumes are the test's own
    await srv.start()
    try:
        async with aiohttp.ClientSession() as s:
            yield s, f"http://127.0.0.1:{srv.port}/api/v1/namespaces/default/pods"
    finally:
        await srv.stop()


async def _create(s: aiohttp.ClientSession, url: str, body: dict) -> tuple[int, list[str], list[tuple[str, str]]]:
    async with s.post(url, json=body) as r:
        got = await r.json()
        causes = [(c.get("field", ""), c.get("message", "")) for c in (got.get("details") or {}).get("causes") or []]
        return r.status, r.headers.getall("Warning", []), causes


async def test_a_volume_like_a_clean_one_but_in_one_value_is_refused_at_its_own_path(pods):
    s, url = pods
    for i in range(3):
        assert await _create(s, url, _pod(f"ok-{i}", _token_volume(f"kube-api-access-{i}"))) == (201, [], [])
    status, _, causes = await _create(s, url, _pod("short", {"name": "scratch", "emptyDir": {}},
                                                   _token_volume("kube-api-access-x", expiration=300)))
    assert status == 422
    assert causes == [("spec.volumes[1].projected.sources[0].serviceAccountToken.expirationSeconds",
                       "Invalid value: 300: may not specify a duration less than 10 minutes")]
    status, _, causes = await _create(s, url, _pod("up", _token_volume("kube-api-access-y", namespace_path="../ns")))
    assert status == 422
    assert causes == [("spec.volumes[0].projected.sources[2].downwardAPI.path",
                       "Invalid value: \"../ns\": must not contain '..'")]
    assert (await _create(s, url, _pod("ok-again", _token_volume("kube-api-access-z"))))[0] == 201


async def test_overlapping_paths_warn_on_every_create_naming_each_pods_volume(pods):
    s, url = pods
    twice = _token_volume("first")
    twice["projected"]["sources"][1]["configMap"]["items"][0]["path"] = "token"
    for name in ("first", "second"):
        twice["name"] = name
        status, warnings, _ = await _create(s, url, _pod(f"pod-{name}", twice))
        assert status == 201
        assert warnings == [f'299 - "volume \\"{name}\\" (Projected ConfigMap \\"kube-root-ca.crt\\"): overlapping '
                            f'paths: \\"token\\" with \\"token\\""']
    assert (await _create(s, url, _pod("quiet", _token_volume("first"))))[:2] == (201, [])
