#!/bin/sh
# Makes sure Debian's headless `chromium` is on PATH for the browser tests (the simulation
# report's, tests/sim/test_report_browser.py, and the web console's, tests/e2e/test_console.py),
# installing the package if needed. Silent on success; on failure it prints the package
# manager's output and exits non-zero.
set -eu

command -v chromium >/dev/null 2>&1 && exit 0

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
log=$(mktemp)
trap 'rm -f "$log"' EXIT

if ! { $SUDO apt-get update && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium; } >"$log" 2>&1; then
    cat "$log" >&2
    echo "scripts/chromium.sh: installing chromium failed" >&2
    exit 1
fi
