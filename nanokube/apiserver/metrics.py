"""Prometheus metrics under the names, labels, buckets and HELP texts kube-apiserver 1.37 uses
(k8s.io/apiserver endpoints/metrics and storage/etcd3/metrics): component-base prefixes each HELP
with the metric's stability level, and a deprecated one's with the release that deprecated it."""

from __future__ import annotations

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from ..clock import REAL
from ..machinery import featuregates
from ..machinery.metrics import Family, exponential_buckets
from ..metrics.exposition import render
from ..metrics.build_info import BUILD_INFO
from ..metrics.process import PROCESS
from .cache import CAPACITY_MIN


#: kube-apiserver's request labels (endpoints/metrics): `scope` is resource, namespace or cluster
#: (CleanScope), `dry_run` the query's dryRun values ("All", "invalid", or ""), `component` the
#: server that answered ("apiserver": nanokube serves what an aggregator would relay itself)
_REQUEST_LABELS = ["verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component"]
#: requestLatencies' buckets (endpoints/metrics), which etcd_request_duration_seconds keeps too
_REQUEST_BUCKETS = (0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 45, 60)
#: responseSizes' buckets: 1 kB to 1 GB
_RESPONSE_SIZE_BUCKETS = exponential_buckets(1000, 10, 7)
#: requestSliLatencies' buckets: requestLatencies' from 50 ms
_SLI_BUCKETS = _REQUEST_BUCKETS[2:]
#: WatchEventsSizes' buckets: 1 KiB to 128 KiB
_EVENT_SIZE_BUCKETS = exponential_buckets(1024, 2, 8)
#: the verbs a request metric reports (validRequestMethods); any other is "other"
_VERBS = frozenset(("APPLY", "CONNECT", "CREATE", "DELETE", "DELETECOLLECTION", "GET", "LIST", "PATCH", "POST",
                    "PROXY", "PUT", "UPDATE", "WATCH", "WATCHLIST"))
#: validConnectRequests: a resource request for one of these subresources is reported under verb
#: CONNECT (CleanVerb), in the request metrics, the long-running gauge and the terminations alike
CONNECT_SUBRESOURCES = frozenset(("log", "exec", "portforward", "attach", "proxy"))


class WatchSent:
    """One watch's series of apiserver_watch_events_total and apiserver_watch_events_sizes: each
    event written to the client is counted with its size in bytes."""

    __slots__ = ("events", "sizes")

    def __init__(self, events, sizes) -> None:
        self.events, self.sizes = events, sizes

    def add(self, size: int) -> None:
        self.events.inc()
        self.sizes.observe(size)


class InflightWatermark:
    """maxinflight.go's request watermark, which API Priority and Fairness keeps: the most read-only
    (get, list, watch) and mutating requests executing at once within each second, long-running
    ones (watches, exec, attach, port-forward, proxy, followed logs) left out. Upstream's maintenance
    loop publishes each second's as apiserver_current_inflight_requests and starts the next from 0;
    here a second is closed when a request starts or the metric is collected after it ended."""

    KINDS = ("readOnly", "mutating")
    NAME = "apiserver_current_inflight_requests"
    HELP = ("[STABLE] Maximal number of currently used inflight request limit of this apiserver per request kind in "
            "last second.")

    def __init__(self, clock=REAL) -> None:
        self.clock = clock
        self.executing = [0, 0]  # by kind: read-only, mutating
        self.marks = [0, 0]  # the most executing at once in this second
        self.published = [0, 0]  # the last whole second's
        self.second = clock.monotonic()  # when this second began

    def _close(self, now: float) -> None:
        elapsed = now - self.second
        # a second without a request to start, after the one that had them, published 0s
        self.published = self.marks if elapsed < 2 else [0, 0]
        self.marks = [0, 0]
        self.second = now - elapsed % 1

    def enter(self, mutating: bool) -> None:
        now = self.clock.monotonic()
        if now - self.second >= 1:
            self._close(now)
        n = self.executing[mutating] = self.executing[mutating] + 1
        if n > self.marks[mutating]:
            self.marks[mutating] = n

    def leave(self, mutating: bool) -> None:
        self.executing[mutating] -= 1

    def describe(self) -> list[Metric]:
        return [Metric(self.NAME, self.HELP, "gauge")]

    def collect(self) -> list[Metric]:
        now = self.clock.monotonic()
        if now - self.second >= 1:
            self._close(now)
        m = Metric(self.NAME, self.HELP, "gauge")
        for kind, value in zip(self.KINDS, self.published):
            m.add_sample(self.NAME, {"request_kind": kind}, value)
        return [m]


def _group_resource(prefix: str) -> tuple[str, str]:
    """A resource prefix's (/registry/deployments.apps/) group and resource."""
    resource, _, group = prefix.split("/")[2].partition(".")
    return group, resource


class StorageSizeCollector:
    """apiserver_storage_size_bytes, the storage monitor's collector: the store's size at each
    scrape, under the one storage_cluster_id kube-apiserver gives its first (here only) etcd
    configuration; no series without a database (the memory store)."""

    def __init__(self, size) -> None:
        self.size = size

    def describe(self) -> list[Metric]:
        return [GaugeMetricFamily("apiserver_storage_size_bytes", _STORAGE_SIZE_HELP, labels=["storage_cluster_id"])]

    def collect(self) -> list[Metric]:
        size = self.size()
        if size is None:
            return []
        family = GaugeMetricFamily("apiserver_storage_size_bytes", _STORAGE_SIZE_HELP, labels=["storage_cluster_id"])
        family.add_metric(["etcd-0"], size)
        return [family]


_STORAGE_SIZE_HELP = "[STABLE] Size of the storage database file physically allocated in bytes."


class WatchCacheCollector:
    """The watch cache's metrics (storage/cacher/metrics and the storage list ones of
    storage/etcd3/metrics), made at each scrape from the counts the cache keeps (cache.CacheStats),
    so serving a list or an event costs a dict increment. Lists are all served from the cache, which
    indexes nothing (`index` is ""); the store is listed only to fill it, as upstream's reflector lists
    the storage. One store watch follows every resource, so each resource's watch cache is at the
    cache's revision, as upstream's are once the storage's progress notifications reach them. The
    (group, resource) pairs in `unmetered` are cached here but have no watch cache upstream: no series."""

    _RV_DIGITS = 10**15  # "truncated to the 15 least significant digits"

    def __init__(self, stats, revision, unmetered: frozenset[tuple[str, str]] = frozenset()) -> None:
        self.stats, self.revision, self.unmetered = stats, revision, unmetered

    def _metered(self, counts: dict):
        """(group, resource) and value of each prefix's count, less the unmetered resources'."""
        for rp, v in counts.items():
            if (gr := _group_resource(rp)) not in self.unmetered:
                yield gr, v

    @staticmethod
    def _family(kind: str, name: str, help_: str, labels=("group", "resource")) -> Metric:
        return (CounterMetricFamily if kind == "counter" else GaugeMetricFamily)(name, help_, labels=labels)

    _FAMILIES = (
        ("counter", "apiserver_cache_list", "[ALPHA] Number of LIST requests served from watch cache",
         ("group", "resource", "index")),
        ("counter", "apiserver_cache_list_fetched_objects",
         "[ALPHA] Number of objects read from watch cache in the course of serving a LIST request",
         ("group", "resource", "index")),
        ("counter", "apiserver_cache_list_returned_objects",
         "[ALPHA] Number of objects returned for a LIST request from watch cache", ("group", "resource")),
        ("counter", "apiserver_init_events",
         "[ALPHA] Counter of init events processed in watch cache broken by resource type.", ("group", "resource")),
        ("counter", "apiserver_watch_cache_events_received",
         "[ALPHA] Counter of events received in watch cache broken by resource type.", ("group", "resource")),
        ("counter", "apiserver_watch_cache_events_dispatched",
         "[ALPHA] Counter of events dispatched in watch cache broken by resource type.", ("group", "resource")),
        ("counter", "apiserver_terminated_watchers",
         "[ALPHA] Counter of watchers closed due to unresponsiveness broken by resource type.", ("group", "resource")),
        ("gauge", "apiserver_watch_cache_resource_version", "[ALPHA] Current resource version of watch cache broken "
         "by resource type. This is truncated to the 15 least significant digits.", ("group", "resource")),
        ("counter", "apiserver_watch_cache_initializations",
         "[ALPHA] Counter of watch cache initializations broken by resource type.", ("group", "resource")),
        ("counter", "apiserver_storage_list", "[ALPHA] Number of LIST requests served from storage",
         ("group", "resource")),
        ("counter", "apiserver_storage_list_fetched_objects",
         "[ALPHA] Number of objects read from storage in the course of serving a LIST request", ("group", "resource")),
        ("counter", "apiserver_storage_list_evaluated_objects",
         "[ALPHA] Number of objects tested in the course of serving a LIST request from storage",
         ("group", "resource")),
        ("counter", "apiserver_storage_list_returned_objects",
         "[ALPHA] Number of objects returned for a LIST request from storage", ("group", "resource")),
        ("gauge", "watch_cache_capacity", "[ALPHA] Total capacity of watch cache broken by resource type."),
        ("counter", "watch_cache_capacity_increase",
         "[ALPHA] Total number of watch cache capacity increase events broken by resource type."),
        ("counter", "watch_cache_capacity_decrease",
         "[ALPHA] Total number of watch cache capacity decrease events broken by resource type."),
    )

    def describe(self) -> list[Metric]:
        return [self._family(*f) for f in self._FAMILIES]

    def collect(self) -> list[Metric]:
        (lists, fetched, returned, init_events, received, dispatched, terminated, rv, inits, storage_lists,
         storage_fetched, storage_evaluated, storage_returned, capacity, increases, decreases) = families = self.describe()
        s = self.stats
        for gr, (n, f, r) in self._metered(s.lists):
            lists.add_metric([*gr, ""], n)
            fetched.add_metric([*gr, ""], f)
            returned.add_metric(gr, r)
        for counts, *into in ((s.init_events, init_events), (s.received, received, dispatched),
                              (s.terminated, terminated), (s.inits, inits, storage_lists), (s.increases, increases),
                              (s.decreases, decreases)):
            for gr, n in self._metered(counts):
                for family in into:
                    family.add_metric(gr, n)
        for gr, n in self._metered(s.init_objects):
            for family in (storage_fetched, storage_evaluated, storage_returned):
                family.add_metric(gr, n)
        rev = self.revision() % self._RV_DIGITS
        for gr, rp in self._metered({rp: rp for rp in {*s.inits, *s.received}}):
            rv.add_metric(gr, rev)
            capacity.add_metric(gr, s.capacity.get(rp, CAPACITY_MIN))
        return families


class APIMetrics:
    def __init__(self, clock=REAL) -> None:
        self.registry = CollectorRegistry()
        self.requests = Family(
            "counter", "apiserver_request_total", "[STABLE] Counter of apiserver requests broken out for each verb, "
            "dry run value, group, version, resource, scope, component, and HTTP response code.",
            [*_REQUEST_LABELS, "code"], self.registry)
        self.latency = Family(
            "histogram", "apiserver_request_duration_seconds", "[STABLE] Response latency distribution in seconds for "
            "each verb, dry run value, group, version, resource, subresource, scope and component.",
            _REQUEST_LABELS, self.registry, _REQUEST_BUCKETS)
        self.sli_latency = Family(
            "histogram", "apiserver_request_sli_duration_seconds", "[ALPHA] Response latency distribution (not "
            "counting webhook duration and priority & fairness queue wait times) in seconds for each verb, group, "
            "version, resource, subresource, scope and component.",
            ["verb", "group", "version", "resource", "subresource", "scope", "component"], self.registry, _SLI_BUCKETS)
        self.deprecated_apis = Family(
            "gauge", "apiserver_requested_deprecated_apis", "[STABLE] Gauge of deprecated APIs that have been "
            "requested, broken out by API group, version, resource, subresource, and removed_release.",
            ["group", "version", "resource", "subresource", "removed_release"], self.registry)
        self.response_sizes = Family(
            "histogram", "apiserver_response_sizes", "[STABLE] Response size distribution in bytes for each group, "
            "version, verb, resource, subresource, scope and component.",
            ["verb", "group", "version", "resource", "subresource", "scope", "component"], self.registry,
            _RESPONSE_SIZE_BUCKETS)
        self.longrunning = Family(
            "gauge", "apiserver_longrunning_requests", "[STABLE] Gauge of all active long-running apiserver requests "
            "broken out by verb, group, version, resource, scope and component. Not all requests are tracked this way.",
            ["verb", "group", "version", "resource", "subresource", "scope", "component"], self.registry)
        self.watch_events = Family(
            "counter", "apiserver_watch_events_total", "[ALPHA] Number of events sent in watch clients",
            ["group", "version", "resource"], self.registry)
        self.watch_event_sizes = Family(
            "histogram", "apiserver_watch_events_sizes", "[ALPHA] Watch event size distribution in bytes",
            ["group", "version", "resource"], self.registry, _EVENT_SIZE_BUCKETS)
        self.storage_latency = Family(
            "histogram", "etcd_request_duration_seconds",
            "[ALPHA] Etcd request latency in seconds for each operation and object type.",
            ["operation", "group", "resource"], self.registry, _REQUEST_BUCKETS)
        self.storage_requests = Family(
            "counter", "etcd_requests_total", "[ALPHA] Etcd request counts for each operation and object type.",
            ["operation", "group", "resource"], self.registry)
        self.storage_errors = Family(
            "counter", "etcd_request_errors_total",
            "[ALPHA] Etcd failed request counts for each operation and object type.",
            ["operation", "group", "resource"], self.registry)
        self.storage_objects = Family(
            "gauge", "apiserver_storage_objects", "[STABLE] (Deprecated since 1.34.0) [DEPRECATED, consider using "
            "apiserver_resource_objects instead] Number of stored objects at the time of last check split by kind. "
            "In case of a fetching error, the value will be -1.", ["resource"], self.registry)
        self.resource_objects = Family(
            "gauge", "apiserver_resource_objects", "[ALPHA] Number of stored objects at the time of last check split "
            "by kind. In case of a fetching error, the value will be -1.", ["group", "resource"], self.registry)
        self.terminations = Family(
            "counter", "apiserver_request_terminations_total", "[ALPHA] Number of requests which apiserver "
            "terminated in self-defense.", ["verb", "group", "version", "resource", "subresource", "scope",
                                            "component", "code"], self.registry)
        self.inflight = InflightWatermark(clock)
        self.registry.register(self.inflight)
        self.request_count, self.request_latency = self.requests.labels, self.latency.labels
        self.response_size, self.request_sli = self.response_sizes.labels, self.sli_latency.labels

    @staticmethod
    def _filtered(request, attrs) -> tuple[str, str]:
        """The verb and scope a filter reports a request under, from its method and request info
        `attrs` (authorizer.Attributes): CleanScope, then CanonicalVerb and cleanVerb (a collection's
        GET is a LIST, a GET with a true `watch` a WATCH, an apply patch an APPLY, a connect's or a
        log's a CONNECT, any verb but validRequestMethods "other")."""
        scope = "resource" if attrs.name or attrs.verb == "create" else (
            "namespace" if attrs.namespace else "cluster" if attrs.resource_request else "")
        verb = request.method.upper()
        if verb in ("GET", "HEAD"):
            watch = request.query.getall("watch", ())
            if verb == "GET" and watch and watch[0].lower() not in ("0", "false"):
                verb = "WATCH"
            else:
                verb = "GET" if scope in ("resource", "") else "LIST"
        elif verb == "PATCH" and request.content_type == "application/apply-patch+yaml":
            verb = "APPLY"
        if attrs.resource_request and attrs.subresource in CONNECT_SUBRESOURCES:
            verb = "CONNECT"
        return verb if verb in _VERBS else "other", scope

    def terminated(self, request, attrs, code: int) -> None:
        """RecordRequestTermination: a request the server ended itself (the timeout filter's 504,
        APF's 429), a non-resource request's path its subresource."""
        verb, scope = self._filtered(request, attrs)
        if attrs.resource_request:
            labels = (verb, attrs.group, attrs.version, attrs.resource, attrs.subresource, scope)
        else:
            labels = (verb, "", "", "", attrs.path, scope)
        self.terminations.labels(*labels, "apiserver", str(code)).inc()

    def refused(self, request, attrs) -> None:
        """APF's 429 (RecordDroppedRequest and RecordRequestTermination): the request, refused before
        its handler counts it, is counted in apiserver_request_total under its dryRun (cleanDryRun)
        and as a termination."""
        verb, scope = self._filtered(request, attrs)
        dry = ""
        if "dryRun" in request.query_string:
            values = sorted(set(request.query.getall("dryRun", ())))
            dry = ",".join(values) if set(values) <= {"All"} else "invalid"
        if attrs.resource_request:
            labels = (verb, dry, attrs.group, attrs.version, attrs.resource, attrs.subresource, scope)
        else:
            labels = (verb, dry, "", "", "", "", scope)
        self.requests.labels(*labels, "apiserver", "429").inc()
        self.terminated(request, attrs, 429)

    def watch_cache(self, stats, revision, unmetered: frozenset[tuple[str, str]] = frozenset()) -> None:
        """Serves the watch cache's metrics from its `stats` (cache.CacheStats) and `revision()`, but
        not those of the (group, resource) pairs in `unmetered`."""
        self.registry.register(WatchCacheCollector(stats, revision, unmetered))

    def storage_size(self, size) -> None:
        """Serves apiserver_storage_size_bytes from `size()` (Store.size) at each scrape."""
        self.registry.register(StorageSizeCollector(size))

    def watch_sent(self, group: str, version: str, resource: str) -> WatchSent:
        return WatchSent(self.watch_events.labels(group, version, resource),
                         self.watch_event_sizes.labels(group, version, resource))

    def stored(self, group_resource: str, count: int) -> None:
        """A resource's stored objects (`group_resource` as its keys name it: pods, deployments.apps),
        under both names kube-apiserver reports them."""
        resource, _, group = group_resource.partition(".")
        self.storage_objects.labels(group_resource).set(count)
        self.resource_objects.labels(group, resource).set(count)

    def render(self, *others) -> bytes:
        """/metrics: these families, the process's, the build's, its feature gates' and those of `others` (the components'
        registries), as one registry's."""
        return render(self.registry, PROCESS, BUILD_INFO, featuregates.GATES, *others)

    def reset(self) -> None:
        """DELETE /metrics (MetricsWithReset, installed with profiling): the request, watch event
        and storage counters and histograms start again. The long-running request, stored object
        and inflight gauges are kept: they hold the server's state, which clearing would misstate."""
        for family in (self.requests, self.latency, self.sli_latency, self.response_sizes, self.terminations,
                       self.watch_events, self.watch_event_sizes, self.storage_latency):
            family.reset()
