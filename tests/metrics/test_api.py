"""The metrics APIs over HTTP as an aggregated adapter serves them."""

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from nanokube.metrics.api import MetricsAPI
from nanokube.metrics.provider import CUSTOM_PREFIX, MetricsProvider
from tests.controllers import make_stack
from tests.metrics.test_provider import running_pod

CUSTOM = "/apis/custom.metrics.k8s.io/v1beta2"


@pytest.fixture
async def env():
    s = await make_stack()
    app = web.Application()
    MetricsAPI(MetricsProvider(s.client)).add_routes(app)
    http = TestClient(TestServer(app))
    await http.start_server()
    yield s.client, http
    await http.close()
    await s.close()


async def test_custom_pod_metrics_by_name_and_by_selector(env):
    client, http = env
    await running_pod(client, "a", {CUSTOM_PREFIX + "qps": "1500m"}, {"app": "web"})
    await running_pod(client, "b", {CUSTOM_PREFIX + "qps": "3"}, {"app": "web"})
    await running_pod(client, "c", {}, {"app": "web"})

    one = await (await http.get(f"{CUSTOM}/namespaces/default/pods/a/qps")).json()
    assert one["kind"] == "MetricValueList" and one["apiVersion"] == "custom.metrics.k8s.io/v1beta2"
    (item,) = one["items"]
    assert item["describedObject"] == {"kind": "Pod", "name": "a", "namespace": "default", "apiVersion": "v1"}
    assert item["value"] == "1500m" and item["metric"] == {"name": "qps"} and item["windowSeconds"] == 30

    many = await (await http.get(f"{CUSTOM}/namespaces/default/pods/*/qps", params={"labelSelector": "app=web"})).json()
    assert sorted((i["describedObject"]["name"], i["value"]) for i in many["items"]) == [("a", "1500m"), ("b", "3")]
    assert many["items"][0]["metric"]["selector"] == {"matchLabels": {"app": "web"}}
    # a selector LabelSelector cannot hold (gt/lt) is refused, not a server error
    await running_pod(client, "d", {CUSTOM_PREFIX + "qps": "1"}, {"app": "other", "n": "2"})
    gt = await http.get(f"{CUSTOM}/namespaces/default/pods/*/qps", params={"labelSelector": "n>1"})
    assert gt.status < 500 and (await gt.json())["message"] == '"gt" is not a valid label selector operator'


async def test_custom_object_and_cluster_scoped_metrics_and_misses(env):
    client, http = env
    await client.resource("", "v1", "services").create({
        "metadata": {"name": "front", "namespace": "default", "annotations": {CUSTOM_PREFIX + "rps": "42"}},
        "spec": {"ports": [{"port": 80}]}})
    await client.resource("", "v1", "namespaces").patch(
        "default", {"metadata": {"annotations": {CUSTOM_PREFIX + "queue": "7"}}})
    svc = await (await http.get(f"{CUSTOM}/namespaces/default/services/front/rps")).json()
    assert svc["items"][0]["describedObject"]["kind"] == "Service" and svc["items"][0]["value"] == "42"
    ns = await (await http.get(f"{CUSTOM}/namespaces/default/metrics/queue")).json()
    assert ns["items"][0]["describedObject"] == {"kind": "Namespace", "name": "default", "apiVersion": "v1"}

    missing = await http.get(f"{CUSTOM}/namespaces/default/services/front/nope")
    assert missing.status == 404 and "could not find the metric nope" in (await missing.json())["message"]
    unknown = await http.get(f"{CUSTOM}/namespaces/default/widgets/x/rps")
    assert unknown.status == 404 and (await unknown.json())["reason"] == "NotFound"
    discovery = await (await http.get(CUSTOM)).json()
    assert {"name": "pods/*", "singularName": "", "namespaced": True, "kind": "MetricValueList",
            "verbs": ["get"]} in discovery["resources"]


async def test_resource_metrics_get_list_table_and_not_found(env):
    client, http = env
    await running_pod(client, "a", {"sim.nanokube.io/cpu-usage": "300m", "sim.nanokube.io/memory-usage": "1Gi"})
    r = await http.get("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/a")
    pm = await r.json()
    assert pm["kind"] == "PodMetrics" and [c["name"] for c in pm["containers"]] == ["c", "d"]
    assert pm["metadata"]["labels"] == {"app": "x"}
    pods = client.resource("", "v1", "pods")  # a pod without labels: none, as metrics-server's ObjectMeta omits them
    bare = await pods.create({"metadata": {"name": "bare", "namespace": "default"},
                              "spec": {"containers": [{"name": "c", "image": "pause"}]}})
    await pods.update({**bare, "status": {"phase": "Running"}}, subresource="status")
    r = await http.get("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/bare")
    assert (await r.json())["metadata"].keys() == {"name", "namespace", "creationTimestamp"}
    r = await http.get("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods",
                       headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    table = await r.json()
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "cpu", "memory", "Window"]
    assert table["rows"][0]["cells"] == ["a", "300m", "1Gi", "15s"]
    r = await http.get("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/nope")
    assert r.status == 404 and (await r.json())["message"] == 'podmetrics.metrics.k8s.io "default/nope" not found'
    r = await http.get("/apis/metrics.k8s.io/v1beta1/nodes/nope")
    assert r.status == 404 and (await r.json())["message"] == 'nodemetrics.metrics.k8s.io "nope" not found'
    assert (await (await http.get("/apis/metrics.k8s.io/v1beta1/nodes")).json())["kind"] == "NodeMetricsList"


async def test_resource_metrics_with_a_label_selector_that_does_not_parse(env):
    """A list's selector that does not parse is the list's 400 (found by a fuzz sweep: it was a 500, the
    loopback list's error unhandled); a get reads no selector, as upstream's GetOptions have none."""
    client, http = env
    await running_pod(client, "a", {"sim.nanokube.io/cpu-usage": "300m"})
    for path in ("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods", "/apis/metrics.k8s.io/v1beta1/pods",
                 "/apis/metrics.k8s.io/v1beta1/nodes"):
        r = await http.get(path, params={"labelSelector": "(("})
        status = await r.json()
        assert (r.status, status["kind"], status["reason"], status["message"]) == (
            400, "Status", "BadRequest", "found '(', expected: !, identifier, or 'end of string'")
    r = await http.get("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/a", params={"labelSelector": "(("})
    assert r.status == 200 and (await r.json())["metadata"]["name"] == "a"
    r = await http.get("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/a", params={"labelSelector": "app=other"})
    assert r.status == 200


async def test_resource_metrics_list_integers_that_do_not_parse(env):
    """A list's limit or timeoutSeconds that is no int64 is the 400 of ListResource's options decoding (they
    were ignored), before the selector is read (ListOptions' order: timeoutSeconds, then limit); a get
    decodes GetOptions, which have neither."""
    client, http = env
    await running_pod(client, "a", {"sim.nanokube.io/cpu-usage": "300m"})
    for path in ("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods", "/apis/metrics.k8s.io/v1beta1/pods",
                 "/apis/metrics.k8s.io/v1beta1/nodes"):
        for query, bad in (({"limit": "1.5"}, "1.5"), ({"timeoutSeconds": "x", "limit": "y"}, "x"),
                           ({"limit": "99999999999999999999", "labelSelector": "(("}, "99999999999999999999")):
            r = await http.get(path, params=query)
            status = await r.json()
            why = "value out of range" if bad.isdigit() else "invalid syntax"
            assert (r.status, status["kind"], status["reason"], status["message"]) == (
                400, "Status", "BadRequest", f'strconv.ParseInt: parsing "{bad}": {why}'), query
        r = await http.get(path, params={"limit": "1", "timeoutSeconds": "-3"})
        assert r.status == 200 and (await r.json())["kind"].endswith("MetricsList")
    r = await http.get("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/a", params={"limit": "x"})
    assert r.status == 200 and (await r.json())["metadata"]["name"] == "a"
