"""The EndpointSlice controller's metrics under upstream's names (k8s.io/endpointslice/metrics), on
kube-controller-manager's registry: endpoints added and removed per sync, slices written, syncs by
result, and gauges of the endpoints, slices and Services by trafficDistribution the controller
keeps, which `SliceCounts` (upstream's metrics Cache) sums over the Services."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from ..machinery.metrics import Family, exponential_buckets

#: client_golang's DefBuckets, which a histogram declared without buckets gets
DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
PREFER_CLOSE = "PreferClose"
#: the label of every other trafficDistribution, so that values nobody knows keep the series few
IMPLEMENTATION_SPECIFIC = "ImplementationSpecific"


class EndpointSliceMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        per_sync = exponential_buckets(2, 2, 15)
        self.added = Family("histogram", "endpoint_slice_controller_endpoints_added_per_sync",
                            "[BETA] Number of endpoints added on each Service sync", [], registry, per_sync)
        self.removed = Family("histogram", "endpoint_slice_controller_endpoints_removed_per_sync",
                              "[BETA] Number of endpoints removed on each Service sync", [], registry, per_sync)
        self.endpoints_desired = Family("gauge", "endpoint_slice_controller_endpoints_desired",
                                        "[BETA] Number of endpoints desired", [], registry)
        self.slices = Family("gauge", "endpoint_slice_controller_num_endpoint_slices",
                             "[BETA] Number of EndpointSlices", [], registry)
        self.slices_desired = Family("gauge", "endpoint_slice_controller_desired_endpoint_slices",
                                     "[BETA] Number of EndpointSlices that would exist with perfect endpoint allocation",
                                     [], registry)
        #: operation: create, update, delete (a delete of a slice already gone is none)
        self.changes = Family("counter", "endpoint_slice_controller_changes", "[ALPHA] Number of EndpointSlice changes",
                              ["operation"], registry, total=False)
        #: topology: Auto (the topology-mode annotation) or Disabled; traffic_distribution: the one in use or ""
        self.changed_per_sync = Family("histogram", "endpoint_slice_controller_endpointslices_changed_per_sync",
                                       "[ALPHA] Number of EndpointSlices changed on each Service sync",
                                       ["topology", "traffic_distribution"], registry, DEFAULT_BUCKETS)
        #: result: success, stale (the informers lag the controller's own writes) or error
        self.syncs = Family("counter", "endpoint_slice_controller_syncs", "[ALPHA] Number of EndpointSlice syncs",
                            ["result"], registry, total=False)
        self.by_traffic_distribution = Family(
            "gauge", "endpoint_slice_controller_services_count_by_traffic_distribution",
            "[BETA] Number of Services using some specific trafficDistribution", ["traffic_distribution"], registry)


class SliceCounts:
    """Per Service, its endpoints, its slices and the slices a perfect packing would need (at least
    one: the placeholder), kept summed in the gauges; and the Services by the trafficDistribution
    they use (PreferClose, else ImplementationSpecific). A dual-stack Service is one Service there,
    as in upstream's set of them, and both of its families in the endpoint and slice gauges, where
    upstream's cache keeps only its last address type's entry (kubernetes/kubernetes#126004, a bug
    whose fix sums them)."""

    def __init__(self, metrics: EndpointSliceMetrics, max_per_slice: int) -> None:
        self.metrics = metrics
        self.max_per_slice = max_per_slice
        self._services: dict[str, tuple[int, int, int]] = {}
        self._totals = [0, 0, 0]
        self._distributions: dict[str, set[str]] = {}

    def update(self, svc_key: str, endpoints_per_port_set: list[int], slices: int) -> None:
        """The Service's endpoints of each port set (of each family) and its slices after a sync."""
        desired = sum(-(-n // self.max_per_slice) for n in endpoints_per_port_set)  # each set's slices packed full
        self._set(svc_key, (sum(endpoints_per_port_set), slices, max(desired, 1)))

    def traffic_distribution(self, svc_key: str, value: str | None) -> None:
        """The trafficDistribution the Service's hints follow now (None: none)."""
        for services in self._distributions.values():
            services.discard(svc_key)
        if value is not None:
            label = value if value == PREFER_CLOSE else IMPLEMENTATION_SPECIFIC
            self._distributions.setdefault(label, set()).add(svc_key)
        for label, services in self._distributions.items():  # a label once used stays, at 0 when unused
            self.metrics.by_traffic_distribution.labels(label).set(len(services))

    def forget(self, svc_key: str) -> None:
        self._set(svc_key, None)
        self.traffic_distribution(svc_key, None)

    def _set(self, svc_key: str, counts: tuple[int, int, int] | None) -> None:
        old = self._services.pop(svc_key, (0, 0, 0))
        if counts is not None:
            self._services[svc_key] = counts
        for i, n in enumerate(counts or (0, 0, 0)):
            self._totals[i] += n - old[i]
        m = self.metrics
        for family, total in zip((m.endpoints_desired, m.slices, m.slices_desired), self._totals):
            family.labels().set(total)
