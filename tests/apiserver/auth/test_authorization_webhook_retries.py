"""An authorization webhook that fails transiently (a 500, 504 or 429, or an answer with Retry-After)
is asked again, as upstream's DefaultAuthWebhookRetryBackoff does (5 tries, from 0.5 s apart); any
other failure (a 403 here) is the webhook failing at once, its failurePolicy applied."""

from __future__ import annotations

import json

from tests.apiserver.auth.test_authorization_config import Webhook, _list, config, served


def _failing_first(webhook: Webhook, codes: list[int]) -> None:
    """The webhook answers each of `codes` in turn (an error status, no review), then as it would."""
    handler = webhook.httpd.RequestHandlerClass
    answer = handler.do_POST

    def do_post(h):
        if not codes:
            return answer(h)
        length = int(h.headers["Content-Length"])
        webhook.reviews.append(json.loads(h.rfile.read(length)))
        h.send_response(codes.pop(0))
        h.send_header("Content-Length", "0")
        h.end_headers()
    handler.do_POST = do_post


async def test_a_webhook_failing_transiently_is_asked_again(tmp_path):
    webhook = Webhook(tmp_path)
    _failing_first(webhook, [500, 429])
    try:
        async with served(tmp_path, config(webhook)) as (server, api):
            assert await _list(api, "pod", "team-a") == 200  # the third try's answer
            assert len(webhook.reviews) == 3
            metrics = server.metrics_text().decode()
            assert 'apiserver_authorization_webhook_evaluations_total{name="team-a",result="success"} 1' in metrics
    finally:
        webhook.close()


async def test_a_webhook_refusing_the_apiserver_is_not_asked_again(tmp_path):
    webhook = Webhook(tmp_path)
    _failing_first(webhook, [403])
    try:
        async with served(tmp_path, config(webhook, "Deny")) as (server, api):
            assert await _list(api, "pod", "team-a") == 500  # failurePolicy Deny, after one try, with its error
            assert len(webhook.reviews) == 1
            metrics = server.metrics_text().decode()
            assert 'apiserver_authorization_webhook_evaluations_total{name="team-a",result="error"} 1' in metrics
    finally:
        webhook.close()
