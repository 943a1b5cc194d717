"""--audit-webhook-config-file: every audit event is also POSTed, as an audit.k8s.io/v1 EventList, to the
server a kubeconfig names (kube-apiserver's webhook backend), in batch, blocking or blocking-strict mode."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import aiohttp
import orjson
import pytest
from aiohttp import web

from nanokube.apiserver.app import APIServer
from nanokube.apiserver.audit_file import LogOptions
from nanokube.apiserver.audit_policy import load
from nanokube.apiserver.audit_webhook import WebhookBackend, WebhookError
from nanokube.pki.ca import ensure_pki
from nanokube.pki.kubeconfig import write_kubeconfig
from nanokube.store.memory import MemoryStore
from tests.apiserver.test_audit_policy import KUBECTL
from tests.apiserver.test_request_body import admin_context
from tests.controllers import eventually

POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Request
    resources: [{group: "", resources: ["configmaps"]}]
"""


#: configmap creates at Metadata, every stage
CREATES = """\
apiVersion: audit.k8s.io/v1
kind: Policy
rules:
  - level: Metadata
    verbs: ["create"]
    resources: [{group: "", resources: ["configmaps"]}]
"""


class Sink:
    """The webhook's server: what it was sent, and a first answer of 503 (or every one, `down`) when asked."""

    def __init__(self):
        self.lists: list[dict] = []
        self.fail_first = self.down = False

    async def handle(self, request: web.Request) -> web.Response:
        assert request.content_type == "application/json"
        if self.fail_first or self.down:
            self.fail_first = False
            return web.Response(status=503)
        self.lists.append(orjson.loads(await request.read()))
        return web.Response(status=200)

    def events(self) -> list[dict]:
        return [e for lst in self.lists for e in lst["items"] if e["user"]["username"] == "kubernetes-super-admin"]


@pytest.fixture
async def sink(tmp_path):
    s = Sink()
    app = web.Application()
    app.router.add_post("/audit", s.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    (tmp_path / "webhook.yaml").write_text(f"""\
apiVersion: v1
kind: Config
clusters: [{{name: sink, cluster: {{server: "http://127.0.0.1:{port}/audit"}}}}]
users: [{{name: apiserver, user: {{}}}}]
contexts: [{{name: webhook, context: {{cluster: sink, user: apiserver}}}}]
current-context: webhook
""")
    (tmp_path / "policy.yaml").write_text(POLICY)
    yield s
    await runner.cleanup()


async def _served(tmp_path, webhook: WebhookBackend, log_format: str = "json"):
    pki = ensure_pki(str(tmp_path))
    server = APIServer(MemoryStore(), pki, port=0, audit_log_path=str(tmp_path / "audit.log"),
                       audit_policy=load(tmp_path / "policy.yaml"), audit_webhook=webhook, audit_log_options=LogOptions(format=log_format))
    server.rest.admission.disable("ServiceAccount")
    await server.start()
    write_kubeconfig(str(tmp_path / "kubeconfig"), server.url, pki)
    return server


async def kubectl(tmp_path, *args: str) -> None:
    r = await asyncio.to_thread(subprocess.run, [KUBECTL, "--kubeconfig", str(tmp_path / "kubeconfig"), *args],
                                capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


async def test_blocking_mode_sends_a_requests_events_before_it_is_answered(tmp_path, sink):
    server = await _served(tmp_path, WebhookBackend(str(tmp_path / "webhook.yaml"), "blocking", initial_backoff=0.01))
    try:
        await kubectl(tmp_path, "create", "configmap", "c", "--from-literal=k=v")
        (create,) = sink.events()  # already there: kubectl had its answer after the webhook had the event
        assert sink.lists[-1]["kind"] == "EventList" and sink.lists[-1]["apiVersion"] == "audit.k8s.io/v1"
        assert create["verb"] == "create" and create["level"] == "Request" and create["requestObject"]["data"] == {"k": "v"}
        line = [orjson.loads(x) for x in (tmp_path / "audit.log").read_bytes().splitlines()]
        assert create in line  # the same event as the log file's
        sink.fail_first = True  # a 503 is retried
        await kubectl(tmp_path, "delete", "configmap", "c")
        assert [e["verb"] for e in sink.events()][:2] == ["create", "delete"]  # (kubectl then gets it, gone)
    finally:
        await server.stop()


async def test_batch_mode_sends_in_the_background_and_what_is_left_at_shutdown(tmp_path, sink):
    webhook = WebhookBackend(str(tmp_path / "webhook.yaml"), "batch", max_batch=2, max_wait=3600)
    server = await _served(tmp_path, webhook)
    stopped = False
    try:
        await kubectl(tmp_path, "create", "configmap", "a")
        assert sink.events() == []  # waiting for a batch of 2 (or an hour)
        await kubectl(tmp_path, "create", "configmap", "b")
        for _ in range(200):
            if sink.events():
                break
            await asyncio.sleep(0.01)
        assert [(e["verb"], e["objectRef"]["name"]) for e in sink.events()] == [("create", "a"), ("create", "b")]
        assert [len(lst["items"]) for lst in sink.lists] == [2]
        await kubectl(tmp_path, "create", "configmap", "c")
        await server.stop()
        stopped = True
        assert [e["objectRef"]["name"] for e in sink.events()] == ["a", "b", "c"]
    finally:
        if not stopped:
            await server.stop()


async def test_the_legacy_log_format_writes_text_and_the_webhook_still_gets_json(tmp_path, sink):
    server = await _served(tmp_path, WebhookBackend(str(tmp_path / "webhook.yaml"), "blocking"), "legacy")
    try:
        await kubectl(tmp_path, "create", "configmap", "c")
    finally:
        await server.stop()
    (create,) = sink.events()
    lines = [x for x in (tmp_path / "audit.log").read_text().splitlines() if 'user="kubernetes-super-admin"' in x]
    stamp = create["requestReceivedTimestamp"]
    stamp = stamp[:-1].rstrip("0").rstrip(".") + "Z"
    assert lines == [
        f'{stamp} AUDIT: id="{create["auditID"]}" stage="ResponseComplete" ip="127.0.0.1" method="create" '
        'user="kubernetes-super-admin" groups="\\"system:masters\\",\\"system:authenticated\\"" as="<self>" '
        f'asgroups="<lookup>" user-agent="{create["userAgent"]}" namespace="default" '
        'uri="/api/v1/namespaces/default/configmaps?fieldManager=kubectl-create&fieldValidation=Strict" response="201"']


def test_a_bad_webhook_config_stops_up(tmp_path):
    (tmp_path / "webhook.yaml").write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\n")
    with pytest.raises(WebhookError):
        WebhookBackend(str(tmp_path / "webhook.yaml"))
    r = subprocess.run([sys.executable, "-m", "nanokube.cli", "up", "--data-dir", str(tmp_path / "data"),
                        "--audit-webhook-config-file", str(tmp_path / "webhook.yaml")], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and "nanokube: --audit-webhook-config-file: invalid configuration for the audit webhook" \
        in r.stderr, r.stderr


async def test_blocking_strict_sends_request_received_first_and_fails_a_request_it_cannot_send(tmp_path, sink):
    (tmp_path / "policy.yaml").write_text(CREATES)
    server = await _served(tmp_path, WebhookBackend(str(tmp_path / "webhook.yaml"), "blocking-strict",
                                                    initial_backoff=0.01))
    try:
        await kubectl(tmp_path, "create", "configmap", "a")
        # RequestReceived was sent on its own, before the request went on; the rest once it was answered
        stages = [[e["stage"] for e in lst["items"] if e["user"]["username"] == "kubernetes-super-admin"] for lst in sink.lists]
        assert [s for s in stages if s] == [["RequestReceived"], ["ResponseComplete"]]
        sink.down = True  # every try answered 503
        ctx = admin_context(server.pki, tmp_path)
        uri = "/api/v1/namespaces/default/configmaps"
        async with aiohttp.ClientSession() as http, http.post(f"{server.url}{uri}", json={"metadata": {"name": "b"}},
                                                             ssl=ctx) as r:
            assert r.status == 500
            assert await r.text() == f'Internal Server Error: "{uri}": failed to store audit event\n'
        sink.down = False
        r = await asyncio.to_thread(subprocess.run, [KUBECTL, "--kubeconfig", str(tmp_path / "kubeconfig"), "get",
                                                     "configmap", "b"], capture_output=True, text=True, timeout=60)
        assert r.returncode == 1 and "NotFound" in r.stderr  # the request ended at RequestReceived
        async with aiohttp.ClientSession() as http, http.get(f"{server.url}/metrics", ssl=ctx) as r:
            metrics = await r.text()
        assert 'apiserver_audit_error_total{plugin="webhook"} 1' in metrics.splitlines()
        assert "apiserver_audit_requests_rejected_total 1" in metrics.splitlines()
    finally:
        await server.stop()


async def test_blocking_serves_a_request_whose_events_cannot_be_sent(tmp_path, sink):
    (tmp_path / "policy.yaml").write_text(CREATES)
    sink.down = True
    server = await _served(tmp_path, WebhookBackend(str(tmp_path / "webhook.yaml"), "blocking", initial_backoff=0.01))
    try:
        await kubectl(tmp_path, "create", "configmap", "a")
        await kubectl(tmp_path, "get", "configmap", "a")
    finally:
        await server.stop()
    assert sink.lists == []


async def test_batch_mode_sends_a_batch_when_the_throttle_lets_it(tmp_path, sink):
    (tmp_path / "policy.yaml").write_text(POLICY.replace("  - level: Request\n", "  - level: Request\n    users: [kubernetes-super-admin]\n"))
    # one batch at once, then one every 1000 s
    webhook = WebhookBackend(str(tmp_path / "webhook.yaml"), "batch", max_batch=1, max_wait=3600, throttle=(0.001, 1))
    server = await _served(tmp_path, webhook)
    stopped = False
    try:
        await kubectl(tmp_path, "create", "configmap", "a")
        await kubectl(tmp_path, "create", "configmap", "b")

        async def sent():
            return sink.events()
        await eventually(sent)
        await asyncio.sleep(0.3)  # b's batch waits for a token (a batch that may go is sent in milliseconds)
        assert [e["objectRef"]["name"] for e in sink.events()] == ["a"]
        await server.stop()
        stopped = True
        assert [[e["objectRef"]["name"] for e in lst["items"]] for lst in sink.lists] == [["a"], ["b"]]
    finally:
        if not stopped:
            await server.stop()


async def test_blocking_mode_sends_a_watchs_response_started_while_it_streams(tmp_path, sink):
    (tmp_path / "policy.yaml").write_text(CREATES.replace('verbs: ["create"]', 'verbs: ["watch"]'))
    server = await _served(tmp_path, WebhookBackend(str(tmp_path / "webhook.yaml"), "blocking"))
    try:
        async with aiohttp.ClientSession() as http, http.get(
                f"{server.url}/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=30",
                ssl=admin_context(server.pki, tmp_path)) as r:
            assert r.status == 200  # the headers are here; the watch goes on
            assert [e["stage"] for e in sink.events()] == ["RequestReceived", "ResponseStarted"]
    finally:
        await server.stop()


async def test_close_returns_when_a_batch_fills_as_it_is_called(tmp_path, sink):
    """A batch that fills in the turn close() cancels the batch loop: Python 3.11's asyncio.wait_for,
    which the loop waited in, returned the wake and dropped the cancellation, so the loop went on
    waiting for the next batch and close(), which awaits it, never returned (the server's stop hung)."""
    webhook = WebhookBackend(str(tmp_path / "webhook.yaml"), "batch", max_batch=1, max_wait=3600, throttle=None)
    webhook.start()
    for _ in range(3):  # the loop is waiting for a batch
        await asyncio.sleep(0)
    webhook.add(b'{"user":{"username":"kubernetes-super-admin"},"verb":"create"}\n')  # wakes the loop ...
    await webhook.close()  # ... in the turn this cancels it
    assert [e["verb"] for e in sink.events()] == ["create"]
