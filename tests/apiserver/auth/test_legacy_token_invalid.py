"""A legacy (Secret-based) ServiceAccount token whose Secret is labelled
kubernetes.io/legacy-token-invalid-since no longer authenticates, as upstream's legacy validator
(pkg/serviceaccount/legacy.go) refuses it; removing the label allows it again."""

import base64
import ssl

import aiohttp

from nanokube.apiserver.app import APIServer
from nanokube.controllers.serviceaccount_token import legacy_claims
from nanokube.pki.jwt import sign
from nanokube.pki.ca import ensure_pki
from nanokube.store.memory import MemoryStore
from tests.apiserver.test_request_body import admin_context

LABEL = "kubernetes.io/legacy-token-invalid-since"


async def test_a_legacy_token_labelled_invalid_gets_401_and_a_review_says_why(tmp_path):
    pki = ensure_pki(str(tmp_path))
    server = APIServer(MemoryStore(), pki, port=0)
    await server.start()
    base = f"https://localhost:{server.port}"
    secret_url = f"{base}/api/v1/namespaces/default/secrets/robot-token"
    merge = {"Content-Type": "application/merge-patch+json"}
    ctx = admin_context(pki, tmp_path)
    trust = ssl.create_default_context(cadata=pki.ca.cert_pem.decode())  # no client certificate: the token alone
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as admin:
            async with admin.post(f"{base}/api/v1/namespaces/default/serviceaccounts",
                                  json={"metadata": {"name": "robot"}}) as r:
                sa = await r.json()
            secret = {"metadata": {"name": "robot-token", "annotations": {"kubernetes.io/service-account.name": "robot"}},
                      "type": "kubernetes.io/service-account-token"}
            # what the token controller writes into the Secret: a legacy JWT signed with the server's key
            token = sign(server.tokens.key, legacy_claims(sa, secret))
            secret["data"] = {"token": base64.b64encode(token.encode()).decode()}
            async with admin.post(f"{base}/api/v1/namespaces/default/secrets", json=secret) as r:
                assert r.status == 201

            async def whoami() -> tuple[int, str]:
                async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=trust)) as anon, anon.post(
                        f"{base}/apis/authentication.k8s.io/v1/selfsubjectreviews",
                        json={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
                        headers={"Authorization": f"Bearer {token}"}) as r:
                    body = await r.json()
                    if r.status != 201:  # a Status
                        return r.status, body["message"]
                    return r.status, body["status"]["userInfo"]["username"]

            async def review() -> dict:
                async with admin.post(f"{base}/apis/authentication.k8s.io/v1/tokenreviews",
                                      json={"spec": {"token": token}}) as r:
                    return (await r.json())["status"]

            assert await whoami() == (201, "system:serviceaccount:default:robot")
            assert (await review())["authenticated"] is True
            # any day, past or future, invalidates: upstream checks only that the label is set
            async with admin.patch(secret_url, data=f'{{"metadata":{{"labels":{{"{LABEL}":"2999-01-01"}}}}}}',
                                   headers=merge) as r:
                assert r.status == 200
            assert await whoami() == (401, "Unauthorized")
            status = await review()
            assert "authenticated" not in status or status["authenticated"] is False
            assert status["error"] == (
                "the token in secret default/robot-token for service account default/robot has been marked invalid. "
                "Use tokens from the TokenRequest API or manually created secret-based tokens, or remove the "
                "'kubernetes.io/legacy-token-invalid-since' label from the secret to temporarily allow use of this token")
            async with admin.patch(secret_url, data=f'{{"metadata":{{"labels":{{"{LABEL}":null}}}}}}', headers=merge) as r:
                assert r.status == 200
            assert await whoami() == (201, "system:serviceaccount:default:robot")
    finally:
        await server.stop()
