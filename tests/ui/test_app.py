"""The desktop app end to end, offscreen, with the real core and tiny models: streaming,
colours, citations, hot-swap, the index manager, compare, responsiveness and closing."""

from __future__ import annotations

import html
import json
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QDialogButtonBox, QMessageBox

from ragdesk.core.types import Answer
from ragdesk.ui.ops import Lane
from ragdesk.ui.theme import passage_tint
from tests.ui.conftest import (
    A_ARTICLES,
    B_ARTICLES,
    article_rows,
    expected_passages,
    write_jsonl,
)
from tests.ui.probes import ANSWER_TIMEOUT_MS, action, ask, error_box, no_error, type_question

JOB_TIMEOUT_MS = 300_000


def titles(tiny_models: Any, which: slice) -> set[str]:
    return {t for t, _ in tiny_models.corpus[which]}


def test_enter_sends_and_the_answer_streams_in_token_by_token(qtbot, fresh_window) -> None:  # type: ignore[no-untyped-def]
    w = fresh_window
    type_question(qtbot, w, "who wrote the origin")
    qtbot.keyClick(w.question, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClicks(w.question, "of species?")
    assert w.question.toPlainText() == "who wrote the origin\nof species?"
    assert not w.chat.cards  # Shift+Enter did not send

    streamed: list[Any] = []
    seen_while_running: list[bool] = []

    def on_token(rid: int, tok: Any) -> None:
        card = w.chat.card(rid)
        streamed.append(tok)
        # The card shows each token before the answer exists on the GUI side.
        seen_while_running.append(card is not None and card.answer is None)

    w.conversation.tokenStreamed.connect(on_token)
    with qtbot.waitSignal(w.conversation.answerFinished, timeout=ANSWER_TIMEOUT_MS) as sig:
        qtbot.keyClick(w.question, Qt.Key.Key_Return)
    answer: Answer = sig.args[1]
    card = w.chat.cards[-1]
    assert w.question.toPlainText() == ""
    assert answer.question == "who wrote the origin\nof species?"
    assert answer.tokens and not answer.cancelled
    assert [(t.id, t.text, t.posterior) for t in streamed] == \
        [(t.id, t.text, t.posterior) for t in answer.tokens]
    assert all(seen_while_running)
    assert card.answer is answer and card.state == "done"
    assert card.text.toPlainText().strip() == answer.text
    assert answer.snapshot == "wiki-a"
    assert len(card.chip_widgets()) == len(answer.docs) == 3
    assert w.selection.answer is answer


def test_token_colours_and_heat_map_match_the_posteriors(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    answer = ask(qtbot, window, "what is the capital of france?")
    card = window.chat.cards[-1]
    post = np.array([t.posterior for t in answer.tokens])
    np.testing.assert_allclose(post.sum(axis=1), 1.0, atol=1e-4)
    # Each token is coloured by its shown source: the posterior's argmax, unless another
    # passage is the one that holds the quoted words (AnswerToken.quoted_from).
    expected = [t.source for t in answer.tokens]
    assert all(t.quoted_from is not None or t.source == int(post[i].argmax())
               for i, t in enumerate(answer.tokens))
    checked = 0
    for i, tok in enumerate(answer.tokens):
        if tok.text.strip():
            assert card.text.token_color(i) == passage_tint(expected[i]), i
            checked += 1
    assert checked > 0
    hm = window.heatmap.map
    assert hm.tokens == answer.tokens and hm.k == len(answer.docs)
    window.heatmap.pieces_box.setChecked(True)  # one column per token
    for i in range(len(answer.tokens)):
        for k in range(hm.k):
            assert hm.value(i, k) == post[i, k]
    tip = html.unescape(card.text.tooltip_html(0)).replace("\xa0", " ")
    for k, p in enumerate(answer.tokens[0].posterior):
        assert f"{p * 100:5.1f}%" in tip and answer.docs[k].title in tip


def test_clicking_a_chip_opens_that_passage(qtbot, window, tiny_models) -> None:  # type: ignore[no-untyped-def]
    from ragdesk.core.snapshots import open_snapshot

    answer = ask(qtbot, window, "who discovered penicillin?")
    card = window.chat.cards[-1]
    k = 2
    qtbot.mouseClick(card.chip(k), Qt.MouseButton.LeftButton)
    doc = answer.docs[k]
    snap = open_snapshot(window.backend.data, window.backend.catalog, "wiki-a")
    try:
        stored = snap.get_passages([doc.id])[0]
    finally:
        snap.close()
    ins = window.inspector
    assert ins.k == k
    assert ins.shown_text() == stored.text
    assert stored.title in ins.title.text()
    assert ins.fact_labels["prob"].text().replace("\u00a0", " ") == \
        f"retrieval {100 * doc.prob:.0f}%  (τ = {card.answer.temperature:.3g})"
    assert ins.fact_labels["score"].text() == f"{doc.score:.3f}"
    assert ins.fact_labels["snapshot"].text() == "wiki-a"
    assert card.text.focus_passage == k and window.heatmap.map.selected_passage == k
    # Clicking a token selects the passage it came from.
    i = next(i for i, t in enumerate(answer.tokens) if t.text.strip())
    qtbot.mouseClick(card.text.viewport(), Qt.MouseButton.LeftButton,
                     pos=card.text.token_rect(i).center().toPoint())
    assert ins.k == answer.tokens[i].source


def test_switching_snapshot_while_an_answer_streams(qtbot, window, tiny_models) -> None:  # type: ignore[no-untyped-def]
    w = window
    w.backend.gate = threading.Event()
    menu_action = w.index_menu.actions["wiki-b"]
    assert menu_action.isEnabled() and not menu_action.isChecked()
    type_question(qtbot, w, "who was the first emperor of rome?")
    with qtbot.waitSignal(w.conversation.tokenStreamed, timeout=ANSWER_TIMEOUT_MS):
        qtbot.keyClick(w.question, Qt.Key.Key_Return)
    first = w.chat.cards[-1]
    assert first.state == "running"

    menu_action.trigger()  # Index ▸ wiki-b, while the worker is mid-answer
    assert w.state.active_snapshot == "wiki-b" and menu_action.isChecked()
    qtbot.waitUntil(lambda: w.backend.catalog.active_snapshot() == "wiki-b", timeout=30_000)
    assert first.state == "running"

    with qtbot.waitSignal(w.conversation.answerFinished, timeout=ANSWER_TIMEOUT_MS) as sig:
        w.backend.gate.set()
    old: Answer = sig.args[1]
    assert old.snapshot == "wiki-a"
    assert {d.snapshot for d in old.docs} == {"wiki-a"}
    assert {d.title for d in old.docs} <= titles(tiny_models, A_ARTICLES)

    w.backend.gate = None
    new = ask(qtbot, w, "who was the first emperor of rome?")
    assert new.snapshot == "wiki-b"
    assert {d.title for d in new.docs} <= titles(tiny_models, B_ARTICLES)
    assert w.backend.answers_started == ["wiki-a", "wiki-b"]
    assert "wiki-b" in w.status.snapshot.text()


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


def test_the_window_writes_settings_on_the_writes_lane(  # type: ignore[no-untyped-def]
        qtbot, window, monkeypatch) -> None:
    settings = window.settings
    plain = settings.update
    on_gui_thread: list[bool] = []

    def update(values: dict[str, Any]) -> None:
        on_gui_thread.append(threading.current_thread() is threading.main_thread())
        plain(values)

    monkeypatch.setattr(settings, "update", update)
    # The start's own writes (the conversations' purge) are done first.
    qtbot.waitUntil(lambda: not window.ops.busy(Lane.WRITES), timeout=10_000)
    try:
        with qtbot.waitSignal(window.ops.events(Lane.WRITES).finished, timeout=5_000) as sig:
            window.apply_theme("dark")
        assert sig.args[0].title == "Save settings" and settings.get("theme") == "dark"
        window.controls.n_docs.setValue(4)
        qtbot.waitUntil(lambda: settings.get("n_docs") == 4, timeout=5_000)
        assert on_gui_thread and not any(on_gui_thread)  # the GUI thread never wrote them
    finally:
        window.apply_theme("light")


def test_export_writes_on_the_writes_lane_and_reports_a_bad_folder_once(  # type: ignore[no-untyped-def]
        qtbot, window, tmp_path, monkeypatch) -> None:
    from PySide6.QtWidgets import QFileDialog

    # The answer is saved on the writes lane too (and the conversation remembered): those
    # writes are done before export's turn.
    with qtbot.waitSignal(window.history.saved, timeout=ANSWER_TIMEOUT_MS):
        ask(qtbot, window, "who wrote hamlet?")
    qtbot.waitUntil(lambda: not window.ops.busy(Lane.WRITES), timeout=10_000)
    target = tmp_path / "chat.md"
    monkeypatch.setattr(QFileDialog, "getSaveFileName",
                        staticmethod(lambda *a, **k: (str(target), "")))
    with qtbot.waitSignal(window.ops.events(Lane.WRITES).finished, timeout=10_000):
        action(window, "export").trigger()
    assert target.read_text(encoding="utf-8").startswith("# ")
    assert str(target) in window.status.text.fullText()

    missing = tmp_path / "no-such-folder" / "chat.md"
    monkeypatch.setattr(QFileDialog, "getSaveFileName",
                        staticmethod(lambda *a, **k: (str(missing), "")))
    with qtbot.waitSignal(window.ops.events(Lane.WRITES).failed, timeout=10_000):
        action(window, "export").trigger()
    qtbot.waitUntil(lambda: error_box(window) is not None, timeout=5_000)
    box = error_box(window)
    assert box is not None and "Could not write" in box.text()
    assert box.icon() != QMessageBox.Icon.Critical  # not a bug
    assert "Choose another folder" in box.informativeText()
    box.close()


def test_compare_view_answers_from_both_snapshots(qtbot, window, tiny_models) -> None:  # type: ignore[no-untyped-def]
    action(window, "compare").trigger()
    d = window.compare_dialog
    assert d.isVisible()
    names = [d.pickers[0].itemData(i) for i in range(d.pickers[0].count())]
    assert names == ["wiki-a", "wiki-b"]  # the other-space snapshot is not offered
    d.set_pair("wiki-a", "wiki-b")
    d.question.setText("where is the eiffel tower?")
    finished: list[Any] = []
    window.conversation.answerFinished.connect(lambda rid, a: finished.append(a))
    qtbot.mouseClick(d.go, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(finished) == 2, timeout=ANSWER_TIMEOUT_MS)
    left, right = (c.answer for c in d.cards)
    assert left.snapshot == "wiki-a" and right.snapshot == "wiki-b"
    assert {x.title for x in left.docs} <= titles(tiny_models, A_ARTICLES)
    assert {x.title for x in right.docs} <= titles(tiny_models, B_ARTICLES)
    assert [c.doc for c in d.cards[0].chip_widgets()] == left.docs
    assert [c.doc for c in d.cards[1].chip_widgets()] == right.docs
    assert window.chat.cards == []  # compare answers stay out of the conversation
    assert window.state.active_snapshot == "wiki-a"

    # A compare answer clicked becomes the selection; comparing again deletes its card, and
    # the selection lets go of it rather than touching a deleted widget.
    old = d.cards[0]
    old.activated.emit(old)
    assert window.selection.card is old and window.selection.answer is left
    finished.clear()
    qtbot.mouseClick(d.go, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(finished) == 2, timeout=ANSWER_TIMEOUT_MS)
    qtbot.waitUntil(lambda: window.selection.card is None, timeout=5_000)
    assert window.state.selected_answer is None
    answer = ask(qtbot, window, "and the louvre?")
    assert window.selection.answer is answer


class StallMeter:
    """A 5 ms timer on the GUI thread; the longest gap between ticks is how long the event
    loop was blocked."""

    def __init__(self) -> None:
        self.timer = QTimer()
        self.timer.setTimerType(Qt.TimerType.PreciseTimer)
        self.timer.setInterval(5)
        self.timer.timeout.connect(self._tick)
        self.last = 0.0
        self.longest = 0.0
        self.ticks = 0

    def _tick(self) -> None:
        now = time.perf_counter()
        if self.ticks:
            self.longest = max(self.longest, now - self.last)
        self.last = now
        self.ticks += 1

    def __enter__(self) -> StallMeter:
        self.timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.timer.stop()


def test_event_loop_keeps_ticking_during_an_answer_and_an_import(  # type: ignore[no-untyped-def]
        qtbot, window, tiny_models, tmp_path, capsys) -> None:
    w = window
    # 64 tokens whatever the tiny model says, and as many answers as it takes for the meter
    # to tick 10 times: one such answer could be over in 40-60 ms, which measured nothing
    w.controls.max_len.setValue(64)
    w.controls._min_new_tokens = 64
    # free decoding: a grounded answer may stop at a dead end before its minimum length
    w.controls.grounded.setCurrentIndex(w.controls.grounded.findData("off"))
    with StallMeter() as answer_meter:
        for _ in range(10):
            type_question(qtbot, w, "what is the tallest mountain on earth?")
            with qtbot.waitSignal(w.conversation.answerFinished, timeout=ANSWER_TIMEOUT_MS):
                qtbot.keyClick(w.question, Qt.Key.Key_Return)
            if answer_meter.ticks > 10:
                break
    src = write_jsonl(tmp_path / "stall.jsonl", article_rows(tiny_models, slice(200, 260)))
    with StallMeter() as import_meter, qtbot.waitSignal(w.ops.events(Lane.JOBS).finished,
                                                        timeout=JOB_TIMEOUT_MS):
        w.library.start_import(str(src), name="stall", encoder=str(tiny_models.ctx_encoder),
                       fmt="jsonl")
    with capsys.disabled():
        print(f"\n[ui stall] longest event-loop gap: answer {answer_meter.longest * 1000:.1f} ms "
              f"({answer_meter.ticks} ticks), import {import_meter.longest * 1000:.1f} ms "
              f"({import_meter.ticks} ticks); goal < 50 ms")
    assert answer_meter.ticks > 10 and import_meter.ticks > 10
    # The goal is < 50 ms; on this shared 2-core machine under load the longest gaps measured
    # 35-230 ms (the rest is other processes and C code holding the GIL, such as parsing a
    # tokenizer's JSON). The bound only catches real freezes, e.g. work on the GUI thread.
    assert answer_meter.longest < 1.0 and import_meter.longest < 1.0


def test_closing_during_work_cancels_it_and_joins_the_workers(  # type: ignore[no-untyped-def]
        qtbot, window, tiny_models, tmp_path) -> None:
    w = window
    w.controls.max_len.setValue(400)
    w.controls._min_new_tokens = 400  # long enough to be mid-answer when the window closes
    type_question(qtbot, w, "tell me everything about the moon")
    with qtbot.waitSignal(w.conversation.tokenStreamed, timeout=ANSWER_TIMEOUT_MS):
        qtbot.keyClick(w.question, Qt.Key.Key_Return)
    src = write_jsonl(tmp_path / "late.jsonl", article_rows(tiny_models, slice(100, 400)))
    job = w.library.start_import(str(src), name="late", encoder=str(tiny_models.ctx_encoder),
                         fmt="jsonl")
    qtbot.waitSignal(w.ops.events(Lane.JOBS).progressed, timeout=JOB_TIMEOUT_MS).wait()
    card = w.chat.cards[-1]
    assert card.state == "running" and w.ops.busy(Lane.JOBS)
    request = w.conversation.pending()[0]

    w.close()

    assert w.stopped_cleanly
    assert w.ops.idle()  # every lane's worker has stopped
    assert job.cancelled and request.cancelled
    rec = w.backend.catalog.find_snapshot("late")
    assert rec is None or rec.state != "ready"
    assert not Path(w.backend.data.snapshots_dir / "late").exists()


def test_keyboard_reaches_the_main_actions(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    w = window
    w.activateWindow()
    answer = ask(qtbot, w, "who painted the mona lisa?")
    w.chat.cards[-1].setFocus()
    qtbot.keyClick(w, Qt.Key.Key_L, Qt.KeyboardModifier.ControlModifier)
    assert w.question.hasFocus()
    qtbot.keyClick(w, Qt.Key.Key_2, Qt.KeyboardModifier.ControlModifier)
    assert w.inspector.k == 1 and w.inspector.shown_text() == answer.docs[1].text
    w.chat.cards[-1].copy_button.setFocus()
    qtbot.keyClick(w, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    copied = QGuiApplication.clipboard().text()
    assert copied.startswith("## who painted the mona lisa?") and answer.docs[0].title in copied

    # Esc stops a running answer.
    w.controls.max_len.setValue(400)
    w.controls._min_new_tokens = 400
    type_question(qtbot, w, "and who sculpted david?")
    with qtbot.waitSignal(w.conversation.tokenStreamed, timeout=ANSWER_TIMEOUT_MS):
        qtbot.keyClick(w.question, Qt.Key.Key_Return)
    with qtbot.waitSignal(w.conversation.answerFinished, timeout=ANSWER_TIMEOUT_MS) as sig:
        qtbot.keyClick(w.question, Qt.Key.Key_Escape)
    stopped: Answer = sig.args[1]
    assert stopped.cancelled and len(stopped.tokens) < 400
    assert w.chat.cards[-1].state == "cancelled"

    out = w.transcript.export_markdown(Path(w.backend.data.root) / "chat.md")
    text = out.read_text(encoding="utf-8")
    assert text.count("\n## ") == 2 and "*(stopped)*" in text


def test_first_run_dialog_offers_the_ways_to_start(qtbot, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from ragdesk.core.app import AppContext
    from ragdesk.ui.backend import Backend
    from ragdesk.ui.main_window import MainWindow

    ctx = AppContext(tmp_path / "empty")
    w = MainWindow(Backend(ctx))
    qtbot.addWidget(w)
    w.show()
    w.start()
    qtbot.waitUntil(lambda: w.first_run is not None and w.first_run.isVisible(), timeout=30_000)
    fr = w.first_run
    assert fr is not None
    assert fr.starter.isChecked()
    assert {fr.paper_pack.itemData(i) for i in range(fr.paper_pack.count())} == \
        {"rag-sequence-nq", "rag-token-nq", "dpr-bart"}
    qtbot.mouseClick(fr.later, Qt.MouseButton.LeftButton)
    assert not fr.isVisible()
    assert w.shutdown()
    ctx.close()


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


def test_dark_theme_recolours_the_answer(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    from PySide6.QtWidgets import QApplication

    from ragdesk.ui.theme import is_dark

    answer = ask(qtbot, window, "what is the speed of light?")
    card = window.chat.cards[-1]
    i = next(i for i, t in enumerate(answer.tokens) if t.text.strip())
    light = card.text.token_color(i)
    try:
        window.theme_actions["dark"].trigger()
        assert is_dark(QApplication.palette())
        # Written on the writes lane, not by the GUI thread.
        qtbot.waitUntil(lambda: window.settings.get("theme") == "dark", timeout=5_000)
        dark = card.text.token_color(i)
        assert dark == passage_tint(answer.tokens[i].source) and dark != light
        assert dark.lightness() < light.lightness()
    finally:
        window.apply_theme("light")


def test_explore_views_dock_lazily_and_follow_the_selected_answer(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    from PySide6.QtWidgets import QLabel

    built: list[QLabel] = []
    seen: list[Answer] = []

    def factory(win: Any) -> QLabel:
        label = QLabel("explore")
        win.state.answerSelected.connect(seen.append)
        built.append(label)
        return label

    act = window.add_explore_view("Test view", factory)
    assert act in window.explore_menu.actions() and not built
    answer = ask(qtbot, window, "what is a black hole?")
    act.trigger()
    assert len(built) == 1 and window.explore_dock("Test view").widget() is built[0]
    assert seen and seen[-1] is answer  # the current answer is replayed to a new view
    act.trigger()
    assert not window.explore_dock("Test view").isVisible()
    act.trigger()
    assert len(built) == 1 and window.explore_dock("Test view").isVisible()


def test_the_app_process_exits_cleanly_when_told_to_close_while_loading(ui_data) -> None:  # type: ignore[no-untyped-def]
    import os
    import signal
    import subprocess
    import sys

    log = ui_data / "logs" / "ragdesk.log"
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    proc = subprocess.Popen([sys.executable, "-m", "ragdesk", "--data-dir", str(ui_data)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 240
        while "loading engine for pack tiny" not in (
                log.read_text(encoding="utf-8") if log.exists() else ""):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the app never started loading its models"
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)  # like closing the window while models load
        _out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "Destroyed while thread" not in err
    assert "closing the window" in log.read_text(encoding="utf-8")


def test_controls_are_remembered_between_runs(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    from ragdesk.core.app import AppContext
    from ragdesk.ui.backend import Backend
    from ragdesk.ui.main_window import MainWindow

    c = window.controls
    c.mode.setCurrentIndex(c.mode.findData("sequence"))
    c.decoding.setCurrentIndex(c.decoding.findData("thorough"))
    c.n_docs.setValue(4)
    c.beams.setValue(3)
    c.answer_style.setCurrentIndex(c.answer_style.findData("sentence"))
    c.grounded.setCurrentIndex(c.grounded.findData("on"))
    c.max_len.setValue(17)
    assert c.decoding.isEnabled()
    qtbot.waitUntil(lambda: window.settings.get("max_new_tokens") == 17, timeout=5_000)
    ctx = AppContext(window.backend.data.root)  # a second run reads the settings file
    again = MainWindow(Backend(ctx), apply_theme=False)
    qtbot.addWidget(again)
    p = again.controls.params()
    assert (p.mode, p.decoding, p.n_docs, p.num_beams, p.max_new_tokens, p.style,
            p.grounded) == ("sequence", "thorough", 4, 3, 17, "sentence", True)
    assert again.shutdown()
    ctx.close()


def test_opening_the_window_imports_no_ml_library() -> None:
    import subprocess
    import sys

    code = ("import sys; import ragdesk.ui.app, ragdesk.ui.main_window, ragdesk.ui.backend; "
            "print(sorted(m for m in ('torch', 'transformers', 'faiss', 'numpy') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_answering_from_given_passages(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    """The retrieval map's "Ask from here": no retrieval, the given passages and scores."""
    from ragdesk.core.snapshots import open_snapshot
    from ragdesk.core.types import Hit

    snap = open_snapshot(window.backend.data, window.backend.catalog, "wiki-b")
    try:
        passages = snap.get_passages([5, 1, 9])
    finally:
        snap.close()
    scores = [2.5, 1.0, -0.5]
    hits = [Hit(p.id, p.title, p.text, s) for p, s in zip(passages, scores, strict=True)]
    with qtbot.waitSignal(window.conversation.answerFinished, timeout=ANSWER_TIMEOUT_MS) as sig:
        card = window.ask_from_docs("who is this about?", hits, snapshot="wiki-b")
    answer: Answer = sig.args[1]
    assert card is window.chat.cards[-1] and card.answer is answer
    assert [(d.id, d.title) for d in answer.docs] == [(p.id, p.title) for p in passages]
    e = np.exp(np.array(scores) - max(scores))
    np.testing.assert_allclose([d.prob for d in answer.docs], e / e.sum(), rtol=1e-5)
    assert answer.snapshot == "wiki-b" and window.backend.answers_started == []


def test_the_retriever_choice_reaches_the_engine(qtbot, window, tiny_models) -> None:  # type: ignore[no-untyped-def]
    """BM25 and hybrid chosen in the panel retrieve what the core's retrieve_batch gives."""
    from ragdesk.core.retrieval.hybrid import retrieve_batch
    from ragdesk.core.snapshots import open_snapshot

    question = f"what is known about {tiny_models.corpus[A_ARTICLES][3][0]}?"
    c = window.controls
    qenc = window.backend.parts[0]
    snap = open_snapshot(window.backend.data, window.backend.catalog, "wiki-a")
    try:
        for mode in ("sparse", "hybrid"):
            c.retriever.setCurrentIndex(c.retriever.findData(mode))
            assert window.params().retriever == mode
            qtbot.waitUntil(lambda m=mode: window.settings.get("retriever") == m, timeout=5_000)
            answer = ask(qtbot, window, question)
            expected = retrieve_batch(snap, [question], qenc.encode([question]),
                                      c.n_docs.value(), mode)[0]
            assert [d.id for d in answer.docs] == [h.id for h in expected], mode
            assert mode.replace("sparse", "BM25") in window.chat.cards[-1].meta_label.text()
    finally:
        snap.close()


def test_style_and_grounding_choices_reach_the_engine(qtbot, window, tiny_models) -> None:  # type: ignore[no-untyped-def]
    """"Quote the passages" makes the answer a span of a cited passage."""
    from ragdesk.core.engine.grounding import normalize_span

    c = window.controls
    c.answer_style.setCurrentIndex(c.answer_style.findData("sentence"))
    assert window.params().grounded is None  # automatic until chosen
    c.grounded.setCurrentIndex(c.grounded.findData("on"))
    assert (window.params().style, window.params().grounded) == ("sentence", True)
    said = 0
    for k in (2, 3, 4):
        question = f"what is known about {tiny_models.corpus[A_ARTICLES][k][0]}?"
        answer = ask(qtbot, window, question)
        assert answer.grounded and answer.style == "sentence"
        text = normalize_span(answer.text)
        # empty only where the random model spelled into a dead end: no passage says that
        assert any(text in normalize_span(f"{d.title}\n{d.text}") for d in answer.docs)
        said += bool(text)
    assert said >= 1
