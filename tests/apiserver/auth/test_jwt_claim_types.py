"""A token its issuer signed whose `aud` holds something other than strings ([{}], [[1]], a string
and an object) is unauthorized, as go-oidc's audience fails to unmarshal: once set() of its
entries was a TypeError, an internal error on the request and in TokenReview."""

from __future__ import annotations

import asyncio

import pytest
from kubernetes import client

from tests.apiserver.auth.jwt_issuer import Issuer, admin_client, served_with
from tests.apiserver.auth.test_jwt_authenticator import _status


@pytest.mark.parametrize("aud", [[{}], [[1]], ["nanokube", {"a": 1}]])
async def test_an_audience_of_other_types_is_unauthorized(tmp_path, aud):
    async with Issuer().served() as issuer, served_with(tmp_path, issuer.config()) as (server, kubeconfig):
        token = issuer.token(aud=aud)
        assert await _status(server, token) == 401
        api = admin_client(kubeconfig)
        try:
            review = await asyncio.to_thread(client.AuthenticationV1Api(api).create_token_review, {
                "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}})
        finally:
            api.close()
        assert review.status.authenticated is not True
        assert review.status.error == "invalid bearer token"
        assert await _status(server, issuer.token()) == 201  # (the issuer's good token still is)
