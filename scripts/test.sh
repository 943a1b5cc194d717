#!/usr/bin/env bash
# Sets up (Python packages, etcd, nftables, Prometheus, kubectl check), then runs the whole suite:
# every test on the default store, then the end-to-end suite again on etcd. Arguments go to
# pytest. Without any, the pod-certificate refresh e2e (five minutes of waiting for the earliest
# refresh the API allows) runs beside the main pass instead of inside it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/etcd.sh
bash scripts/nftables.sh
bash scripts/prometheus.sh
command -v kubectl >/dev/null || { echo "kubectl is required on PATH" >&2; exit 1; }
refresh=tests/e2e/test_pod_certificate_refresh.py
status=0
if [ "$#" -eq 0 ]; then
  refresh_log=$(mktemp)
  trap 'rm -f "$refresh_log"' EXIT
  .venv/bin/pytest -q -p no:cacheprovider "$refresh" >"$refresh_log" 2>&1 &
  refresh_pid=$!
  .venv/bin/pytest -q -n 2 --dist loadfile --ignore="$refresh" || status=$?
  wait "$refresh_pid" || status=$?
  echo "--- $refresh (ran beside the main pass):"
  cat "$refresh_log"
else
  .venv/bin/pytest -q -n 2 --dist loadfile "$@" || status=$?
fi
NANOKUBE_E2E_STORE=etcd .venv/bin/pytest -q -n 2 --dist loadfile --ignore="$refresh" tests/e2e "$@" || status=$?
exit "$status"
