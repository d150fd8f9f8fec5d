"""A damaged ``catalog.sqlite`` (4 KB flipped at offset 8192) was copied over the
good ``catalog.sqlite.backup`` by the next ``index list``; the advice "move the file aside"
then lost every imported pack and all conversations.

SQLite's own checks now stand between the two: a catalog that fails ``quick_check`` at
open is reported with the commands that put its backup back, and a backup is refreshed only
from a copy that passes ``integrity_check``.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from ragdesk.core.catalog import Catalog
from ragdesk.core.conversations import ConversationStore

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the hint's commands are POSIX")


def _flip(path: Path, offset: int = 8192, size: int = 4096) -> None:
    raw = bytearray(path.read_bytes())
    assert len(raw) >= offset + size
    for i in range(offset, offset + size):
        raw[i] ^= 0xFF
    path.write_bytes(bytes(raw))


def _catalog_with_conversations(data_dir: Path, cli) -> Path:  # type: ignore[no-untyped-def]
    code, _, err = cli("models", "list")
    assert code == 0, err
    path = data_dir / "catalog.sqlite"
    catalog = Catalog(path)
    store = ConversationStore(catalog)
    for i in range(40):
        store.create(f"conversation {i} " + "about the tides " * 12)
    catalog.close()  # refreshes the backup: it holds the conversations
    return path


def _titles(path: Path) -> int:
    catalog = Catalog(path)
    try:
        return len(ConversationStore(catalog).list_conversations())
    finally:
        catalog.close()


def test_a_damaged_catalog_never_replaces_its_backup(cli, data_dir: Path) -> None:  # type: ignore[no-untyped-def]
    path = _catalog_with_conversations(data_dir, cli)
    backup = path.with_name(path.name + ".backup")
    good = backup.read_bytes()
    _flip(path)

    code, out, err = cli("index", "list")
    assert "damaged" in err and str(path) in err, (code, out, err)
    assert backup.read_bytes() == good  # the last good copy is kept
    cli("models", "use", "starter")  # a write, and another close
    assert backup.read_bytes() == good

    # The message says how to go back to the backup; doing it gives everything back.
    commands = re.search(r"run: (.+?) \(snapshots", " ".join(err.split()))
    assert commands is not None, err
    subprocess.run(commands.group(1), shell=True, check=True)
    code, _, err = cli("models", "list")
    assert code == 0 and "damaged" not in err, err
    assert _titles(path) == 40


def test_damage_during_a_session_is_not_backed_up(cli, data_dir: Path) -> None:  # type: ignore[no-untyped-def]
    path = _catalog_with_conversations(data_dir, cli)
    backup = path.with_name(path.name + ".backup")
    good = backup.read_bytes()
    catalog = Catalog(path)  # opened while the file was still good
    assert not catalog.damaged
    _flip(path)
    catalog.close()  # the file changed, so this would refresh the backup
    assert catalog.damaged
    assert backup.read_bytes() == good
