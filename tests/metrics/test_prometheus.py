"""The Prometheus provider against an aiohttp server that speaks Prometheus's
HTTP API response format (a protocol-level test: the PromQL it receives is
recorded and asserted, not evaluated; tests/e2e/test_prometheus_metrics.py
runs a real Prometheus). Composed into MetricsProvider, as `nanokube up` does."""

import asyncio
import re
import socket

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from nanokube.metrics.api import MetricsAPI
from nanokube.metrics.prometheus import PrometheusMetrics
from nanokube.metrics.provider import CUSTOM_PREFIX, MetricsProvider, MetricsUnavailable
from nanokube.metrics.rules import DEFAULT_RULES, load_rules
from tests.metrics.test_provider import configmap, running_pod

RULES = """
rules:
- seriesQuery: 'http_requests_total{namespace!="",pod!=""}'
  name: {matches: "^(.*)_total$", as: "${1}_per_second"}
  resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}, svc: {resource: service}}}
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)'
externalRules:
- seriesQuery: '{__name__=~"^.*_lag$"}'
  resources: {overrides: {namespace: {resource: namespace}}}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
"""


def vector(*series):
    return {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": labels, "value": [1767225600.5, value]} for labels, value in series]}}


class FakePrometheus:
    """Answers series-name discovery from `names` (honouring a `__name__=~`
    matcher, anchored as Prometheus anchors it) and every query with `answer`."""

    def __init__(self):
        self.names = ["queue_length", "consumer_lag", "http_requests_total"]
        self.answer: dict | bytes = vector()
        self.delay = 0.0
        self.queries: list[str] = []
        self.discoveries: list[str] = []

    async def label_values(self, request: web.Request) -> web.Response:
        match = request.query["match[]"]
        self.discoveries.append(match)
        regex = re.search(r'__name__=~"([^"]*)"', match)
        names = [n for n in self.names if regex is None or re.fullmatch(regex.group(1), n)]
        return web.json_response({"status": "success", "data": names})

    async def query(self, request: web.Request) -> web.Response:
        self.queries.append(request.query["query"])
        await asyncio.sleep(self.delay)
        if isinstance(self.answer, bytes):
            return web.Response(body=self.answer, status=500)
        return web.Response(body=orjson.dumps(self.answer), content_type="application/json",
                            status=400 if "error" in self.answer else 200)


@pytest.fixture
async def prom():
    fake = FakePrometheus()
    app = web.Application()
    app.router.add_get("/api/v1/label/__name__/values", fake.label_values)
    app.router.add_get("/api/v1/query", fake.query)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    fake.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    yield fake
    await runner.cleanup()


def provider(stack, prom, rules=DEFAULT_RULES, timeout=5.0):
    return MetricsProvider(stack.client, source=PrometheusMetrics(prom.url, load_rules(rules), timeout))


async def test_default_rules_serve_the_series_of_the_same_name(stack, prom):
    prom.answer = vector(({"__name__": "queue_length", "queue": "jobs", "instance": "x:1"}, "12"),
                         ({"__name__": "queue_length", "queue": "mail"}, "0.25"))
    got = await provider(stack, prom).external_metric_list("default", "queue_length", "queue in (jobs,mail)")
    assert prom.queries == ['queue_length{queue=~"jobs|mail"}']
    assert prom.discoveries == ['{__name__=~".+"}']
    assert got["kind"] == "ExternalMetricValueList"
    assert [(i["metricName"], i["metricLabels"], i["value"]) for i in got["items"]] == [
        ("queue_length", {"queue": "jobs", "instance": "x:1"}, "12"), ("queue_length", {"queue": "mail"}, "250m")]


async def test_namespaced_external_rule_adds_the_namespace_matcher(stack, prom):
    prom.answer = vector(({"namespace": "team-a"}, "1e+03"))
    samples = await provider(stack, prom, RULES).external_metric("team-a", "consumer_lag", "topic=orders")
    assert prom.queries == ['sum(consumer_lag{topic="orders",namespace="team-a"}) by (namespace)']
    assert [(s.labels, s.value) for s in samples] == [({"namespace": "team-a"}, 1_000_000)]


async def test_metrics_no_rule_covers_come_from_the_builtin_store(stack, prom):
    await configmap(stack.client, {"queue_length": "7"})
    prov = provider(stack, prom, RULES)  # no rule exposes queue_length
    assert [s.value for s in await prov.external_metric("default", "queue_length")] == [7000]
    prom.names = ["queue_length"]
    prov = provider(stack, prom)  # the default rule does, when Prometheus has the series
    assert [s.value for s in await prov.external_metric("default", "queue_length")] == []
    prom.names = []
    assert [s.value for s in await prov.external_metric("default", "queue_length")] == [7000]
    assert prom.queries == ["queue_length{}"]


async def test_pods_metric_asks_for_the_running_pods_of_the_selector(stack, prom):
    await running_pod(stack.client, "web-1", {}, {"app": "web"})
    await running_pod(stack.client, "web-2", {CUSTOM_PREFIX + "http_requests_per_second": "99"}, {"app": "web"})
    await stack.client.resource("", "v1", "pods").create(
        {"metadata": {"name": "web-pending", "namespace": "default", "labels": {"app": "web"}},
         "spec": {"containers": [{"name": "c", "image": "pause"}]}})
    prom.answer = vector(({"pod": "web-1"}, "2.5"), ({"pod": "web-2"}, "3"), ({"pod": "elsewhere"}, "50"))
    samples = await provider(stack, prom, RULES).pods_metric("default", "app=web", "http_requests_per_second")
    assert prom.queries == ['sum(rate(http_requests_total{namespace="default",pod=~"web-1|web-2"}[2m])) by (pod)']
    assert {k: s.value for k, s in samples.items()} == {"web-1": 2500, "web-2": 3000}


async def test_object_metric_and_the_custom_metrics_api(stack, prom):
    await stack.client.resource("", "v1", "services").create(
        {"metadata": {"name": "front", "namespace": "default"}, "spec": {"ports": [{"port": 80}]}})
    prom.answer = vector(({"svc": "front"}, "40"))
    prov = provider(stack, prom, RULES)
    ref = {"apiVersion": "v1", "kind": "Service", "name": "front"}
    assert await prov.object_metric("default", "http_requests_per_second", ref) == 40_000
    assert prom.queries[-1] == 'sum(rate(http_requests_total{namespace="default",svc=~"front"}[2m])) by (svc)'
    got = await prov.custom_metric_list("default", "services", "front", "http_requests_per_second")
    assert [(i["describedObject"]["name"], i["value"]) for i in got["items"]] == [("front", "40")]
    prom.answer = vector()
    with pytest.raises(MetricsUnavailable, match="could not find the metric http_requests_per_second"):
        await prov.object_metric("default", "http_requests_per_second", ref)


async def test_served_through_the_external_metrics_api(stack, prom):
    prom.answer = vector(({"__name__": "queue_length", "queue": "jobs"}, "12"))
    app = web.Application()
    MetricsAPI(provider(stack, prom)).add_routes(app)
    async with TestClient(TestServer(app)) as http:
        r = await http.get("/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_length")
        body = await r.json()
        assert r.status == 200 and body["items"][0]["value"] == "12"
        prom.answer = {"status": "error", "errorType": "bad_data", "error": "parse error"}
        r = await http.get("/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_length")
        assert r.status == 404 and "bad_data: parse error" in (await r.json())["message"]


@pytest.mark.parametrize("answer,message", [
    ({"status": "error", "errorType": "bad_data", "error": "1:7: parse error"}, "refused /api/v1/query: bad_data"),
    (b"<html>upstream down</html>", "something other than JSON"),
    ({"status": "success", "data": {"resultType": "matrix", "result": []}}, "returned matrix, not a vector"),
    ({"status": "success", "data": {"resultType": "scalar", "result": [0, "1"]}}, "returned scalar"),
    (vector(({}, "NaN")), "malformed sample"),
    (vector(({}, "+Inf")), "malformed sample"),
    (vector(({}, None)), "malformed sample"),
    ({"status": "success", "data": {"resultType": "vector", "result": [{"value": [0, "1"]}]}}, "malformed sample"),
    ([1, 2], "not an API response"),
])
async def test_garbage_is_an_unavailable_metric(stack, prom, answer, message):
    prom.answer = answer
    with pytest.raises(MetricsUnavailable, match=message):
        await provider(stack, prom).external_metric("default", "queue_length")


async def test_an_unreachable_or_slow_prometheus_is_an_unavailable_metric(stack, prom):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    prov = MetricsProvider(stack.client, source=PrometheusMetrics(closed, load_rules(RULES)))
    await configmap(stack.client, {"consumer_lag": "5"})
    with pytest.raises(MetricsUnavailable, match="unable to fetch metrics from Prometheus"):
        await prov.external_metric("default", "consumer_lag")  # discovery fails: no fallback
    prom.delay = 2.0
    with pytest.raises(MetricsUnavailable, match="TimeoutError"):
        await provider(stack, prom, timeout=0.2).external_metric("default", "queue_length")
