"""The conversations sidebar over a real store, with its work on the op runner's threads."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel

from ragdesk.core.catalog import Catalog
from ragdesk.core.conversations import ConversationStore
from ragdesk.core.types import Answer, AnswerToken, RetrievedDoc
from ragdesk.ui.background import op_background
from ragdesk.ui.conversations_sidebar import ConversationsSidebar, snippet_html
from ragdesk.ui.ops import OpRunner

TIMEOUT_MS = 10_000


def answer(question: str, text: str) -> Answer:
    docs = [RetrievedDoc(1, "T", "passage text", 70.0, 0.6, "wiki"),
            RetrievedDoc(2, "U", "other text", 69.0, 0.4, "wiki")]
    toks = [AnswerToken(5, text, [0.7, 0.3])]
    return Answer(question, text, [5], toks, docs, -0.5, "token", snapshot="wiki")


class ThreadCheckedStore(ConversationStore):
    """The real store, noting whether any call ran on the GUI thread."""

    def __init__(self, catalog: Catalog) -> None:
        super().__init__(catalog)
        self.gui_thread_calls: list[str] = []

    def __getattribute__(self, name: str) -> Any:
        attr = super().__getattribute__(name)
        if not callable(attr) or name.startswith("_"):
            return attr
        calls = super().__getattribute__("gui_thread_calls")

        def checked(*args: Any, **kwargs: Any) -> Any:
            if threading.current_thread() is threading.main_thread():
                calls.append(name)
            return attr(*args, **kwargs)

        return checked


@pytest.fixture()
def runner(qapp: Any) -> Iterator[OpRunner]:
    r = OpRunner()
    yield r
    assert r.shutdown(5_000)
    r.deleteLater()


@pytest.fixture()
def store(tmp_path: Path) -> ThreadCheckedStore:
    return ThreadCheckedStore(Catalog(tmp_path / "catalog.sqlite"))


def make_sidebar(qtbot: Any, store: ConversationStore, runner: OpRunner) -> ConversationsSidebar:
    if isinstance(store, ThreadCheckedStore):
        store.gui_thread_calls.clear()  # the test's own seeding ran on this thread
    bar = ConversationsSidebar(store, op_background(runner))
    qtbot.addWidget(bar)
    bar.resize(320, 480)
    bar.show()
    with qtbot.waitSignal(bar.refreshed, timeout=TIMEOUT_MS):
        bar.refresh()
    return bar


def titles(bar: ConversationsSidebar) -> list[str]:
    return [bar.list.item(i).text() for i in range(bar.list.count())]


def seed(store: ConversationStore) -> tuple[int, int, int]:
    old = store.create()
    radium = store.add_answer(old.id, answer("Who discovered radium?", "Marie Curie"))
    store.add_answer(old.id, answer("Where was she born?", "Warsaw"))
    new = store.create("Art")
    store.add_answer(new.id, answer("Who painted the Mona Lisa?", "Leonardo da Vinci"))
    return old.id, new.id, radium.id


def test_lists_survive_a_new_sidebar_on_a_reopened_catalog(
        qtbot: Any, tmp_path: Path, store: ThreadCheckedStore, runner: OpRunner) -> None:
    seed(store)
    bar = make_sidebar(qtbot, store, runner)
    assert titles(bar) == ["Art", "Who discovered radium?"]
    assert not bar.empty_label.isVisible()
    bar.close()
    store.catalog.close()
    again = make_sidebar(qtbot, ConversationStore(Catalog(store.catalog.path)), runner)
    assert titles(again) == ["Art", "Who discovered radium?"]
    assert store.gui_thread_calls == []  # every store call ran on a worker thread


def test_search_finds_an_old_answer_and_opens_it(
        qtbot: Any, store: ThreadCheckedStore, runner: OpRunner) -> None:
    old_id, _, radium_id = seed(store)
    bar = make_sidebar(qtbot, store, runner)
    with qtbot.waitSignal(bar.search_done, timeout=TIMEOUT_MS):
        qtbot.keyClicks(bar.search_box, "curi")  # a prefix: search as you type
    assert [(h.conversation_id, h.answer_id) for h in bar.hits()] == [(old_id, radium_id)]
    assert bar.list.count() == 1
    label = bar.list.itemWidget(bar.list.item(0))
    assert isinstance(label, QLabel)
    assert "<b>Curie</b>" in label.text() and "Who discovered radium?" in label.text()
    with qtbot.waitSignal(bar.answer_selected, timeout=TIMEOUT_MS) as sig:
        rect = bar.list.visualItemRect(bar.list.item(0))
        qtbot.mouseClick(bar.list.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert sig.args == [old_id, radium_id]

    with qtbot.waitSignal(bar.search_done, timeout=TIMEOUT_MS):
        bar.search("art")  # the name of a conversation: listed first, opens it
    assert [c.title for c in bar.named_hits()] == ["Art"]
    assert bar.list.item(0).text() == "Art" and bar.list.item(0).font().bold()
    with qtbot.waitSignal(bar.conversation_selected, timeout=TIMEOUT_MS):
        rect = bar.list.visualItemRect(bar.list.item(0))
        qtbot.mouseClick(bar.list.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())

    with qtbot.waitSignal(bar.search_done, timeout=TIMEOUT_MS):
        bar.search("nowhere to be found")
    assert bar.list.count() == 0 and bar.empty_label.isVisible()
    bar.search_box.clear()  # back to the conversations, without a store call
    assert titles(bar) == ["Art", "Who discovered radium?"]
    assert store.gui_thread_calls == []


def test_the_context_menu_acts_on_the_conversation_right_clicked_and_moves_no_highlight(
        qtbot: Any, store: ThreadCheckedStore, runner: OpRunner,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from PySide6.QtWidgets import QMenu

    old_id, art_id, _ = seed(store)
    bar = make_sidebar(qtbot, store, runner)
    bar.list.setCurrentRow(0)  # "Art", the conversation shown
    shown: list[str] = []

    def choose_delete(menu: QMenu, _at: Any) -> None:
        shown.extend(a.text() for a in menu.actions() if a.text())
        bar.act_delete.trigger()  # what a click on "Delete" does inside the menu's loop

    monkeypatch.setattr(bar, "_run_menu", choose_delete)
    rect = bar.list.visualItemRect(bar.list.item(1))  # "Who discovered radium?"
    with qtbot.waitSignal(bar.conversation_deleted, timeout=TIMEOUT_MS) as deleted:
        bar._context_menu(rect.center())
    assert shown and deleted.args == [old_id]
    assert bar.list.currentItem() is not None and bar.list.currentItem().text() == "Art"
    assert [c.id for c in store.list_conversations()] == [art_id]


def test_delete_then_undo_restores_the_conversation(
        qtbot: Any, store: ThreadCheckedStore, runner: OpRunner) -> None:
    old_id, art_id, _ = seed(store)
    bar = make_sidebar(qtbot, store, runner)
    bar.list.setCurrentRow(1)  # "Who discovered radium?"
    with qtbot.waitSignal(bar.refreshed, timeout=TIMEOUT_MS), \
            qtbot.waitSignal(bar.conversation_deleted, timeout=TIMEOUT_MS) as deleted:
        bar.act_delete.trigger()
    assert deleted.args == [old_id]
    assert titles(bar) == ["Art"] and bar.undo_bar.isVisible()
    assert "Who discovered radium?" in bar.undo_label.text()
    assert store.gui_thread_calls == []
    assert [c.id for c in store.list_conversations()] == [art_id]
    store.gui_thread_calls.clear()

    with qtbot.waitSignal(bar.refreshed, timeout=TIMEOUT_MS), \
            qtbot.waitSignal(bar.conversation_restored, timeout=TIMEOUT_MS):
        qtbot.mouseClick(bar.undo_button, Qt.MouseButton.LeftButton)
    assert titles(bar) == ["Art", "Who discovered radium?"] and not bar.undo_bar.isVisible()
    assert store.gui_thread_calls == []
    assert len(store.answers(old_id)) == 2
    assert len(store.search("radium")) == 1


def test_rename_in_place_and_new_conversation_keeps_the_others(
        qtbot: Any, store: ThreadCheckedStore, runner: OpRunner) -> None:
    old_id, _, _ = seed(store)
    bar = make_sidebar(qtbot, store, runner)
    item = bar.list.item(1)
    with qtbot.waitSignal(bar.refreshed, timeout=TIMEOUT_MS):
        item.setText("Physics")  # what the in-place editor commits
    assert titles(bar) == ["Art", "Physics"]

    with qtbot.waitSignal(bar.conversation_selected, timeout=TIMEOUT_MS) as opened:
        qtbot.mouseClick(bar.new_button, Qt.MouseButton.LeftButton)
    new_id = opened.args[0]
    qtbot.waitUntil(lambda: bar.list.count() == 3, timeout=TIMEOUT_MS)
    assert store.gui_thread_calls == []
    assert bar.current_id() == new_id and store.get(new_id).answers == 0
    assert store.get(old_id).title == "Physics"
    assert {c.title for c in store.list_conversations()} == {"Art", "Physics",
                                                             "New conversation"}
    with qtbot.waitSignal(bar.conversation_selected, timeout=TIMEOUT_MS) as again:
        qtbot.mouseClick(bar.new_button, Qt.MouseButton.LeftButton)
    assert again.args == [new_id]  # still empty: "New" again reuses it
    assert len(store.list_conversations()) == 3


def test_export_is_requested_for_the_selected_conversation(
        qtbot: Any, store: ThreadCheckedStore, runner: OpRunner) -> None:
    _, art_id, _ = seed(store)
    bar = make_sidebar(qtbot, store, runner)
    bar.list.setCurrentRow(0)  # "Art"
    with qtbot.waitSignal(bar.export_requested, timeout=TIMEOUT_MS) as sig:
        bar.act_export_json.trigger()
    assert sig.args == [art_id, "json"]


def test_store_errors_are_reported_not_raised(qtbot: Any, store: ThreadCheckedStore,
                                              runner: OpRunner) -> None:
    bar = make_sidebar(qtbot, store, runner)
    with qtbot.waitSignal(bar.error, timeout=TIMEOUT_MS) as err:
        bar.rename(12345, "nothing there")
    assert "12345" in err.args[0]


def test_snippet_html_escapes_before_highlighting() -> None:
    assert snippet_html("a <b> \x02x&y\x03") == "a &lt;b&gt; <b>x&amp;y</b>"


def test_a_found_answer_whose_snapshot_is_gone_opens_in_heat_map_inspector_and_steps(
        qtbot: Any, store: ThreadCheckedStore, runner: OpRunner) -> None:
    """What the window does with ``answer_selected``: load the stored answer and hand it to
    the heat map, the inspector and the step-through, with no snapshot in the catalog."""
    from ragdesk.ui.explore.step_through import AnswerSteps
    from ragdesk.ui.heatmap import PosteriorHeatMap
    from ragdesk.ui.inspector import PassageInspector

    assert store.catalog.list_snapshots() == []  # "wiki" is nowhere
    seed(store)
    bar = make_sidebar(qtbot, store, runner)
    heat, inspector = PosteriorHeatMap(), PassageInspector()
    qtbot.addWidget(heat)
    qtbot.addWidget(inspector)
    background = op_background(runner)
    opened: list[Answer] = []

    def open_answer(conversation_id: int, answer_id: int) -> None:
        def show(stored: Any) -> None:
            heat.set_data(stored.answer.tokens, stored.answer.docs)
            inspector.set_answer(stored.answer)
            inspector.show_passage(0)
            opened.append(stored.answer)

        background(lambda: store.get_answer(answer_id), show)

    bar.answer_selected.connect(open_answer)
    with qtbot.waitSignal(bar.search_done, timeout=TIMEOUT_MS):
        bar.search("radium")
    rect = bar.list.visualItemRect(bar.list.item(0))
    qtbot.mouseClick(bar.list.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    qtbot.waitUntil(lambda: bool(opened), timeout=TIMEOUT_MS)
    expected = answer("Who discovered radium?", "Marie Curie")
    assert opened[0] == expected
    assert [heat.value(0, k) for k in range(2)] == expected.tokens[0].posterior
    assert heat.k == 2 and len(heat.docs) == 2
    assert "passage text" in inspector.shown_text()
    steps = AnswerSteps(opened[0])  # the step-through's panel for one answer
    qtbot.addWidget(steps)
    assert steps.step_count == 1 and steps.expected_values(0) == [0.6, 0.4]
    assert steps.expected_values(1) == [0.7, 0.3]


def test_hostile_titles_and_queries_are_shown_as_text(
        qtbot: Any, store: ThreadCheckedStore, runner: OpRunner) -> None:
    conv = store.create("<b>bold</b> & <i>more</i>")
    store.add_answer(conv.id, answer("What is <script>?", "a <tag> & more"))
    bar = make_sidebar(qtbot, store, runner)
    assert titles(bar) == ["<b>bold</b> & <i>more</i>"]
    with qtbot.waitSignal(bar.refreshed, timeout=TIMEOUT_MS):
        bar.delete(conv.id)
    assert bar.undo_label.text() == "Deleted “<b>bold</b> & <i>more</i>”."
    assert bar.undo_label.textFormat() == Qt.TextFormat.PlainText
    with qtbot.waitSignal(bar.search_done, timeout=TIMEOUT_MS):
        bar.search('<b> "x')
    assert bar.empty_label.text() == 'Nothing found for “<b> "x”.'


def test_clicks_in_quick_succession_open_a_conversation_once(
        qtbot: Any, store: ThreadCheckedStore, runner: OpRunner) -> None:
    old_id, art_id, _ = seed(store)
    bar = make_sidebar(qtbot, store, runner)
    opened: list[int] = []
    bar.conversation_selected.connect(opened.append)
    clicks: list[object] = []
    bar.list.itemClicked.connect(clicks.append)
    rect = bar.list.visualItemRect(bar.list.item(0))
    for _ in range(2):  # what a double click delivers: clicks, then an activation
        qtbot.mouseClick(bar.list.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    bar.list.itemActivated.emit(bar.list.item(0))
    assert len(clicks) == 2 and opened == [art_id]
    rect = bar.list.visualItemRect(bar.list.item(1))  # another one opens at once
    qtbot.mouseClick(bar.list.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert opened == [art_id, old_id]
