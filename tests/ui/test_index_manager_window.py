"""The index manager in the running app, offscreen with tiny models: imports with progress
and cancel, readable errors reported once, switch, quantize, verify and remove."""

from __future__ import annotations

import json
import threading
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialogButtonBox

from ragdesk.ui.ops import Lane
from tests.ui.conftest import (
    article_rows,
    expected_passages,
    write_jsonl,
)
from tests.ui.probes import (
    JOB_TIMEOUT_MS,
    action,
    ask,
    error_box,
    no_error,
)


def test_a_snapshot_of_another_vector_space_is_disabled_with_the_reason(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    act = window.index_menu.actions["other-space"]
    assert not act.isEnabled()
    assert "sentence-transformers 24-d" in act.text() and "dpr 32-d" in act.text()
    assert window.index_menu.actions["wiki-a"].isEnabled()
    window.library.switch_snapshot("other-space")  # e.g. a stale menu: refused with a dialog
    assert window.state.active_snapshot == "wiki-a"
    box = error_box(window)
    assert box is not None and "other-space" in box.text()
    box.close()


def _hold_bulk_encoding(monkeypatch: Any
                        ) -> tuple[threading.Event, threading.Event, threading.Event]:
    """(hold, held, release): once ``hold`` is set, the second batch of more than one text
    (an import's, not a question's) sets ``held`` and waits until ``release`` before it is
    encoded (the first one is encoded and reported), so that a cancel lands while the import
    still has batches left, however fast this machine encodes."""
    from ragdesk.core.encoders.runtime import TextEncoder

    hold, held, release = threading.Event(), threading.Event(), threading.Event()
    encode = TextEncoder.encode_tokenized
    bulk: list[int] = []

    def holding(self: TextEncoder, rows: list[dict[str, list[int]]]) -> Any:
        if hold.is_set() and len(rows) > 1:
            if bulk:
                held.set()
                release.wait(JOB_TIMEOUT_MS / 1000)
            bulk.append(len(rows))
        return encode(self, rows)

    monkeypatch.setattr(TextEncoder, "encode_tokenized", holding)
    return hold, held, release


def test_index_manager_imports_a_jsonl_with_progress_and_cancels_another(  # type: ignore[no-untyped-def]
        qtbot, window, tiny_models, tmp_path, monkeypatch) -> None:
    w = window
    hold, held, release = _hold_bulk_encoding(monkeypatch)
    action(window, "manage").trigger()
    m = w.index_manager
    assert m.isVisible()
    rows = article_rows(tiny_models, slice(100, 112))
    src = write_jsonl(tmp_path / "fresh.jsonl", rows)
    updates: list[Any] = []
    w.ops.events(Lane.JOBS).progressed.connect(lambda job, u: updates.append(u))

    dlg = m.open_import()
    dlg.source.setText(str(src))
    assert dlg.format.currentData() == "jsonl"
    assert dlg.name.text() == "fresh"
    # the pack's passage encoder, once listed: under load the packs come after the dialog
    qtbot.waitUntil(lambda: dlg.encoder_ref() == str(tiny_models.ctx_encoder), timeout=30_000)
    with qtbot.waitSignal(w.ops.events(Lane.JOBS).finished, timeout=JOB_TIMEOUT_MS):
        qtbot.mouseClick(dlg.buttons.button(QDialogButtonBox.StandardButton.Ok),
                         Qt.MouseButton.LeftButton)
    want = expected_passages(rows)
    encoded = [u for u in updates if u.total == want]
    assert encoded and encoded[-1].done == want
    assert any(u.rate for u in updates)
    qtbot.waitUntil(lambda: any(s.name == "fresh" and s.ready for s in m.snapshots),
                    timeout=30_000)
    fresh = next(s for s in m.snapshots if s.name == "fresh")
    assert fresh.ready and fresh.passages == want
    row = next(r for r in range(m.table.rowCount()) if m.table.item(r, 1).text() == "fresh")
    assert m.table.item(row, 2).text() == f"{want:,}"
    assert "fresh" in w.index_menu.actions  # the Index menu lists it too

    # A bigger import, cancelled from the job panel once encoding has started.
    big = write_jsonl(tmp_path / "big.jsonl", article_rows(tiny_models, slice(120, 420)))
    dlg = m.open_import()
    dlg.source.setText(str(big))
    dlg.name.setText("big")
    hold.set()
    qtbot.mouseClick(dlg.buttons.button(QDialogButtonBox.StandardButton.Ok),
                     Qt.MouseButton.LeftButton)
    # Not the first batch's progress: the GUI hears one update per 50 ms at most, so a
    # fast batch's may be dropped, and nothing more comes while the second is held.
    qtbot.waitUntil(held.is_set, timeout=JOB_TIMEOUT_MS)
    # The import keeps going while the user chats.
    chat = ask(qtbot, w, "what did they import?")
    assert chat.tokens and w.ops.busy(Lane.JOBS)
    current = w.ops.current(Lane.JOBS)
    assert current is not None and current.title == "Importing big"
    assert m.job_panel.isVisible() and m.job_panel.cancel_button.isEnabled()
    with qtbot.waitSignal(w.ops.events(Lane.JOBS).failed, timeout=JOB_TIMEOUT_MS) as sig:
        qtbot.mouseClick(m.job_panel.cancel_button, Qt.MouseButton.LeftButton)
        release.set()  # the held batch ends; the cancel is seen before the next one
    assert sig.args[1].cancelled
    assert no_error(w)  # a cancel is not an error dialog
    rec = w.backend.catalog.find_snapshot("big")
    assert rec is None or rec.state != "ready"
    assert not (w.backend.data.snapshots_dir / "big").exists()
    assert "cancelled" in m.message.text()


def test_a_bad_file_gives_a_readable_error(qtbot, window, tiny_models, tmp_path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"title": "A", "text": "fine"}) + "\n{not json\n",
                   encoding="utf-8")
    window.open_index_manager()
    with qtbot.waitSignal(window.ops.events(Lane.JOBS).failed, timeout=JOB_TIMEOUT_MS) as sig:
        window.library.start_import(str(bad), name="bad",
                                    encoder=str(tiny_models.ctx_encoder), fmt="jsonl")
    report = sig.args[1]
    assert not report.cancelled and not report.is_bug
    box = error_box(window)
    assert box is not None and box.isVisible()
    assert "line 2" in box.text() and "Traceback" not in box.text()
    assert box.detailedText() == ""
    box.close()


def test_a_failure_started_in_the_index_manager_is_reported_there_once(  # type: ignore[no-untyped-def]
        qtbot, window, tiny_models, tmp_path) -> None:
    from ragdesk.ui.import_dialog import ImportSpec

    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n", encoding="utf-8")
    m = window.open_index_manager()
    with qtbot.waitSignal(window.ops.events(Lane.JOBS).failed, timeout=JOB_TIMEOUT_MS):
        m.start_import(ImportSpec(str(bad), "bad", str(tiny_models.ctx_encoder), "jsonl", None))
    qtbot.waitUntil(lambda: "Importing bad failed" in m.message.text(), timeout=5_000)
    assert "line 1" in m.message.text()
    assert no_error(window)  # not a modal as well

    # With the dialog closed, the same failure is a dialog of the window's, once.
    m.close()
    bad.write_text("{still not json\n", encoding="utf-8")
    with qtbot.waitSignal(window.ops.events(Lane.JOBS).failed, timeout=JOB_TIMEOUT_MS):
        m.start_import(ImportSpec(str(bad), "bad2", str(tiny_models.ctx_encoder), "jsonl",
                                  None))
    qtbot.waitUntil(lambda: error_box(window) is not None, timeout=5_000)
    box = error_box(window)
    assert box is not None and "line 1" in box.text()
    box.close()


def test_index_manager_switch_quantize_verify_and_remove(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    w = window
    m = w.open_index_manager()
    m.select("wiki-b")
    assert m.switch_button.isEnabled()
    qtbot.mouseClick(m.switch_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: w.backend.catalog.active_snapshot() == "wiki-b", timeout=30_000)
    assert w.state.active_snapshot == "wiki-b"
    qtbot.waitUntil(lambda: m.table.item(m.table.currentRow(), 0).text() == "●",
                    timeout=30_000)

    m.select("other-space")
    assert not m.switch_button.isEnabled()  # the tiny pack cannot query it
    assert "sentence-transformers" in m.switch_button.toolTip()

    m.select("wiki-a")
    dlg = m.open_quantize()
    dlg.variant.setCurrentIndex(dlg.variant.findData("hnsw-sq8"))
    with qtbot.waitSignal(w.ops.events(Lane.JOBS).finished, timeout=JOB_TIMEOUT_MS):
        dlg.accept()
    qtbot.waitUntil(lambda: any(v.variant == "hnsw-sq8" for s in m.snapshots
                                if s.name == "wiki-a" for v in s.variants), timeout=30_000)
    variants = {v.variant: v for v in w.backend.catalog.get_snapshot("wiki-a").variants}
    assert "hnsw-sq8" in variants and variants["hnsw-sq8"].recall_at_20 is not None

    m.select("wiki-a")
    with qtbot.waitSignal(w.ops.events(Lane.JOBS).finished, timeout=JOB_TIMEOUT_MS):
        qtbot.mouseClick(m.verify_button, Qt.MouseButton.LeftButton)
    assert "checks passed" in m.message.text()

    m.select("wiki-a")
    qtbot.mouseClick(m.remove_button, Qt.MouseButton.LeftButton)
    box = m.confirm_box
    assert box is not None and "wiki-a" in box.text()
    remove = next(b for b in box.buttons() if b.text() == "Remove")
    with qtbot.waitSignal(w.ops.events(Lane.WRITES).finished, timeout=30_000):
        qtbot.mouseClick(remove, Qt.MouseButton.LeftButton)
    assert w.backend.catalog.find_snapshot("wiki-a") is None
    assert not (w.backend.data.snapshots_dir / "wiki-a").exists()
    qtbot.waitUntil(lambda: "wiki-a" not in w.index_menu.actions, timeout=30_000)
