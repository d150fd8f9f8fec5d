"""Does .venv already hold what scripts/install.sh would install? (stdlib only)

``scripts/install.sh`` runs on every ``scripts/run.sh`` and ``scripts/test.sh``; reinstalling
each time costs 10-20 s and a screen of pip output. After a successful install it writes a
stamp into the virtualenv: a hash of everything that decides what gets installed
(pyproject.toml, install.sh itself, the torch requirement, the Python version, the checkout's
path, which the editable install points at) and the extras installed. The next run skips pip
when the hash matches and the extras it asks for were installed already (``run.sh`` after
``test.sh`` asks for none of them). A deleted or recreated .venv has no stamp.

    python scripts/install_stamp.py check --torch SPEC [EXTRA ...]   exit 0: up to date
    python scripts/install_stamp.py write --torch SPEC [EXTRA ...]   after an install

Run with the virtualenv's python (its version is part of the hash and its site-packages
must hold ragdesk).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INPUTS = ("pyproject.toml", "scripts/install.sh")


def stamp_path(root: Path = ROOT) -> Path:
    return root / ".venv" / ".ragdesk-install-stamp"


def install_key(torch: str, root: Path = ROOT) -> str:
    """A hash of everything that changes what install.sh installs, extras aside."""
    h = hashlib.sha256()
    for name in INPUTS:
        h.update(name.encode() + b"\0")
        h.update((root / name).read_bytes() + b"\0")
    for part in (f"torch={torch}", f"python={sys.version}", f"root={root}"):
        h.update(part.encode() + b"\0")
    return h.hexdigest()


def _read(path: Path) -> dict[str, object]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _ragdesk_installed() -> bool:
    # The stamp can outlive the package (someone ran `pip uninstall ragdesk`).
    try:
        importlib.metadata.distribution("ragdesk")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def is_current(torch: str, extras: list[str], root: Path = ROOT) -> bool:
    """True when the last install was this one, with at least these extras."""
    data = _read(stamp_path(root))
    installed = data.get("extras")
    return (data.get("key") == install_key(torch, root)
            and isinstance(installed, list) and set(extras) <= set(installed)
            and _ragdesk_installed())


def write(torch: str, extras: list[str], root: Path = ROOT) -> None:
    """Record a finished install. Extras add up while the key stays the same: pip never
    removes the previous ones."""
    key = install_key(torch, root)
    data = _read(stamp_path(root))
    before = data.get("extras") if data.get("key") == key else []
    union = sorted(set(extras) | set(before if isinstance(before, list) else []))
    path = stamp_path(root)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"key": key, "extras": union}) + "\n", encoding="utf-8")
    tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("check", "write"))
    parser.add_argument("--torch", required=True, help="the torch requirement installed")
    parser.add_argument("extras", nargs="*")
    args = parser.parse_intermixed_args(argv)  # "check --torch T test bench"
    if args.action == "check":
        return 0 if is_current(args.torch, args.extras) else 1
    write(args.torch, args.extras)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
