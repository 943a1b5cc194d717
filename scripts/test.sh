#!/usr/bin/env bash
# Sets up (Python packages incl. kubectl 1.37, etcd, nftables, Prometheus, Chromium), then runs the whole
# suite: ruff, every test on the default store, then the end-to-end modules whose outcome depends
# on the store (marked `store`) again on etcd. Arguments go to pytest. Without any, the
# pod-certificate refresh e2e (five minutes of waiting for the earliest refresh the API allows)
# runs beside the main pass instead of inside it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/etcd.sh
bash scripts/nftables.sh
bash scripts/prometheus.sh
sh scripts/chromium.sh
run_tmp=$(mktemp -d)
trap 'rm -rf "$run_tmp"' EXIT
# Where the environment sets PYTHONDONTWRITEBYTECODE, every pytest process (each xdist worker
# collects the whole tree) and every Python process the tests start would compile nanokube and
# the tests anew, some 15 CPU seconds a collection: this run writes its bytecode once, outside the
# tree, and removes it at the end.
if [ -n "${PYTHONDONTWRITEBYTECODE:-}" ] && [ -z "${PYTHONPYCACHEPREFIX:-}" ]; then
  unset PYTHONDONTWRITEBYTECODE
  export PYTHONPYCACHEPREFIX="$run_tmp/pycache"
fi
refresh=tests/e2e/test_pod_certificate_refresh.py
# Three workers on CI's two cores: many e2e tests wait on real time (grace periods, leases, back-offs)
# more than they compute, so a third worker fills those waits (main pass 14:13 -> 11:39 on this
# two-core machine, same tree, both green).
workers=3
status=0
.venv/bin/ruff check nanokube tests benchmarks scripts || status=$?
if [ "$#" -eq 0 ]; then
  refresh_log="$run_tmp/refresh.log"
  .venv/bin/pytest -q -p no:cacheprovider "$refresh" >"$refresh_log" 2>&1 &
  refresh_pid=$!
  .venv/bin/pytest -q -n "$workers" --dist loadfile --ignore="$refresh" || status=$?
  wait "$refresh_pid" || status=$?
  echo "--- $refresh (ran beside the main pass):"
  cat "$refresh_log"
else
  .venv/bin/pytest -q -n "$workers" --dist loadfile "$@" || status=$?
fi
NANOKUBE_E2E_STORE=etcd .venv/bin/pytest -q -n 2 --dist loadfile -m store tests/e2e "$@" || status=$?
exit "$status"
