"""Admission webhook metrics under kube-apiserver's names (apiserver's
admission/metrics): latency and outcome of every call, rejections by kind of
error, and calls that failed open."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import Metric

_BUCKETS = (0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 10, 25)
CALLING_WEBHOOK_ERROR, INTERNAL_ERROR, NO_ERROR = "calling_webhook_error", "apiserver_internal_error", "no_error"


class AdmissionMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.duration = Histogram(
            "apiserver_admission_webhook_admission_duration_seconds",
            "[STABLE] Admission webhook latency histogram in seconds, identified by name and broken out for each operation "
            "and API resource and type (validate or admit).",
            ["name", "type", "operation", "rejected"], buckets=_BUCKETS, registry=self.registry)
        self.requests = Counter(
            "apiserver_admission_webhook_request_total",
            "[ALPHA] Admission webhook request total, identified by name and broken out for each admission type (validating "
            "or mutating) and operation. Additional labels specify whether the request was rejected or not and an "
            "HTTP status code. Codes greater than 600 are truncated to 600, to keep the metrics cardinality bounded.",
            ["name", "type", "operation", "code", "rejected"], registry=self.registry)
        self.rejections = _PlainCounter(
            "apiserver_admission_webhook_rejection_count",
            "[ALPHA] Admission webhook rejection count, identified by name and broken out for each admission type (validating "
            "or admit) and operation. Additional labels specify an error type (calling_webhook_error or "
            "apiserver_internal_error if an error occurred; no_error otherwise) and optionally a non-zero rejection "
            "code if the webhook rejects the request with an HTTP status code (honored by the apiserver when the code "
            "is greater or equal to 400). Codes greater than 600 are truncated to 600, to keep the metrics cardinality "
            "bounded.",
            ("name", "type", "operation", "error_type", "rejection_code"))
        self.fail_open = _PlainCounter(
            "apiserver_admission_webhook_fail_open_count",
            "[ALPHA] Admission webhook fail open count, identified by name and broken out for each admission type (validating "
            "or admit).", ("name", "type"))
        self.registry.register(self.rejections)
        self.registry.register(self.fail_open)

    def observe(self, name: str, typ: str, operation: str, seconds: float, code: int, rejected: bool) -> None:
        """ObserveWebhook: one call's latency and outcome."""
        code = min(code, 600)
        self.duration.labels(name, typ, operation, str(rejected).lower()).observe(seconds)
        self.requests.labels(name, typ, operation, str(code), str(rejected).lower()).inc()

    def rejection(self, name: str, typ: str, operation: str, error_type: str, code: int) -> None:
        self.rejections.inc(name, typ, operation, error_type, str(min(code, 600)))


class _PlainCounter:
    """A counter exposed under its own name: kube-apiserver's `..._count` counters
    carry no `_total` suffix, which prometheus_client's Counter would add (the exposition
    names a counter whose samples carry the family's own name by that name). `suffix`: the
    samples' (`_total` for a family exposed as `name_total`)."""

    def __init__(self, name: str, doc: str, labels: tuple[str, ...], suffix: str = "") -> None:
        self.name, self.doc, self.label_names, self.suffix = name, doc, labels, suffix
        self.values: dict[tuple[str, ...], float] = {}

    def inc(self, *labels: str) -> None:
        self.values[labels] = self.values.get(labels, 0.0) + 1

    def collect(self):
        m = Metric(self.name, self.doc, "counter")
        for labels, v in self.values.items():
            m.add_sample(self.name + self.suffix, dict(zip(self.label_names, labels)), v)
        yield m
