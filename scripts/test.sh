#!/usr/bin/env bash
# Sets up (Python packages, etcd, nftables, Prometheus, kubectl check), then runs the whole suite:
# every test on the default store, then the end-to-end suite again on etcd.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/etcd.sh
bash scripts/nftables.sh
bash scripts/prometheus.sh
command -v kubectl >/dev/null || { echo "kubectl is required on PATH" >&2; exit 1; }
.venv/bin/pytest -q -n 2 --dist loadfile "$@"
NANOKUBE_E2E_STORE=etcd .venv/bin/pytest -q -n 2 --dist loadfile tests/e2e "$@"
