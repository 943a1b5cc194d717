"""A small external (and custom) metrics adapter, run as its own process as KEDA's metrics server
or prometheus-adapter run: HTTPS on `--ip`, serving external.metrics.k8s.io/v1beta1 and
custom.metrics.k8s.io/v1beta1 (as prometheus-adapter's chart registers it) discovery and values read from a JSON file at each request
(`{"external": {metric: quantity}, "custom": {metric: {pod: quantity}}}`), so a test changes them by
rewriting it. A metric it has no value for is a 404 Status, as custom-metrics-apiserver answers it.
Each request's path and X-Remote-User go to `--log` as a JSON line; the port it listens on to
`--port-file`.

    python -m tests.apiserver.metrics_adapter --values V.json --port-file P --log L.jsonl --ip 10.0.0.5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from aiohttp import web

from nanokube.pki.ca import issue, new_ca

EXTERNAL = "external.metrics.k8s.io/v1beta1"
CUSTOM = "custom.metrics.k8s.io/v1beta1"
STAMP = "2026-01-01T00:00:00Z"


def _not_found(message: str) -> web.Response:
    return web.json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                              "message": message, "reason": "NotFound", "code": 404}, status=404)


def app(values: Path, log: Path) -> web.Application:
    def read(kind: str) -> dict:
        return json.loads(values.read_text()).get(kind) or {}

    @web.middleware
    async def logged(request: web.Request, handler):
        with log.open("a") as f:
            f.write(json.dumps({"path": request.path, "query": dict(request.query),
                                "user": request.headers.get("X-Remote-User")}) + "\n")
        return await handler(request)

    async def external_resources(_):
        return web.json_response({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": EXTERNAL, "resources": [
            {"name": "externalmetrics", "singularName": "", "namespaced": True, "kind": "ExternalMetricValueList",
             "verbs": ["get"]}]})

    async def custom_resources(_):
        return web.json_response({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": CUSTOM, "resources": [
            {"name": "pods/*", "singularName": "", "namespaced": True, "kind": "MetricValueList", "verbs": ["get"]}]})

    async def external(request: web.Request):
        metric = request.match_info["metric"]
        value = read("external").get(metric)
        if value is None:
            return _not_found(f'unable to get external metric {request.match_info["namespace"]}/{metric}: no such metric')
        return web.json_response({"kind": "ExternalMetricValueList", "apiVersion": EXTERNAL, "metadata": {}, "items": [
            {"metricName": metric, "metricLabels": {}, "timestamp": STAMP, "value": value}]})

    async def pods(request: web.Request):
        ns, metric = request.match_info["namespace"], request.match_info["metric"]
        got = read("custom").get(metric) or {}
        if not got:
            return _not_found(f"the server could not find the metric {metric} for pods")
        return web.json_response({"kind": "MetricValueList", "apiVersion": CUSTOM, "metadata": {}, "items": [
            {"describedObject": {"kind": "Pod", "namespace": ns, "name": pod, "apiVersion": "/v1"},
             "metric": {"name": metric}, "timestamp": STAMP, "windowSeconds": 60, "value": v}
            for pod, v in sorted(got.items())]})

    a = web.Application(middlewares=[logged])
    a.router.add_get(f"/apis/{EXTERNAL}", external_resources)
    a.router.add_get(f"/apis/{EXTERNAL}/namespaces/{{namespace}}/{{metric}}", external)
    a.router.add_get(f"/apis/{CUSTOM}", custom_resources)
    a.router.add_get(f"/apis/{CUSTOM}/namespaces/{{namespace}}/pods/*/{{metric}}", pods)
    return a


def serving_context(ca_name: str, dns_name: str) -> ssl.SSLContext:
    """A server's TLS context with a certificate for `dns_name` from a new CA of its own."""
    serving = issue(new_ca(ca_name), dns_name, dns_names=(dns_name,), server=True)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "tls.crt").write_bytes(serving.cert_pem)
        (Path(tmp) / "tls.key").write_bytes(serving.key_pem)
        ctx.load_cert_chain(Path(tmp) / "tls.crt", Path(tmp) / "tls.key")
    return ctx


class Adapter:
    """The adapter process a test starts: its port, its values (`set`), the requests it got."""

    def __init__(self, tmp: Path, ip: str, values: dict):
        self.ip, self.values, self.log = ip, tmp / "adapter-values.json", tmp / "adapter-requests.jsonl"
        self.set(values)
        port_file = tmp / "adapter-port"
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.apiserver.metrics_adapter", "--values",
                                      str(self.values), "--port-file", str(port_file), "--log", str(self.log),
                                      "--ip", ip], cwd=Path(__file__).parents[2])
        deadline = time.monotonic() + 30
        while not port_file.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError("the metrics adapter did not start")
            time.sleep(0.05)
        self.port = int(port_file.read_text())

    def set(self, values: dict) -> None:
        tmp = self.values.with_suffix(".tmp")
        tmp.write_text(json.dumps(values))
        tmp.rename(self.values)

    def requests(self) -> list[dict]:
        return [json.loads(line) for line in self.log.read_text().splitlines()] if self.log.exists() else []

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


async def main(args) -> None:
    runner = web.AppRunner(app(Path(args.values), Path(args.log)))
    await runner.setup()
    site = web.TCPSite(runner, args.ip, 0, ssl_context=serving_context("metrics-adapter-ca", "adapter.default.svc"))
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    Path(args.port_file + ".tmp").write_text(str(port))
    Path(args.port_file + ".tmp").rename(args.port_file)
    await asyncio.Event().wait()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    for flag in ("--values", "--port-file", "--log", "--ip"):
        p.add_argument(flag, required=True)
    asyncio.run(main(p.parse_args()))
