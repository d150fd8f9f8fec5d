#!/usr/bin/env bash
# Create .venv and install ragdesk. torch==2.13.0 goes first so that pip keeps the CPU build
# instead of pulling a multi-GB CUDA build; extras ("test", "bench") are passed as arguments.
# Does nothing when .venv already holds this install: scripts/install_stamp.py keeps a stamp
# of what was installed (pyproject.toml, this script, torch, extras).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
torch="torch==${RAGDESK_TORCH_VERSION:-2.13.0}"
[ -x .venv/bin/python ] || "$PY" -m venv .venv
if .venv/bin/python scripts/install_stamp.py check --torch "$torch" "$@"; then
    exit 0
fi
.venv/bin/python -m pip install --quiet --upgrade pip
# Not --quiet: the first install downloads about 1 GB, and its progress is worth seeing.
.venv/bin/python -m pip install "$torch"
extras=""
if [ "$#" -gt 0 ]; then extras="[$(IFS=,; echo "$*")]"; fi
# setuptools announces every editable install with a boxed "be careful with folders named
# like your package" notice, which pip repeats as a build-backend warning; it says nothing
# about this project, so that one message is filtered (in pip and in the build backend).
PYTHONWARNINGS="ignore:Editable installation" .venv/bin/python -m pip install -e ".${extras}"
.venv/bin/python scripts/install_stamp.py write --torch "$torch" "$@"
