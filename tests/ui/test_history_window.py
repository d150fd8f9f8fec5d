"""Conversations, whole articles and settings through the main window, offscreen, with the
real core and tiny models: a conversation outlives the window, search and delete/undo in
the sidebar, an answer whose snapshot is gone still opens, the inspector's whole article,
New conversation keeps the old one, export, and Edit ▸ Settings…."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialogButtonBox

from ragdesk.core.types import Answer
from tests.ui.conftest import SharedModelsBackend, open_window
from tests.ui.probes import ANSWER_TIMEOUT_MS, action, ask

WAIT_MS = 30_000


def ask_saved(qtbot: Any, w: Any, text: str) -> tuple[Answer, int, int]:
    """Ask in the chat and wait until the answer is stored: (answer, conversation, id)."""
    with qtbot.waitSignal(w.history.saved, timeout=ANSWER_TIMEOUT_MS) as sig:
        answer = ask(qtbot, w, text)
    cid, aid = sig.args
    return answer, int(cid), int(aid)


def reopen(qtbot: Any, w: Any) -> Any:
    """Close ``w`` like its close button, then open a new window on the same data."""
    root = Path(w.backend.data.root)
    w.close()
    assert w.stopped_cleanly
    again = open_window(qtbot, root, SharedModelsBackend)
    qtbot.waitUntil(lambda: again.history.current_id is not None and bool(again.chat.cards),
                    timeout=WAIT_MS)
    return again


def close(w: Any) -> None:
    w.shutdown()
    w.backend.ctx.close()


def sidebar_ids(w: Any) -> list[int]:
    return [c.id for c in w.history.sidebar.conversations()]


def wait_listed(qtbot: Any, w: Any, cid: int, listed: bool = True) -> None:
    qtbot.waitUntil(lambda: (cid in sidebar_ids(w)) == listed, timeout=WAIT_MS)


def test_a_conversation_survives_closing_and_reopening_the_window(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    first, cid, _ = ask_saved(qtbot, window, "who wrote the origin of species?")
    second, cid2, _ = ask_saved(qtbot, window, "and who discovered penicillin?")
    assert cid2 == cid
    sidebar = window.history.sidebar
    sidebar.rename(cid, "Scientists")  # closing right after waits for it (writes lane)
    # View ▸ Conversations hides and shows the sidebar.
    toggle = window.sidebar_dock.toggleViewAction()
    view_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&View")
    assert toggle in view_menu.actions() and toggle.shortcut().toString() == "Ctrl+Shift+4"
    toggle.trigger()
    assert not window.sidebar_dock.isVisible()
    toggle.trigger()
    assert window.sidebar_dock.isVisible()
    again = reopen(qtbot, window)
    try:
        assert again.history.current_id == cid
        cards = again.chat.cards
        assert [c.answer.text for c in cards] == [first.text, second.text]
        assert [c.question for c in cards] == [first.question, second.question]
        card = cards[-1]
        assert again.selection.card is card and card.state == "done"
        assert len(card.chip_widgets()) == len(second.docs)
        assert again.heatmap.map.tokens == card.answer.tokens
        wait_listed(qtbot, again, cid)
        current = again.history.sidebar.list.currentItem()
        assert current.data(Qt.ItemDataRole.UserRole) == cid and current.text() == "Scientists"
        # Stepping through answers goes over the reopened ones.
        again.selection.step(-1)
        assert again.selection.card is cards[0]
    finally:
        close(again)


def test_search_finds_an_old_answer_and_opens_it(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    w = window
    old, cid, aid = ask_saved(qtbot, w, "who discovered penicillin?")
    ask_saved(qtbot, w, "what is the capital of france?")
    w.new_conversation()
    _, cid2, _ = ask_saved(qtbot, w, "who painted the mona lisa?")
    assert cid2 != cid
    sidebar = w.history.sidebar
    with qtbot.waitSignal(sidebar.search_done, timeout=WAIT_MS):
        sidebar.search("penicil")
    hits = sidebar.hits()
    assert [h.answer_id for h in hits] == [aid] and hits[0].question == old.question
    item = next(sidebar.list.item(i) for i in range(sidebar.list.count())
                if sidebar.list.item(i).data(Qt.ItemDataRole.UserRole + 1) == aid)
    with qtbot.waitSignal(w.history.opened, timeout=WAIT_MS):
        sidebar.list.itemActivated.emit(item)
    assert w.history.current_id == cid
    assert len(w.chat.cards) == 2
    card = w.selection.card
    assert card is w.chat.cards[0] and card.answer.text == old.text
    assert w.history.answer_id(card) == aid
    assert w.inspector.answer is card.answer


def test_deleting_a_conversation_and_undoing_restores_it(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    w = window
    answer, cid, _ = ask_saved(qtbot, w, "who sculpted david?")
    sidebar = w.history.sidebar
    wait_listed(qtbot, w, cid)
    with qtbot.waitSignal(sidebar.conversation_deleted, timeout=WAIT_MS):
        sidebar.delete(cid)
    wait_listed(qtbot, w, cid, listed=False)
    assert not w.chat.cards and w.selection.card is None
    assert sidebar.undo_bar.isVisibleTo(sidebar)
    with qtbot.waitSignal(w.history.opened, timeout=WAIT_MS):
        qtbot.mouseClick(sidebar.undo_button, Qt.MouseButton.LeftButton)
    wait_listed(qtbot, w, cid)
    assert w.history.current_id == cid
    assert [c.answer.text for c in w.chat.cards] == [answer.text]


def test_an_answer_whose_snapshot_was_removed_still_opens(qtbot, window, tiny_models) -> None:  # type: ignore[no-untyped-def]
    from ragdesk.core.app import AppContext
    from ragdesk.core.snapshots import remove_snapshot

    answer, cid, _ = ask_saved(qtbot, window, "who discovered penicillin?")
    assert answer.snapshot == "wiki-a"
    root = Path(window.backend.data.root)
    window.close()
    ctx = AppContext(root)
    ctx.catalog.set_active("wiki-b")
    remove_snapshot(ctx.data, ctx.catalog, "wiki-a")
    ctx.close()
    again = reopen(qtbot, window)
    try:
        assert again.history.current_id == cid
        card = again.chat.cards[0]
        stored = card.answer
        assert [d.text for d in stored.docs] == [d.text for d in answer.docs]
        assert [t.posterior for t in stored.tokens] == [t.posterior for t in answer.tokens]
        hm = again.heatmap.map
        assert hm.tokens == stored.tokens and hm.k == len(answer.docs)
        qtbot.mouseClick(card.chip(1), Qt.MouseButton.LeftButton)
        assert again.inspector.shown_text() == answer.docs[1].text
        view = again.inspector.article_view
        with qtbot.waitSignal(view.load_failed, timeout=WAIT_MS):
            again.inspector.show_article()
        assert "wiki-a" in view.note.text()
        assert answer.docs[1].text in view.browser.toPlainText()
    finally:
        close(again)


def test_the_inspector_shows_the_neighbouring_passages_of_the_cited_article(  # type: ignore[no-untyped-def]
        qtbot, window) -> None:
    from ragdesk.core.snapshots import open_snapshot

    w = window
    answer = ask(qtbot, w, "what is the capital of france?")
    card = w.chat.cards[-1]
    k = 0
    qtbot.mouseClick(card.chip(k), Qt.MouseButton.LeftButton)
    view = w.inspector.article_view
    with qtbot.waitSignal(view.loaded, timeout=WAIT_MS):
        w.inspector.show_article()
    article = view.article()
    doc = answer.docs[k]
    assert article is not None and article.cited_id == doc.id and not article.stored_only
    ids = [p.id for p in article.passages]
    # The fixture's articles are 150 words: two passages each, consecutive ids.
    assert len(ids) == 2 and doc.id in ids and ids == list(range(ids[0], ids[0] + 2))
    snap = open_snapshot(w.backend.data, w.backend.catalog, "wiki-a")
    try:
        stored = snap.get_passages(ids)
    finally:
        snap.close()
    assert {p.title for p in stored} == {doc.title}
    text = view.browser.toPlainText()
    assert all(p.text in text for p in stored)
    assert 'name="cited"' in view.browser.toHtml()
    # Another passage of the answer replaces it while the tab is shown.
    with qtbot.waitSignal(view.loaded, timeout=WAIT_MS):
        w.selection.show_passage(1)
    assert view.article().cited_id == answer.docs[1].id


def test_new_conversation_keeps_the_old_one_and_exports_it(  # type: ignore[no-untyped-def]
        qtbot, window, monkeypatch, tmp_path) -> None:
    from ragdesk.ui import history
    from ragdesk.ui.explore.install import STEPS_TITLE

    w = window
    steps = next(a for a in w.explore_menu.actions() if a.text() == f"&{STEPS_TITLE}")
    answer, cid, _ = ask_saved(qtbot, w, "who wrote hamlet?")
    steps.trigger()
    view = w.explore_dock(STEPS_TITLE).widget()
    assert view.answers() == [answer]
    action(w, "new").trigger()
    assert not w.chat.cards and w.selection.card is None
    assert view.answers() == []  # the step-through lets go of the cleared answer
    qtbot.waitUntil(lambda: w.history.current_id not in (None, cid), timeout=WAIT_MS)
    wait_listed(qtbot, w, cid)
    _, cid2, _ = ask_saved(qtbot, w, "who wrote faust?")
    assert cid2 != cid and len(w.chat.cards) == 1
    wait_listed(qtbot, w, cid2)
    assert cid in sidebar_ids(w)

    target = tmp_path / "hamlet.json"
    monkeypatch.setattr(history, "ask_export_path", lambda *_a: str(target))
    w.history.sidebar.export_requested.emit(cid, "json")
    qtbot.waitUntil(target.exists, timeout=WAIT_MS)
    data = json.loads(target.read_text(encoding="utf-8"))
    assert [a["question"] for a in data["answers"]] == [answer.question]


def test_settings_dialog_applies_theme_and_answer_defaults(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    w = window
    action(w, "settings").trigger()
    from ragdesk.ui.settings_dialog import SettingsDialog

    dialog = w.findChild(SettingsDialog)
    assert dialog is not None and dialog.isVisible()
    dialog.theme.setCurrentIndex(dialog.theme.findData("dark"))
    dialog.answer_spins["n_docs"].setValue(4)
    dialog.threads.setValue(1)
    with qtbot.waitSignal(dialog.applied, timeout=WAIT_MS) as sig:
        dialog.buttons.button(QDialogButtonBox.StandardButton.Apply).click()
    _new, restart = sig.args
    assert restart == []
    assert w.theme_actions["dark"].isChecked()
    assert w.controls.params().n_docs == 4
    qtbot.waitUntil(lambda: w.settings.get("n_docs") == 4, timeout=WAIT_MS)
    assert "Settings saved and applied" in w.status.text.text()
    # A new Hugging Face cache waits for the next start, and the window says so.
    dialog.hf_cache.setText(str(Path(w.backend.data.root) / "hf-cache"))
    with qtbot.waitSignal(dialog.applied, timeout=WAIT_MS) as sig:
        dialog.buttons.button(QDialogButtonBox.StandardButton.Apply).click()
    assert sig.args[1] == ["Hugging Face cache"]
    assert "restart ragdesk to use the new Hugging Face cache" in w.status.text.text()


def test_new_conversation_during_an_answer_keeps_what_it_wrote(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    import threading

    w = window
    first, cid, _ = ask_saved(qtbot, w, "who discovered penicillin?")
    w.backend.gate = threading.Event()  # the answer pauses after its first token
    w.question.setPlainText("who wrote the origin of species?")
    with qtbot.waitSignal(w.conversation.tokenStreamed, timeout=ANSWER_TIMEOUT_MS):
        w.send()
    with qtbot.waitSignal(w.history.saved, timeout=ANSWER_TIMEOUT_MS) as sig:
        w.new_conversation()
        w.backend.gate.set()
    assert sig.args[0] == cid  # saved where it was asked, not in the new conversation
    assert not w.chat.cards
    qtbot.waitUntil(lambda: w.history.current_id not in (None, cid), timeout=WAIT_MS)
    assert w.backend.conversations.answers(w.history.current_id) == []
    with qtbot.waitSignal(w.history.opened, timeout=WAIT_MS):
        w.history.open(cid)
    cards = w.chat.cards
    assert [c.question for c in cards] == [first.question, "who wrote the origin of species?"]
    assert cards[1].answer.cancelled and cards[1].state == "cancelled"
