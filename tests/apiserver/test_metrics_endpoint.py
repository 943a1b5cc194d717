"""kube-apiserver's storage and watch metrics at /metrics, scraped over HTTPS as Prometheus does:
etcd_request_duration_seconds by operation, group and resource; apiserver_storage_objects and
apiserver_resource_objects; apiserver_longrunning_requests while a watch streams; and
apiserver_watch_events_total and apiserver_watch_events_sizes for the events it was sent."""

import asyncio
import gzip
import time

import aiohttp
import orjson
import pytest

from nanokube.apiserver.app import APIServer
from nanokube.clock import VirtualClock
from nanokube.pki.ca import ensure_pki
from nanokube.store.interface import Unavailable
from nanokube.store.memory import MemoryStore
from tests.apiserver.test_request_body import admin_context
from tests.controllers import eventually

WATCH = ('component="apiserver",group="",resource="configmaps",scope="namespace",subresource="",verb="WATCH",'
         'version="v1"')


@pytest.fixture
async def api(tmp_path):
    pki = ensure_pki(str(tmp_path))
    clock = VirtualClock(start=1_800_000_000.0)
    s = APIServer(MemoryStore(), pki, port=0, clock=clock)
    await s.start()
    async with aiohttp.ClientSession(f"https://127.0.0.1:{s.port}",
                                     connector=aiohttp.TCPConnector(ssl=admin_context(pki, tmp_path))) as http:
        try:
            yield s, clock, http
        finally:
            await s.stop()


async def scrape(http) -> str:
    async with http.get("/metrics") as r:
        assert r.status == 200 and r.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8; escaping=underscores"
        return await r.text()


def value(text: str, series: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


async def create(http, path: str, body: dict) -> None:
    async with http.post(path, data=orjson.dumps(body), headers={"Content-Type": "application/json"}) as r:
        assert r.status == 201, await r.text()


async def test_storage_requests_are_etcd_request_duration_seconds_by_operation_group_and_resource(api):
    s, clock, http = api
    await create(http, "/api/v1/namespaces/default/podtemplates", {"metadata": {"name": "a"}, "template": {
        "spec": {"containers": [{"name": "c", "image": "x"}]}}})
    await create(http, "/apis/apps/v1/namespaces/default/deployments", {"metadata": {"name": "web"}, "spec": {
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}})
    text = await scrape(http)
    assert value(text, 'etcd_request_duration_seconds_count{group="",operation="create",resource="podtemplates"}') == 1
    assert value(text, 'etcd_request_duration_seconds_count{group="apps",operation="create",resource="deployments"}') == 1
    bounds = [line.split('le="')[1].split('"')[0] for line in text.splitlines()
              if line.startswith('etcd_request_duration_seconds_bucket{group="",operation="create",resource="podtemplates"')]
    assert bounds == ["0.005", "0.025", "0.05", "0.1", "0.2", "0.4", "0.6", "0.8", "1", "1.25", "1.5", "2", "3", "4",
                      "5", "6", "8", "10", "15", "20", "30", "45", "60", "+Inf"]
    assert "# HELP etcd_request_duration_seconds [ALPHA] Etcd request latency in seconds for each operation and " \
           "object type.\n" in text
    assert "apiserver_storage_request_duration_seconds" not in text and "apiserver_registered_watchers" not in text

    await clock.advance(60)  # the stored objects are counted every minute (--etcd-count-metric-poll-period)
    text = await scrape(http)
    assert value(text, 'apiserver_storage_objects{resource="podtemplates"}') == 1
    assert value(text, 'apiserver_storage_objects{resource="deployments.apps"}') == 1
    assert value(text, 'apiserver_resource_objects{group="apps",resource="deployments"}') == 1
    assert value(text, 'apiserver_resource_objects{group="",resource="podtemplates"}') == 1
    # the ComponentStatuses the API server keeps are no stored objects of kube-apiserver's
    async with http.get("/api/v1/componentstatuses") as r:
        assert "etcd-0" in [c["metadata"]["name"] for c in (await r.json())["items"]]
    assert value(text, 'apiserver_storage_objects{resource="componentstatuses"}') is None
    assert value(text, 'apiserver_resource_objects{group="",resource="componentstatuses"}') is None
    # nor requests to its storage or a watch cache of them, though they were written and listed here
    families = ("etcd_request_duration_seconds_count{", "etcd_requests_total{", "apiserver_watch_cache_events_received_total{",
                "apiserver_watch_cache_resource_version{", "apiserver_cache_list_total{")
    series = [line for line in (await scrape(http)).splitlines() if line.startswith(families)]
    assert {line.split("{")[0] for line in series} == {f[:-1] for f in families}
    assert [line for line in series if 'resource="componentstatuses"' in line] == []


@pytest.mark.parametrize("accept", [
    "application/json",  # each event handed to the connection directly
    "application/json;as=Table;g=meta.k8s.io;v=v1",  # each event written by the watch's own task
])
async def test_a_watch_is_a_long_running_request_and_its_events_are_counted_with_their_sizes(api, accept):
    s, clock, http = api
    async with http.get("/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=0&"
                        "fieldSelector=metadata.name%3Dbig", headers={"Accept": accept}) as watch:
        assert watch.status == 200
        assert value(await scrape(http), f"apiserver_longrunning_requests{{{WATCH}}}") == 1
        await create(http, "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "big"}, "data": {"k": "x" * 3000}})
        line = await asyncio.wait_for(watch.content.readline(), 10)
        assert orjson.loads(line)["type"] == "ADDED"
        text = await scrape(http)
        events = 'group="",resource="configmaps",version="v1"'
        assert value(text, f"apiserver_watch_events_total{{{events}}}") == 1
        assert value(text, f"apiserver_watch_events_sizes_sum{{{events}}}") == len(line)
        bound = next(b for b in (1024 * 2 ** i for i in range(8)) if b >= len(line))  # 1 KiB, 2 KiB, ... 128 KiB
        if bound > 1024:
            assert value(text, f'apiserver_watch_events_sizes_bucket{{{events},le="{bound // 2}"}}') == 0
        assert value(text, f'apiserver_watch_events_sizes_bucket{{{events},le="{bound}"}}') == 1
        assert value(text, f'apiserver_watch_events_sizes_bucket{{{events},le="131072"}}') == 1
        assert "# HELP apiserver_longrunning_requests [STABLE] Gauge of all active long-running apiserver " in text

    async def ended():  # once the server writes to the closed connection
        async with http.delete("/api/v1/namespaces/default/configmaps/big"):
            pass
        return value(await scrape(http), f"apiserver_longrunning_requests{{{WATCH}}}") == 0
    await eventually(ended)


async def test_inflight_requests_are_the_most_executing_at_once_in_the_last_second(api):
    """maxinflight's watermark, which APF keeps: each second's most read-only and mutating requests
    executing at once, published when the second is over; a watch counts as read-only only while it
    is initialized (upstream's execute notes it executing until its initialization signal)."""
    s, clock, http = api

    def inflight(text: str) -> tuple[float | None, float | None]:
        return (value(text, 'apiserver_current_inflight_requests{request_kind="readOnly"}'),
                value(text, 'apiserver_current_inflight_requests{request_kind="mutating"}'))

    async with http.get("/api/v1/namespaces/default/configmaps?watch=1") as watch:
        assert watch.status == 200
        await create(http, "/api/v1/namespaces/default/podtemplates", {"metadata": {"name": "a"}, "template": {
            "spec": {"containers": [{"name": "c", "image": "x"}]}}})
        await clock.advance(1)
        assert inflight(await scrape(http)) == (1, 1)  # the second of the watch's start and the create
        await clock.advance(1)
        assert inflight(await scrape(http)) == (1, 0)  # the second of the scrape before
        await clock.advance(5)
        assert inflight(await scrape(http)) == (0, 0)  # seconds without a request
    assert "# HELP apiserver_current_inflight_requests [STABLE] Maximal number of currently used inflight " \
           "request limit of this apiserver per request kind in last second.\n" in await scrape(http)


async def test_a_read_requests_response_size_is_observed(api):
    """apiserver_response_sizes (STABLE): the bytes of each GET's and LIST's response, by request;
    a create's is not observed."""
    s, clock, http = api
    await create(http, "/api/v1/namespaces/default/podtemplates", {"metadata": {"name": "a"}, "template": {
        "spec": {"containers": [{"name": "c", "image": "x"}]}}})
    async with http.get("/api/v1/namespaces/default/podtemplates/a") as r:
        got = await r.read()
    async with http.get("/api/v1/namespaces/default/podtemplates") as r:
        listed = await r.read()
    async with http.get("/api/v1/namespaces/default/podtemplates/nosuch") as r:
        missing = await r.read()
    text = await scrape(http)
    series = 'apiserver_response_sizes_{}{{component="apiserver",group="",resource="podtemplates",scope="{}",' \
             'subresource="",verb="{}",version="v1"}}'
    assert value(text, series.format("sum", "resource", "GET")) == len(got) + len(missing)
    assert value(text, series.format("count", "resource", "GET")) == 2
    assert value(text, series.format("sum", "namespace", "LIST")) == len(listed)
    assert value(text, series.format("count", "resource", "POST")) is None
    buckets = [line.split('le="')[-1].split('"')[0] for line in text.splitlines()
               if line.startswith('apiserver_response_sizes_bucket{') and 'verb="LIST"' in line]
    assert buckets == ["1000", "10000", "100000", "1e+06", "1e+07", "1e+08", "1e+09", "+Inf"]


async def test_a_read_answered_in_protobuf_or_yaml_is_observed_at_the_size_sent(api):
    """The bytes written, in the media type negotiated: a protobuf or YAML answer's own size, not that
    of the JSON it was made from."""
    s, clock, http = api
    await create(http, "/api/v1/namespaces/default/podtemplates", {"metadata": {"name": "a"}, "template": {
        "spec": {"containers": [{"name": "c", "image": "x"}]}}})
    sizes = []
    for accept in ("application/vnd.kubernetes.protobuf", "application/yaml", "application/json"):
        async with http.get("/api/v1/namespaces/default/podtemplates/a", headers={"Accept": accept}) as r:
            assert r.content_type == accept
            sizes.append(len(await r.read()))
    assert len(set(sizes)) == 3
    series = 'apiserver_response_sizes_{}{{component="apiserver",group="",resource="podtemplates",scope="resource",' \
             'subresource="",verb="GET",version="v1"}}'
    text = await scrape(http)
    assert (value(text, series.format("sum")), value(text, series.format("count"))) == (sum(sizes), 3)


class _FlakyStore(MemoryStore):
    """A store whose next create of a pod template fails as an unreachable etcd does."""

    fail_next = False

    async def create(self, key: str, value: bytes):
        if self.fail_next and "/podtemplates/" in key:
            self.fail_next = False
            raise Unavailable("etcdserver: request timed out")
        return await super().create(key, value)


async def test_storage_requests_and_their_failures_are_counted(tmp_path):
    """etcd_requests_total and etcd_request_errors_total (RecordEtcdRequest): every request to the
    store, and those the store failed; an existing key is an answer, not a failure."""
    pki, store = ensure_pki(str(tmp_path)), _FlakyStore()
    s = APIServer(store, pki, port=0)
    await s.start()
    try:
        async with aiohttp.ClientSession(f"https://127.0.0.1:{s.port}",
                                         connector=aiohttp.TCPConnector(ssl=admin_context(pki, tmp_path))) as http:
            body = {"metadata": {"name": "a"}, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}
            store.fail_next = True
            async with http.post("/api/v1/namespaces/default/podtemplates", json=body) as r:
                assert r.status >= 500
            await create(http, "/api/v1/namespaces/default/podtemplates", body)
            async with http.post("/api/v1/namespaces/default/podtemplates", json=body) as r:
                assert r.status == 409
            text = await scrape(http)
    finally:
        await s.stop()
    labels = 'group="",operation="create",resource="podtemplates"'
    assert value(text, f"etcd_requests_total{{{labels}}}") == 3  # the failed create, the create, the existing key
    assert value(text, f"etcd_request_duration_seconds_count{{{labels}}}") == 3
    assert value(text, f"etcd_request_errors_total{{{labels}}}") == 1
    assert "# HELP etcd_request_errors_total [ALPHA] Etcd failed request counts for each operation and object type.\n" \
        in text


async def test_the_sli_latency_leaves_out_the_webhook_calls(api):
    """apiserver_request_sli_duration_seconds: a request's latency less its mutating webhooks' calls
    (and validating ones' longest, and its APF queue wait); a watch has none."""
    from tests.apiserver.admission.server import WebhookServer, allow

    s, clock, http = api
    hooks = WebhookServer().start()
    try:
        hooks.handlers["/m"] = lambda review: (time.sleep(0.02), allow(review))[1]
        await create(http, "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", {
            "metadata": {"name": "slow"}, "webhooks": [{
                "name": "slow.hooks.example.com", "sideEffects": "None", "admissionReviewVersions": ["v1"],
                "clientConfig": {"url": hooks.url("/m"), "caBundle": hooks.ca.bundle},
                "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                           "resources": ["podtemplates"]}]}]})

        async def hooked():
            return s.cache.get("/registry/mutatingwebhookconfigurations.admissionregistration.k8s.io/slow") is not None
        await eventually(hooked)
        async with http.get("/api/v1/namespaces/default/podtemplates?watch=1&timeoutSeconds=1"):
            pass
        await create(http, "/api/v1/namespaces/default/podtemplates", {"metadata": {"name": "a"}, "template": {
            "spec": {"containers": [{"name": "c", "image": "x"}]}}})
        text = await scrape(http)
    finally:
        hooks.stop()
    post = 'component="apiserver",group="",resource="podtemplates",scope="resource",subresource="",verb="POST",' \
           'version="v1"'
    webhook = value(text, 'apiserver_admission_webhook_admission_duration_seconds_sum{name="slow.hooks.example.com",'
                          'operation="CREATE",rejected="false",type="admit"}')
    with_dry_run = post.replace("group=", 'dry_run="",group=')
    latency = value(text, f"apiserver_request_duration_seconds_sum{{{with_dry_run}}}")
    sli = value(text, f"apiserver_request_sli_duration_seconds_sum{{{post}}}")
    assert webhook >= 0.02 and value(text, f"apiserver_request_sli_duration_seconds_count{{{post}}}") == 1
    assert sli == pytest.approx(latency - webhook, abs=1e-9)
    assert 'apiserver_request_sli_duration_seconds_count{component="apiserver",group="",resource="podtemplates",' \
           'scope="namespace",subresource="",verb="WATCH"' not in text
    bounds = [line.split('le="')[-1].split('"')[0] for line in text.splitlines()
              if line.startswith(f"apiserver_request_sli_duration_seconds_bucket{{{post}")]
    assert bounds[:3] == ["0.05", "0.1", "0.2"] and bounds[-2:] == ["60", "+Inf"] and len(bounds) == 22


async def test_a_requested_deprecated_api_is_reported(api):
    """apiserver_requested_deprecated_apis (STABLE): the deprecated APIs clients asked for, which an
    upgrade's checklist greps /metrics for; v1 Endpoints and ComponentStatus have no removal release."""
    s, clock, http = api
    assert "apiserver_requested_deprecated_apis" not in await scrape(http)
    async with http.get("/api/v1/componentstatuses") as r:
        assert r.status == 200 and "deprecated" in r.headers["Warning"]
    async with http.get("/api/v1/namespaces/default/endpoints") as r:
        assert r.status == 200
    async with http.get("/api/v1/namespaces/default/configmaps") as r:
        assert r.status == 200
    text = await scrape(http)
    assert value(text, 'apiserver_requested_deprecated_apis{group="",removed_release="",resource="componentstatuses",'
                       'subresource="",version="v1"}') == 1
    assert value(text, 'apiserver_requested_deprecated_apis{group="",removed_release="",resource="endpoints",'
                       'subresource="",version="v1"}') == 1
    assert len([line for line in text.splitlines() if line.startswith("apiserver_requested_deprecated_apis{")]) == 2


async def test_health_endpoints_are_counted_as_requests(api):
    """healthz.InstallPathHandler's InstrumentHandlerFunc: /healthz, /livez and /readyz in
    apiserver_request_total and the latency families as verb GET with the path as the subresource
    (a /readyz 500 while shutting down is an error there as upstream's is)."""
    s, clock, http = api
    for path in ("/healthz", "/readyz?verbose", "/readyz"):
        async with http.get(path) as r:
            assert r.status == 200
    s.shutting_down = True
    async with http.get("/readyz") as r:
        assert r.status == 500
    s.shutting_down = False
    text = await scrape(http)

    def series(name: str, subresource: str, code: str = "") -> str:
        labels = f'code="{code}",' if code else ""
        labels += 'component="",' + ('dry_run="",' if name != "apiserver_request_sli_duration_seconds_count" else "")
        return f'{name}{{{labels}group="",resource="",scope="",subresource="{subresource}",verb="GET",version=""}}'
    assert value(text, series("apiserver_request_total", "/healthz", "200")) == 1
    assert value(text, series("apiserver_request_total", "/readyz", "200")) == 2
    assert value(text, series("apiserver_request_total", "/readyz", "500")) == 1
    assert value(text, series("apiserver_request_duration_seconds_count", "/readyz")) == 3
    assert value(text, series("apiserver_request_sli_duration_seconds_count", "/readyz")) == 3
    assert value(text, series("apiserver_request_total", "/livez", "200")) is None


def families(text: str) -> dict:
    """The exposition as Prometheus reads it: each family by name, its type and its samples."""
    from prometheus_client.parser import text_string_to_metric_families
    return {f.name: f for f in text_string_to_metric_families(text)}


def sample(fams: dict, name: str, **labels) -> float | None:
    for f in fams.values():
        for s in f.samples:
            if s.name == name and s.labels == labels:
                return s.value
    return None


async def test_the_watch_cache_counts_its_lists_events_and_initial_events(api):
    """storage/cacher/metrics: a list served from the watch cache counts the objects it read and
    returned; each stored change is an event received and dispatched; a watch from resourceVersion 0
    is handed the resource's objects as its init events."""
    s, clock, http = api
    pt = {"group": "", "resource": "podtemplates"}
    assert sample(families(await scrape(http)), "apiserver_cache_list_total", **pt, index="") is None
    for name in ("a", "b", "c"):
        await create(http, "/api/v1/namespaces/default/podtemplates", {"metadata": {"name": name, "labels": {"n": name}},
                                                                       "template": {"spec": {"containers": [
                                                                           {"name": "c", "image": "x"}]}}})
    async with http.get("/api/v1/namespaces/default/podtemplates?labelSelector=n%3Da") as r:
        assert len((await r.json())["items"]) == 1
    async with http.get("/api/v1/podtemplates") as r:
        assert len((await r.json())["items"]) == 3
    async with http.get("/api/v1/namespaces/default/podtemplates?watch=1&resourceVersion=0") as watch:
        for _ in range(3):
            assert orjson.loads(await asyncio.wait_for(watch.content.readline(), 10))["type"] == "ADDED"
        fams = families(await scrape(http))
    assert sample(fams, "apiserver_cache_list_total", **pt, index="") == 2
    assert sample(fams, "apiserver_cache_list_fetched_objects_total", **pt, index="") == 6
    assert sample(fams, "apiserver_cache_list_returned_objects_total", **pt) == 4
    assert sample(fams, "apiserver_watch_cache_events_received_total", **pt) == 3
    assert sample(fams, "apiserver_watch_cache_events_dispatched_total", **pt) == 3
    assert sample(fams, "apiserver_init_events_total", **pt) == 3
    assert fams["apiserver_watch_cache_resource_version"].type == "gauge"
    assert sample(fams, "apiserver_watch_cache_resource_version", **pt) == s.cache.rev
    text = await scrape(http)
    assert "# HELP apiserver_cache_list_total [ALPHA] Number of LIST requests served from watch cache\n" in text
    assert "# TYPE apiserver_init_events_total counter\n" in text
    assert "apiserver_terminated_watchers_total" not in text  # no watcher fell behind: an empty vector is left out


async def test_the_watch_cache_filled_from_storage_at_start_is_its_initialization_and_a_storage_list(tmp_path):
    """A server started over a store holding objects fills its watch cache with a list of the store:
    one initialization per resource, counted as upstream's reflector's list of the storage is
    (apiserver_storage_list_*: every object read, tested and returned)."""
    pki, store = ensure_pki(str(tmp_path)), MemoryStore()
    first = APIServer(store, pki, port=0)
    await first.start()
    await first.stop()
    s = APIServer(store, pki, port=0)
    await s.start()
    try:
        async with aiohttp.ClientSession(f"https://127.0.0.1:{s.port}",
                                         connector=aiohttp.TCPConnector(ssl=admin_context(pki, tmp_path))) as http:
            fams = families(await scrape(http))
            async with http.get("/api/v1/namespaces") as r:
                stored = len((await r.json())["items"])
    finally:
        await s.stop()
    ns = {"group": "", "resource": "namespaces"}
    assert fams["apiserver_watch_cache_initializations"].type == "counter"
    assert sample(fams, "apiserver_watch_cache_initializations_total", **ns) == 1
    assert sample(fams, "apiserver_storage_list_total", **ns) == 1
    for name in ("fetched", "evaluated", "returned"):
        assert sample(fams, f"apiserver_storage_list_{name}_objects_total", **ns) == stored >= 4


@pytest.mark.parametrize("accept, escaping", [
    (None, "underscores"),  # curl
    ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
     "text/plain;version=0.0.4;q=0.5,*/*;q=0.1", "underscores"),  # Prometheus 2
    ("application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,application/openmetrics-text;"
     "version=0.0.1;q=0.4,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,"
     "*/*;q=0.1", "allow-utf-8"),  # Prometheus 3
    ("text/plain;version=0.0.4;escaping=dots", "dots"),
    ("text/plain;escaping=bogus", "underscores"),  # an unknown scheme is ignored
])
async def test_the_scrape_is_answered_in_the_text_format_with_the_escaping_it_asked_for(api, accept, escaping):
    """client_golang 1.20+ (expfmt.Negotiate) names the escaping scheme of metric names in the text format's
    Content-Type: the one the Accept header asks for, else its default, underscores; never OpenMetrics."""
    s, clock, http = api
    async with http.get("/metrics", headers={"Accept": accept} if accept else {}) as r:
        assert r.status == 200
        assert r.headers["Content-Type"] == f"text/plain; version=0.0.4; charset=utf-8; escaping={escaping}"
        assert families(await r.text())["apiserver_current_inflight_requests"].type == "gauge"  # the same body


@pytest.mark.parametrize("accept_encoding, gzipped", [
    ("gzip", True), ("deflate, gzip", True), ("gzip;q=0.5, identity;q=0.4", True),  # (Go's and aiohttp's clients)
    (None, False), ("identity", False), ("gzip;q=0", False),
    ("*", False), ("gzip, identity", False),  # identity, promhttp's first offer, wins a tie
])
async def test_the_scrape_is_gzipped_whatever_its_size_where_the_client_prefers_gzip(api, accept_encoding, gzipped):
    """promhttp's handler (component-base's /metrics and /metrics/slis) negotiates the encoding of every
    answer between its offers, identity and gzip, with no size threshold, and varies on both headers."""
    s, clock, http = api
    headers = {"Accept-Encoding": accept_encoding} if accept_encoding else {"Accept-Encoding": ""}
    for path in ("/metrics", "/metrics/slis"):
        async with http.get(path, headers=headers, auto_decompress=False) as r:
            body = await r.read()
            assert (r.status, r.headers.getall("Vary")) == (200, ["Accept", "Accept-Encoding"])
            assert r.headers.get("Content-Encoding") == ("gzip" if gzipped else None), path
            text = (gzip.decompress(body) if gzipped else body).decode()
            if path == "/metrics":
                assert families(text)["apiserver_current_inflight_requests"].type == "gauge"


@pytest.mark.parametrize("kind", ["memory", "sqlite", "etcd"])
async def test_the_storage_size_is_the_database_files(tmp_path, kind, request):
    """apiserver_storage_size_bytes{storage_cluster_id="etcd-0"} (the storage monitor's): the SQLite
    file's size at the scrape, etcd's Status dbSize (asked for at a scrape, served from the next);
    no series without a database."""
    from nanokube.store.etcd import EtcdStore
    from nanokube.store.sqlite import SQLiteStore

    path = tmp_path / "state.db"
    store = {"memory": MemoryStore, "sqlite": lambda: SQLiteStore(str(path)),
             "etcd": lambda: EtcdStore([request.getfixturevalue("etcd_server").endpoint])}[kind]()
    pki = ensure_pki(str(tmp_path))
    s = APIServer(store, pki, port=0)
    await s.start()
    series = 'apiserver_storage_size_bytes{storage_cluster_id="etcd-0"}'
    try:
        async with aiohttp.ClientSession(f"https://127.0.0.1:{s.port}",
                                         connector=aiohttp.TCPConnector(ssl=admin_context(pki, tmp_path))) as http:
            await create(http, "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "a"}})

            async def scraped() -> tuple[str, int] | None:
                text = await scrape(http)
                size = path.stat().st_size if kind == "sqlite" else 0
                return (text, size) if kind == "memory" or value(text, series) is not None else None
            text, size = await eventually(scraped)
    finally:
        await s.stop()
    if kind == "memory":
        assert "apiserver_storage_size_bytes" not in text
        return
    assert "# TYPE apiserver_storage_size_bytes gauge\n" in text
    assert "# HELP apiserver_storage_size_bytes [STABLE] Size of the storage database file physically allocated in bytes.\n" \
        in text
    if kind == "sqlite":
        assert value(text, series) == size > 0
    else:
        assert value(text, series) >= 4096  # bolt's file: at least its meta and freelist pages
