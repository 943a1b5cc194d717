#!/usr/bin/env bash
# Sets up, then runs `nanokube up` on the embedded SQLite store (extra args pass through).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/nanokube up "$@"
