#!/usr/bin/env bash
# Creates .venv and installs nanokube with its pinned dependencies (idempotent).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
# (opentelemetry.sdk: a .venv made before the tracing pins installs again)
if ! .venv/bin/python -c "import nanokube, kubernetes, pytest, opentelemetry.sdk" 2>/dev/null || [ pyproject.toml -nt .venv/.installed ]; then
  .venv/bin/pip install --quiet --disable-pip-version-check -e '.[test]'
  touch .venv/.installed
fi
