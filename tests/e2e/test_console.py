"""The web console in headless Chromium against a real `nanokube up`, driven over the DevTools
protocol as a user would use it: sign in with a token from `kubectl create token` (after applying
examples/console/viewer.yaml, as the README says), see the nodes and a pending pod with the
scheduler's reason, and see the pod become Running, without a reload, once a node takes it; open a
Deployment from its ready count to its pods (through its ReplicaSet), a pod's logs as they are
written (the stream closed when the view is left), a link to a pod's detail (its conditions and its
events) and, once RBAC takes pods/log away, upstream's 403 in the log view; then a watch told 410
Gone makes the page relist, as an informer does; no script error or failed load on the way but that
403; and a token the server stops taking signs the page out. Skipped where no Chromium is
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
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: server, image: nginx, command: [sh, -c, "echo serving on 8080; sleep 3600"]}]
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
        #: the URL of each request sent (Network domain), and those the page canceled
        self.sent: dict[str, str] = {}
        self.canceled: list[str] = []
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
            for domain in ("Runtime", "Log", "Page", "Network"):
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
        elif msg.get("method") == "Network.requestWillBeSent":
            self.sent[params["requestId"]] = params["request"]["url"]
        elif msg.get("method") == "Network.loadingFailed" and params.get("canceled"):
            self.canceled.append(self.sent.get(params["requestId"], ""))
        elif msg.get("method") == "Runtime.exceptionThrown":
            self.errors.append(json.dumps(params["exceptionDetails"])[:500])
        elif msg.get("method") == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
            self.errors.append(json.dumps(params["args"])[:500])
        elif msg.get("method") == "Log.entryAdded" and params["entry"]["level"] == "error":
            self.errors.append(f'{params["entry"]["text"]} {params["entry"].get("url", "")}')

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


CLICK = "document.querySelector(%s).click()"
GO = "location.hash = %s"
DETAIL = """(() => { const q = (s) => [...document.querySelectorAll('#detail-body ' + s)];
  const text = (id) => (document.getElementById(id) || {}).textContent || '';
  return {hash: location.hash, title: text('detail-title'), error: text('detail-error'), yaml: text('yaml'), log: text('log'),
          facts: Object.fromEntries(q('dd').map((d) => [d.dataset.fact, d.textContent])),
          pods: q('tr[data-pod]').map((r) => r.dataset.pod), conditions: q('tr[data-condition]').map((r) => r.dataset.condition),
          events: q('tr[data-reason]').map((r) => r.dataset.reason)}; })()"""
FORBIDDEN = ('403: pods "trainer" is forbidden: User "system:serviceaccount:kube-system:console" cannot get resource '
             '"pods/log" in API group "" in the namespace "default"')


def _detail(page: Page, what: str, ready) -> dict:
    """The detail view once `ready(view)` holds."""
    return wait_for(lambda: (d := page.eval(DETAIL)) and ready(d) and d, 30, what)


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

            # a Deployment's row (its ready count, listed every 15 s) links to its detail: its pods found through
            # its ReplicaSet, each with a link to its logs, which follow what the container writes
            wait_for(lambda: cluster.kubectl_json("get", "deployment", "web")["status"].get("readyReplicas") == 1, 30,
                     "web ready")
            row = page.eval(ROW.format(kind="workload", key="deployments/default/web"))
            assert re.match(r"Deployment\tdefault\tweb\t[01]/1\t", row["text"]), row
            page.eval(CLICK % json.dumps('tr[data-workload="deployments/default/web"] a'))
            web = _detail(page, "the Deployment's pods", lambda d: d["pods"] and "kind: Deployment" in d["yaml"])
            assert (web["hash"], web["title"], web["facts"]["Ready"]) == (
                "#/object/apps/v1/deployments/default/web", "Deployment default/web", "1/1"), web
            assert "Available" in web["conditions"] and "ScalingReplicaSet" in web["events"], web
            (web_pod,) = web["pods"]
            page.eval(CLICK % json.dumps(f'#detail-body tr[data-pod="{web_pod}"] a[href^="#/logs/"]'))
            log = _detail(page, "the pod's log", lambda d: "serving on 8080" in d["log"])
            assert log["hash"] == "#/logs/" + web_pod, log
            # a shared link opens a pod's detail: the scheduler's condition and events found by the pod's uid;
            # leaving the log view ended its stream
            page.eval(GO % json.dumps("#/object/core/v1/pods/default/trainer"))
            trainer = _detail(page, "the pod's events", lambda d: {"FailedScheduling", "Scheduled"} <= set(d["events"]))
            assert trainer["facts"]["Node"] == "gpu-1" and "PodScheduled" in trainer["conditions"], trainer
            assert [url for url in page.canceled if "/log?" in url and "follow=true" in url], page.canceled

            # with pods/log taken from the viewer's role, the log view says what upstream says
            cluster.kubectl("patch", "clusterrole", "console-viewer", "--type=json",
                            "-p", '[{"op": "remove", "path": "/rules/1"}]')
            wait_for(lambda: cluster.kubectl("auth", "can-i", "get", "pods", "--subresource=log", "--as",
                                             "system:serviceaccount:kube-system:console", check=False).stdout.strip() == "no",
                     30, "pods/log forbidden")
            page.eval(GO % json.dumps("#/logs/default/trainer"))
            assert _detail(page, "the 403", lambda d: d["error"])["error"] == FORBIDDEN
            page.eval("1")  # (reads what the page logged meanwhile: the browser logs the 403 as a failed load)
            assert [e for e in page.errors if "/pods/trainer/log" in e and "403" in e], page.errors
            page.errors = [e for e in page.errors if "/pods/trainer/log" not in e]
            page.eval(GO % json.dumps("#pods"))
            wait_for(lambda: page.eval(ROW.format(kind="pod", key="default/trainer")), 30, "the overview again")

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
