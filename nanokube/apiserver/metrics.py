"""Prometheus metrics under the names kube-apiserver uses."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Gauge

from ..machinery.metrics import Family
from ..metrics.exposition import render


#: kube-apiserver's request labels (endpoints/metrics): `scope` is resource, namespace or cluster
#: (CleanScope), `dry_run` the query's dryRun values ("All", "invalid", or ""), `component` the
#: server that answered ("apiserver": nanokube serves what an aggregator would relay itself)
_REQUEST_LABELS = ["verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component"]
#: requestLatencies' buckets (endpoints/metrics)
_REQUEST_BUCKETS = (0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 45, 60)
_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class APIMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Family(
            "counter", "apiserver_request_total", "Counter of apiserver requests broken out for each verb, dry run value, "
            "group, version, resource, scope, component, and HTTP response code.",
            [*_REQUEST_LABELS, "code"], self.registry)
        self.latency = Family(
            "histogram", "apiserver_request_duration_seconds", "Response latency distribution in seconds for each verb, "
            "dry run value, group, version, resource, subresource, scope and component.",
            _REQUEST_LABELS, self.registry, _REQUEST_BUCKETS)
        self.watchers = Family(
            "gauge", "apiserver_registered_watchers", "Number of currently registered watchers for a given resource.",
            ["group", "version", "kind"], self.registry)
        self.watch_events = Family(
            "counter", "apiserver_watch_events_total", "Number of events sent in watch clients.",
            ["group", "version", "kind"], self.registry)
        self.storage_latency = Family(
            "histogram", "apiserver_storage_request_duration_seconds", "Storage request latency in seconds by operation and resource.",
            ["operation", "resource"], self.registry, _BUCKETS)
        self.storage_objects = Family(
            "gauge", "apiserver_storage_objects", "Number of stored objects at the time of last check split by kind.",
            ["resource"], self.registry)
        self.inflight = Gauge(
            "apiserver_current_inflight_requests", "Maximal number of currently used inflight request limit of this apiserver per request kind.",
            ["request_kind"], registry=self.registry)
        self.request_count, self.request_latency = self.requests.labels, self.latency.labels

    def render(self, *others) -> bytes:
        """/metrics: these families and those of `others` (the components' registries), as one registry's."""
        return render(self.registry, *others)

    def reset(self) -> None:
        """DELETE /metrics (MetricsWithReset, installed with profiling): the request, watch event
        and storage counters and histograms start again. The watcher, stored object and inflight
        gauges are kept: they hold the server's state, which clearing would misstate."""
        for family in (self.requests, self.latency, self.watch_events, self.storage_latency):
            family.reset()
