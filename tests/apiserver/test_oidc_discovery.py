"""The OIDC discovery document's jwks_uri, as kube-apiserver builds it (NewOpenIDMetadataProvider):
--service-account-jwks-uri when set, else https:// the external address (the advertised one, with
the secure port) and /openid/v1/jwks; `nanokube up` refuses a jwks URI that is not https."""

from __future__ import annotations

import asyncio
import json

import pytest
from kubernetes import config

from nanokube.apiserver.app import APIServer
from nanokube.cli import main
from nanokube.pki.ca import ensure_pki
from nanokube.pki.kubeconfig import write_kubeconfig
from nanokube.store.memory import MemoryStore


async def _jwks_uri(tmp_path, **kwargs) -> tuple[str, int]:
    pki = ensure_pki(str(tmp_path))
    server = APIServer(MemoryStore(), pki, port=0, **kwargs)
    await server.start()
    try:
        write_kubeconfig(str(tmp_path / "kubeconfig"), server.url, pki)
        api = config.new_client_from_config(config_file=str(tmp_path / "kubeconfig"))
        try:
            request = api.param_serialize("GET", "/.well-known/openid-configuration")
            r = await asyncio.to_thread(api.call_api, *request[:4])
            r.read()
            return json.loads(r.data)["jwks_uri"], server.port
        finally:
            api.close()
    finally:
        await server.stop()


@pytest.mark.parametrize("advertise, host", [("192.0.2.7", "192.0.2.7"), ("2001:db8::7", "[2001:db8::7]")])
async def test_jwks_uri_names_the_advertised_address(tmp_path, advertise, host):
    uri, port = await _jwks_uri(tmp_path, advertise=advertise)
    assert uri == f"https://{host}:{port}/openid/v1/jwks"


async def test_jwks_uri_is_the_flags_when_set(tmp_path):
    uri, _ = await _jwks_uri(tmp_path, advertise="192.0.2.7", jwks_uri="https://issuer.example/keys")
    assert uri == "https://issuer.example/keys"


@pytest.mark.parametrize("value, message", [
    ("http://baz.com", "service-account-jwks-uri requires https scheme, parsed as: http://baz.com"),
    ("https://[::1", "service-account-jwks-uri must be a valid URL: Invalid IPv6 URL"),
])
def test_up_refuses_a_jwks_uri_not_https(value, message, capsys):
    with pytest.raises(SystemExit) as e:
        main(["up", "--service-account-jwks-uri", value])
    assert e.value.code == 2 and capsys.readouterr().err.rstrip().endswith(f"--service-account-jwks-uri: {message}")
