#!/usr/bin/env bash
# Install ragdesk into .venv (only when something changed), make sure the system libraries
# that Qt needs to open a window are there, and start the desktop app with the arguments.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh

# Qt aborts the app (exit 134) when its platform plugin lacks a system library, and bare
# Debian/Ubuntu images lack several (libxcb-cursor0, libxcb-icccm4, libxcb-keysyms1, ...).
# platform_check names the Debian packages that provide the missing ones, without starting
# Qt; it prints nothing when none is missing, when there is no display (the app then says
# so itself) and off Linux.
check() { .venv/bin/python -m ragdesk.platform_check "$@"; }
missing=$(check --packages)
if [ -n "$missing" ]; then
    check >&2 || true
    if ! command -v apt-get >/dev/null; then
        echo "ragdesk: install the packages that provide these libraries with the system's" \
             "package manager, then run scripts/run.sh again." >&2
        exit 1
    fi
    if [ "$(id -u)" = 0 ]; then
        sudo=""
    elif command -v sudo >/dev/null; then
        sudo="sudo"
    else
        echo "ragdesk: as root, run this, then scripts/run.sh again:" >&2
        echo "  apt-get update && apt-get install -y $missing" >&2
        exit 1
    fi
    echo "ragdesk: installing them: ${sudo:+sudo }apt-get install -y $missing" >&2
    # shellcheck disable=SC2086  # $missing is a list of package names
    apt_install() {
        $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
            $missing
    }
    # A fresh image has no package lists until the first `apt-get update`.
    if ! { apt_install || { $sudo apt-get update && apt_install; }; }; then
        echo "ragdesk: the install failed; run this, then scripts/run.sh again:" >&2
        echo "  ${sudo:+sudo }apt-get update && ${sudo:+sudo }apt-get install -y $missing" >&2
        exit 1
    fi
    still=$(check --packages)
    if [ -n "$still" ]; then
        check >&2 || true
        exit 1
    fi
fi
exec .venv/bin/ragdesk "$@"
