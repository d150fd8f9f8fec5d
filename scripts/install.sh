#!/usr/bin/env bash
# Create .venv and install ragdesk. torch==2.13.0 goes first so that pip keeps the CPU build
# instead of pulling a multi-GB CUDA build; extras ("test", "bench") are passed as arguments.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet "torch==${RAGDESK_TORCH_VERSION:-2.13.0}"
extras=""
if [ "$#" -gt 0 ]; then extras="[$(IFS=,; echo "$*")]"; fi
.venv/bin/python -m pip install --quiet -e ".${extras}"
