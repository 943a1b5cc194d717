"""Fuzz a running API server for as long as asked (issue 18).

Runs the property of tests/e2e/test_fuzz.py -- schema-driven hostile writes;
no 5xx, no answer over 2 s, every 4xx a Status, refused writes change
nothing, accepted objects re-validate -- against the server a kubeconfig
names (admin credentials; it writes in the namespace `fuzz`), and prints the
request count and the status histogram. Needs the test extra (hypothesis).

    .venv/bin/python scripts/fuzz.py --kubeconfig .nanokube/kubeconfig --examples 20000

--kinds fuzzes only some kinds (plurals); --keep-going records each broken
request (to --failures, one JSON line each) and goes on instead of stopping
at the first one and shrinking it, so that one long run triages many kinds.

A component's bug (a controller's sync, the scheduler's binding) breaks no
answer: it shows only as a traceback in the server's log. --server-log FILE
scans the part of that log written during the run, and --up starts `nanokube up`
itself (its data dir, log and audit log kept in a fresh temporary directory)
and scans its log, stopped, at the end: each traceback or ERROR line is a
failure, alike ones counted once (tests/e2e/logscan.py); --keep-going also
records each kind (`component`, `count`, `example`) to --failures.

    .venv/bin/python scripts/fuzz.py --up --examples 60000 --seed 1 --keep-going
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hypothesis import HealthCheck, given, seed, settings  # noqa: E402

from tests.e2e.conftest import start_cluster  # noqa: E402
from tests.e2e.fuzzing import NO_ANSWER, Fuzzer, requests  # noqa: E402
from tests.e2e.logscan import component_failures, read_from  # noqa: E402
from tests.e2e.test_hardening import Raw  # noqa: E402

#: how long the server's log is given after the last request, for the failures it caused asynchronously
SETTLE = 2.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    target = ap.add_mutually_exclusive_group(required=True)
    target.add_argument("--kubeconfig", help="the server to fuzz")
    target.add_argument("--up", action="store_true", help="start `nanokube up` (sqlite, a free port) and fuzz it")
    ap.add_argument("--server-log", default=None, help="the --kubeconfig server's log (stderr), scanned for failures")
    ap.add_argument("--examples", type=int, default=10_000, help="generated requests (each is 1-6 HTTP requests)")
    ap.add_argument("--seed", type=int, default=None, help="Hypothesis seed, to repeat a run")
    ap.add_argument("--kinds", default=None, help="comma-separated plurals to fuzz (default: all the fuzzer knows)")
    ap.add_argument("--keep-going", action="store_true", help="record broken requests and go on")
    ap.add_argument("--failures", default="fuzz-failures.jsonl", help="where --keep-going records them")
    args = ap.parse_args()
    server = None
    if args.up:
        server = start_cluster(Path(tempfile.mkdtemp(prefix="nanokube-fuzz-")), "sqlite")
        print(f"nanokube up (pid {server.proc.pid}) at {server.url}, data and log in {server.data_dir}", flush=True)
        args.kubeconfig, args.server_log = server.kubeconfig, server.log_path
    log_start = Path(args.server_log).stat().st_size if args.server_log else 0
    if not args.server_log:
        print("(no --server-log: the components' failures are not looked for)", file=sys.stderr)
    try:
        failed, broken = fuzz(args)
    finally:
        time.sleep(SETTLE)
        if server is not None:
            server.log_read = True  # (the scan below reports what its cache mutation detector logs)
            server.stop()
    components = component_failures(read_from(args.server_log, log_start)) if args.server_log else []
    for f in components:
        print(f"{f.count:6d}  component: {f.signature}")
        if args.keep_going:
            with open(args.failures, "a") as out:
                out.write(json.dumps({"component": f.signature, "count": f.count, "example": f.example}) + "\n")
    if components and not args.keep_going:
        print(f"first component failure:\n{components[0].example}", file=sys.stderr)
    return 1 if failed or broken or components else 0


def fuzz(args) -> tuple[bool, collections.Counter]:
    """Run the property; whether it failed, and the broken requests --keep-going counted."""
    fuzzer = Fuzzer(Raw(args.kubeconfig, timeout=NO_ANSWER), args.kinds.split(",") if args.kinds else None)
    fuzzer.ensure_seeds()
    start = time.monotonic()
    broken: collections.Counter = collections.Counter()

    @settings(max_examples=args.examples, deadline=None, database=None, suppress_health_check=list(HealthCheck),
              print_blob=True)
    @given(requests(fuzzer))
    def prop(request):
        if not args.keep_going:
            fuzzer.check(request)
            return
        try:
            fuzzer.check(request)
        except AssertionError as e:
            broken[_signature(request, str(e))] += 1
            with open(args.failures, "a") as f:
                f.write(json.dumps({"request": request, "error": str(e)[:2000]}, default=_text) + "\n")

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
    for sig, n in broken.most_common():
        print(f"{n:6d}  {sig}")
    return failed, broken


def _text(body: bytes) -> str:
    """A body sent as bytes (another encoding's, possibly not UTF-8) as text for the failures file."""
    return body.decode("utf-8", "backslashreplace")


def _signature(request, error: str) -> str:
    """A broken request's kind, verb and error with its numbers and names blanked, to count alike failures once."""
    method, path, target = request[0], request[1], request[5]
    plural = (path if target is None else path[:path.index(f"/{target}")]).rsplit("/", 1)[-1]
    error = error.split(" (the request before: ")[0]
    return f"{plural} {method} " + re.sub(r"fuzz-[0-9]+|[0-9]+", "N", error.split(" -> ")[-1])[:160]


if __name__ == "__main__":
    sys.exit(main())
