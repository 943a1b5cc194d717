"""Upstream's STABLE and BETA metrics that nanokube serves, as test data: name, type, label names and
bucket bounds, taken from kubernetes/kubernetes test/instrumentation/testdata/stable-metrics-list.yaml
(the list `make test-instrumentation` keeps; its Custom collectors are written here as the type they
expose). Each entry: (endpoint, type, label names, bounds or None). Endpoints: `/metrics` of `up`'s API
server (which also serves the in-process scheduler's and controller-manager's registries), and the
kubelet's, through the API server's node proxy."""

_REQUEST = (0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 45, 60)
_SLI = tuple(0.01 * 2 ** i for i in range(20))
_EXTENSION_POINT = tuple(0.0001 * 2 ** i for i in range(12))
_ATTEMPT = tuple(0.001 * 2 ** i for i in range(15))
_KUBELET = "/api/v1/nodes/{node}/proxy/metrics"

STABLE = {
    # kube-apiserver
    "apiserver_current_inflight_requests": ("/metrics", "gauge", "request_kind", None),
    "apiserver_storage_size_bytes": ("/metrics", "gauge", "storage_cluster_id", None),  # a Custom collector's
    "apiserver_longrunning_requests": ("/metrics", "gauge", "component group resource scope subresource verb version", None),
    "apiserver_request_duration_seconds": (
        "/metrics", "histogram", "component dry_run group resource scope subresource verb version", _REQUEST),
    "apiserver_request_total": ("/metrics", "counter", "code component dry_run group resource scope subresource verb version",
                                None),
    "apiserver_response_sizes": ("/metrics", "histogram", "component group resource scope subresource verb version",
                                 (1000, 10000, 100000, 1e6, 1e7, 1e8, 1e9)),
    "apiserver_flowcontrol_current_executing_requests": ("/metrics", "gauge", "flow_schema priority_level", None),
    "apiserver_flowcontrol_current_executing_seats": ("/metrics", "gauge", "flow_schema priority_level", None),
    "apiserver_flowcontrol_current_inqueue_requests": ("/metrics", "gauge", "flow_schema priority_level", None),
    "apiserver_flowcontrol_dispatched_requests_total": ("/metrics", "counter", "flow_schema priority_level", None),
    "apiserver_flowcontrol_nominal_limit_seats": ("/metrics", "gauge", "priority_level", None),
    "apiserver_flowcontrol_request_wait_duration_seconds": (
        "/metrics", "histogram", "execute flow_schema priority_level", (0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30)),
    "kubernetes_feature_enabled": ("/metrics", "gauge", "name stage", None),
    # kube-scheduler
    "scheduler_framework_extension_point_duration_seconds": (
        "/metrics", "histogram", "extension_point profile status", _EXTENSION_POINT),
    "scheduler_pending_pods": ("/metrics", "gauge", "queue", None),
    "scheduler_pod_scheduling_attempts": ("/metrics", "histogram", "", (1, 2, 4, 8, 16)),
    "scheduler_pod_scheduling_sli_duration_seconds": ("/metrics", "histogram", "attempts", _SLI),
    "scheduler_preemption_attempts_total": ("/metrics", "counter", "", None),
    "scheduler_preemption_victims": ("/metrics", "histogram", "", (1, 2, 4, 8, 16, 32, 64)),
    "scheduler_queue_incoming_pods_total": ("/metrics", "counter", "event queue", None),
    "scheduler_schedule_attempts_total": ("/metrics", "counter", "profile result", None),
    "scheduler_scheduling_attempt_duration_seconds": ("/metrics", "histogram", "profile result", _ATTEMPT),
    # kube-controller-manager
    "cronjob_controller_job_creation_skew_duration_seconds": (
        "/metrics", "histogram", "", (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)),
    "node_collector_evictions_total": ("/metrics", "counter", "zone", None),
    # kubelet
    "container_cpu_usage_seconds_total": (_KUBELET + "/resource", "counter", "container namespace pod", None),
    "container_memory_working_set_bytes": (_KUBELET + "/resource", "gauge", "container namespace pod", None),
    "container_start_time_seconds": (_KUBELET + "/resource", "gauge", "container namespace pod", None),
    "node_cpu_usage_seconds_total": (_KUBELET + "/resource", "counter", "", None),
    "node_memory_working_set_bytes": (_KUBELET + "/resource", "gauge", "", None),
    "pod_cpu_usage_seconds_total": (_KUBELET + "/resource", "counter", "namespace pod", None),
    "pod_memory_working_set_bytes": (_KUBELET + "/resource", "gauge", "namespace pod", None),
    "resource_scrape_error": (_KUBELET + "/resource", "gauge", "", None),
}
