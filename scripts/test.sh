#!/usr/bin/env bash
# Install everything into .venv (CPU torch first) and run the whole test suite with lint checks.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh test
export QT_QPA_PLATFORM=offscreen
.venv/bin/ruff check .
.venv/bin/mypy
.venv/bin/lint-imports
.venv/bin/python -m pytest "$@"
