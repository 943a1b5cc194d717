"""The OIDC discovery document's jwks_uri, as kube-apiserver builds it (NewOpenIDMetadataProvider):
--service-account-jwks-uri when set, else https:// the external address (the advertised one, with
the secure port) and /openid/v1/jwks; `nanokube up` refuses a jwks URI that is not https. /api's
serverAddressByClientCIDRs names the same external address."""

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


async def _get(tmp_path, path: str, **kwargs) -> tuple[dict, int]:
    pki = ensure_pki(str(tmp_path))
    server = APIServer(MemoryStore(), pki, port=0, **kwargs)
    await server.start()
    try:
        write_kubeconfig(str(tmp_path / "kubeconfig"), server.url, pki)
        api = config.new_client_from_config(config_file=str(tmp_path / "kubeconfig"))
        try:
            request = api.param_serialize("GET", path)
            r = await asyncio.to_thread(api.call_api, *request[:4])
            r.read()
            return json.loads(r.data), server.port
        finally:
            api.close()
    finally:
        await server.stop()


async def _jwks_uri(tmp_path, **kwargs) -> tuple[str, int]:
    doc, port = await _get(tmp_path, "/.well-known/openid-configuration", **kwargs)
    return doc["jwks_uri"], port


@pytest.mark.parametrize("advertise, host", [("192.0.2.7", "192.0.2.7"), ("2001:db8::7", "[2001:db8::7]")])
async def test_jwks_uri_names_the_advertised_address(tmp_path, advertise, host):
    uri, port = await _jwks_uri(tmp_path, advertise=advertise)
    assert uri == f"https://{host}:{port}/openid/v1/jwks"


@pytest.mark.parametrize("advertise, host", [("192.0.2.7", "192.0.2.7"), ("2001:db8::7", "[2001:db8::7]")])
async def test_api_names_the_advertised_address_and_port_for_every_client(tmp_path, advertise, host):
    """As a kubeadm cluster's `kubectl get --raw /api`: {"clientCIDR": "0.0.0.0/0", "serverAddress": "<advertise>:6443"}."""
    doc, port = await _get(tmp_path, "/api", advertise=advertise)
    assert doc["serverAddressByClientCIDRs"] == [{"clientCIDR": "0.0.0.0/0", "serverAddress": f"{host}:{port}"}]


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
