"""Who may go without credentials, as a cluster admin configures it: kube-apiserver's
--anonymous-auth (default true; false makes such a request a 401) and the `anonymous` section of
--authentication-config (enabled, and on which paths only), whose bad files stop `up` with
upstream's validation errors."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import ssl
import urllib.error
import urllib.request

import pytest
from kubernetes import client

from nanokube.apiserver import auth_options
from nanokube.cli import main
from tests.served import served


def _options(tmp_path, anonymous_auth=None, config: str | None = None) -> auth_options.AuthOptions:
    path = None
    if config is not None:
        path = tmp_path / "authn.yaml"
        path.write_text(config)
    return auth_options.load(argparse.Namespace(anonymous_auth=anonymous_auth, authentication_config=path and str(path)))


def _getter(server):
    ctx = ssl.create_default_context(cadata=server.pki.ca.cert_pem.decode())

    def get(path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(urllib.request.Request(server.url + path), context=ctx, timeout=10) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
    return lambda path: asyncio.to_thread(get, path)


async def test_by_default_a_request_without_credentials_is_anonymous(tmp_path):
    async with served(tmp_path) as (server, _):
        get = _getter(server)
        assert await get("/healthz") == (200, "ok")
        code, body = await get("/api/v1/namespaces")
        assert code == 403 and 'User "system:anonymous" cannot list resource "namespaces"' in json.loads(body)["message"]


async def test_what_an_admin_binds_to_system_unauthenticated_an_anonymous_request_may_do(tmp_path):
    """RBAC decides every anonymous request past the health and version paths, as upstream's chain
    does: binding the service-account issuer's discovery to system:unauthenticated (what a workload
    identity federation asks for) opens its JWKS to requests without credentials."""
    async with served(tmp_path) as (server, api_client):
        get = _getter(server)
        assert (await get("/openid/v1/jwks"))[0] == 403
        await asyncio.to_thread(client.RbacAuthorizationV1Api(api_client).create_cluster_role_binding, {
            "metadata": {"name": "oidc-discovery-anonymous"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "system:service-account-issuer-discovery"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:unauthenticated"}]})
        for _ in range(100):  # the binding reaches the authorizer through its informer
            code, body = await get("/openid/v1/jwks")
            if code == 200:
                break
            await asyncio.sleep(0.05)
        assert code == 200 and json.loads(body)["keys"]
        code, body = await get("/api/v1/namespaces")  # nothing else the binding names
        assert code == 403 and 'User "system:anonymous" cannot list resource "namespaces"' in json.loads(body)["message"]


async def test_anonymous_auth_false_makes_it_a_401_everywhere_and_leaves_credentials_alone(tmp_path):
    async with served(tmp_path) as (server, api_client):
        auth_options.apply(server, _options(tmp_path, anonymous_auth=False))
        get = _getter(server)
        for path in ("/healthz", "/version", "/api/v1/namespaces", "/ui/"):
            code, body = await get(path)
            assert (code, json.loads(body)["reason"]) == (401, "Unauthorized"), path
        namespaces = await asyncio.to_thread(client.CoreV1Api(api_client).list_namespace)
        assert "default" in {n.metadata.name for n in namespaces.items}


CONDITIONS = """apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
anonymous:
  enabled: true
  conditions:
  - path: /livez
  - path: /readyz
"""


async def test_the_configs_conditions_let_anonymous_requests_reach_only_their_paths(tmp_path):
    async with served(tmp_path) as (server, _):
        auth_options.apply(server, _options(tmp_path, config=CONDITIONS))
        get = _getter(server)
        assert await get("/livez") == (200, "ok")
        assert await get("/readyz") == (200, "ok")
        assert (await get("/livez/ping"))[0] == 401  # a path matches exactly
        assert (await get("/healthz"))[0] == 401
        assert (await get("/api/v1/namespaces"))[0] == 401


async def test_the_config_can_turn_anonymous_off(tmp_path):
    async with served(tmp_path) as (server, _):
        auth_options.apply(server, _options(tmp_path, config=CONDITIONS.split("anonymous:")[0] + "anonymous:\n  enabled: false\n"))
        assert (await _getter(server)("/livez"))[0] == 401


@pytest.mark.parametrize("flags, config, line", [
    (["--anonymous-auth=false"], CONDITIONS,
     "anonymous: Forbidden: --anonymous-auth flag cannot be set when anonymous field is configured in authentication "
     "configuration file"),
    ([], CONDITIONS.replace("enabled: true", "enabled: false"),
     "invalid authentication configuration: anonymous.conditions: Invalid value: "),
    ([], CONDITIONS.replace("- path: /livez", "- path: /livez\n    paths: [/x]"),
     'strict decoding error: unknown field "anonymous.conditions[0].paths"'),
    ([], CONDITIONS.replace("kind: AuthenticationConfiguration", "kind: AuthorizationConfiguration"),
     'no kind "AuthorizationConfiguration" is registered for version "apiserver.config.k8s.io/v1"'),
    ([], "", "empty config data"),
])
def test_up_stops_on_a_bad_file_with_upstreams_reason(tmp_path, capsys, flags, config, line):
    path = tmp_path / "authn.yaml"
    path.write_text(config)
    assert main(["up", "--data-dir", str(tmp_path / "d"), "--authentication-config", str(path), *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith("nanokube: --authentication-config: ") and line in err, err
    assert not (tmp_path / "d").exists()  # nothing started


def test_up_names_a_missing_file(tmp_path, capsys):
    missing = tmp_path / "nope.yaml"
    assert main(["up", "--data-dir", str(tmp_path / "d"), "--authentication-config", str(missing)]) == 2
    assert f'failed to load authentication configuration from file "{missing}": open {missing}: no such file or directory' \
        in capsys.readouterr().err


async def test_head_on_the_console_is_allowed_as_its_get_is(tmp_path):
    """A non-resource HEAD is authorized as verb `head` (upstream's RequestInfo lowercases the
    method), so the bootstrap `nanokube:console` role grants it next to `get`."""
    async with served(tmp_path) as (server, _):
        ctx = ssl.create_default_context(cadata=server.pki.ca.cert_pem.decode())

        def head(path: str) -> tuple[int, bytes]:
            try:
                with urllib.request.urlopen(urllib.request.Request(server.url + path, method="HEAD"), context=ctx,
                                            timeout=10) as r:
                    return r.status, r.read()
            except urllib.error.HTTPError as e:
                return e.code, b""
        assert await asyncio.to_thread(head, "/ui/") == (200, b"")
        assert (await asyncio.to_thread(head, "/api/v1/pods"))[0] == 403


async def test_a_reloaded_file_may_not_change_anonymous(tmp_path):
    """The file is reloaded when it changes, but its `anonymous` must stay as the server started
    with it: such a file is refused (counted as a failed reload) and the first one stands."""
    from tests.apiserver.auth.jwt_issuer import served_with

    async with served_with(tmp_path, CONDITIONS) as (server, _):
        get = _getter(server)
        assert await get("/livez") == (200, "ok")
        (tmp_path / "authn.yaml").write_text(CONDITIONS.replace("- path: /readyz\n", ""))
        failed = re.compile(r'apiserver_authentication_config_controller_automatic_reloads_total\{apiserver_id_hash="sha256:'
                            r'\w+",status="failure"\} 1\n')
        for _ in range(100):
            if failed.search(text := server.metrics_text().decode()):
                break
            await asyncio.sleep(0.1)
        assert failed.search(text), text
        assert await get("/readyz") == (200, "ok")


def test_every_api_worker_gets_up_s_flags_with_the_files_by_absolute_path(tmp_path, monkeypatch):
    """`up --api-workers N` hands its authentication and authorization flags to each worker, which
    reads them as `up` did: a worker that let anonymous requests through would undo the flag."""
    (tmp_path / "authn.yaml").write_text(CONDITIONS.split("anonymous:")[0])
    (tmp_path / "authz.yaml").write_text("apiVersion: apiserver.config.k8s.io/v1\nkind: AuthorizationConfiguration\n"
                                         "authorizers:\n- {type: RBAC, name: rbac}\n")
    monkeypatch.chdir(tmp_path)
    up = argparse.ArgumentParser()
    auth_options.add_flags(up)
    args = up.parse_args(["--anonymous-auth=false", "--authentication-config", "authn.yaml",
                          "--authorization-config", "authz.yaml"])
    argv = auth_options.worker_argv(args)
    assert argv == ["--anonymous-auth=false", f"--authentication-config={tmp_path}/authn.yaml",
                    f"--authorization-config={tmp_path}/authz.yaml"]
    worker = argparse.ArgumentParser()
    auth_options.add_flags(worker)
    monkeypatch.chdir("/")
    options = auth_options.load(worker.parse_args(argv))
    assert (options.anonymous.enabled, options.authentication_path, options.authorization_path) == \
        (False, f"{tmp_path}/authn.yaml", f"{tmp_path}/authz.yaml")
    assert [s.type for s in options.authorization[1]] == ["RBAC"]
