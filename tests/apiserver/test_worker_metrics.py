"""Several API server workers' /metrics merged as one server's (apiserver/worker_metrics.py)."""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.parser import text_string_to_metric_families

from nanokube.apiserver.metrics import APIMetrics
from nanokube.apiserver.worker_metrics import merge


class _Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def monotonic(self) -> float:
        return self.t


def _worker(requests: int, objects: int, latency: float) -> tuple[APIMetrics, bytes]:
    clock = _Clock()
    m = APIMetrics(clock)
    for _ in range(requests):
        m.request_count("GET", "", "", "v1", "pods", "", "namespace", "apiserver", "200").inc()
        m.request_latency("GET", "", "", "v1", "pods", "", "namespace", "apiserver").observe(latency)
    m.stored("pods", objects)
    m.longrunning.labels("WATCH", "", "v1", "pods", "", "namespace", "apiserver").set(requests)
    m.inflight.enter(True)  # one mutating request in the second before the scrape
    m.inflight.leave(True)
    clock.t += 1
    return m, m.render()


def _samples(body: bytes) -> dict:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(body.decode()) for s in fam.samples}


def test_one_worker_comes_back_as_it_was():
    m, body = _worker(3, 7, 0.002)
    m.request_count("POST", "", "", "v1", "pods", "", "resource", "apiserver", "201").inc()
    component = CollectorRegistry()  # a component's prometheus_client metrics, rendered with the server's
    Counter("webhook_rejections", "doc", ["name"], registry=component).labels("w").inc()
    Histogram("webhook_seconds", "doc", registry=component).observe(0.3)
    body = m.render(component)
    assert merge([body]) == body


def test_counters_histograms_and_gauges_of_work_add_up_the_store_is_counted_once():
    a, body_a = _worker(3, 7, 0.002)
    time.sleep(0.01)
    b, body_b = _worker(5, 9, 0.2)
    got = _samples(merge([body_a, body_b]))
    pods = (("code", "200"), ("component", "apiserver"), ("dry_run", ""), ("group", ""), ("resource", "pods"),
            ("scope", "namespace"), ("subresource", ""), ("verb", "GET"), ("version", "v1"))
    assert got[("apiserver_request_total", pods)] == 8
    latency = tuple(x for x in pods if x[0] != "code")
    assert got[("apiserver_request_duration_seconds_count", latency)] == 8
    assert got[("apiserver_request_duration_seconds_bucket", tuple(sorted((*latency, ("le", "0.005")))))] == 3
    assert got[("apiserver_request_duration_seconds_bucket", tuple(sorted((*latency, ("le", "+Inf")))))] == 8
    assert abs(got[("apiserver_request_duration_seconds_sum", latency)] - (3 * 0.002 + 5 * 0.2)) < 1e-9
    watches = (("component", "apiserver"), ("group", ""), ("resource", "pods"), ("scope", "namespace"),
               ("subresource", ""), ("verb", "WATCH"), ("version", "v1"))
    assert got[("apiserver_longrunning_requests", watches)] == 8
    assert got[("apiserver_current_inflight_requests", (("request_kind", "mutating"),))] == 2
    assert got[("apiserver_storage_objects", (("resource", "pods"),))] == 9
    assert got[("apiserver_resource_objects", (("group", ""), ("resource", "pods")))] == 9
    [build] = [v for (name, _), v in got.items() if name == "kubernetes_build_info"]
    assert build == 1, "each worker's build info is the one server's"
    # a series only one worker has is kept as it is
    b.request_count("DELETE", "", "", "v1", "pods", "", "resource", "apiserver", "200").inc()
    deletes = (("code", "200"), ("component", "apiserver"), ("dry_run", ""), ("group", ""), ("resource", "pods"),
               ("scope", "resource"), ("subresource", ""), ("verb", "DELETE"), ("version", "v1"))
    assert _samples(merge([body_a, b.render()]))[("apiserver_request_total", deletes)] == 1
