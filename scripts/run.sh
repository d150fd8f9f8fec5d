#!/usr/bin/env bash
# Install ragdesk with the offline starter pack and start the desktop app.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec .venv/bin/ragdesk "$@"
