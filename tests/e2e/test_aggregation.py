"""The aggregation layer end to end: built-in group/versions and the metrics
APIs as local APIServices, and an extension API server (a small HTTPS server
in this test, trusting only the front-proxy CA the cluster publishes) reached
through an APIService: availability, proxying with the identity headers,
discovery (kubectl api-resources, kubectl get) and removal."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import socket
import ssl
import tempfile
import threading
from pathlib import Path

import pytest
from aiohttp import web
from kubernetes import client

from nanokube.apiserver.kubernetes_service import host_address
from nanokube.pki.ca import issue, new_ca

from .conftest import wait_for

GROUP, VERSION = "wardle.example.com", "v1alpha1"
RESOURCES = {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{GROUP}/{VERSION}", "resources": [
    {"name": "flunders", "singularName": "flunder", "namespaced": True, "kind": "Flunder", "verbs": ["get", "list"],
     "shortNames": ["fl"]}]}


def host_ip() -> str:
    """A non-loopback address of this host (EndpointSlices refuse loopback ones)."""
    return host_address() or pytest.skip("no non-loopback IPv4 address for the extension server")


class ExtensionServer:
    """HTTPS on a host address with a serving certificate for api.wardle.svc; it
    answers only clients presenting a certificate of the request-header CA and
    echoes the identity headers it got into the objects it lists."""

    def __init__(self, requestheader_ca: str) -> None:
        self.ca = new_ca("wardle-ca")
        serving = issue(self.ca, "api.wardle.svc", dns_names=("api.wardle.svc",), server=True)
        self.ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        with tempfile.TemporaryDirectory(prefix="nanokube-wardle-") as tmp:  # ssl loads a chain only from files
            d = Path(tmp)
            (d / "tls.crt").write_bytes(serving.cert_pem)
            (d / "tls.key").write_bytes(serving.key_pem)
            self.ctx.load_cert_chain(d / "tls.crt", d / "tls.key")
        self.ctx.load_verify_locations(cadata=requestheader_ca)
        self.ctx.verify_mode = ssl.CERT_REQUIRED
        self.ip = host_ip()
        with socket.socket() as s:
            s.bind((self.ip, 0))
            self.port = s.getsockname()[1]
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        assert self.ready.wait(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        app = web.Application()
        app.router.add_get(f"/apis/{GROUP}/{VERSION}", self.resources)
        app.router.add_get(f"/apis/{GROUP}/{VERSION}/namespaces/{{ns}}/flunders", self.flunders)
        app.router.add_get(f"/openapi/v3/apis/{GROUP}/{VERSION}", self.openapi)
        app.router.add_get("/openapi/v3", self.openapi_index)
        self.runner = web.AppRunner(app)
        self.loop.run_until_complete(self.runner.setup())
        self.loop.run_until_complete(web.TCPSite(self.runner, self.ip, self.port, ssl_context=self.ctx).start())
        self.ready.set()
        self.loop.run_forever()

    async def openapi_index(self, request: web.Request) -> web.Response:
        """The index a k8s.io/apiserver server publishes: its document's URL under the hash of its bytes."""
        digest = hashlib.sha512((await self.openapi(request)).body).hexdigest().upper()
        return web.json_response({"paths": {f"apis/{GROUP}/{VERSION}": {
            "serverRelativeURL": f"/openapi/v3/apis/{GROUP}/{VERSION}?hash={digest}"}}})

    async def openapi(self, request: web.Request) -> web.Response:
        flunder = {"type": "object", "description": "A Flunder flunders.",
                   "x-kubernetes-group-version-kind": [{"group": GROUP, "version": VERSION, "kind": "Flunder"}],
                   "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                                  "spec": {"type": "object", "properties": {
                                      "reference": {"type": "string", "description": "What it refers to."}}}}}
        gvk = {"group": GROUP, "version": VERSION, "kind": "Flunder"}
        ref = {"$ref": "#/components/schemas/com.example.wardle.v1alpha1.Flunder"}
        paths = {f"/apis/{GROUP}/{VERSION}/namespaces/{{namespace}}/flunders/{{name}}": {"get": {
            "x-kubernetes-action": "get", "x-kubernetes-group-version-kind": gvk,
            "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": ref}}}}}}}
        return web.json_response({"openapi": "3.0.0", "info": {"title": "wardle", "version": VERSION}, "paths": paths,
                                  "components": {"schemas": {"com.example.wardle.v1alpha1.Flunder": flunder}}})

    async def resources(self, request: web.Request) -> web.Response:
        return web.json_response(RESOURCES)

    async def flunders(self, request: web.Request) -> web.Response:
        peer = request.transport.get_extra_info("peercert") or {}
        cn = next((v for rdn in peer.get("subject", ()) for k, v in rdn if k == "commonName"), "")
        seen = {"client-cn": cn, "user": request.headers.get("X-Remote-User", ""),
                "groups": ",".join(request.headers.getall("X-Remote-Group", [])),
                "authorization": request.headers.get("Authorization", "")}
        item = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Flunder",
                "metadata": {"name": "seen", "namespace": request.match_info["ns"], "annotations": seen}}
        return web.json_response({"apiVersion": f"{GROUP}/{VERSION}", "kind": "FlunderList", "metadata": {}, "items": [item]})

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def test_builtin_group_versions_are_local_apiservices(cluster):
    reg = client.ApiregistrationV1Api(cluster.client())
    apps = wait_for(lambda: _available(reg, "v1.apps"), 60, "v1.apps Available")
    assert apps.spec.service is None and (apps.spec.group_priority_minimum, apps.spec.version_priority) == (17800, 15)
    cond = next(c for c in apps.status.conditions if c.type == "Available")
    assert (cond.status, cond.reason, cond.message) == ("True", "Local", "Local APIServices are always available")
    assert reg.read_api_service("v1.").metadata.labels["kube-aggregator.kubernetes.io/automanaged"] == "onstart"
    wait_for(lambda: _available(reg, "v1beta1.metrics.k8s.io"), 60, "metrics APIService Available")
    rows = [line.split() for line in cluster.kubectl("get", "apiservices", "--no-headers").stdout.splitlines()]
    assert ["v1.networking.k8s.io", "Local", "True"] == rows[[r[0] for r in rows].index("v1.networking.k8s.io")][:3]


def _available(reg, name):
    try:
        a = reg.read_api_service(name)
    except client.ApiException:
        return None
    return a if any(c.type == "Available" and c.status == "True" for c in (a.status.conditions or [])) else None


@pytest.fixture
def wardle(cluster):
    core = client.CoreV1Api(cluster.client())
    cm = wait_for(lambda: _configmap(core), 60, "extension-apiserver-authentication")
    assert json.loads(cm.data["requestheader-allowed-names"]) == ["front-proxy-client"]
    server = ExtensionServer(cm.data["requestheader-client-ca-file"])
    try:
        yield server
    finally:
        server.stop()


def _configmap(core):
    try:
        return core.read_namespaced_config_map("extension-apiserver-authentication", "kube-system")
    except client.ApiException:
        return None


def test_the_authentication_configmap_is_written_again_once_deleted_or_edited(cluster):
    """As upstream's trust controller, which follows the ConfigMap's events: a delete or an edit is
    undone at once, not at the next minute's check."""
    core = client.CoreV1Api(cluster.client())
    published = wait_for(lambda: _configmap(core), 60, "extension-apiserver-authentication").data
    core.patch_namespaced_config_map("extension-apiserver-authentication", "kube-system",
                                     {"data": {"client-ca-file": None, "requestheader-allowed-names": '["mallory"]'}})
    restored = wait_for(lambda: "client-ca-file" in (cm := _configmap(core)).data and cm, 30, "the client CA written back")
    # (in one write, joined with what was stored: the names an edit added stay, as upstream joins them)
    assert restored.data == {**published, "requestheader-allowed-names": '["mallory","front-proxy-client"]'}
    core.delete_namespaced_config_map("extension-apiserver-authentication", "kube-system")
    assert wait_for(lambda: _configmap(core), 30, "the ConfigMap created again").data == published


def test_extension_api_server_through_an_apiservice(cluster, wardle):
    core = client.CoreV1Api(cluster.client())
    core.create_namespace({"metadata": {"name": "wardle"}})
    core.create_namespaced_service("wardle", {"metadata": {"name": "api"}, "spec": {"ports": [
        {"port": 443, "targetPort": wardle.port}]}})
    client.DiscoveryV1Api(cluster.client()).create_namespaced_endpoint_slice("wardle", {
        "metadata": {"name": "api-1", "labels": {"kubernetes.io/service-name": "api"}}, "addressType": "IPv4",
        "endpoints": [{"addresses": [wardle.ip], "conditions": {"ready": True}}],
        "ports": [{"name": "", "port": wardle.port, "protocol": "TCP"}]})
    reg = client.ApiregistrationV1Api(cluster.client())
    reg.create_api_service({"metadata": {"name": f"{VERSION}.{GROUP}"}, "spec": {
        "group": GROUP, "version": VERSION, "groupPriorityMinimum": 1000, "versionPriority": 15,
        "service": {"namespace": "wardle", "name": "api"},
        "caBundle": base64.b64encode(wardle.ca.cert_pem).decode()}})
    got = wait_for(lambda: _available(reg, f"{VERSION}.{GROUP}"), 60, "the wardle APIService Available")
    assert got.spec.service.port == 443
    cond = next(c for c in got.status.conditions if c.type == "Available")
    assert (cond.reason, cond.message) == ("Passed", "all checks passed")
    assert cluster.kubectl("get", "apiservice", f"{VERSION}.{GROUP}", "--no-headers").stdout.split()[:3] == [
        f"{VERSION}.{GROUP}", "wardle/api", "True"]

    rows = wait_for(lambda: [r.split() for r in cluster.kubectl("api-resources", f"--api-group={GROUP}",
                                                                "--no-headers").stdout.splitlines()], 60, "discovery")
    assert rows == [["flunders", "fl", f"{GROUP}/{VERSION}", "true", "Flunder"]]
    # the extension server's document is indexed under its own URL and hash, as the server's index names it
    index = json.loads(cluster.kubectl("get", "--raw", "/openapi/v3").stdout)["paths"]
    url = index[f"apis/{GROUP}/{VERSION}"]["serverRelativeURL"]
    document = cluster.kubectl("get", "--raw", url).stdout.encode()
    assert url == f"/openapi/v3/apis/{GROUP}/{VERSION}?hash={hashlib.sha512(document).hexdigest().upper()}"
    explained = cluster.kubectl("explain", "flunders.spec").stdout
    assert "What it refers to." in explained
    seen = cluster.kubectl_json("get", "flunders", "-n", "wardle")["items"][0]["metadata"]["annotations"]
    assert seen["client-cn"] == "front-proxy-client" and seen["user"] == "kubernetes-super-admin"
    assert "system:masters" in seen["groups"].split(",") and seen["authorization"] == ""

    reg.delete_api_service(f"{VERSION}.{GROUP}")
    wait_for(lambda: cluster.kubectl("get", "--raw", f"/apis/{GROUP}/{VERSION}", check=False).returncode != 0,
             60, "the group gone")
    core.delete_namespace("wardle")


def test_unavailable_apiservice(cluster):
    reg = client.ApiregistrationV1Api(cluster.client())
    reg.create_api_service({"metadata": {"name": "v1.nowhere.example.com"}, "spec": {
        "group": "nowhere.example.com", "version": "v1", "groupPriorityMinimum": 1000, "versionPriority": 15,
        "service": {"namespace": "default", "name": "missing"}, "insecureSkipTLSVerify": True}})
    cond = wait_for(lambda: next((c for c in reg.read_api_service("v1.nowhere.example.com").status.conditions or []
                                  if c.type == "Available"), None), 60, "a condition")
    assert (cond.status, cond.reason, cond.message) == (
        "False", "ServiceNotFound", 'service/missing in "default" is not present')
    r = cluster.kubectl("get", "--raw", "/apis/nowhere.example.com/v1", check=False)
    assert r.returncode != 0 and "ServiceUnavailable" in r.stderr or "service unavailable" in r.stderr
    reg.delete_api_service("v1.nowhere.example.com")


def test_custom_resource_definitions_get_local_apiservices(cluster):
    crd = {"metadata": {"name": "widgets.example.com"}, "spec": {
        "group": "example.com", "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [{"name": v, "served": True, "storage": v == "v1",
                      "schema": {"openAPIV3Schema": {"type": "object"}}} for v in ("v1", "v1beta1")]}}
    ext = client.ApiextensionsV1Api(cluster.client())
    ext.create_custom_resource_definition(crd)
    reg = client.ApiregistrationV1Api(cluster.client())
    a = wait_for(lambda: _available(reg, "v1.example.com"), 60, "v1.example.com Available")
    assert (a.spec.group_priority_minimum, a.spec.version_priority) == (1000, 100)
    assert a.metadata.labels == {"kube-aggregator.kubernetes.io/automanaged": "true"}
    assert wait_for(lambda: _available(reg, "v1beta1.example.com"), 60, "v1beta1.example.com Available")
    ext.delete_custom_resource_definition("widgets.example.com")
    wait_for(lambda: "v1.example.com" not in {x.metadata.name for x in reg.list_api_service().items}, 60,
             "the CRD's APIService removed")
