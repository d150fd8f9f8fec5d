"""In the desktop app: a snapshot whose files no longer match their checksums is
refused at its first open with a readable error in the app's words (no command, no
traceback), stays inactive, and switches in once it is whole again."""

from __future__ import annotations

from typing import Any

from ragdesk.ui.ops import Lane
from tests.ui.probes import error_box

SWITCH_TIMEOUT_MS = 60_000


def _xor(path: Any, offset: int) -> None:
    with open(path, "r+b") as fh:
        fh.seek(offset)
        byte = fh.read(1)
        fh.seek(offset)
        fh.write(bytes([byte[0] ^ 0xFF]))


def test_switching_to_a_snapshot_with_flipped_bytes_shows_a_clear_error(  # type: ignore[no-untyped-def]
        qtbot, window) -> None:
    w = window
    path = w.backend.data.snapshots_dir / "wiki-b" / "embeddings.npy"
    offset = path.stat().st_size // 2
    _xor(path, offset)

    with qtbot.waitSignal(w.ops.events(Lane.WRITES).failed, timeout=SWITCH_TIMEOUT_MS) as sig:
        w.library.switch_snapshot("wiki-b")
    assert not sig.args[1].is_bug
    qtbot.waitUntil(lambda: error_box(w) is not None, timeout=5_000)
    box = error_box(w)
    assert box is not None
    text, hint = box.text(), box.informativeText()
    assert "wiki-b" in text and "embeddings.npy: checksum mismatch" in text
    assert "Manage indexes" in hint and "Verify" in hint  # what to do, in the app's words
    assert "`" not in text + hint and "ragdesk index" not in text + hint
    assert "Traceback" not in text and box.detailedText() == ""
    box.close()
    assert w.state.active_snapshot == "wiki-a"
    assert w.backend.catalog.active_snapshot() == "wiki-a"

    _xor(path, offset)  # whole again
    with qtbot.waitSignal(w.ops.events(Lane.WRITES).finished, timeout=SWITCH_TIMEOUT_MS):
        w.library.switch_snapshot("wiki-b")
    qtbot.waitUntil(lambda: w.backend.catalog.active_snapshot() == "wiki-b", timeout=30_000)
