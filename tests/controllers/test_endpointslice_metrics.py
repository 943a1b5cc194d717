"""The EndpointSlice controller's metrics (upstream's k8s.io/endpointslice/metrics), scraped from the
/metrics kube-controller-manager serves its ControllerMetrics registry on."""

import re

from aiohttp.test_utils import TestClient, TestServer

from nanokube import component_server
from nanokube.controllers.endpointslice import EndpointSliceController
from nanokube.controllers.metrics import ControllerMetrics
from tests.controllers import becomes, make_stack
from tests.controllers.test_endpointslice import add_pod, service, slices_of, stop, wait_addresses
from tests.test_component_server import AllowAll

PREFIX = "endpoint_slice_controller_"


def series(text: str, name: str, **labels: str) -> float | None:
    """The value of one series of the exposition (labels in the order written), None if absent."""
    shown = ",".join(f'{k}="{v}"' for k, v in labels.items())
    m = re.search(rf"^{re.escape(PREFIX + name)}{re.escape('{' + shown + '}') if shown else ''} (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


async def test_endpoints_slices_syncs_and_traffic_distribution_on_metrics():
    s = await make_stack()
    c = s.client
    await c.resource("", "v1", "nodes").create({"metadata": {"name": "n1"}})
    metrics = ControllerMetrics()
    ctrl = EndpointSliceController(c, max_endpoints_per_slice=3, metrics=metrics)
    await ctrl.start()
    app = component_server.app(component_server.DelegatedAuth(AllowAll()), metrics.registry, {}, list)
    services, pods = c.resource("", "v1", "services"), c.resource("", "v1", "pods")
    try:
        async with TestClient(TestServer(app)) as http:
            async def scrape() -> str:
                return await (await http.get("/metrics")).text()

            async def gauges() -> tuple:
                text = await scrape()
                return tuple(series(text, g) for g in ("endpoints_desired", "num_endpoint_slices",
                                                       "desired_endpoint_slices"))

            await services.create({**service(), "spec": {**service()["spec"], "trafficDistribution": "PreferClose"}})
            for i in range(4):
                await add_pod(c, f"p{i}", f"10.244.1.{i + 2}")
            await wait_addresses(c, "web", [f"10.244.1.{i + 2}" for i in range(4)])
            assert await becomes(gauges, (4, 2, 2)) == (4, 2, 2), "4 endpoints in 2 slices of at most 3"
            text = await scrape()
            assert series(text, "endpoints_added_per_sync_sum") == 4 and series(text, "endpoints_removed_per_sync_sum") == 0
            assert series(text, "endpoints_added_per_sync_bucket", le="32768") == series(
                text, "endpoints_added_per_sync_count") >= 1
            assert "# HELP endpoint_slice_controller_endpoints_added_per_sync [BETA] Number of endpoints added on " \
                   "each Service sync\n" in text
            assert series(text, "changes", operation="create") >= 2
            assert series(text, "syncs", result="success") >= 1
            assert "# TYPE endpoint_slice_controller_changes counter" in text and "_changes_total" not in text, \
                "client_golang's counters named without _total"
            assert "_syncs_total" not in text
            assert series(text, "services_count_by_traffic_distribution", traffic_distribution="PreferClose") == 1
            assert series(text, "endpointslices_changed_per_sync_count", topology="Disabled",
                          traffic_distribution="PreferClose") >= 1
            assert 'changed_per_sync_bucket{topology="Disabled",traffic_distribution="PreferClose",le="10"}' in text

            full = max(await slices_of(c, "web"), key=lambda sl: len(sl["endpoints"]))
            gone = full["endpoints"][0]
            await pods.delete(gone["targetRef"]["name"], "default", grace_period_seconds=0)
            await wait_addresses(c, "web", sorted({f"10.244.1.{i + 2}" for i in range(4)} - set(gone["addresses"])))
            await becomes(gauges, (3, 2, 1))  # still 2 slices (2 and 1 endpoints), where one would do
            assert series(await scrape(), "endpoints_removed_per_sync_sum") == 1

            await services.patch("web", {"spec": {"trafficDistribution": "PreferSameZone"}}, namespace="default")

            async def distributions():
                text = await scrape()
                return [series(text, "services_count_by_traffic_distribution", traffic_distribution=td)
                        for td in ("PreferClose", "ImplementationSpecific")]
            await becomes(distributions, [0, 1])

            await services.delete("web", "default")
            await becomes(gauges, (0, 0, 0))
            text = await scrape()
            assert series(text, "services_count_by_traffic_distribution", traffic_distribution="ImplementationSpecific") == 0
            assert series(text, "changes", operation="delete") >= 2
    finally:
        await stop(ctrl)
        await s.close()


async def test_a_dual_stack_service_counts_once_by_traffic_distribution_and_both_families_in_the_gauges():
    """services_count_by_traffic_distribution counts Services (upstream's set of them, which both of a
    dual-stack Service's reconcileByAddressType calls update), so such a Service is one; the endpoint and
    slice gauges count both families' (upstream's cache keeps the last family's only, the bug of
    kubernetes/kubernetes#126004, whose fix sums them)."""
    s = await make_stack()
    c = s.client
    s.rest.index.get("", "v1", "services").strategy.ips.set_extra_ranges({"v6": ["fd00:10:96::/112"]})
    await c.resource("", "v1", "nodes").create({"metadata": {"name": "n1"}})
    metrics = ControllerMetrics()
    ctrl = EndpointSliceController(c, metrics=metrics)
    await ctrl.start()
    app = component_server.app(component_server.DelegatedAuth(AllowAll()), metrics.registry, {}, list)
    try:
        async with TestClient(TestServer(app)) as http:
            async def scrape() -> tuple:
                text = await (await http.get("/metrics")).text()
                return (series(text, "services_count_by_traffic_distribution", traffic_distribution="PreferClose"),
                        *(series(text, g) for g in ("endpoints_desired", "num_endpoint_slices", "desired_endpoint_slices")))

            svc = service()
            await c.resource("", "v1", "services").create({**svc, "spec": {
                **svc["spec"], "ipFamilyPolicy": "RequireDualStack", "trafficDistribution": "PreferClose"}})
            await add_pod(c, "p0", "10.244.1.2")
            await c.resource("", "v1", "pods").patch("p0", {"status": {"podIPs": [{"ip": "10.244.1.2"}, {"ip": "fd00:244::2"}]}},
                                                      namespace="default", subresource="status")
            assert await becomes(scrape, (1, 2, 2, 2)) == (1, 2, 2, 2), "one Service; an endpoint and a slice per family"
            assert sorted(sl["addressType"] for sl in await slices_of(c, "web")) == ["IPv4", "IPv6"]
    finally:
        await stop(ctrl)
        await s.close()
