"""The selected answer and passage, kept in step across the chat, the inspector and the
heat map: clicking a token, a citation chip, a heat-map cell or an inspector tab selects the
same passage everywhere. The selected answer goes to :class:`AppState` for every other view.
"""

from __future__ import annotations

import shiboken6
from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QDockWidget

from ragdesk.core.types import Answer, AnswerToken
from ragdesk.ui.chat.card import AnswerCard
from ragdesk.ui.chat.view import ChatView
from ragdesk.ui.heatmap import NO_ANSWER_TEXT
from ragdesk.ui.heatmap_panel import HeatMapPanel
from ragdesk.ui.inspector import PassageInspector
from ragdesk.ui.state import AppState

GUESS_HIDDEN_TEXT = ("Not found in the snapshot: its guess is hidden until Show the guess on "
                     "its card.")


def answer_note(card: AnswerCard) -> str | None:
    """What the card says about its answer that the heat map repeats."""
    a, summary = card.answer, card.summary
    if card.guess_hidden:
        return "not found in the snapshot; Show the guess on the card to see its words here"
    if a is not None and a.abstained and not a.cancelled:
        return "the best guess (not found in the snapshot)"
    if summary is not None and summary.mixed:
        return "from several passages"
    return None


class AnswerSelection(QObject):
    copyRequested = Signal(object)  # AnswerCard whose answer to copy

    def __init__(self, state: AppState, chat: ChatView, inspector: PassageInspector,
                 inspector_dock: QDockWidget, heatmap: HeatMapPanel,
                 heatmap_dock: QDockWidget, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.state = state
        self.chat = chat
        self.inspector = inspector
        self.inspector_dock = inspector_dock
        self.heatmap = heatmap
        self.heatmap_dock = heatmap_dock
        self.card: AnswerCard | None = None
        self.passage: int | None = None
        inspector.passageChanged.connect(self.show_passage)
        heatmap.map.cellClicked.connect(lambda _i, k: self.show_passage(k))

    @property
    def answer(self) -> Answer | None:
        return self.card.answer if self.card is not None else None

    def wire(self, card: AnswerCard) -> None:
        """Connect a new card's clicks to the selection."""
        card.passageClicked.connect(self._card_passage)
        card.tokenClicked.connect(self._card_token)
        card.activated.connect(self.select)
        card.copyRequested.connect(self.copyRequested)
        card.heatmapRequested.connect(self._show_heatmap_for)
        card.guessShown.connect(self._guess_shown)
        # A card deleted elsewhere (compare's previous pair, a cleared chat) is not selected.
        card.destroyed.connect(lambda _obj=None, c=card: self.forget(c))

    def select(self, card: AnswerCard, force: bool = False) -> None:
        if card is self.card and not force:
            return
        if self.card is not None and self.card is not card:
            self.card.set_selected(False)
            self.card.text.set_focus_passage(None)
        self.card = card
        card.set_selected(True)
        self.passage = None
        a = card.answer
        self.heatmap.set_mode(card.params.mode if a is None else a.mode, card.question,
                              answer_note(card))
        hidden = card.guess_hidden
        self.heatmap.map.set_data([] if hidden else card.tokens if a is None else a.tokens,
                                  None if a is None else a.docs,
                                  empty_text=GUESS_HIDDEN_TEXT if hidden else NO_ANSWER_TEXT)
        self.heatmap.map.set_selected_passage(None)
        self.inspector.set_answer(a, guess_hidden=hidden)
        if a is not None:
            self.state.select_answer(a, guess_hidden=hidden)

    def answered(self, card: AnswerCard) -> None:
        """A conversation answer finished: it becomes the selection unless another one is."""
        if self.card is card or self.card is None:
            self.select(card, force=True)

    def token_shown(self, card: AnswerCard, tok: AnswerToken) -> None:
        if card is self.card:
            self.heatmap.map.append_token(tok)

    def forget(self, card: AnswerCard) -> None:
        if self.card is card:
            self.card = None
            if shiboken6.isValid(self.state):  # not while the window itself is deleted
                self.state.select_answer(None)

    def clear(self) -> None:
        self.card = None
        self.state.select_answer(None)  # the views let go of it too (step-through)
        self.inspector.set_answer(None)
        self.heatmap.set_mode(None)
        self.heatmap.map.set_data([], None)

    def step(self, delta: int) -> None:
        cards = self.chat.cards
        if not cards:
            return
        i = cards.index(self.card) if self.card in cards else len(cards)
        j = min(max(i + delta, 0), len(cards) - 1)
        self.select(cards[j])
        self.chat.ensureWidgetVisible(cards[j])

    def show_passage(self, k: int) -> None:
        """Select passage ``k`` of the selected answer everywhere: text, heat map, inspector."""
        card = self.card
        if card is None:
            return
        self.passage = k
        card.text.set_focus_passage(k)
        self.heatmap.map.set_selected_passage(k)
        if card.answer is not None and k < len(card.answer.docs):
            self.inspector.show_passage(k, notify=False)
            self.inspector_dock.show()
            self.inspector_dock.raise_()

    def focus_heatmap(self) -> None:
        """Bring the heat map into view and give it the keyboard: shown, in front of the
        docks tabbed with it, its window activated when it floats, and its cursor cell
        marked, so that even a map already on the screen shows that it was asked for."""
        dock, hm = self.heatmap_dock, self.heatmap.map
        dock.show()
        dock.raise_()
        if dock.isFloating():
            dock.activateWindow()
        if hm.cursor_cell is None and hm.words:
            hm.cursor_cell = (0, 0 if hm.quoted else hm.selected_passage or 0)
        hm.setFocus(Qt.FocusReason.ShortcutFocusReason)

    def _card_passage(self, card: AnswerCard, k: int) -> None:
        self.select(card)
        self.show_passage(k)

    def _card_token(self, card: AnswerCard, i: int) -> None:
        self.select(card)
        if 0 <= i < len(card.tokens) and card.tokens[i].posterior:
            self.show_passage(card.tokens[i].source)

    def _guess_shown(self, card: AnswerCard, _shown: bool) -> None:
        if card is self.card and card.answer is not None:
            passage = self.passage
            self.select(card, force=True)
            if passage is not None:
                self.show_passage(passage)

    def _show_heatmap_for(self, card: AnswerCard) -> None:
        self.select(card)
        self.focus_heatmap()
