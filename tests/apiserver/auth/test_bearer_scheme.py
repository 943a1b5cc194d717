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
    bearer token nobody issued fails the chain (401), not anonymous, on public paths too."""
    async with served(tmp_path) as (server, _):
        ctx = ssl.create_default_context(cadata=server.pki.ca.cert_pem.decode())

        def get(authorization: str, path: str = "/api/v1/namespaces/default/pods") -> tuple[int, dict]:
            request = urllib.request.Request(server.url + path, headers={"Authorization": authorization})
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
        code, body = await asyncio.to_thread(get, "Bearer not-a-token", "/version")  # public to anonymous only
        assert (code, body["reason"]) == (401, "Unauthorized")
        code, body = await asyncio.to_thread(get, "Basic dXNlcjpwYXNz", "/version")
        assert (code, body["gitVersion"]) == (200, "v1.37.0-nanokube")
        # a space before the token leaves it empty: ignored (anonymous) with upstream's Warning, not a 401
        def warned(path: str) -> tuple[int, list[str]]:
            request = urllib.request.Request(server.url + path, headers={"Authorization": "Bearer  not-a-token"})
            try:
                with urllib.request.urlopen(request, context=ctx, timeout=10) as r:
                    return r.status, r.headers.get_all("Warning")
            except urllib.error.HTTPError as e:
                return e.code, e.headers.get_all("Warning")

        said = ['299 - "the provided Authorization header contains extra space before the bearer token, and is ignored"']
        assert await asyncio.to_thread(warned, "/version") == (200, said)
        assert await asyncio.to_thread(warned, "/api/v1/namespaces/default/pods") == (403, said)


async def test_a_token_review_that_fails_says_why_as_the_authenticators_do(tmp_path):
    """tokenreview's REST sets status.error from the authenticator chain's error, authenticated false
    (omitted) and no audiences: a token that is no JWT of ours is bearertoken's "invalid bearer token",
    one for other audiences the JWT authenticator's audience error (was `{"user": {}}` alone)."""
    async with served(tmp_path) as (server, api_client):
        core, auth = client.CoreV1Api(api_client), client.AuthenticationV1Api(api_client)
        await asyncio.to_thread(core.create_namespaced_service_account, "default", {"metadata": {"name": "robot"}})
        token = (await asyncio.to_thread(core.create_namespaced_service_account_token, "robot", "default",
                                         {"spec": {"audiences": ["vault"]}})).status.token

        def review(token: str, audiences: list[str] | None = None) -> dict:
            spec = {"token": token, **({"audiences": audiences} if audiences else {})}
            return api_client.sanitize_for_serialization(auth.create_token_review({"spec": spec}).status)

        assert await asyncio.to_thread(review, "not-a-token") == {"user": {}, "error": "invalid bearer token"}
        assert await asyncio.to_thread(review, token, ["other"]) == {
            "user": {}, "error": 'token audiences ["vault"] is invalid for the target audiences ["other"]'}
        ok = await asyncio.to_thread(review, token, ["vault"])
        assert (ok["authenticated"], ok["audiences"], ok["user"]["username"], "error" in ok) == (
            True, ["vault"], "system:serviceaccount:default:robot", False)
        old_uid = ok["user"]["uid"]
        await asyncio.to_thread(core.delete_namespaced_service_account, "robot", "default")
        assert await asyncio.to_thread(review, token, ["vault"]) == {  # claims.go: the lookup's error
            "user": {}, "error": 'serviceaccounts "robot" not found'}
        new_uid = (await asyncio.to_thread(core.create_namespaced_service_account, "default",
                                           {"metadata": {"name": "robot"}})).metadata.uid
        assert await asyncio.to_thread(review, token, ["vault"]) == {
            "user": {}, "error": f"service account UID ({new_uid}) does not match claim ({old_uid})"}
