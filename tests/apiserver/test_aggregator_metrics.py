"""The metrics groups and the aggregator: the built-in adapter serves external.metrics.k8s.io behind its
local APIService until an APIService with a `service` (KEDA's manifest applied over it) takes the
group/version to an adapter process; the aggregator proxies it there, over HTTPS and for the loopback
client's and an HTTPClient's GET alike, answers 503 once the adapter is gone; deleting the APIService leaves the group
served by none (upstream has no built-in adapter), until a local APIService for it gives it back to the built-in one."""

from __future__ import annotations

import aiohttp
import orjson
import pytest

from nanokube.apiserver.loopback import LocalClient
from nanokube.client.http import HTTPClient
from nanokube.machinery.errors import APIError
from nanokube.pki.kubeconfig import write_kubeconfig
from tests.apiserver.metrics_adapter import Adapter
from tests.apiserver.test_aggregator_proxy import host_ip
from tests.apiserver.test_expect import served
from tests.controllers import tries

NAME = "v1beta1.external.metrics.k8s.io"
APISERVICE = f"/apis/apiregistration.k8s.io/v1/apiservices/{NAME}"
QUEUE = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue"
MERGE = {"Content-Type": "application/merge-patch+json"}


class API:
    def __init__(self, session: aiohttp.ClientSession, base: str, ctx):
        self.s, self.base, self.ctx = session, base, ctx

    async def call(self, method: str, path: str, body=None, headers=None) -> tuple[int, bytes]:
        async with self.s.request(method, self.base + path, json=body, headers=headers, ssl=self.ctx) as r:
            return r.status, await r.read()

    async def ok(self, method: str, path: str, body=None, headers=None) -> dict:
        code, raw = await self.call(method, path, body, headers)
        assert code < 300, raw
        return orjson.loads(raw)

    async def available(self) -> tuple[str, str] | None:
        a = await self.ok("GET", APISERVICE)
        return next(((c["status"], c["reason"]) for c in a["status"].get("conditions") or [] if c["type"] == "Available"),
                    None)

    async def until(self, check, what: str):
        for _ in tries():
            if got := await check():
                return got
        raise AssertionError(f"never: {what}")


def value(doc: dict) -> str:
    [item] = doc["items"]
    return item["value"]


async def test_an_apiservice_with_a_service_takes_the_external_metrics_group_and_gives_it_back(tmp_path):
    async with served(tmp_path) as (server, ctx), aiohttp.ClientSession() as s:
        api = API(s, f"https://127.0.0.1:{server.port}", ctx)
        loopback = LocalClient(server.rest)
        write_kubeconfig(str(tmp_path / "kubeconfig"), server.url, server.pki)
        http = HTTPClient.from_kubeconfig(str(tmp_path / "kubeconfig"))
        await http.start()
        await api.ok("POST", "/api/v1/namespaces/default/configmaps", {
            "metadata": {"name": "nanokube-external-metrics"}, "data": {"queue": "5"}})
        assert value(await api.ok("GET", QUEUE)) == "5"
        assert (await api.ok("GET", APISERVICE))["spec"]["service"] is None
        await api.until(lambda: _is(api.available(), ("True", "Local")), "the local APIService Available")

        adapter = Adapter(tmp_path, host_ip(), {"external": {"queue": "42"}})
        try:
            await api.ok("POST", "/api/v1/namespaces/default/services", {
                "metadata": {"name": "adapter"}, "spec": {"ports": [{"port": 443, "targetPort": adapter.port}]}})
            await api.ok("POST", "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices", {
                "metadata": {"name": "adapter-1", "labels": {"kubernetes.io/service-name": "adapter"}},
                "addressType": "IPv4", "endpoints": [{"addresses": [adapter.ip], "conditions": {"ready": True}}],
                "ports": [{"name": "", "port": adapter.port, "protocol": "TCP"}]})
            # KEDA's manifest over the local APIService: a service, TLS unchecked, its priorities
            await api.ok("PATCH", APISERVICE, {"spec": {
                "service": {"namespace": "default", "name": "adapter", "port": 443}, "insecureSkipTLSVerify": True,
                "groupPriorityMinimum": 100, "versionPriority": 100}}, MERGE)
            await api.until(lambda: _is(api.available(), ("True", "Passed")), "the adapter's APIService Available")

            assert value(await api.ok("GET", QUEUE)) == "42"
            assert value(await loopback.get_raw(QUEUE)) == "42" and value(await http.get_raw(QUEUE)) == "42"
            # each as its own user: the admin's certificate, the loopback client's identity
            assert {r["user"] for r in adapter.requests() if r["path"] == QUEUE} == {
                "kubernetes-super-admin", "system:kube-controller-manager"}
            groups = [g["name"] for g in (await api.ok("GET", "/apis"))["groups"]]
            assert groups.count("external.metrics.k8s.io") == 1 and "custom.metrics.k8s.io" in groups
            # the adapter publishes no OpenAPI: the group/version leaves the index, the built-in ones stay
            assert {"apis/custom.metrics.k8s.io/v1beta2", "apis/apps/v1"} <= set(await _openapi_index(api))
            assert "apis/external.metrics.k8s.io/v1beta1" not in await _openapi_index(api)
            assert _external_paths(await api.ok("GET", "/openapi/v2")) == []  # nor its paths in the aggregated v2

            adapter.stop()
            code, _ = await api.call("GET", QUEUE)
            assert code == 503  # the proxy's dial error while the APIService is still Available
            # a change to its Service has the availability controller check it at once
            await api.ok("PATCH", "/api/v1/namespaces/default/services/adapter", {"metadata": {"labels": {"poked": "y"}}},
                         MERGE)
            await api.until(lambda: _is(api.available(), ("False", "FailedDiscoveryCheck")), "Available False")
            assert await api.call("GET", QUEUE) == (503, b"service unavailable\n")
            for c in (loopback, http):  # client-go's words for an answer that is no Status
                with pytest.raises(APIError) as e:
                    await c.get_raw(QUEUE)
                assert (e.value.code, e.value.reason, e.value.message) == (
                    503, "ServiceUnavailable", "the server is currently unable to handle the request")
        finally:
            adapter.stop()
            await http.close()

        await api.ok("DELETE", APISERVICE)
        await api.until(lambda: _is(api.call("GET", QUEUE), (404, NOT_FOUND)), "the group served by none")
        with pytest.raises(APIError) as e:
            await loopback.get_raw(QUEUE)
        assert (e.value.code, e.value.details) == (404, {})
        assert "external.metrics.k8s.io" not in [g["name"] for g in (await api.ok("GET", "/apis"))["groups"]]
        assert "apis/external.metrics.k8s.io/v1beta1" not in await _openapi_index(api)
        assert _external_paths(await api.ok("GET", "/openapi/v2")) == []
        assert "apis/custom.metrics.k8s.io/v1beta2" in await _openapi_index(api)

        # the local APIService again (as autoregister makes it on start): the built-in adapter's once more
        await api.ok("POST", "/apis/apiregistration.k8s.io/v1/apiservices", {"metadata": {"name": NAME}, "spec": {
            "group": "external.metrics.k8s.io", "version": "v1beta1", "groupPriorityMinimum": 100,
            "versionPriority": 100}})
        await api.until(lambda: _answered_by_built_in(api), "the built-in adapter's answer again")
        assert value(await loopback.get_raw(QUEUE)) == "5"
        assert "apis/external.metrics.k8s.io/v1beta1" in await _openapi_index(api)
        assert _external_paths(await api.ok("GET", "/openapi/v2")) != []


NOT_FOUND = orjson.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                          "message": "the server could not find the requested resource", "reason": "NotFound",
                          "details": {}, "code": 404}) + b"\n"


def _external_paths(doc: dict) -> list[str]:
    return [p for p in doc["paths"] if p.startswith("/apis/external.metrics.k8s.io/")]


async def _is(got, want) -> bool:
    return await got == want


async def _answered_by_built_in(api: API) -> bool:
    code, raw = await api.call("GET", QUEUE)
    return code == 200 and value(orjson.loads(raw)) == "5"


async def _openapi_index(api: API) -> dict:
    return (await api.ok("GET", "/openapi/v3"))["paths"]
