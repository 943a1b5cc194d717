"""The Authorization header's Bearer scheme is read as kube-apiserver's bearertoken authenticator
reads it: the scheme in any case (the official Python client's in-cluster config sends
`bearer <token>`), the token the next space-separated part."""

from __future__ import annotations

import asyncio
import json
import ssl
import urllib.error
import urllib.request

import pytest
from kubernetes import client

from tests.served import served

REVIEW = json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}).encode()


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER"])
async def test_the_scheme_is_matched_in_any_case(tmp_path, scheme):
    async with served(tmp_path) as (server, api_client):
        core = client.CoreV1Api(api_client)
        await asyncio.to_thread(core.create_namespaced_service_account, "default", {"metadata": {"name": "robot"}})
        token = (await asyncio.to_thread(core.create_namespaced_service_account_token, "robot", "default",
                                         {"spec": {}})).status.token
        ctx = ssl.create_default_context(cadata=server.pki.ca.cert_pem.decode())

        def review(authorization: str) -> tuple[int, dict]:
            request = urllib.request.Request(server.url + "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                                             data=REVIEW, method="POST",
                                             headers={"Authorization": authorization, "Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, context=ctx, timeout=10) as r:
                    return r.status, json.loads(r.read())
            except urllib.error.HTTPError as e:
                return e.code, json.loads(e.read())

        code, body = await asyncio.to_thread(review, f"{scheme} {token}")
        assert (code, body["status"]["userInfo"]["username"]) == (201, "system:serviceaccount:default:robot")
        code, body = await asyncio.to_thread(review, f"{scheme} {token[:-4]}xxxx")
        assert (code, body["reason"]) == (401, "Unauthorized")


async def test_another_scheme_is_anonymous_and_a_bad_bearer_token_unauthorized(tmp_path):
    """No authenticator reads Basic (gone since 1.19), so the request is system:anonymous's; a
    bearer token nobody issued fails the chain (401), not anonymous."""
    async with served(tmp_path) as (server, _):
        ctx = ssl.create_default_context(cadata=server.pki.ca.cert_pem.decode())

        def get(authorization: str) -> tuple[int, dict]:
            request = urllib.request.Request(server.url + "/api/v1/namespaces/default/pods",
                                             headers={"Authorization": authorization})
            try:
                with urllib.request.urlopen(request, context=ctx, timeout=10) as r:
                    return r.status, json.loads(r.read())
            except urllib.error.HTTPError as e:
                return e.code, json.loads(e.read())

        code, body = await asyncio.to_thread(get, "Basic dXNlcjpwYXNz")
        assert (code, body["message"]) == (403, 'pods is forbidden: User "system:anonymous" cannot list resource '
                                                '"pods" in API group "" in the namespace "default"')
        code, body = await asyncio.to_thread(get, "bearer not-a-token")
        assert (code, body["reason"]) == (401, "Unauthorized")
