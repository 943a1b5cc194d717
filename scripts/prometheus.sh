#!/bin/sh
# Makes sure a `prometheus` binary is on PATH for the Prometheus metrics provider e2e test,
# installing Debian/Ubuntu's prometheus package if needed. Silent on success; on failure
# it prints the package manager's output and exits non-zero.
set -eu

command -v prometheus >/dev/null 2>&1 && exit 0

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
log=$(mktemp)
trap 'rm -f "$log"' EXIT

if ! { $SUDO apt-get update && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus; } >"$log" 2>&1; then
    cat "$log" >&2
    echo "scripts/prometheus.sh: installing prometheus failed" >&2
    exit 1
fi
if ! command -v prometheus >/dev/null 2>&1; then
    echo "scripts/prometheus.sh: prometheus installed but no prometheus on PATH" >&2
    exit 1
fi
