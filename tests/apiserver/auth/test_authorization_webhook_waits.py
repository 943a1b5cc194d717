"""A slow authorization webhook holds only the requests it is asked about: a SelfSubjectAccessReview,
a SubjectAccessReview and an impersonating request wait for its answer while the server goes on
answering everyone else (where such callers asked it synchronously and froze the server for the
webhook's round trip). A SelfSubjectRulesReview says its list is incomplete where a webhook
authorizes, as upstream's rule resolver for webhooks does."""

from __future__ import annotations

import asyncio
import threading

from kubernetes import client

from nanokube.pki.ca import issue
from tests.apiserver.auth.test_authorization_config import Webhook, _list, config, served


class Held:
    """Holds the webhook's answers until released, and says when it has been asked."""

    def __init__(self, webhook: Webhook) -> None:
        self.asked, self.release = threading.Event(), threading.Event()
        handler = webhook.httpd.RequestHandlerClass
        answer = handler.do_POST

        def do_post(h):
            self.asked.set()
            self.release.wait(30)
            answer(h)
        handler.do_POST = do_post


async def _meanwhile(api, held: Held, call):
    """`call` (a blocking client call) started, the webhook asked and holding it: another request is
    answered before the webhook is let go; then `call`'s answer."""
    pending = asyncio.ensure_future(asyncio.to_thread(call))
    assert await asyncio.to_thread(held.asked.wait, 30)
    assert await _list(api, "pod", "default") == 403  # RBAC's answer, the webhook still holding
    assert not pending.done() and not held.release.is_set()
    held.release.set()
    answer = await pending
    held.asked.clear()
    held.release.clear()
    return answer


def _patient(webhook: Webhook) -> str:
    """The authorization config, its webhook given time to answer however busy the test machine is."""
    return config(webhook).replace("timeout: 3s", "timeout: 30s")


def _root(tmp_path, server) -> client.ApiClient:
    """A client of a system:masters user, whom no authorizer is asked about."""
    root = issue(server.pki.ca, "root", organizations=("system:masters",), client=True)
    (tmp_path / "root.crt").write_bytes(root.cert_pem)
    (tmp_path / "root.key").write_bytes(root.key_pem)
    c = client.Configuration()
    c.host, c.ssl_ca_cert = server.url, server.pki.ca_path
    c.cert_file, c.key_file = str(tmp_path / "root.crt"), str(tmp_path / "root.key")
    return client.ApiClient(c)


async def test_requests_asking_a_slow_webhook_do_not_hold_the_server(tmp_path):
    webhook = Webhook(tmp_path)
    held = Held(webhook)
    try:
        async with served(tmp_path, _patient(webhook)) as (server, api):
            authz = client.AuthorizationV1Api(api)
            ssar = {"spec": {"resourceAttributes": {"namespace": "team-a", "verb": "get", "resource": "configmaps"}}}
            answer = await _meanwhile(api, held, lambda: authz.create_self_subject_access_review(ssar))
            assert answer.status.allowed is True
            sar = {"spec": {"user": "erin", "groups": ["devs"], "uid": "e1", "resourceAttributes": {
                "namespace": "team-a", "verb": "list", "resource": "secrets"}}}
            with _root(tmp_path, server) as root:
                answer = await _meanwhile(api, held, lambda: client.AuthorizationV1Api(root).create_subject_access_review(sar))
            assert (answer.status.allowed, answer.status.reason) == (False, "team-a keeps its secrets")
            assert [(r["spec"]["user"], r["spec"].get("uid")) for r in webhook.reviews] == [("dave", None), ("erin", "e1")]
    finally:
        held.release.set()
        webhook.close()


async def test_a_rules_review_is_incomplete_where_a_webhook_authorizes(tmp_path):
    webhook = Webhook(tmp_path)
    try:
        async with served(tmp_path, _patient(webhook)) as (server, api):
            rules = await asyncio.to_thread(client.AuthorizationV1Api(api).create_self_subject_rules_review,
                                            {"spec": {"namespace": "team-a"}})
            assert rules.status.incomplete is True
            assert rules.status.evaluation_error == "webhook authorizer does not support user rule resolution"
            assert any("selfsubjectrulesreviews" in (r.resources or []) for r in rules.status.resource_rules)
            assert webhook.reviews == []  # listing rules asks no webhook
    finally:
        webhook.close()


async def test_a_policys_authorizer_check_asking_a_slow_webhook_does_not_hold_the_server(tmp_path):
    """CEL's `authorizer` in a ValidatingAdmissionPolicy: the policy is evaluated in a worker, each check
    handed back to the loop, whose authorizer asks the webhook off it."""
    webhook = Webhook(tmp_path)
    held = Held(webhook)
    held.release.set()
    check = "authorizer.group('').resource('pods').namespace('team-a').name(object.metadata.name).check('get').allowed()"
    try:
        async with served(tmp_path, _patient(webhook)) as (server, api):
            with _root(tmp_path, server) as root:
                await asyncio.to_thread(client.CoreV1Api(root).create_namespace, {"metadata": {"name": "team-a"}})
                admission = client.AdmissionregistrationV1Api(root)
                await asyncio.to_thread(admission.create_validating_admission_policy, {
                    "metadata": {"name": "may-read-its-pod"},
                    "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                                     "operations": ["CREATE"], "resources": ["configmaps"]}]},
                             "validations": [{"expression": f"object.metadata.name != 'probe' && {check}"}]}})
                await asyncio.to_thread(admission.create_validating_admission_policy_binding, {
                    "metadata": {"name": "may-read-its-pod"},
                    "spec": {"policyName": "may-read-its-pod", "validationActions": ["Deny"]}})
            core = client.CoreV1Api(api)
            for _ in range(100):  # until the policy is in force: it refuses the probe
                try:
                    await asyncio.to_thread(core.create_namespaced_config_map, "team-a", {"metadata": {"name": "probe"}})
                    await asyncio.to_thread(core.delete_namespaced_config_map, "probe", "team-a")
                except client.ApiException as e:
                    assert e.status == 422, e.body
                    break
                await asyncio.sleep(0.1)
            held.asked.clear()
            held.release.clear()
            made = await _meanwhile(api, held, lambda: core.create_namespaced_config_map("team-a", {"metadata": {"name": "c1"}}))
            assert made.metadata.name == "c1"
            asked = [r["spec"]["resourceAttributes"] for r in webhook.reviews]
            assert {"namespace": "team-a", "verb": "get", "resource": "pods", "name": "c1"} in \
                [{k: v for k, v in ra.items() if k != "version"} for ra in asked]
    finally:
        held.release.set()
        webhook.close()
