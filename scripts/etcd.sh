#!/bin/sh
# Makes sure an `etcd` binary is on PATH for the etcd store tests, installing
# Debian/Ubuntu's etcd-server package if needed. Silent on success; on failure
# it prints the package manager's output and exits non-zero.
set -eu

command -v etcd >/dev/null 2>&1 && exit 0

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
log=$(mktemp)
trap 'rm -f "$log"' EXIT

if ! { $SUDO apt-get update && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends etcd-server; } >"$log" 2>&1; then
    cat "$log" >&2
    echo "scripts/etcd.sh: installing etcd-server failed" >&2
    exit 1
fi
if ! command -v etcd >/dev/null 2>&1; then
    echo "scripts/etcd.sh: etcd-server installed but no etcd on PATH" >&2
    exit 1
fi
