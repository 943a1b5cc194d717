#!/usr/bin/env bash
# Creates .venv and installs nanokube with its pinned dependencies (idempotent).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
if ! .venv/bin/python -c "import nanokube, kubernetes, pytest" 2>/dev/null || [ pyproject.toml -nt .venv/.installed ]; then
  .venv/bin/pip install --quiet --disable-pip-version-check -e '.[test]'
  touch .venv/.installed
fi
# Debian's headless Chromium for the simulation report's browser test (tests/sim/test_report_browser.py skips without it)
if ! command -v chromium >/dev/null && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  apt-get install -y --no-install-recommends chromium >/dev/null || echo "setup: chromium not installed" >&2
fi
