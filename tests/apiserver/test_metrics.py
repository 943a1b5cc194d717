"""The API server's metric families expose exactly what prometheus_client's Counter, Gauge and
Histogram expose for the same updates, in client_golang's text format (no `_created` series)."""

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from nanokube.apiserver.metrics import Family
from nanokube.metrics.exposition import render

BUCKETS = (0.0005, 0.001, 0.0025, 0.5, 1, 60)


def _text(registry) -> str:
    return render(registry).decode()


def test_families_expose_what_prometheus_client_does():
    theirs, ours = CollectorRegistry(), CollectorRegistry()
    counters = (Counter("requests_total", "Requests.", ["verb", "code"], registry=theirs),
                Family("counter", "requests_total", "Requests.", ["verb", "code"], ours))
    gauges = (Gauge("watchers", "Watchers.", ["kind"], registry=theirs),
              Family("gauge", "watchers", "Watchers.", ["kind"], ours))
    histograms = (Histogram("latency_seconds", "Latency.", ["verb"], buckets=BUCKETS, registry=theirs),
                  Family("histogram", "latency_seconds", "Latency.", ["verb"], ours, BUCKETS))
    for m in counters:
        m.labels("GET", "200").inc()
        m.labels("GET", "200").inc(2)
        m.labels("POST", "409").inc()
    for m in gauges:
        m.labels("Pod").inc()
        m.labels("Pod").inc()
        m.labels("Pod").dec()
        m.labels("Node").set(7)
    for m in histograms:
        for v in (0.0001, 0.0005, 0.0007, 0.001, 0.3, 1, 2, 100):  # on and between bounds, and past the last
            m.labels("GET").observe(v)
        m.labels("LIST").observe(0.002)
    assert _text(ours) == _text(theirs)
    assert "_created" not in _text(ours)
    assert 'requests_total{code="200",verb="GET"} 3' in _text(ours)
    assert 'latency_seconds_bucket{verb="GET",le="0.0005"} 2' in _text(ours)
    assert 'latency_seconds_bucket{verb="GET",le="+Inf"} 8' in _text(ours)


def test_a_family_refuses_the_wrong_number_of_labels():
    family = Family("counter", "x_total", "X.", ["a", "b"], CollectorRegistry())
    try:
        family.labels("only-one")
    except ValueError:
        pass
    else:
        raise AssertionError("one label value for two label names was accepted")
    assert family.labels("1", "2") is family.labels("1", "2")


def test_an_unlabelled_family_is_exposed_from_the_start_as_prometheus_clients():
    theirs, ours = CollectorRegistry(), CollectorRegistry()
    Histogram("attempts", "Attempts.", buckets=(1, 2, 4), registry=theirs)
    observed = Family("histogram", "attempts", "Attempts.", [], ours, (1, 2, 4)).labels()
    assert _text(ours) == _text(theirs)
    assert 'attempts_count 0' in _text(ours)
    observed.observe(3)
    assert 'attempts_bucket{le="4"} 1' in _text(ours)
