"""Bootstrap token authentication (kube-apiserver's --enable-bootstrap-token-auth, on in `up` as
kubeadm runs it): `<id>.<secret>` is system:bootstrap:<id> in system:bootstrappers and the extra
groups while its kube-system Secret is a live bootstrap.kubernetes.io/token one marked for
authentication; any failed check is a 401."""

from __future__ import annotations

import argparse
import asyncio
import json
import ssl
import urllib.error
import urllib.request

from kubernetes import client

from nanokube.apiserver import auth_options
from tests.served import served

TOKEN = "abcdef.0123456789abcdef"


def _secret(name: str = "bootstrap-token-abcdef", type_: str = "bootstrap.kubernetes.io/token", **data: str) -> dict:
    fields = {"token-id": "abcdef", "token-secret": "0123456789abcdef", "usage-bootstrap-authentication": "true", **data}
    return {"metadata": {"name": name, "namespace": "kube-system"}, "type": type_,
            "string_data": {k: v for k, v in fields.items() if v is not None}}


def _who(server, token: str) -> tuple[int, dict]:
    ctx = ssl.create_default_context(cadata=server.pki.ca.cert_pem.decode())
    review = json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}).encode()
    req = urllib.request.Request(server.url + "/apis/authentication.k8s.io/v1/selfsubjectreviews", data=review,
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


async def _with(server, api_client, secret: dict, token: str = TOKEN) -> tuple[int, dict]:
    """Who `token` is while `secret` is the only bootstrap token Secret."""
    core = client.CoreV1Api(api_client)
    await asyncio.to_thread(core.create_namespaced_secret, "kube-system", secret)
    try:
        return await asyncio.to_thread(_who, server, token)
    finally:
        await asyncio.to_thread(core.delete_namespaced_secret, secret["metadata"]["name"], "kube-system")


async def test_a_live_token_is_its_bootstrap_user_with_the_extra_groups(tmp_path):
    async with served(tmp_path) as (server, api_client):
        auth_options.apply(server, auth_options.load(argparse.Namespace(enable_bootstrap_token_auth=True)))
        code, got = await _with(server, api_client, _secret(**{
            "auth-extra-groups": "system:bootstrappers:kubeadm:default-node-token,system:bootstrappers:a",
            "expiration": "2099-01-01T00:00:00Z"}))
        assert code == 201, got
        assert got["status"]["userInfo"] == {"username": "system:bootstrap:abcdef", "groups": [
            "system:bootstrappers", "system:bootstrappers:a", "system:bootstrappers:kubeadm:default-node-token",
            "system:authenticated"]}


async def test_every_failed_check_is_a_401(tmp_path):
    refused = [
        _secret(expiration="2020-01-01T00:00:00Z"),  # expired
        _secret(expiration="next week"),  # an expiration that does not parse is past
        # (and so is one Go's time.Parse(RFC3339) refuses, which Python's fromisoformat took for 2099)
        _secret(expiration="2099-01-01"), _secret(expiration="2099-01-01T00:00:00"),
        _secret(expiration="2099-01-01T00:00:00+0100"), _secret(expiration="2099-01-01 00:00:00Z"),
        _secret(**{"usage-bootstrap-authentication": None}),  # not for authentication
        _secret(**{"usage-bootstrap-authentication": "false"}),
        _secret(**{"token-secret": "0123456789abcdee"}),  # another secret
        _secret(**{"token-id": "abcdeg"}),  # the Secret names another id
        _secret(type_="Opaque"),
        _secret(**{"auth-extra-groups": "system:masters"}),  # only system:bootstrappers:... groups
        _secret(**{"auth-extra-groups": "system:bootstrappers:a\n"}),  # matched whole, as Go's \A...\z
        _secret(name="bootstrap-token-abcdeg"),  # not the token's Secret
    ]
    async with served(tmp_path) as (server, api_client):
        auth_options.apply(server, auth_options.load(argparse.Namespace(enable_bootstrap_token_auth=True)))
        for secret in refused:
            code, got = await _with(server, api_client, secret)
            assert (code, got.get("reason")) == (401, "Unauthorized"), secret


async def test_without_the_flag_a_bootstrap_token_is_nobody(tmp_path):
    async with served(tmp_path) as (server, api_client):
        auth_options.apply(server, auth_options.load(argparse.Namespace(enable_bootstrap_token_auth=False)))
        code, _ = await _with(server, api_client, _secret())
        assert code == 401
