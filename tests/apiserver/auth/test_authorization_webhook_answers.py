"""An authorization webhook whose answer is not a SubjectAccessReview with a status object (a
status that is a string, a list, a body that is not an object) has failed, as upstream's decoding
of its response fails: its failurePolicy applies (NoOpinion here: the next authorizer decides), and
its error, where no authorizer allows, makes the request upstream's plain-text 500 (once a Python
exception made it one on every request it was asked about)."""

from __future__ import annotations

import http.server
import json

import pytest

from tests.apiserver.auth.test_authorization_config import Webhook, _list, config, served


def _answering(body: bytes):
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass
    return Handler


@pytest.mark.parametrize("body", [{"status": "allowed"}, {"status": [True]}, ["allowed"]])
async def test_a_malformed_answer_is_the_webhook_failing(tmp_path, body):
    webhook = Webhook(tmp_path)
    webhook.httpd.RequestHandlerClass = _answering(json.dumps(body).encode())
    try:
        async with served(tmp_path, config(webhook, "NoOpinion")) as (server, api):
            assert await _list(api, "pod", "team-a") == 500  # no opinion, then RBAC's, which grants dave nothing
            metrics = server.metrics_text().decode()
            assert 'apiserver_authorization_webhook_evaluations_total{name="team-a",result="error"} 1' in metrics
    finally:
        webhook.close()
