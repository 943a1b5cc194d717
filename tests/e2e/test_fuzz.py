"""Property-based fuzzing of `nanokube up` through HTTP (issue 18), bounded
for CI (NANOKUBE_FUZZ_EXAMPLES examples over every seeded kind, about 50 each; some 20 s);
scripts/fuzz.py runs the same property for as long as asked against any server.
See tests/e2e/fuzzing.py for what is generated and what is asserted."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings

from .fuzzing import Fuzzer, requests
from .test_hardening import Raw

EXAMPLES = int(os.environ.get("NANOKUBE_FUZZ_EXAMPLES", "3000"))


@pytest.fixture(scope="module")
def fuzzer(cluster):
    f = Fuzzer(Raw(cluster.kubeconfig))
    f.ensure_seeds()
    return f


@pytest.mark.timeout(300)
def test_no_request_breaks_the_server_contract(fuzzer):
    @settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(requests(fuzzer))
    def prop(request):
        fuzzer.check(request)

    prop()
    print(f"fuzz: {fuzzer.requests} requests, status histogram {fuzzer.histogram()}, slowest {fuzzer.slowest:.2f}s")
    assert fuzzer.send("GET", "/readyz", ctype=None)[0] == 200
