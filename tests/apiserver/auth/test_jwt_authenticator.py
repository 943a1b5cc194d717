"""JWT issuers of --authentication-config, against a real issuer (tests/apiserver/auth/jwt_issuer.py):
tokens it signs authenticate as the user their claims map to (by claim and prefix, or by CEL),
which `kubectl auth whoami` and RBAC see; a token for another audience, expired, forged, or failing
a claim or user validation rule is a 401; the keys are fetched again whenever none held verifies; the file
is reloaded when it changes (a bad one kept out), and upstream's metrics say so."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import subprocess
import time

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from kubernetes import client
from kubernetes.client.rest import ApiException

from nanokube.cli import main
from tests.apiserver.auth.jwt_issuer import Issuer, admin_client, served_with, token_client
from tests.e2e.conftest import KUBECTL

MAPPINGS = """    username:
      claim: sub
      prefix: 'oidc:'
    groups:
      expression: 'claims.groups.map(g, "team:" + g)'
    uid:
      claim: uid
    extra:
    - key: example.com/tenant
      valueExpression: 'has(claims.tenant) ? claims.tenant : ""'
"""
RULES = """  claimValidationRules:
  - claim: hd
    requiredValue: example.com
  - expression: 'claims.exp - claims.iat <= 3600'
    message: tokens may live an hour at most
  userValidationRules:
  - expression: "!user.username.startsWith('oidc:system:')"
    message: no system users
"""
RELOADS = r'apiserver_authentication_config_controller_automatic_reloads_total\{{apiserver_id_hash="sha256:\w+",status="{}"\}} 1\n'
GOOD = {"hd": "example.com", "groups": ["dev", "ops"], "uid": "u-1", "tenant": "blue"}


async def _whoami(server, token: str) -> dict:
    api = token_client(server, token)
    try:
        review = await asyncio.to_thread(client.AuthenticationV1Api(api).create_self_subject_review,
                                         {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
        return api.sanitize_for_serialization(review)["status"]["userInfo"]
    finally:
        api.close()


async def _status(server, token: str) -> int:
    try:
        await _whoami(server, token)
    except ApiException as e:
        return e.status
    return 201


async def test_a_token_authenticates_as_its_mapped_user_for_kubectl_and_the_client(tmp_path):
    async with Issuer().served() as issuer, served_with(tmp_path, issuer.config(MAPPINGS, RULES)) as (server, _):
        token = issuer.token(**GOOD)
        assert await _whoami(server, token) == {"username": "oidc:alice", "uid": "u-1",
                                                "groups": ["team:dev", "team:ops", "system:authenticated"],
                                                "extra": {"example.com/tenant": ["blue"]}}
        out = await asyncio.to_thread(subprocess.run, [KUBECTL, "--server", server.url, "--certificate-authority",
                                                       server.pki.ca_path, "--token", token, "auth", "whoami", "-o", "json"],
                                      capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        info = json.loads(out.stdout)["status"]["userInfo"]
        assert (info["username"], info["extra"]) == ("oidc:alice", {"example.com/tenant": ["blue"]})
        # an empty extra value is left out
        assert "extra" not in await _whoami(server, issuer.token(**{**GOOD, "tenant": ""}))


async def test_rbac_decides_for_the_mapped_user(tmp_path):
    async with Issuer().served() as issuer, served_with(tmp_path, issuer.config(MAPPINGS, RULES)) as (server, kubeconfig):
        api = token_client(server, issuer.token(**GOOD))
        core = client.CoreV1Api(api)
        with pytest.raises(ApiException) as e:
            await asyncio.to_thread(core.list_namespaced_pod, "default")
        assert e.value.status == 403
        assert 'User "oidc:alice" cannot list resource "pods"' in json.loads(e.value.body)["message"]
        admin = admin_client(kubeconfig)
        await asyncio.to_thread(client.RbacAuthorizationV1Api(admin).create_cluster_role_binding, {
            "metadata": {"name": "ops-view"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                                         "name": "view"},
            "subjects": [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "team:ops"}]})
        for _ in range(100):  # the binding reaches RBAC through the watch cache
            try:
                assert (await asyncio.to_thread(core.list_namespaced_pod, "default")).items == []
                break
            except ApiException:
                await asyncio.sleep(0.05)
        else:
            pytest.fail("the binding never applied")
        admin.close()
        api.close()


async def test_an_email_username_needs_a_verified_email(tmp_path):
    """With the username `claims.email` by expression, the config must read claims.email_verified
    (here a claim validation rule); by claim, the token's email_verified, where present, must be true."""
    rules = "  claimValidationRules:\n  - expression: 'claims.?email_verified.orValue(false)'\n"
    async with Issuer().served() as issuer, \
            served_with(tmp_path, issuer.config("    username:\n      expression: claims.email\n", rules)) as (server, _):
        assert (await _whoami(server, issuer.token(email="a@x.io", email_verified=True)))["username"] == "a@x.io"
        assert await _status(server, issuer.token(email="a@x.io", email_verified=False)) == 401
        assert await _status(server, issuer.token(email="a@x.io")) == 401
        (tmp_path / "authn.yaml").write_text(issuer.config("    username:\n      claim: email\n      prefix: ''\n"))
        for _ in range(100):
            if await _status(server, issuer.token(email="b@x.io")) == 201:  # no email_verified: fine by claim
                break
            await asyncio.sleep(0.1)
        assert (await _whoami(server, issuer.token(email="b@x.io")))["username"] == "b@x.io"
        assert await _status(server, issuer.token(email="b@x.io", email_verified=False)) == 401


async def test_tokens_failing_a_check_are_unauthorized(tmp_path):
    async with Issuer().served() as issuer, served_with(tmp_path, issuer.config(MAPPINGS, RULES)) as (server, _):
        now = int(time.time())
        forged = issuer.token(**GOOD)
        forged = forged[:-8] + ("AAAAAAAA" if not forged.endswith("AAAAAAAA") else "BBBBBBBB")
        for why, token in [("another audience", issuer.token(**GOOD, aud="other")),
                           ("expired", issuer.token(**GOOD, iat=now - 900, exp=now - 300)),
                           ("forged", forged),
                           ("claim rule: hd", issuer.token(**{**GOOD, "hd": "evil.com"})),
                           ("claim rule: hd missing", issuer.token(**{k: v for k, v in GOOD.items() if k != "hd"})),
                           ("claim expression", issuer.token(**GOOD, exp=now + 7200)),
                           ("user rule", issuer.token(**GOOD, sub="system:admin")),
                           ("groups of the wrong type", issuer.token(**{**GOOD, "groups": "dev"}))]:
            assert await _status(server, token) == 401, why
        assert await _status(server, issuer.token(**GOOD)) == 201


async def test_the_keys_are_fetched_again_whenever_none_held_verifies_a_token(tmp_path):
    """go-oidc's RemoteKeySet: no schedule and no limit, a fetch each time no key held verifies a token
    (a new kid, a kid whose key was replaced, a forged signature), none while one does; the metrics keep
    the last fetch's time and key set, one series per issuer."""
    from nanokube.apiserver.auth.oidc import issuer_hash

    async with Issuer().served() as issuer, served_with(tmp_path, issuer.config()) as (server, _):
        assert (await _whoami(server, issuer.token()))["username"] == "oidc:alice"
        fetched = issuer.fetches
        assert (await _whoami(server, issuer.token(sub="carol")))["username"] == "oidc:carol"
        assert issuer.fetches == fetched  # a key held verifies it
        for sub in ("bob", "dan"):  # two rotations in a row: each new kid fetched at once
            issuer.rotate()
            assert (await _whoami(server, issuer.token(sub=sub)))["username"] == f"oidc:{sub}"
            assert issuer.fetches == (fetched := fetched + 1)
        kid, _ = issuer.keys[-1]
        issuer.keys[-1] = (kid, rsa.generate_private_key(public_exponent=65537, key_size=2048))  # same kid, new key
        assert (await _whoami(server, issuer.token(sub="erin")))["username"] == "oidc:erin"
        assert issuer.fetches == (fetched := fetched + 1)
        forged = issuer.token()
        assert await _status(server, forged[:-8] + ("AAAAAAAA" if not forged.endswith("AAAAAAAA") else "BBBBBBBB")) == 401
        assert issuer.fetches == fetched + 1
        metrics = server.metrics_text().decode()
        jwks = json.dumps(issuer._jwks())  # as the issuer serves it (aiohttp's json_response)
        key_sets = re.findall(r'apiserver_authentication_jwt_authenticator_jwks_fetch_last_key_set_info\{(.*)\} 1', metrics)
        assert key_sets == [f'apiserver_id_hash="{server.authentication.metrics.id}",'
                            f'hash="sha256:{hashlib.sha256(jwks.encode()).hexdigest()}",'
                            f'jwt_issuer_hash="{issuer_hash(issuer.url)}"'], key_sets
        assert re.search(r'apiserver_authentication_jwt_authenticator_jwks_fetch_last_timestamp_seconds\{apiserver_id_hash='
                         r'"sha256:\w+",jwt_issuer_hash="sha256:\w+",result="success"\} \d', metrics)
        other = Issuer()
        other.url = "https://127.0.0.1:9"  # nobody answers there: its fetches fail
        (tmp_path / "authn.yaml").write_text(other.config())
        for _ in range(100):  # once reloaded, the issuer the file no longer names has no series
            if issuer_hash(issuer.url) not in server.metrics_text().decode():
                break
            await asyncio.sleep(0.1)
        metrics = server.metrics_text().decode()
        assert issuer_hash(issuer.url) not in metrics
        assert "apiserver_authentication_jwt_authenticator_jwks_fetch_last_key_set_info{" not in metrics


async def test_the_file_is_reloaded_when_it_changes_and_a_bad_one_is_kept_out(tmp_path):
    async with Issuer().served() as issuer, served_with(tmp_path, issuer.config()) as (server, _):
        admin = admin_client(str(tmp_path / "kubeconfig"))

        async def metrics() -> str:
            return await asyncio.to_thread(lambda: admin.rest_client.pool_manager.request(
                "GET", admin.configuration.host + "/metrics").data.decode())

        before = await metrics()
        assert "apiserver_authentication_config_controller_last_config_info{" in before
        (tmp_path / "authn.yaml").write_text(issuer.config("    username:\n      expression: '\"sso:\" + claims.sub'\n"))

        async def name() -> str:
            for _ in range(100):
                got = (await _whoami(server, issuer.token()))["username"]
                if got != "oidc:alice":
                    return got
                await asyncio.sleep(0.1)
            return got
        assert await name() == "sso:alice"
        text = await metrics()
        assert re.search(RELOADS.format("success"), text), text
        assert "apiserver_authentication_config_controller_automatic_reload_last_timestamp_seconds{" in text
        assert text.count("apiserver_authentication_config_controller_last_config_info{") == 1  # the new file's alone
        (tmp_path / "authn.yaml").write_text(issuer.config("    username:\n      claim: sub\n"))  # no prefix: invalid
        for _ in range(100):
            if re.search(RELOADS.format("failure"), text := await metrics()):
                break
            await asyncio.sleep(0.1)
        assert re.search(RELOADS.format("failure"), text), text
        assert (await _whoami(server, issuer.token()))["username"] == "sso:alice"  # the last good file stands
        admin.close()


CONFIG = """apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: {url}
    audiences: {audiences}
  claimMappings:
{mappings}
"""
PREFIXED = "    username:\n      claim: sub\n      prefix: ''"


@pytest.mark.parametrize("url, audiences, mappings, line", [
    ("http://issuer.example", "[a]", PREFIXED, 'jwt[0].issuer.url: Invalid value: "http://issuer.example": URL scheme must be https'),
    ("https://issuer.example", "[]", PREFIXED, "jwt[0].issuer.audiences: Required value: at least one jwt[0].issuer.audiences is required"),
    ("https://issuer.example", "[a, b]", PREFIXED,
     'jwt[0].issuer.audienceMatchPolicy: Invalid value: "": audienceMatchPolicy must be MatchAny for multiple audiences'),
    ("https://issuer.example", "[a]", "    username:\n      claim: sub",
     "jwt[0].claimMappings.username.prefix: Required value: prefix is required when claim is set. It can be set to an "
     "empty string to disable prefixing"),
    ("https://issuer.example", "[a]", "    username: {}", "jwt[0].claimMappings.username: Required value: claim or expression is required"),
    ("https://issuer.example", "[a]", "    username:\n      expression: 'claims.sub +'",
     "jwt[0].claimMappings.username.expression: Invalid value: \"claims.sub +\": compilation failed: ERROR: <input>:1:13: Syntax error"),
    ("https://issuer.example", "[a]", PREFIXED + "\n    extra:\n    - key: kubernetes.io/x\n      valueExpression: claims.x",
     'jwt[0].claimMappings.extra[0].key: Invalid value: "kubernetes.io/x": k8s.io, kubernetes.io and their subdomains are '
     'reserved for Kubernetes use'),
    ("https://issuer.example", "[a]", "    username:\n      expression: claims.email",
     'jwt[0].claimMappings.username.expression: Invalid value: "claims.email": claims.email_verified must be used in '
     "claimMappings.username.expression or claimMappings.extra[*].valueExpression or claimValidationRules[*].expression "
     "when claims.email is used in claimMappings.username.expression"),
    ("https://kubernetes.default.svc.cluster.local", "[a]", PREFIXED,
     'jwt[0].issuer.url: Invalid value: "https://kubernetes.default.svc.cluster.local": URL must not overlap with '
     'disallowed issuers: [https://kubernetes.default.svc.cluster.local]'),
])
def test_up_stops_on_a_bad_jwt_entry_with_upstreams_reason(tmp_path, capsys, url, audiences, mappings, line):
    path = tmp_path / "authn.yaml"
    path.write_text(CONFIG.format(url=url, audiences=audiences, mappings=mappings))
    assert main(["up", "--data-dir", str(tmp_path / "d"), "--authentication-config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("nanokube: --authentication-config: invalid authentication configuration: ") and line in err, err


def test_up_reports_every_error_at_once(tmp_path, capsys):
    path = tmp_path / "authn.yaml"
    path.write_text(CONFIG.format(url="https://a.example", audiences="[a]", mappings=PREFIXED) +
                    "- issuer:\n    url: https://a.example\n    audiences: ['']\n  claimMappings:\n" + PREFIXED + "\n")
    assert main(["up", "--data-dir", str(tmp_path / "d"), "--authentication-config", str(path)]) == 2
    assert capsys.readouterr().err.strip() == (
        "nanokube: --authentication-config: invalid authentication configuration: [jwt[1].issuer.audiences[0]: Required "
        'value, jwt[1].issuer.url: Duplicate value: "https://a.example"]')


async def test_a_token_review_authenticates_an_issuers_token_for_the_servers_audiences(tmp_path):
    """Upstream's TokenReview runs every token authenticator; a JWT issuer's is audience-agnostic:
    the token stands for the API server's audiences, so a review asking for others fails."""
    async with Issuer().served() as issuer, served_with(tmp_path, issuer.config(MAPPINGS, RULES)) as (server, kubeconfig):
        admin = admin_client(kubeconfig)
        api = client.AuthenticationV1Api(admin)

        async def review(**spec) -> dict:
            r = await asyncio.to_thread(api.create_token_review, {"spec": {"token": issuer.token(**GOOD), **spec}})
            return admin.sanitize_for_serialization(r)["status"]
        status = await review()
        assert (status["authenticated"], status["user"]["username"], status["audiences"]) == \
            (True, "oidc:alice", ["https://kubernetes.default.svc.cluster.local"])
        assert status["user"]["extra"] == {"example.com/tenant": ["blue"]}
        assert "authenticated" not in await review(audiences=["somebody-else"])
        admin.close()
