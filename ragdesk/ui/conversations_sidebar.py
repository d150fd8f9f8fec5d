"""The conversations sidebar: saved conversations, newest first; rename in place, delete
with undo, and a search box over every question and answer (SQLite FTS5).

Every read and write of the store goes through the injected :class:`Background`; the widget
only renders results, so the event loop never waits on the disk. Results that arrive after
a newer request (typing fast in the search box) are dropped.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Protocol, TypeVar

from PySide6.QtCore import QElapsedTimer, QPoint, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QFont, QFontMetrics, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ragdesk.core.conversation_types import HIT_END, HIT_START, ConversationRecord, SearchHit
from ragdesk.ui.background import Background


class ConversationSource(Protocol):
    """What the sidebar calls (in the background) of the conversation store the backend
    hands out (:class:`ragdesk.core.conversations.ConversationStore`)."""

    def list_conversations(self) -> list[ConversationRecord]: ...
    def search_titles(self, query: str) -> list[ConversationRecord]: ...
    def search(self, query: str) -> list[SearchHit]: ...
    def new_conversation(self) -> ConversationRecord: ...
    def rename(self, conversation_id: int, title: str) -> ConversationRecord: ...
    def delete(self, conversation_id: int) -> None: ...
    def get(self, conversation_id: int) -> ConversationRecord: ...
    def restore(self, conversation_id: int) -> ConversationRecord: ...


T = TypeVar("T")
SEARCH_DELAY_MS = 200  # a search starts this long after the last key press
UNDO_MS = 15_000  # how long the "Deleted … Undo" bar stays (the data stays until purged)
_ID = Qt.ItemDataRole.UserRole
_ANSWER_ID = Qt.ItemDataRole.UserRole + 1


def snippet_html(snippet: str) -> str:
    """A search snippet as rich text: escaped, matched words in bold."""
    return (html.escape(snippet).replace(HIT_START, "<b>").replace(HIT_END, "</b>")
            .replace("\n", " "))


def narrowest_width(widget: QWidget) -> int:
    """The sidebar's minimum width: its dock's bold title whole, with room to spare."""
    bold = QFont(widget.font())
    bold.setWeight(QFont.Weight.DemiBold)
    return max(160, QFontMetrics(bold).horizontalAdvance("Conversations") + 64)


class ConversationsSidebar(QWidget):
    """Signals: ``conversation_selected(id)`` when the user opens a conversation (or one was
    created), ``answer_selected(conversation_id, answer_id)`` when a search hit is opened,
    ``conversation_deleted(id)`` / ``conversation_restored(id)`` after the store did so,
    ``export_requested(id, "markdown" | "json")`` from the context menu (the window asks
    for a file name and calls ``store.export_to`` in the background), ``error(message)``
    when a store call failed."""

    conversation_selected = Signal(int)
    answer_selected = Signal(int, int)
    conversation_deleted = Signal(int)
    conversation_restored = Signal(int)
    export_requested = Signal(int, str)  # conversation id, "markdown" or "json"
    error = Signal(str)
    refreshed = Signal()  # the list shows the store as it was just read (tests wait on it)
    search_done = Signal()

    def __init__(self, store: ConversationSource, background: Background,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ConversationsSidebar")
        self.store = store
        self._background = background
        self._conversations: list[ConversationRecord] = []
        self._hits: list[SearchHit] = []
        self._named: list[ConversationRecord] = []  # conversations whose name matched
        self._current: int | None = None
        self._deleted: ConversationRecord | None = None
        self._search_gen = 0
        self._list_gen = 0
        self._filling = False
        self._last_open: tuple[int, object] | None = None
        self._menu_item: QListWidgetItem | None = None  # right-clicked, while its menu is open
        self._since_open = QElapsedTimer()

        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 6, 6, 6)
        lay.setSpacing(6)
        lay.addLayout(self._search_row())
        # Squeezed by the docks beside it, the dock read "Con…" over "Sear…" and could not be
        # dragged wider: it keeps room for its title and a few words of each question.
        self.setMinimumWidth(narrowest_width(self))

        self.list = QListWidget()
        self.list.setAccessibleName("Conversations")
        self.list.setEditTriggers(QListWidget.EditTrigger.EditKeyPressed)
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        # A long first question is elided (its tooltip has it whole), not scrolled sideways.
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setTextElideMode(Qt.TextElideMode.ElideRight)
        lay.addWidget(self.list, 1)

        self.empty_label = QLabel()
        self.empty_label.setWordWrap(True)
        self.empty_label.setTextFormat(Qt.TextFormat.PlainText)  # it quotes what was typed
        self.empty_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty_label.hide()
        lay.addWidget(self.empty_label)

        self._build_undo_bar(lay)
        self._search_timer = QTimer(self)
        self._search_timer.setSingleShot(True)
        self._search_timer.setInterval(SEARCH_DELAY_MS)
        self._search_timer.timeout.connect(self._run_search)

        self._build_actions()
        self.search_box.textChanged.connect(self._on_search_text)
        self.search_box.returnPressed.connect(self._run_search)
        self.new_button.clicked.connect(self.new_conversation)
        self.list.itemActivated.connect(self._on_activated)
        self.list.itemClicked.connect(self._on_activated)
        self.list.itemChanged.connect(self._on_item_changed)
        self.list.customContextMenuRequested.connect(self._context_menu)
        self.undo_button.clicked.connect(self.undo_delete)

    # ---- state -----------------------------------------------------------------------

    def _search_row(self) -> QHBoxLayout:
        top = QHBoxLayout()
        self.search_box = QLineEdit()
        # Short enough for the dock's narrowest width; the tooltip says what is searched.
        self.search_box.setPlaceholderText("Search conversations")
        self.search_box.setToolTip("Finds every question and answer with these words "
                                   "(the last one as a prefix), and conversation names")
        self.search_box.setClearButtonEnabled(True)
        self.search_box.setAccessibleName("Search conversations")
        top.addWidget(self.search_box, 1)
        self.new_button = QToolButton()
        self.new_button.setText("New")
        self.new_button.setToolTip("Start a new conversation (the current one stays saved)")
        top.addWidget(self.new_button)
        return top

    def _build_actions(self) -> None:
        self.act_rename = QAction("&Rename", self)
        self.act_rename.setShortcut(QKeySequence(Qt.Key.Key_F2))
        self.act_rename.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        self.act_rename.triggered.connect(self._rename_selected)
        self.act_delete = QAction("&Delete", self)
        self.act_delete.setShortcut(QKeySequence(QKeySequence.StandardKey.Delete))
        self.act_delete.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        self.act_delete.triggered.connect(self._delete_selected)
        self.act_export_md = QAction("Export as &Markdown…", self)
        self.act_export_md.triggered.connect(lambda: self._export_selected("markdown"))
        self.act_export_json = QAction("Export as &JSON…", self)
        self.act_export_json.triggered.connect(lambda: self._export_selected("json"))
        self.list.addAction(self.act_rename)
        self.list.addAction(self.act_delete)

    def _build_undo_bar(self, lay: QVBoxLayout) -> None:
        self.undo_bar = QFrame()
        self.undo_bar.setFrameShape(QFrame.Shape.StyledPanel)
        ub = QHBoxLayout(self.undo_bar)
        ub.setContentsMargins(8, 4, 4, 4)
        self.undo_label = QLabel()
        self.undo_label.setWordWrap(True)
        self.undo_label.setTextFormat(Qt.TextFormat.PlainText)  # it quotes a user's title
        self.undo_button = QPushButton("Undo")
        ub.addWidget(self.undo_label, 1)
        ub.addWidget(self.undo_button)
        self.undo_bar.hide()
        lay.addWidget(self.undo_bar)
        self._undo_timer = QTimer(self)
        self._undo_timer.setSingleShot(True)
        self._undo_timer.setInterval(UNDO_MS)
        self._undo_timer.timeout.connect(self._hide_undo)

    @property
    def searching(self) -> bool:
        return bool(self.search_box.text().strip())

    def current_id(self) -> int | None:
        return self._current

    def conversations(self) -> list[ConversationRecord]:
        """The conversations as last read from the store."""
        return list(self._conversations)

    def hits(self) -> list[SearchHit]:
        """The answers the last search found."""
        return list(self._hits)

    def named_hits(self) -> list[ConversationRecord]:
        """The conversations whose name the last search matched."""
        return list(self._named)

    def _run(self, fn: Callable[[], T], on_done: Callable[[T], None], *,
             write: bool = False) -> None:
        self._background(fn, on_done, on_error=self.error.emit, write=write)

    # ---- the list --------------------------------------------------------------------

    def refresh(self) -> None:
        """Read the conversations again (after an answer was saved, for instance)."""
        self._list_gen += 1
        gen = self._list_gen
        self._run(self.store.list_conversations, lambda rows: self._show_list(gen, rows))

    def _show_list(self, gen: int, rows: list[ConversationRecord]) -> None:
        if gen != self._list_gen:
            return
        self._conversations = rows
        if not self.searching:
            self._fill_conversations()
        self.refreshed.emit()

    def _fill_conversations(self) -> None:
        self._filling = True
        self.list.clear()
        for conv in self._conversations:
            item = QListWidgetItem(conv.title)
            item.setData(_ID, conv.id)
            item.setToolTip(f"{conv.title}\n{conv.answers} answer(s) · {conv.updated_at}")
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsEditable)
            self.list.addItem(item)
            if conv.id == self._current:
                item.setSelected(True)
                self.list.setCurrentItem(item)
        self._filling = False
        self.empty_label.setText("No conversations yet: ask a question to start one.")
        self.empty_label.setVisible(not self._conversations)

    def _fill_hits(self, query: str) -> None:
        self._filling = True
        self.list.clear()
        for conv in self._named:
            item = QListWidgetItem(conv.title)
            item.setData(_ID, conv.id)
            item.setToolTip(f"The conversation “{conv.title}” ({conv.answers} answer(s))")
            font = item.font()
            font.setBold(True)
            item.setFont(font)
            self.list.addItem(item)
        for hit in self._hits:
            item = QListWidgetItem()
            item.setData(_ID, hit.conversation_id)
            item.setData(_ANSWER_ID, hit.answer_id)
            item.setToolTip(f"{hit.question}\nin “{hit.conversation_title}”")
            label = QLabel(f"<b>{html.escape(hit.question)}</b><br/>"
                           f"<span>{snippet_html(hit.snippet)}</span><br/>"
                           f"<small>{html.escape(hit.conversation_title)}</small>")
            label.setWordWrap(True)
            label.setTextFormat(Qt.TextFormat.RichText)
            label.setContentsMargins(4, 3, 4, 3)
            label.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
            item.setSizeHint(label.sizeHint())
            self.list.addItem(item)
            self.list.setItemWidget(item, label)
        self._filling = False
        self.empty_label.setText(f"Nothing found for “{query}”.")
        self.empty_label.setVisible(not self._hits and not self._named)

    # ---- search ----------------------------------------------------------------------

    def search(self, text: str) -> None:
        """Put ``text`` in the search box and search at once."""
        self.search_box.setText(text)
        self._run_search()

    def _on_search_text(self, _text: str) -> None:
        if self.searching:
            self._search_timer.start()
        else:
            self._search_timer.stop()
            self._search_gen += 1  # a search still running must not refill the list
            self._hits = []
            self._named = []
            self._fill_conversations()

    def _run_search(self) -> None:
        self._search_timer.stop()
        query = self.search_box.text().strip()
        if not query:
            return
        self._search_gen += 1
        gen = self._search_gen

        def show(found: tuple[list[ConversationRecord], list[SearchHit]]) -> None:
            if gen != self._search_gen:
                return
            self._named, self._hits = found
            self._fill_hits(query)
            self.search_done.emit()

        self._run(lambda: (self.store.search_titles(query), self.store.search(query)), show)

    # ---- opening ---------------------------------------------------------------------

    def _on_activated(self, item: QListWidgetItem) -> None:
        cid = item.data(_ID)
        if cid is None:
            return
        answer_id = item.data(_ANSWER_ID)
        # A double click is two clicks and an activation: open the item once.
        target = (int(cid), answer_id)
        if target == self._last_open and self._since_open.isValid() and \
                self._since_open.elapsed() < QApplication.doubleClickInterval():
            return
        self._last_open = target
        self._since_open.start()
        self._current = int(cid)
        if answer_id is not None:
            self.answer_selected.emit(int(cid), int(answer_id))
        else:
            self.conversation_selected.emit(int(cid))

    def select(self, conversation_id: int | None) -> None:
        """Mark the conversation the window shows (no signal)."""
        self._current = conversation_id
        for i in range(self.list.count()):
            item = self.list.item(i)
            if item.data(_ANSWER_ID) is None and item.data(_ID) == conversation_id:
                self.list.setCurrentItem(item)
                return
        self.list.clearSelection()

    def new_conversation(self) -> None:
        """Create an empty conversation and open it; nothing that was saved is touched."""
        def created(conv: ConversationRecord) -> None:
            self._current = conv.id
            if self.searching:
                self.search_box.clear()
            self.refresh()
            self.conversation_selected.emit(conv.id)

        self._run(self.store.new_conversation, created, write=True)

    # ---- rename ----------------------------------------------------------------------

    def _target_item(self) -> QListWidgetItem | None:
        """The conversation an action acts on: the one right-clicked while its menu is open,
        else the highlighted one."""
        return self._menu_item if self._menu_item is not None else self.list.currentItem()

    def _selected_conversation(self) -> int | None:
        item = self._target_item()
        if item is None or item.data(_ANSWER_ID) is not None:
            return None
        cid = item.data(_ID)
        return None if cid is None else int(cid)

    def _rename_selected(self) -> None:
        item = self._target_item()
        if item is not None and item.data(_ANSWER_ID) is None:
            self.list.editItem(item)

    def _on_item_changed(self, item: QListWidgetItem) -> None:
        if self._filling or item.data(_ANSWER_ID) is not None:
            return
        cid = int(item.data(_ID))
        old = next((c for c in self._conversations if c.id == cid), None)
        if old is not None and item.text() != old.title:
            self.rename(cid, item.text())

    def rename(self, conversation_id: int, title: str) -> None:
        """Name a conversation; an empty name goes back to its first question."""
        self._run(lambda: self.store.rename(conversation_id, title),
                  lambda _conv: self.refresh(), write=True)

    # ---- delete and undo -------------------------------------------------------------

    def _export_selected(self, fmt: str) -> None:
        cid = self._selected_conversation()
        if cid is not None:
            self.export_requested.emit(cid, fmt)

    def _delete_selected(self) -> None:
        cid = self._selected_conversation()
        if cid is not None:
            self.delete(cid)

    def delete(self, conversation_id: int) -> None:
        """Delete a conversation; the bar below the list offers to undo it."""
        def deleted(conv: ConversationRecord) -> None:
            self._deleted = conv
            self.undo_label.setText(f"Deleted “{conv.title}”.")
            self.undo_bar.show()
            self._undo_timer.start()
            if self._current == conversation_id:
                self._current = None
            self.conversation_deleted.emit(conversation_id)
            self.refresh()
            if self.searching:
                self._run_search()

        def work() -> ConversationRecord:
            self.store.delete(conversation_id)
            return self.store.get(conversation_id)

        self._run(work, deleted, write=True)

    def undo_delete(self) -> None:
        """Bring back the conversation deleted last."""
        conv = self._deleted
        if conv is None:
            return
        self._deleted = None
        self._hide_undo()

        def restored(rec: ConversationRecord) -> None:
            self.conversation_restored.emit(rec.id)
            self.refresh()
            if self.searching:
                self._run_search()

        self._run(lambda: self.store.restore(conv.id), restored, write=True)

    def _hide_undo(self) -> None:
        self._undo_timer.stop()
        self.undo_bar.hide()

    # ---- context menu ----------------------------------------------------------------

    def _context_menu(self, pos: QPoint) -> None:
        item = self.list.itemAt(pos)
        if item is None or item.data(_ANSWER_ID) is not None:
            return
        menu = QMenu(self)
        menu.addAction(self.act_rename)
        menu.addAction(self.act_delete)
        menu.addSeparator()
        menu.addAction(self.act_export_md)
        menu.addAction(self.act_export_json)
        # The menu's actions act on the conversation right-clicked; the highlight stays on
        # the one the chat shows, which the keys (F2, Delete) act on.
        self._menu_item = item
        try:
            self._run_menu(menu, self.list.viewport().mapToGlobal(pos))
        finally:
            self._menu_item = None
            menu.deleteLater()

    def _run_menu(self, menu: QMenu, at: QPoint) -> None:
        """Show ``menu`` until it closes (its chosen action has run by then)."""
        menu.exec(at)
