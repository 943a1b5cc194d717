"""/statusz and /flagz over HTTP, as kube-scheduler, kube-controller-manager and kube-apiserver serve
them: plain text unless the Accept header asks for config.k8s.io Statusz/Flagz (v1beta1, or v1alpha1
with a deprecation warning) as JSON or YAML, 406 for anything else."""

import argparse
import json
import re

import aiohttp
import pytest
import yaml
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry

from nanokube import cli_controller_manager, cli_scheduler, component_server, zpages
from nanokube.machinery import logs
from nanokube.apiserver.app import APIServer
from nanokube.apiserver.healthz import Check
from nanokube.pki.ca import ensure_pki
from nanokube.store.memory import MemoryStore
from tests.apiserver.test_request_body import admin_context

from .test_component_server import AllowAll

START = 1_700_000_000.0  # Tue Nov 14 22:13:20 UTC 2023
BETA = "application/json;v=v1beta1;g=config.k8s.io;as=Statusz"
ALPHA = "application/json;v=v1alpha1;g=config.k8s.io;as=Statusz"
_DELIM = r"(?::|: |=| )"


async def _ok(request: web.Request) -> web.Response:
    return web.Response()


def _app() -> web.Application:
    app = web.Application()
    for path in ("/healthz", "/metrics/slis", "/", "/apis/metrics.k8s.io/v1beta1", "/openapi/v3/{path:.*}"):
        app.router.add_get(path, _ok)
    zpages.install(app, "kube-test", {"secure-port": "10259", "leader-elect": "true", "config": ""},
                   start=START, now=lambda: START + 3725)
    return app


async def _get(http, path: str, accept: str | None):
    r = await http.get(path, headers={"Accept": accept} if accept is not None else {})
    return r.status, await r.text(), r.headers


async def test_statusz_text_by_default():
    async with TestClient(TestServer(_app())) as http:
        for accept in (None, "", "text/plain", "*/*", "application/json;v=foo;g=config.k8s.io;as=Statusz,*/*"):
            code, body, headers = await _get(http, "/statusz", accept)
            assert code == 200 and headers["Content-Type"] == "text/plain; charset=utf-8", accept
            lines = body.split("\n")
            assert lines[:3] == ["", "kube-test statusz", "Warning: This endpoint is not meant to be machine "
                                 "parseable, has no formatting compatibility guarantees and is for debugging "
                                 "purposes only."]
            assert re.fullmatch(rf"Started{_DELIM} \w{{3}} Nov 1[45] \d\d:\d\d:20 \w+ 2023", lines[4]), lines[4]
            assert re.fullmatch(rf"Up{_DELIM} 1 hr 02 min 05 sec", lines[5])
            assert re.fullmatch(rf"Go version{_DELIM} go1\.25\.0", lines[6])
            assert re.fullmatch(rf"Binary version{_DELIM} 1\.37\.0-nanokube", lines[7])
            assert re.fullmatch(rf"Emulation version{_DELIM} 1\.37", lines[8])
            # the API's own paths are left out, the rest by their first segment; /flagz is listed, /statusz not
            assert re.fullmatch(rf"Paths{_DELIM} /flagz /healthz /metrics", lines[9]), lines[9]


async def test_any_method_is_answered():
    """The z-pages are plain handlers on the component's mux: a POST is answered as a GET."""
    async with TestClient(TestServer(_app())) as http:
        for path in ("/statusz", "/flagz"):
            r = await http.post(path, headers={"Accept": "text/plain"})
            assert r.status == 200 and (await r.text()).startswith(f"\nkube-test {path[1:]}\n")


async def test_statusz_structured():
    async with TestClient(TestServer(_app())) as http:
        code, body, headers = await _get(http, "/statusz", BETA)
        assert code == 200 and headers["Content-Type"] == "application/json" and "Warning" not in headers
        assert json.loads(body) == {
            "kind": "Statusz", "apiVersion": "config.k8s.io/v1beta1", "metadata": {"name": "kube-test"},
            "startTime": "2023-11-14T22:13:20Z", "uptimeSeconds": 3725, "goVersion": "go1.25.0",
            "binaryVersion": "1.37.0-nanokube", "emulationVersion": "1.37", "paths": ["/flagz", "/healthz", "/metrics"]}
        assert list(json.loads(body)) == ["kind", "apiVersion", "metadata", "startTime", "uptimeSeconds",
                                          "goVersion", "binaryVersion", "emulationVersion", "paths"]

        # the first acceptable clause wins: the deprecated alpha before the beta is served, with a warning
        code, body, headers = await _get(http, "/statusz", f"{ALPHA},{BETA}")
        assert code == 200 and json.loads(body)["apiVersion"] == "config.k8s.io/v1alpha1"
        assert headers["Warning"] == \
            '299 - "This version of the statusz endpoint is deprecated. Please use a newer version."'
        code, body, headers = await _get(http, "/statusz", f"{BETA},{ALPHA}")
        assert json.loads(body)["apiVersion"] == "config.k8s.io/v1beta1" and "Warning" not in headers

        code, body, headers = await _get(http, "/statusz", "application/yaml;g=config.k8s.io;v=v1beta1;as=Statusz")
        assert code == 200 and headers["Content-Type"] == "application/yaml"
        assert yaml.safe_load(body)["metadata"] == {"name": "kube-test"}
        assert body.startswith("apiVersion: config.k8s.io/v1beta1\n")


@pytest.mark.parametrize("accept", [
    "application/json", "application/xml", "application/json;v=v1beta1;g=config.k8s.io",
    "application/json;v=v1beta1;g=config.k8s.io;as=Flagz", "application/json;v=v1;g=config.k8s.io;as=Statusz",
    "text/plain;v=v1beta1;g=config.k8s.io;as=Statusz",
    "application/vnd.kubernetes.protobuf;v=v1beta1;g=config.k8s.io;as=Statusz"])
async def test_statusz_not_acceptable(accept):
    async with TestClient(TestServer(_app())) as http:
        code, body, headers = await _get(http, "/statusz", accept)
        assert code == 406 and headers["Content-Type"] == "application/json"
        status = json.loads(body)
        assert (status["kind"], status["reason"], status["code"]) == ("Status", "NotAcceptable", 406)
        assert status["message"] == "only the following media types are accepted: application/json, " \
                                    "application/yaml, application/vnd.kubernetes.protobuf, text/plain"


async def test_flagz():
    async with TestClient(TestServer(_app())) as http:
        code, body, headers = await _get(http, "/flagz", None)
        assert code == 200 and headers["Content-Type"] == "text/plain; charset=utf-8"
        head, _, flags = body.partition("purposes only.\n")
        assert head.startswith("\nkube-test flagz\nWarning: ")
        assert re.fullmatch(rf"config{_DELIM}\nleader-elect{_DELIM}true\nsecure-port{_DELIM}10259\n", flags), flags
        assert all([(await _get(http, "/flagz", None))[1] == body for _ in range(8)]), "cached, delimiter and all"

        code, body, headers = await _get(http, "/flagz", "application/json;v=v1beta1;g=config.k8s.io;as=Flagz")
        assert code == 200 and headers["Content-Type"] == "application/json"
        assert json.loads(body) == {"kind": "Flagz", "apiVersion": "config.k8s.io/v1beta1",
                                    "metadata": {"name": "kube-test"},
                                    "flags": {"config": "", "leader-elect": "true", "secure-port": "10259"}}
        code, body, headers = await _get(http, "/flagz", "application/json;v=v1alpha1;g=config.k8s.io;as=Flagz")
        assert json.loads(body)["apiVersion"] == "config.k8s.io/v1alpha1"
        assert headers["Warning"] == '299 - "This version of the flagz endpoint is deprecated. Please use a newer version."'
        assert (await _get(http, "/flagz", BETA))[0] == 406, "a Statusz target is not a Flagz"


def test_flags_are_every_long_flag_as_pflag_prints_it():
    """Set or not (an unset flag without a default is empty), under its long name."""
    parser = argparse.ArgumentParser()
    cli_scheduler.add_parser(parser.add_subparsers())
    args = parser.parse_args(["scheduler", "--kubeconfig", "/k", "--leader-elect=false", "--secure-port", "0"])
    got = zpages.flags(args)
    assert got["kubeconfig"] == "/k" and got["leader-elect"] == "false" and got["secure-port"] == "0"
    assert got["leader-elect-retry-period"] == "" and got["config"] == "" and got["bind-address"] == "0.0.0.0"
    assert got["authorization-always-allow-paths"] == "/healthz,/readyz,/livez"
    assert "help" not in got and "flag-parser" not in got and "flag_parser" not in got


def test_duration_flags_print_as_go_durations():
    """pflag prints a duration flag with time.Duration's String: kube-controller-manager's default
    8760h as 8760h0m0s, and a value given in another spelling normalised."""
    parser = argparse.ArgumentParser()
    cli_controller_manager.add_parser(parser.add_subparsers())
    assert zpages.flags(parser.parse_args(["controller-manager"]))["cluster-signing-duration"] == "8760h0m0s"
    got = zpages.flags(parser.parse_args(["controller-manager", "--cluster-signing-duration", "90m1500ms"]))
    assert got["cluster-signing-duration"] == "1h30m1.5s"


def test_kubelet_flags_unset_print_their_defaults_and_map_flags_print_as_component_base_s():
    """Once the kubelet's configuration is merged, an unset flag prints its default (20s, false, 0, [])
    as upstream's kubelet's /flagz; --eviction-hard's map as `k<v` pairs sorted, a `=` map as `k=v`."""
    from nanokube import cli_kubelet

    parser = argparse.ArgumentParser()
    cli_kubelet.add_parser(parser.add_subparsers())
    args = parser.parse_args(["kubelet", "--kubeconfig", "/k"])
    cli_kubelet.configure(args)
    got = zpages.flags(args)
    assert (got["file-check-frequency"], got["rotate-certificates"], got["rotate-server-certificates"],
            got["eviction-max-pod-grace-period"], got["cluster-dns"], got["eviction-soft"]) == (
        "20s", "false", "false", "0", "[]", "")
    assert got["eviction-hard"] == ("imagefs.available<15%,imagefs.inodesFree<5%,memory.available<100Mi,"
                                    "nodefs.available<10%,nodefs.inodesFree<5%")
    args = parser.parse_args(["kubelet", "--kubeconfig", "/k", "--file-check-frequency", "90s",
                              "--eviction-soft", "nodefs.available<20%,memory.available<1Gi",
                              "--eviction-soft-grace-period", "nodefs.available=2m,memory.available=90s"])
    cli_kubelet.configure(args)
    got = zpages.flags(args)
    assert got["file-check-frequency"] == "1m30s"
    assert got["eviction-soft"] == "memory.available<1Gi,nodefs.available<20%"
    assert got["eviction-soft-grace-period"] == "memory.available=90s,nodefs.available=2m"


async def test_component_paths_as_upstream_lists_them():
    """kube-scheduler lists /configz /flagz /healthz /livez /metrics /readyz; kube-controller-manager,
    which serves neither /livez nor /readyz, /configz /flagz /healthz /metrics; neither lists /statusz."""
    checks = [Check("ok", lambda: None)]
    auth = component_server.DelegatedAuth(AllowAll(), "/statusz,/flagz")
    sched = component_server.app(auth, CollectorRegistry(), {}, lambda: checks, list, lambda: checks,
                                 reset=lambda: None, resources=lambda: None, component="kube-scheduler", flags={})
    kcm = component_server.app(auth, CollectorRegistry(), {}, lambda: checks, component="kube-controller-manager",
                               flags={"controllers": "*"})
    for app, name, paths in ((sched, "kube-scheduler", ["/configz", "/flagz", "/healthz", "/livez", "/metrics", "/readyz"]),
                             (kcm, "kube-controller-manager", ["/configz", "/flagz", "/healthz", "/metrics"])):
        async with TestClient(TestServer(app)) as http:
            code, body, headers = await _get(http, "/statusz", BETA)
            assert code == 200 and json.loads(body)["metadata"]["name"] == name
            assert json.loads(body)["paths"] == paths
            assert headers["Cache-Control"] == "no-cache, private"
    async with TestClient(TestServer(kcm)) as http:
        code, body, _ = await _get(http, "/flagz", None)
        assert code == 200 and re.search(rf"\ncontrollers{_DELIM}\*\n", body)


@pytest.fixture
async def apiserver(tmp_path):
    pki = ensure_pki(str(tmp_path))
    s = APIServer(MemoryStore(), pki, port=0)
    s.flags = {"port": "0", "store": "memory"}
    await s.start()
    ctx = admin_context(pki, tmp_path)
    try:
        yield s, ctx
    finally:
        await s.stop()


async def test_apiserver_zpages_for_the_monitoring_group(apiserver):
    """kube-apiserver's /statusz lists its debugging paths (not the API's); both z-pages are authorized
    like any path: the bootstrap system:monitoring ClusterRole grants them to the system:monitoring group."""
    s, ctx = apiserver
    base = f"https://localhost:{s.port}"
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as admin:
        async with admin.get(base + "/statusz", headers={"Accept": BETA}) as r:
            got = await r.json()
            assert r.status == 200 and got["metadata"] == {"name": "kube-apiserver"}
            assert got["paths"] == ["/flagz", "/healthz", "/livez", "/metrics", "/readyz", "/version"]
        async with admin.get(base + "/flagz") as r:
            body = await r.text()
            assert r.status == 200 and body.startswith("\nkube-apiserver flagz\n")
            assert re.search(rf"\nstore{_DELIM}memory\n", body)
        async with admin.get(base + "/") as r:
            assert {"/flagz", "/statusz"} <= set((await r.json())["paths"])
        for path in ("/statusz", "/flagz"):
            as_user = {"Impersonate-User": "prometheus"}
            async with admin.get(base + path, headers=as_user) as r:
                assert r.status == 403
                assert (await r.json())["message"] == f'forbidden: User "prometheus" cannot get path "{path}"'
            async with admin.get(base + path, headers={**as_user, "Impersonate-Group": "system:monitoring"}) as r:
                assert r.status == 200, path
        async with admin.get(base + "/apis/rbac.authorization.k8s.io/v1/clusterroles/system:monitoring") as r:
            [rule] = (await r.json())["rules"]
            assert rule == {"verbs": ["get"], "nonResourceURLs": [
                "/metrics", "/metrics/slis", "/livez", "/readyz", "/healthz", "/livez/*", "/readyz/*", "/healthz/*",
                "/statusz", "/flagz"]}


async def test_apiserver_debug_flags_v_for_whoever_may_put_it(apiserver):
    """kube-apiserver installs routes.DebugFlags too: a PUT on /debug/flags/v, which RBAC grants
    cluster-admin alone by default; unlisted, like the z-pages' snapshot says."""
    import logging

    s, ctx = apiserver
    base = f"https://localhost:{s.port}"
    root, before = logging.getLogger(), logging.getLogger().level
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as admin:
            async with admin.put(base + "/debug/flags/v", data=b"5") as r:
                assert r.status == 200 and await r.text() == "successfully set klog.logging.verbosity to 5\n"
                assert root.level == logs.level(5) < logging.DEBUG  # V(5): under V(4), Python's DEBUG
            async with admin.put(base + "/debug/flags/v", data=b"1", headers={"Impersonate-User": "prometheus",
                                                                           "Impersonate-Group": "system:monitoring"}) as r:
                assert r.status == 403
                assert (await r.json())["message"] == 'forbidden: User "prometheus" cannot put path "/debug/flags/v"'
            async with admin.get(base + "/") as r:
                assert not any(p.startswith("/debug") for p in (await r.json())["paths"])
    finally:
        root.setLevel(before)


async def test_apiserver_metrics_reset_on_delete(apiserver):
    """kube-apiserver's /metrics is MetricsWithReset (with profiling, the default): a DELETE, for
    whoever may delete the path, starts the request counters again; the watcher gauges stay."""
    s, ctx = apiserver
    base = f"https://localhost:{s.port}"
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as admin:
        async with admin.get(base + "/api/v1/namespaces"):
            pass
        async with admin.get(base + "/metrics") as r:
            assert r.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8; escaping=underscores"  # client_golang's text format
            assert ('apiserver_request_total{code="200",component="apiserver",dry_run="",group="",'
                    'resource="namespaces"') in await r.text()
        async with admin.delete(base + "/metrics", headers={"Impersonate-User": "prometheus",
                                                            "Impersonate-Group": "system:monitoring"}) as r:
            assert r.status == 403
            assert (await r.json())["message"] == 'forbidden: User "prometheus" cannot delete path "/metrics"'
        async with admin.delete(base + "/metrics") as r:
            assert r.status == 200 and await r.text() == "metrics reset\n"
        async with admin.get(base + "/metrics") as r:
            body = await r.text()
            # no series left: client_golang's Gather leaves the family out, HELP and TYPE too; the etcd
            # request counts are kept (the storage metrics' Reset clears only their latency)
            assert "apiserver_request_total" not in body and 'etcd_requests_total{group="",operation="create",' \
                'resource="namespaces"}' in body
