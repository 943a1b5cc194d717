#!/bin/sh
# Makes sure an `nft` binary is on PATH for the kube-proxy nftables tests,
# installing Debian/Ubuntu's nftables package if needed. Silent on success; on
# failure it prints the package manager's output and exits non-zero.
set -eu

command -v nft >/dev/null 2>&1 && exit 0

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
log=$(mktemp)
trap 'rm -f "$log"' EXIT

if ! { $SUDO apt-get update && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nftables; } >"$log" 2>&1; then
    cat "$log" >&2
    echo "scripts/nftables.sh: installing nftables failed" >&2
    exit 1
fi
if ! command -v nft >/dev/null 2>&1; then
    echo "scripts/nftables.sh: nftables installed but no nft on PATH" >&2
    exit 1
fi
