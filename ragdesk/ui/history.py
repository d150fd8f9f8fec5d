"""Conversations that last: every finished answer of the chat is saved in the catalog (the
writes lane), the sidebar reopens any saved conversation in the chat, and the window opens
with the conversation it showed when it was closed.

The chat shows one stored conversation at a time (its :class:`_Target`). A new conversation
gets its row in the catalog on the writes lane, in order with the answers saved into it, so
an answer that finishes before the row's id is back on the GUI thread still lands in it.
Reopened answers are ordinary finished cards: heat map, chips, inspector and step-through
work from the passages and posteriors stored with them, whether or not their snapshot is
still there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QDockWidget, QFileDialog, QMainWindow, QWidget

from ragdesk.core.errors import NotFoundError
from ragdesk.core.options import AnswerOptions
from ragdesk.core.types import Answer
from ragdesk.ui.backend import Backend
from ragdesk.ui.background import Background, op_background
from ragdesk.ui.chat.card import CHOSEN_PASSAGES_KEY, AnswerCard
from ragdesk.ui.chat.view import ChatView
from ragdesk.ui.conversation import Conversation
from ragdesk.ui.conversations_sidebar import ConversationsSidebar
from ragdesk.ui.selection import AnswerSelection
from ragdesk.ui.view_context import ViewContext

if TYPE_CHECKING:
    from ragdesk.core.conversation_types import StoredAnswer

log = logging.getLogger(__name__)

LAST_KEY = "conversation"  # settings: the conversation the window showed last
EXPORT_FILTERS = {"markdown": ("md", "Markdown (*.md);;All files (*)"),
                  "json": ("json", "JSON (*.json);;All files (*)")}


def ask_export_path(parent: QWidget, title: str, fmt: str) -> str:
    """The file to export to, or "" when the user cancelled (tests replace this)."""
    ext, filters = EXPORT_FILTERS[fmt]
    stem = "".join(ch if ch.isalnum() or ch in " -_" else "_" for ch in title).strip()
    path, _ = QFileDialog.getSaveFileName(parent, "Export conversation",
                                          str(Path.home() / f"{stem or 'conversation'}.{ext}"),
                                          filters)
    return path


class _Target:
    """The stored conversation that new answers join. ``id`` is None until its row exists;
    only ops on the writes lane (one thread, in order) set it, so an answer saved right
    after "New conversation" finds the row that op made."""

    def __init__(self, conversation_id: int | None = None) -> None:
        self.id = conversation_id


class History(QObject):
    """Signals: ``opened(conversation_id)`` once a conversation's answers are in the chat;
    ``saved(conversation_id, answer_id)`` once a finished answer is stored."""

    opened = Signal(int)
    saved = Signal(int, int)

    def __init__(self, backend: Backend, background: Background, sidebar: ConversationsSidebar,
                 chat: ChatView, selection: AnswerSelection, conversation: Conversation, *,
                 wire_card: Callable[[AnswerCard], None], pack: Callable[[], str],
                 remember: Callable[[dict[str, object]], None], show: Callable[[str], None],
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.backend = backend
        self.store = backend.conversations
        self.background = background
        self.sidebar = sidebar
        self.chat = chat
        self.selection = selection
        self.conversation = conversation
        self._wire_card = wire_card
        self._pack = pack
        self._remember = remember
        self.show = show
        self._target = _Target()
        self._gen = 0  # a conversation read after another was opened is dropped
        self._answer_ids: dict[int, int] = {}  # card request id -> stored answer id
        # Answers stopped by leaving their conversation: saved, as stopped, where they began.
        self._leaving: dict[int, tuple[_Target, str, dict[str, object]]] = {}
        conversation.chatAnswered.connect(self.save)
        conversation.answerFinished.connect(self._left_finished)
        conversation.answerFailed.connect(lambda rid, _r: self._leaving.pop(rid, None))
        sidebar.conversation_selected.connect(self.open)
        sidebar.answer_selected.connect(self.open_answer)
        sidebar.conversation_deleted.connect(self._deleted)
        sidebar.conversation_restored.connect(self._restored)
        sidebar.export_requested.connect(self.export)
        sidebar.error.connect(self.show)

    @property
    def current_id(self) -> int | None:
        """The stored conversation the chat shows (None: not stored yet)."""
        return self._target.id

    def answer_id(self, card: AnswerCard) -> int | None:
        return self._answer_ids.get(card.request_id)

    # ---- start -------------------------------------------------------------------------

    def start(self, last: object) -> None:
        """Reopen the conversation shown last (``last``: its remembered id), or the newest;
        purge conversations deleted long ago; fill the sidebar."""
        store = self.store

        def pick() -> int | None:
            alive = store.list_conversations()
            ids = [c.id for c in alive]
            if isinstance(last, int) and last in ids:
                return last
            return ids[0] if ids else None

        def picked(cid: int | None) -> None:
            # Asked meanwhile: that conversation is the one to keep showing.
            if cid is not None and not self.chat.cards and self._target.id is None:
                self.open(cid)

        self.background(pick, picked)
        self.background(store.purge_deleted, lambda n: log.info("purged %s conversations", n),
                        write=True)
        self.sidebar.refresh()

    # ---- opening -----------------------------------------------------------------------

    def clear_chat(self, *, keep_running: bool = True) -> None:
        """Empty the chat; what was saved stays saved. Answers in flight stop, and what they
        had written is saved in their conversation (unless ``keep_running`` is False)."""
        for card in self.chat.cards:
            if keep_running and card.answer is None and card.state.active:
                self._leaving[card.request_id] = (self._target, self._pack(),
                                                  card.stored_options())
            self.conversation.forget(card)
        self.chat.clear()
        self.selection.clear()
        self._answer_ids.clear()

    def new(self) -> None:
        """Start a new conversation; the one shown stays in the sidebar."""
        self.clear_chat()
        self._gen += 1
        target = self._target = _Target()
        # An empty conversation is reused, unless an answer stopped by leaving it is on its
        # way there.
        fresh = self.store.create if self._leaving else self.store.new_conversation

        def create() -> int:
            if target.id is None:
                target.id = fresh().id
            return target.id

        def created(cid: int) -> None:
            if target is self._target:
                self.sidebar.select(cid)
                self._remember({LAST_KEY: cid})
            self.sidebar.refresh()

        self.background(create, created, write=True)

    def open(self, conversation_id: int, answer_id: int | None = None) -> None:
        """Show a stored conversation in the chat (``answer_id``: then select that answer)."""
        if conversation_id == self._target.id and self.chat.cards:
            self._select_stored(answer_id)
            return
        self.clear_chat()
        self._gen += 1
        gen = self._gen
        self._target = _Target(conversation_id)
        self.sidebar.select(conversation_id)
        self._remember({LAST_KEY: conversation_id})

        def shown(stored: list[StoredAnswer]) -> None:
            if gen != self._gen:
                return
            for s in stored:
                self._add_stored(s)
            if not self._select_stored(answer_id) and self.chat.cards:
                self.selection.select(self.chat.cards[-1])
            self.opened.emit(conversation_id)

        self.background(lambda: self.store.answers(conversation_id), shown)

    def open_answer(self, conversation_id: int, answer_id: int) -> None:
        self.open(conversation_id, answer_id)

    def _add_stored(self, stored: StoredAnswer) -> AnswerCard:
        a = stored.answer
        params = AnswerOptions.from_settings(stored.options)
        # Negative ids: the ops' ids (positive) name the cards of questions asked now.
        card = AnswerCard(-stored.id, a.question, params, a.snapshot,
                          chosen_passages=stored.options.get(CHOSEN_PASSAGES_KEY) is True)
        self._wire_card(card)
        self.chat.add_card(card)
        card.finish(a)
        self._answer_ids[card.request_id] = stored.id
        return card

    def _select_stored(self, answer_id: int | None) -> bool:
        card = next((c for c in self.chat.cards
                     if answer_id is not None and self.answer_id(c) == answer_id), None)
        if card is None:
            return False
        self.selection.select(card)
        self.chat.ensureWidgetVisible(card)
        return True

    # ---- saving ------------------------------------------------------------------------

    def save(self, card: AnswerCard) -> None:
        """Store a finished answer of the chat in the conversation shown."""
        if card.answer is not None:
            self._store(card.answer, self._target, self._pack(), card.stored_options(),
                        card.request_id)

    def _left_finished(self, rid: int, answer: Answer) -> None:
        left = self._leaving.pop(rid, None)
        if left is not None and answer.tokens:
            self._store(answer, *left, rid)

    def _store(self, answer: Answer, target: _Target, pack: str, options: dict[str, object],
               rid: int) -> None:
        store = self.store

        def work() -> StoredAnswer:
            # A conversation of its own: an empty one may be another target's already.
            if target.id is None:
                target.id = store.create().id
            try:
                return store.add_answer(target.id, answer, pack=pack, options=options)
            except NotFoundError:
                # Deleted from the sidebar while the answer was written: keep the answer.
                target.id = store.create().id
                return store.add_answer(target.id, answer, pack=pack, options=options)

        def stored(s: StoredAnswer) -> None:
            if target is self._target:
                self._answer_ids[rid] = s.id
                self.sidebar.select(s.conversation_id)
                self._remember({LAST_KEY: s.conversation_id})
            self.sidebar.refresh()
            self.saved.emit(s.conversation_id, s.id)

        self.background(work, stored, write=True)

    # ---- the sidebar's other requests ----------------------------------------------------

    def _deleted(self, conversation_id: int) -> None:
        if conversation_id == self._target.id:
            self.clear_chat(keep_running=False)
            self._target = _Target()

    def _restored(self, conversation_id: int) -> None:
        if not self.chat.cards:
            self.open(conversation_id)

    def export(self, conversation_id: int, fmt: str) -> None:
        title = next((c.title for c in self.sidebar.conversations()
                      if c.id == conversation_id), "conversation")
        path = ask_export_path(self.chat.window(), title, fmt)
        if not path:
            return
        if not Path(path).suffix:
            path = f"{path}.{EXPORT_FILTERS[fmt][0]}"
        target = Path(path)
        self.background(lambda: self.store.export_to(conversation_id, target),
                        lambda p: self.show(f"Exported “{title}” to {p}."), write=True)


def install_history(window: QMainWindow, beside: QDockWidget, ctx: ViewContext,
                    chat: ChatView, selection: AnswerSelection, conversation: Conversation, *,
                    wire_card: Callable[[AnswerCard], None],
                    remember: Callable[[dict[str, object]], None],
                    show: Callable[[str], None]) -> tuple[History, QDockWidget]:
    """The conversations sidebar as a dock left of ``beside`` (the controls), and the
    :class:`History` that keeps the window's chat and the catalog in step."""
    background = op_background(ctx.ops, window, title="Conversations")
    sidebar = ConversationsSidebar(ctx.backend.conversations, background)
    dock = QDockWidget("Conversations", window)
    dock.setObjectName("ConversationsDock")
    dock.setWidget(sidebar)
    dock.setFeatures(beside.features())
    window.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, dock)
    window.splitDockWidget(dock, beside, Qt.Orientation.Horizontal)
    window.resizeDocks([dock], [230], Qt.Orientation.Horizontal)
    state = ctx.state
    history = History(ctx.backend, background, sidebar, chat, selection, conversation,
                      wire_card=wire_card, pack=lambda: state.pack, remember=remember,
                      show=show, parent=window)
    return history, dock
