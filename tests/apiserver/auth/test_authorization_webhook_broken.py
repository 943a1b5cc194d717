"""An authorization webhook that breaks HTTP itself (a status line that is not HTTP, a body cut
short of its Content-Length) has failed, as Go's client fails on it: once such an answer escaped
the webhook authorizer as a Python exception, an internal error with a traceback on every request
it was asked about. A webhook answering a byte a second is cut at its timeout in all (Go's
http.Client.Timeout), where each byte arriving within the socket's timeout kept the request, and a
thread, waiting until the webhook was done."""

from __future__ import annotations

import http.server
import time

import pytest

from tests.apiserver.auth.test_authorization_config import Webhook, _list, config, served

ANSWER = b'{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","status":{"allowed":true}}'


def _broken(how: str):
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            if how == "not http":
                self.wfile.write(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(ANSWER) + (100 if how == "cut" else 0)))
            self.end_headers()
            if how == "drip":  # a byte a second, each within the 3 s timeout, the whole answer in 97 s
                for b in ANSWER:
                    self.wfile.write(bytes([b]))
                    self.wfile.flush()
                    time.sleep(1)
            self.wfile.write(ANSWER)

        def log_message(self, *args):
            pass
    return Handler


@pytest.mark.parametrize("how, result", [("not http", "error"), ("cut", "error"), ("drip", "timeout")])
async def test_a_webhook_breaking_http_or_dripping_its_answer_has_failed(tmp_path, how, result):
    webhook = Webhook(tmp_path)
    webhook.httpd.RequestHandlerClass = _broken(how)
    webhook.httpd.handle_error = lambda *args: None  # (the drip's writes after the server hung up)
    try:
        async with served(tmp_path, config(webhook, "NoOpinion")) as (server, api):
            assert await _list(api, "pod", "team-a") != 200  # the webhook's allow never counted
            metrics = server.metrics_text().decode()
            assert f'apiserver_authorization_webhook_evaluations_total{{name="team-a",result="{result}"}} 1' in metrics
    finally:
        webhook.close()
