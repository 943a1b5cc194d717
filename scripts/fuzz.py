"""Fuzz a running API server for as long as asked (issue 18).

Runs the property of tests/e2e/test_fuzz.py -- schema-driven hostile writes;
no 5xx, no answer over 2 s, every 4xx a Status, refused writes change
nothing, accepted objects re-validate -- against the server a kubeconfig
names (admin credentials; it writes in the namespace `fuzz`), and prints the
request count and the status histogram. Needs the test extra (hypothesis).

    .venv/bin/python scripts/fuzz.py --kubeconfig .nanokube/kubeconfig --examples 20000
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hypothesis import HealthCheck, given, seed, settings  # noqa: E402

from tests.e2e.fuzzing import Fuzzer, requests  # noqa: E402
from tests.e2e.test_hardening import Raw  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--examples", type=int, default=10_000, help="generated requests (each is 1-6 HTTP requests)")
    ap.add_argument("--seed", type=int, default=None, help="Hypothesis seed, to repeat a run")
    args = ap.parse_args()
    fuzzer = Fuzzer(Raw(args.kubeconfig))
    fuzzer.ensure_seeds()
    start = time.monotonic()

    @settings(max_examples=args.examples, deadline=None, database=None, suppress_health_check=list(HealthCheck),
              print_blob=True)
    @given(requests(fuzzer))
    def prop(request):
        fuzzer.check(request)

    if args.seed is not None:
        prop = seed(args.seed)(prop)
    failed = False
    try:
        prop()
    except Exception as e:  # AssertionError, or Hypothesis's FlakyFailure group around one
        failed = True
        print(f"FAILED: {e!r}", file=sys.stderr)
    took = time.monotonic() - start
    print(f"{fuzzer.requests} requests in {took:.0f} s; status histogram: {fuzzer.histogram()}; "
          f"slowest answer {fuzzer.slowest:.2f} s: {fuzzer.slowest_request}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
