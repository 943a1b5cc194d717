"""Property-based fuzzing of `nanokube up` through HTTP (issue 18), bounded
for CI (NANOKUBE_FUZZ_EXAMPLES examples over every seeded kind, about 40 each; some 35 s);
scripts/fuzz.py runs the same property for as long as asked against any server.
See tests/e2e/fuzzing.py for what is generated and what is asserted; the server's log must
show no component failure (tests/e2e/logscan.py) once the run is over."""

from __future__ import annotations

import os
import time

import pytest
from hypothesis import HealthCheck, given, settings

from .fuzzing import NO_ANSWER, Fuzzer, requests
from .logscan import component_failures, read_from, records
from .test_hardening import Raw

EXAMPLES = int(os.environ.get("NANOKUBE_FUZZ_EXAMPLES", "3000"))


@pytest.fixture(scope="module")
def log_start(cluster) -> int:
    """Where the server's log stood before fuzzing set up."""
    return cluster.log_path.stat().st_size


@pytest.fixture(scope="module")
def fuzzer(cluster, log_start):
    f = Fuzzer(Raw(cluster.kubeconfig, timeout=NO_ANSWER))
    f.ensure_seeds()
    return f


@pytest.mark.timeout(300)
def test_no_request_breaks_the_server_contract(fuzzer, cluster, log_start):
    @settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(requests(fuzzer))
    def prop(request):
        fuzzer.check(request)

    prop()
    print(f"fuzz: {fuzzer.requests} requests, status histogram {fuzzer.histogram()}, slowest {fuzzer.slowest:.2f}s")
    assert fuzzer.send("GET", "/readyz", ctype=None)[0] == 200
    time.sleep(1)  # for the failures the last requests cause asynchronously (a controller's sync)
    # (its start-up INFO records say that the scan reads this log's format: a drift would hide every failure)
    assert any(level == "INFO" for level, _, _ in records(read_from(cluster.log_path, 0)))
    failures = component_failures(read_from(cluster.log_path, log_start))
    assert not failures, "components failed during the run:\n" + "\n\n".join(
        f"{f.count} x {f.signature}:\n{f.example}" for f in failures)
