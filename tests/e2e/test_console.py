"""The web console in headless Chromium against a real `nanokube up`, driven over the DevTools
protocol as a user would use it: sign in with a token from `kubectl create token` (after applying
examples/console/viewer.yaml, as the README says), see the nodes and a pending pod with the
scheduler's reason, and see the pod become Running, without a reload, once a node takes it; then
a watch told 410 Gone makes the page relist, as an informer does; no script error or failed load
on the way; and a token the server stops taking signs the page out. Skipped where no Chromium is
installed."""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import re
import shutil
import subprocess
import tempfile
import urllib.request
from pathlib import Path

import pytest
import websocket

from .conftest import running_cluster, wait_for

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
VIEWER = Path(__file__).resolve().parents[2] / "examples" / "console" / "viewer.yaml"
POD = """
apiVersion: v1
kind: Pod
metadata: {name: trainer, namespace: default}
spec:
  containers: [{name: main, image: pytorch/pytorch, resources: {requests: {cpu: "2", memory: 4Gi}}}]
"""


class Page:
    """One tab of a headless Chromium of its own (a fresh profile), over the DevTools protocol; what
    the page threw or logged as an error is gathered in `errors`."""

    def __init__(self):
        self.profile = tempfile.mkdtemp(prefix="nanokube-chromium-")
        self.proc = subprocess.Popen(
            [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
             "--ignore-certificate-errors", "--remote-debugging-port=0", f"--user-data-dir={self.profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.errors: list[str] = []
        #: the URLs of the requests `Fetch.enable` paused, and what answers each: (a Fetch method, its params)
        self.paused: list[str] = []
        self.on_request = lambda params: ("Fetch.continueRequest", {"requestId": params["requestId"]})
        self._ids = itertools.count(1)
        self.ws = None
        try:
            port = None
            for line in self.proc.stderr:
                if m := re.match(r"DevTools listening on ws://[^:]+:(\d+)/", line):
                    port = m.group(1)
                    break
            assert port, "chromium did not open its DevTools port"
            self.proc.stderr.close()
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
                target = next(t for t in json.load(r) if t["type"] == "page")
            self.ws = websocket.create_connection(target["webSocketDebuggerUrl"], timeout=10)
            for domain in ("Runtime", "Log", "Page"):
                self.call(f"{domain}.enable")
        except BaseException:  # no `with` holds it yet: the browser and its profile go here
            self.proc.kill()
            self.close()
            raise

    def _send(self, method: str, params: dict) -> int:
        n = next(self._ids)
        self.ws.send(json.dumps({"id": n, "method": method, "params": params}))
        return n

    def call(self, method: str, **params) -> dict:
        n = self._send(method, params)
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == n:
                assert "error" not in msg, msg
                return msg["result"]
            self._event(msg)

    def _event(self, msg: dict) -> None:
        params = msg.get("params", {})
        if msg.get("method") == "Fetch.requestPaused":
            self.paused.append(params["request"]["url"])
            self._send(*self.on_request(params))
        elif msg.get("method") == "Runtime.exceptionThrown":
            self.errors.append(json.dumps(params["exceptionDetails"])[:500])
        elif msg.get("method") == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
            self.errors.append(json.dumps(params["args"])[:500])
        elif msg.get("method") == "Log.entryAdded" and params["entry"]["level"] == "error":
            self.errors.append(params["entry"]["text"])

    def eval(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        assert "exceptionDetails" not in result, result
        return result["result"].get("value")

    def __enter__(self) -> Page:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self.ws is not None:
            try:
                self.call("Browser.close")
            except (OSError, websocket.WebSocketException):  # it may close the socket before it answers
                pass
            self.ws.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


EXPIRED = {"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                      "message": "too old resource version: 1 (2)", "reason": "Expired", "code": 410}}


def _expire_first_watch():
    """A Fetch answerer: the first watch paused is told 410 Gone in its stream; all else goes to the server."""
    answered = []

    def answer(params: dict) -> tuple[str, dict]:
        if "watch=1" in params["request"]["url"] and not answered:
            answered.append(params["request"]["url"])
            body = base64.b64encode(json.dumps(EXPIRED).encode() + b"\n").decode()
            return "Fetch.fulfillRequest", {"requestId": params["requestId"], "responseCode": 200, "body": body,
                                            "responseHeaders": [{"name": "Content-Type", "value": "application/json"}]}
        return "Fetch.continueRequest", {"requestId": params["requestId"]}
    return answer


PICK_NAMESPACE = """(() => { const ns = document.getElementById('namespace'); ns.value = '%s';
  ns.dispatchEvent(new Event('change')); })()"""
POD_ERRORS = "document.querySelector('[data-errors-of=\"pods\"]').textContent"
ROW = """(() => {{ const r = document.querySelector('tr[data-{kind}="{key}"]');
  return r && {{phase: r.dataset.phase || '', text: r.innerText}}; }})()"""


INFORMERS = """JSON.stringify(Object.fromEntries(Object.entries(informers).map(
  ([name, i]) => [name, {error: i.error, resourceVersion: i.resourceVersion, items: i.items.size}])))"""


@contextlib.contextmanager
def _explained(page: Page, cluster):
    """A failed assertion, with what the page's informers held, what it logged and the server's pods."""
    try:
        yield
    except AssertionError as e:
        pods = cluster.kubectl("get", "pods", "-A", "-o", "wide", check=False).stdout
        raise AssertionError(f"{e}\ninformers: {page.eval(INFORMERS)}\npage errors: {page.errors}\npods:\n{pods}") from e


@pytest.mark.skipif(BROWSER is None, reason="no chromium on PATH (scripts/chromium.sh installs it)")
def test_sign_in_and_watch_a_pending_pod_start():
    with running_cluster("console") as cluster:
        cluster.kubectl("cordon", "gpu-0", "gpu-1")
        cluster.kubectl("apply", "-f", str(VIEWER))
        token = cluster.kubectl("create", "token", "console", "-n", "kube-system").stdout.strip()
        cluster.kubectl("create", "-f", "-", input=POD)
        console = next(line.split()[2] for line in cluster.banner if line.startswith("nanokube console: "))
        assert console == cluster.url + "/ui/"
        with Page() as page, _explained(page, cluster):
            page.call("Page.navigate", url=console)
            wait_for(lambda: page.eval("document.readyState") == "complete" and page.eval(
                "!!document.getElementById('login-form') && !document.getElementById('login').hidden"), 30, "sign-in form")
            page.eval(f"document.getElementById('token').value = {json.dumps(token)};"
                      "document.getElementById('login-form').requestSubmit()")
            assert wait_for(lambda: page.eval("document.getElementById('who').textContent"), 30, "signed in") == \
                "system:serviceaccount:kube-system:console"
            node = wait_for(lambda: (r := page.eval(ROW.format(kind="node", key="gpu-0")))
                            and "gpu.nanokube.io 0/8" in r["text"] and r, 30, "node row with its ResourceSlices' devices")
            assert "Ready, cordoned" in node["text"], node
            pending = wait_for(lambda: (r := page.eval(ROW.format(kind="pod", key="default/trainer")))
                               and "unschedulable" in r["text"] and r, 30, "pending pod with its reason")
            assert pending["phase"] == "Pending" and "0/2 nodes are available" in pending["text"], pending

            cluster.kubectl("uncordon", "gpu-1")
            running = wait_for(lambda: (r := page.eval(ROW.format(kind="pod", key="default/trainer")))
                               and r["phase"] == "Running" and r, 30, "pod Running")
            assert "gpu-1" in running["text"], running

            # the informer's relist: picking a namespace lists and watches its pods anew, and that watch is told
            # 410 Gone in its stream (its resourceVersion compacted away), as kube-apiserver tells it; the page
            # lists again, watches on from there, and so sees the pod go
            page.on_request = _expire_first_watch()
            page.call("Fetch.enable", patterns=[{"urlPattern": "*/api/v1/namespaces/default/pods*"}])
            page.eval(PICK_NAMESPACE % "default")

            def relisted() -> bool:
                assert page.eval(POD_ERRORS) == "", "410 Gone was taken for an error, not as the signal to relist"
                return len(page.paused) >= 4
            wait_for(relisted, 30, "a relist after 410 Gone")
            assert ["watch=1" in url for url in page.paused[:4]] == [False, True, False, True], page.paused
            cluster.kubectl("delete", "pod", "trainer", "--wait=false")
            wait_for(lambda: page.eval(ROW.format(kind="pod", key="default/trainer")) is None, 30, "pod gone")
            assert page.eval(POD_ERRORS) == ""
            page.eval("1")  # (reads what the page logged meanwhile)
            assert page.errors == []

            # a token the server no longer takes (its ServiceAccount deleted) signs the page out
            cluster.kubectl("delete", "serviceaccount", "console", "-n", "kube-system")
            page.eval(PICK_NAMESPACE % "")  # (new requests: the watches open meet no check)
            wait_for(lambda: "401" in page.eval("document.getElementById('login-error').textContent"), 30, "signed out")
            assert page.eval("[document.getElementById('login').hidden, sessionStorage.length]") == [False, 0]
