"""/metrics in client_golang's text format: prometheus_client's collectors written as a Kubernetes
component writes them (no `_created`, Go's numbers, `le` last, families sorted by name), and the
import of nanokube's command line and client pays for no prometheus_client."""

import subprocess
import sys

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Summary

from nanokube.metrics.exposition import go_float, render


@pytest.mark.parametrize(("value", "text"), [
    (2, "2"), (0, "0"), (-0.0, "0"), (-1, "-1"), (0.005, "0.005"), (1.25, "1.25"), (0.0001, "0.0001"),
    (0.00001, "1e-05"), (1.5e-07, "1.5e-07"), (123456, "123456"), (123456.5, "123456.5"), (1e6, "1e+06"),
    (-1e6, "-1e+06"), (1234567, "1.234567e+06"), (1.7330176123e9, "1.7330176123e+09"), (1e21, "1e+21"),
    (0.1 + 0.2, "0.30000000000000004"), (float("inf"), "+Inf"), (float("-inf"), "-Inf"), (float("nan"), "NaN"),
])
def test_numbers_are_written_as_go_writes_them(value, text):
    """strconv.FormatFloat(v, 'g', -1, 64), which client_golang's text format writes values and bounds with."""
    assert go_float(value) == text


def test_a_counter_at_2_reads_2_with_no_created_series():
    registry = CollectorRegistry()
    Counter("requests", "Requests.", ["code"], registry=registry).labels("200").inc(2)
    assert render(registry).decode() == ('# HELP requests_total Requests.\n# TYPE requests_total counter\n'
                                         'requests_total{code="200"} 2\n')


def test_a_histogram_writes_le_last_in_go_form_then_sum_then_count():
    registry = CollectorRegistry()
    Histogram("wait_seconds", "Wait.", ["verb"], buckets=(0.5, 1, 2.5), registry=registry).labels("GET").observe(2)
    assert render(registry).decode().splitlines() == [
        "# HELP wait_seconds Wait.", "# TYPE wait_seconds histogram",
        'wait_seconds_bucket{verb="GET",le="0.5"} 0', 'wait_seconds_bucket{verb="GET",le="1"} 0',
        'wait_seconds_bucket{verb="GET",le="2.5"} 1', 'wait_seconds_bucket{verb="GET",le="+Inf"} 1',
        'wait_seconds_sum{verb="GET"} 2', 'wait_seconds_count{verb="GET"} 1']


def test_a_summary_writes_its_sum_then_count():
    registry = CollectorRegistry()
    Summary("size_bytes", "Size.", registry=registry).observe(1e6)
    assert render(registry).decode().splitlines()[2:] == ["size_bytes_sum 1e+06", "size_bytes_count 1"]


def test_families_of_several_registries_are_one_sorted_by_name_series_by_label_values():
    """client_golang's Gather: families by name, each family's series by their label values, a
    family of the same name from two collectors one family, and a vector without series left out."""
    a, b = CollectorRegistry(), CollectorRegistry()
    zeta = Gauge("zeta", "Z.", ["kind"], registry=a)
    zeta.labels("b").set(1)
    zeta.labels("a").set(3)
    Gauge("unused", "No series yet.", ["kind"], registry=a)
    Gauge("alpha", 'A "quoted" help\\ on\ntwo lines.', registry=b).set(0.5)
    Gauge("zeta", "Z.", ["kind"], registry=b).labels('c"\\\n').set(2)
    assert render(a, b).decode() == (
        '# HELP alpha A "quoted" help\\\\ on\\ntwo lines.\n# TYPE alpha gauge\nalpha 0.5\n'
        '# HELP zeta Z.\n# TYPE zeta gauge\nzeta{kind="a"} 3\nzeta{kind="b"} 1\nzeta{kind="c\\"\\\\\\n"} 2\n')
    assert render(CollectorRegistry()) == b""


def test_importing_the_command_line_and_client_loads_no_prometheus_client():
    """The flag that left `_created` out had `import nanokube` pay ~50 ms for prometheus_client: kubectl-like
    runs of the CLI and the client import none of it (the exposition drops `_created` itself)."""
    code = ("import sys, nanokube.cli, nanokube.client, nanokube.metrics.exposition;"
            "print(sorted(m for m in sys.modules if m.startswith('prometheus_client')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out == "[]\n"


def test_a_counter_whose_samples_carry_its_bare_name_is_a_counter_of_that_name():
    """kube-apiserver's apiserver_admission_webhook_rejection_count: a counter without `_total`."""
    from prometheus_client.metrics_core import Metric

    class Plain:
        def collect(self):
            m = Metric("webhook_rejection_count", "Rejections.", "counter")
            m.add_sample("webhook_rejection_count", {"name": "w"}, 1)
            return [m]

    assert render(Plain()).decode() == ("# HELP webhook_rejection_count Rejections.\n"
                                        "# TYPE webhook_rejection_count counter\nwebhook_rejection_count{name=\"w\"} 1\n")


def test_exponential_buckets_are_go_s_to_the_last_bit():
    """kube-scheduler's plugin_execution_duration_seconds bounds as upstream's /metrics writes them."""
    from nanokube.machinery.metrics import exponential_buckets

    bounds = [go_float(b) for b in exponential_buckets(0.00001, 1.5, 20)]
    assert bounds[:4] == ["1e-05", "1.5000000000000002e-05", "2.2500000000000005e-05", "3.375000000000001e-05"]
    assert [go_float(b) for b in exponential_buckets(10e-9, 10, 10)] == [
        "1e-08", "1e-07", "1e-06", "9.999999999999999e-06", "9.999999999999999e-05", "0.001", "0.01", "0.1", "1", "10"]
