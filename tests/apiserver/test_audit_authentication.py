"""Where the audit sits among a request's filters, as kube-apiserver's handler chain orders them
(authentication, then the audit, then impersonation, priority and fairness and authorization):
the RequestReceived event is written once the user is known, stamped with the time the request
arrived and carrying authentication's annotations only; with --audit-log-mode blocking-strict a
RequestReceived event the log cannot take ends the request with a 500 before anything else is
done. And authentication's Warning (an auto-generated legacy token's) is on every response it
answers, a watch's, which starts before its handler returns, included."""

from __future__ import annotations

import base64
import contextlib
import ssl
import uuid

import aiohttp
import orjson

from nanokube.apiserver.app import APIServer
from nanokube.apiserver.audit_file import LogOptions
from nanokube.apiserver.audit_policy import load
from nanokube.controllers.serviceaccount_token import legacy_claims
from nanokube.pki.ca import ensure_front_proxy, ensure_pki
from nanokube.pki.jwt import sign
from nanokube.store.memory import MemoryStore
from tests.apiserver.auth.test_legacy_token_tracking import AUTO_WARNING
from tests.apiserver.test_audit_webhook import CREATES as POLICY
from tests.apiserver.test_request_body import admin_context

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


def without_certificate(server: APIServer, headers: dict | None = None) -> aiohttp.ClientSession:
    """A session to `server` that trusts its CA and shows no client certificate: `headers` are its
    only credentials."""
    trust = ssl.create_default_context(cadata=server.pki.ca.cert_pem.decode())
    return aiohttp.ClientSession(f"https://localhost:{server.port}", headers=headers,
                                 connector=aiohttp.TCPConnector(ssl=trust))


@contextlib.asynccontextmanager
async def served(tmp_path, log_path: str, options: LogOptions = LogOptions(), policy: str = POLICY):
    """A server auditing configmap creates (by `policy`) to `log_path`, and an admin session to it."""
    (tmp_path / "policy.yaml").write_text(policy)
    pki = ensure_pki(str(tmp_path))
    server = APIServer(MemoryStore(), pki, port=0, audit_log_path=log_path, audit_policy=load(tmp_path / "policy.yaml"),
                       audit_log_options=options)
    await server.start()
    try:
        async with aiohttp.ClientSession(f"https://localhost:{server.port}",
                                         connector=aiohttp.TCPConnector(ssl=admin_context(pki, tmp_path))) as admin:
            yield server, admin
    finally:
        await server.stop()


async def test_request_received_is_written_once_authenticated_before_impersonation_and_authorization(tmp_path):
    log = tmp_path / "audit.log"
    async with served(tmp_path, str(log)) as (_, admin), admin.post(
            CONFIGMAPS, json={"metadata": {"name": "c"}}, headers={"Impersonate-User": "nobody"}) as r:
        assert r.status == 403
    events = [orjson.loads(line) for line in log.read_bytes().splitlines()]
    received, complete = [e for e in events if e["user"]["username"] == "kubernetes-super-admin"]
    assert (received["stage"], complete["stage"]) == ("RequestReceived", "ResponseComplete")
    assert received["auditID"] == complete["auditID"]
    # written before the request was impersonated and authorized: neither is in it yet
    assert "impersonatedUser" not in received and received["annotations"] == {}
    assert complete["impersonatedUser"]["username"] == "nobody"
    assert complete["annotations"]["authorization.k8s.io/decision"] == "forbid"
    assert received["stageTimestamp"] == received["requestReceivedTimestamp"] == complete["requestReceivedTimestamp"]


async def test_blocking_strict_ends_a_request_whose_request_received_event_the_log_cannot_take(tmp_path):
    """/dev/full refuses every write (ENOSPC), as a full disk would."""
    async with served(tmp_path, "/dev/full", LogOptions(mode="blocking-strict")) as (_, admin):
        for headers in ({}, {"Impersonate-User": "nobody"}):  # (refused before authorization would forbid it)
            async with admin.post(CONFIGMAPS, json={"metadata": {"name": "c"}}, headers=headers) as r:
                assert r.status == 500
                assert r.headers["Content-Type"] == "text/plain; charset=utf-8"
                assert r.headers["X-Content-Type-Options"] == "nosniff"
                assert await r.text() == f'Internal Server Error: "{CONFIGMAPS}": failed to store audit event\n'
        async with admin.get(f"{CONFIGMAPS}/c") as r:  # never created; a read the policy does not audit is served
            assert r.status == 404
        async with admin.get("/metrics") as r:
            metrics = _samples(await r.text())
        assert metrics["apiserver_audit_requests_rejected_total"] == 2.0
        assert metrics['apiserver_audit_error_total{plugin="log"}'] >= 2  # (and the server's own writes')
        assert metrics['apiserver_audit_level_total{level="Metadata"}'] >= 2
    async with served(tmp_path, "/dev/full") as (_, admin), admin.post(
            CONFIGMAPS, json={"metadata": {"name": "c"}}) as r:
        assert r.status == 201  # blocking (the default): the failed write is logged, the request served


def _samples(text: str) -> dict[str, float]:
    """/metrics' apiserver_audit_* samples, by series."""
    return {k: float(v) for k, v in (line.rsplit(" ", 1) for line in text.splitlines())
            if k.startswith("apiserver_audit_")}


async def auto_generated_token(server: APIServer, admin: aiohttp.ClientSession, role: str) -> str:
    """An auto-generated legacy token (its Secret listed in its account's) of an account `builder`
    bound to ClusterRole `role` in the default namespace."""
    sa = {"metadata": {"name": "builder"}, "secrets": [{"name": "builder-token"}]}
    async with admin.post("/api/v1/namespaces/default/serviceaccounts", json=sa) as r:
        sa = await r.json()
    secret = {"metadata": {"name": "builder-token", "annotations": {"kubernetes.io/service-account.name": "builder"}},
              "type": "kubernetes.io/service-account-token"}
    token = sign(server.tokens.key, legacy_claims(sa, secret))
    secret["data"] = {"token": base64.b64encode(token.encode()).decode()}
    binding = {"metadata": {"name": "builder"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                                            "kind": "ClusterRole", "name": role},
               "subjects": [{"kind": "ServiceAccount", "name": "builder", "namespace": "default"}]}
    for path, body in (("/api/v1/namespaces/default/secrets", secret),
                       ("/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings", binding)):
        async with admin.post(path, json=body) as r:
            assert r.status == 201, await r.text()
    return token


async def test_an_auto_generated_legacy_tokens_warning_is_on_a_watch_too(tmp_path):
    async with served(tmp_path, str(tmp_path / "audit.log")) as (server, admin):
        token = await auto_generated_token(server, admin, "view")
        async with without_certificate(server, {"Authorization": f"Bearer {token}"}) as robot:  # the token alone
            for query in ("", "?watch=1&timeoutSeconds=5"):
                async with robot.get(CONFIGMAPS + query) as r:
                    assert r.status == 200
                    assert r.headers.getall("Warning", []) == [AUTO_WARNING], query


async def test_a_failed_authentication_is_one_response_started_event_without_a_user(tmp_path):
    """As upstream's WithFailedAuthenticationAudit: the policy is asked for no user, and the one event
    is written as the 401 starts, naming the credentials attempted; no RequestReceived, no ResponseComplete."""
    log = tmp_path / "audit.log"
    policy = "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n  - level: Metadata\n"
    async with served(tmp_path, str(log), policy=policy) as (server, admin):
        async with without_certificate(server) as stranger, stranger.post(
                CONFIGMAPS, json={"metadata": {"name": "c"}}, headers={"Authorization": "Bearer not-a-token"}) as r:
            assert r.status == 401
            audit_id = r.headers["Audit-Id"]
    events = [e for e in map(orjson.loads, log.read_bytes().splitlines()) if e["auditID"] == audit_id]
    assert events == [{
        "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata", "auditID": audit_id,
        "stage": "ResponseStarted", "requestURI": CONFIGMAPS, "verb": "create", "user": {},
        "sourceIPs": ["127.0.0.1"], "userAgent": events[0]["userAgent"],
        "objectRef": {"resource": "configmaps", "namespace": "default", "apiVersion": "v1"},
        "responseStatus": {"metadata": {}, "code": 401, "message": "Authentication failed, attempted: bearer"},
        "requestReceivedTimestamp": events[0]["requestReceivedTimestamp"], "stageTimestamp": events[0]["stageTimestamp"],
        "annotations": {}}]


async def test_a_failed_authentication_is_not_audited_where_the_policy_omits_response_started(tmp_path):
    log = tmp_path / "audit.log"
    policy = "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [ResponseStarted]\nrules:\n  - level: Metadata\n"
    async with served(tmp_path, str(log), policy=policy) as (server, admin):
        async with without_certificate(server) as stranger, stranger.get(
                CONFIGMAPS, headers={"Authorization": "bearer nope", "Audit-ID": "refused-1"}) as r:
            assert (r.status, r.headers["Audit-Id"]) == (401, "refused-1")
    assert b"refused-1" not in log.read_bytes()


async def test_every_response_carries_its_audit_id_which_its_events_carry(tmp_path):
    """As upstream's WithAuditInit: the request's Audit-ID header echoed, else a new UUID, on every
    response (reads the policy does not audit, streams, non-resource paths); the events carry it."""
    log = tmp_path / "audit.log"
    async with served(tmp_path, str(log)) as (_, admin):
        ids = []
        for method, path, body in (("POST", CONFIGMAPS, {"metadata": {"name": "c"}}), ("GET", CONFIGMAPS, None),
                                   ("GET", CONFIGMAPS + "?watch=1&timeoutSeconds=1", None), ("GET", "/healthz", None),
                                   ("GET", "/apis/metrics.k8s.io", None)):
            async with admin.request(method, path, json=body) as r:
                ids.append(r.headers["Audit-Id"])
                assert uuid.UUID(ids[-1]).version == 4, (path, ids[-1])
        assert len(set(ids)) == len(ids)
        async with admin.post(CONFIGMAPS, json={"metadata": {"name": "d"}}, headers={"Audit-ID": "mine-7"}) as r:
            assert (r.status, r.headers["Audit-Id"]) == (201, "mine-7")
    events = [orjson.loads(line) for line in log.read_bytes().splitlines()]
    created = [e for e in events if e["verb"] == "create" and e["requestURI"] == CONFIGMAPS]
    assert [(e["auditID"], e["stage"]) for e in created] == [
        (ids[0], "RequestReceived"), (ids[0], "ResponseComplete"), ("mine-7", "RequestReceived"),
        ("mine-7", "ResponseComplete")]


async def test_the_audit_id_header_is_set_without_an_audit_log(tmp_path):
    pki = ensure_pki(str(tmp_path))
    server = APIServer(MemoryStore(), pki, port=0)
    await server.start()
    try:
        async with aiohttp.ClientSession(f"https://localhost:{server.port}", connector=aiohttp.TCPConnector(
                ssl=admin_context(pki, tmp_path))) as admin, admin.get(CONFIGMAPS, headers={"Audit-ID": "x" * 5000}) as r:
            assert (r.status, r.headers["Audit-Id"]) == (200, "x" * 5000)
    finally:
        await server.stop()


async def test_a_failed_token_beside_a_certificate_names_both_methods(tmp_path):
    """The front proxy's certificate vouches for no one without X-Remote-User, so the token is tried
    and fails: the event names both credentials, in upstream's order."""
    log = tmp_path / "audit.log"
    policy = "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n  - level: Metadata\n"
    async with served(tmp_path, str(log), policy=policy) as (server, _):
        client = ensure_front_proxy(server.pki.dir)[1]
        (tmp_path / "fp.crt").write_bytes(client.cert_pem)
        (tmp_path / "fp.key").write_bytes(client.key_pem)
        ctx = ssl.create_default_context(cadata=server.pki.ca.cert_pem.decode())
        ctx.load_cert_chain(tmp_path / "fp.crt", tmp_path / "fp.key")
        async with aiohttp.ClientSession(f"https://localhost:{server.port}",
                                         connector=aiohttp.TCPConnector(ssl=ctx)) as proxy, proxy.get(
                CONFIGMAPS, headers={"Authorization": "Bearer nope", "Audit-ID": "fp-1"}) as r:
            assert r.status == 401
    [event] = [e for e in map(orjson.loads, log.read_bytes().splitlines()) if e["auditID"] == "fp-1"]
    assert (event["stage"], event["user"], event["responseStatus"]["message"]) == (
        "ResponseStarted", {}, "Authentication failed, attempted: bearer, x509")
