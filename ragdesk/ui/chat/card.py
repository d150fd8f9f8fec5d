"""One exchange of the conversation: the question, the streamed answer coloured by source
passage, its legend, verdict and citation chips, and a line of facts about how the answer
was made."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont, QMouseEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ragdesk.core.export import MODE_NAMES
from ragdesk.core.options import AnswerOptions
from ragdesk.core.retriever_names import retriever_in_sentence
from ragdesk.core.types import Answer, AnswerToken, RetrievedDoc
from ragdesk.core.units import logprob_text, plural
from ragdesk.ui.card_state import CardState
from ragdesk.ui.chat.chip import CitationChip
from ragdesk.ui.chat.legend import Legend
from ragdesk.ui.chat.token_text import TokenText
from ragdesk.ui.dialogs import set_flagged_text
from ragdesk.ui.flow_layout import FlowLayout
from ragdesk.ui.infos import CitationPlace
from ragdesk.ui.resources import icon
from ragdesk.ui.texts import summarize, unbroken
from ragdesk.ui.verdict import VerdictRow, not_found_text

if TYPE_CHECKING:
    from ragdesk.core.confidence import SourceSummary


CLOSEST_PASSAGES = ("Closest passages (none of them seems to hold the answer; they are not "
                    "sources):")


# "Ask from here" on the retrieval map answers from the passages the user put the query
# among, not from those retrieved for the question: the card says so, or it would read like
# any other answer to the question.
CHOSEN_PASSAGES = "Asked from the passages you chose on the retrieval map"
# Stored with the answer's options, so that the mark comes back with the conversation.
CHOSEN_PASSAGES_KEY = "chosen_passages"

EMPTY_ANSWER = (
    "The model produced an empty answer: it ended the answer before its first word. Small "
    "generators do this when the retrieved passages (below) do not contain the answer, or "
    "the question reads like something other than a question. Try rephrasing it, more "
    "passages (K), another retriever, or a snapshot that covers the topic.")


class AnswerCard(QFrame):
    """One exchange: the question, the streamed answer and where it came from."""

    passageClicked = Signal(object, int)  # card, passage rank (0-based)
    tokenClicked = Signal(object, int)  # card, token index
    activated = Signal(object)  # card (clicked: becomes the selected answer)
    copyRequested = Signal(object)
    heatmapRequested = Signal(object)
    answered = Signal(object)  # Answer: finished (its chips exist)
    guessShown = Signal(object, bool)  # card, whether an abstained answer's guess is shown

    def __init__(self, request_id: int, question: str, params: AnswerOptions,
                 snapshot: str | None, parent: QWidget | None = None, *,
                 chosen_passages: bool = False) -> None:
        super().__init__(parent)
        self.request_id = request_id
        self.question = question
        self.params = params
        self.snapshot = snapshot
        self.chosen_passages = chosen_passages
        self.answer: Answer | None = None
        self.state = CardState.WAITING
        self.selected = False
        self.setObjectName("AnswerCard")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        # Not Maximum: that capped the card at a size hint worked out for a wider card, and a
        # narrow pane cut its wrapped text; the column's stretch keeps it from growing.
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)

        lay = QVBoxLayout(self)
        lay.setContentsMargins(16, 12, 16, 12)
        lay.setSpacing(8)

        lay.addLayout(self._header(question))

        self.chosen_label = _wrapped_label("ChosenPassages", CHOSEN_PASSAGES)
        self.chosen_label.setVisible(chosen_passages)
        lay.addWidget(self.chosen_label)

        self.status_label = _wrapped_label("CardStatus")
        lay.addWidget(self.status_label)

        self.text = TokenText(params.mode)
        self.text.tokenClicked.connect(lambda i: self.tokenClicked.emit(self, i))
        self.text.setVisible(False)  # until its first token: no blank line under the status
        lay.addWidget(self.text)

        self.legend = Legend()
        self.legend.passageClicked.connect(lambda k: self.passageClicked.emit(self, k))
        self.legend.setVisible(False)
        lay.addWidget(self.legend)

        self.verdict = VerdictRow()
        self.verdict.guessToggled.connect(self.show_guess)
        lay.addWidget(self.verdict)
        self.summary: SourceSummary | None = None

        self.chips_caption = _wrapped_label("ChipsCaption", CLOSEST_PASSAGES)
        self.chips_caption.setVisible(False)
        lay.addWidget(self.chips_caption)

        self.chips_box = QWidget()
        self.chips = FlowLayout(self.chips_box, spacing=6)
        self.chips_box.setVisible(False)
        lay.addWidget(self.chips_box)

        self.meta_label = _wrapped_label("CardMeta")
        lay.addWidget(self.meta_label)
        self._set_status("Waiting for the engine…")
        self._update_meta()

    def stored_options(self) -> dict[str, object]:
        """The options stored with the answer: what :meth:`AnswerOptions.from_settings`
        reads, and whether its passages were chosen on the map."""
        return {**self.params.to_settings(),
                **({CHOSEN_PASSAGES_KEY: True} if self.chosen_passages else {})}

    def _header(self, question: str) -> QHBoxLayout:
        head = QHBoxLayout()
        head.setSpacing(6)
        self.question_label = QLabel(question)
        self.question_label.setObjectName("QuestionText")
        self.question_label.setWordWrap(True)
        self.question_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        qf = QFont(self.question_label.font())
        qf.setPointSizeF(qf.pointSizeF() * 1.2)
        qf.setWeight(QFont.Weight.DemiBold)
        self.question_label.setFont(qf)
        head.addWidget(self.question_label, 1)
        self.copy_button = self._tool_button("copy", "Copy this answer as Markdown")
        self.copy_button.clicked.connect(lambda: self.copyRequested.emit(self))
        self.heat_button = self._tool_button("heatmap", "Show the posterior heat map")
        self.heat_button.clicked.connect(lambda: self.heatmapRequested.emit(self))
        head.addWidget(self.copy_button, 0, Qt.AlignmentFlag.AlignTop)
        head.addWidget(self.heat_button, 0, Qt.AlignmentFlag.AlignTop)
        return head

    def _tool_button(self, icon_name: str, tip: str) -> QToolButton:
        b = QToolButton()
        b.setObjectName("CardButton")
        b.setIcon(icon(icon_name))
        b.setToolTip(tip)
        b.setAutoRaise(True)
        b.setEnabled(False)
        return b

    def refresh_icons(self) -> None:
        self.copy_button.setIcon(icon("copy"))
        self.heat_button.setIcon(icon("heatmap"))

    # ---- streaming ------------------------------------------------------------------------

    def set_running(self) -> None:
        self.state = CardState.RUNNING
        self._set_status("Retrieving passages and generating…")

    def set_queued(self, text: str) -> None:
        """Waiting for something else first (the starter pack's setup): say what and how far."""
        self._set_status(text)

    def append_token(self, tok: AnswerToken) -> None:
        if self.state is not CardState.RUNNING:
            self.set_running()
        if not self.text.tokens:
            self.status_label.setVisible(False)
            self.text.setVisible(True)
            self.heat_button.setEnabled(True)
        self.text.append_token(tok)
        self._update_legend()

    @property
    def tokens(self) -> list[AnswerToken]:
        return self.text.tokens

    def finish(self, answer: Answer) -> None:
        self.answer = answer
        self.state = CardState.CANCELLED if answer.cancelled else CardState.DONE
        self.text.mode = answer.mode
        # The final answer is authoritative: RAG-Sequence's thorough decoding re-scores
        # hypotheses at the end, so streamed tokens may differ from the chosen ones, and each
        # token's shown source (a passage that holds it) is settled only now.
        if [(t.id, t.source) for t in self.text.tokens] != [
                (t.id, t.source) for t in answer.tokens] or any(
                a.posterior != b.posterior for a, b in zip(self.text.tokens, answer.tokens,
                                                           strict=False)):
            self.text.set_tokens(answer.tokens)
        self.text.set_docs(answer.docs)
        self.summary = summarize(answer)
        self._update_legend()
        self._build_chips(answer.docs)
        abstained = answer.abstained and not answer.cancelled
        self.verdict.set_answer(answer)
        unsourced = answer.from_memory and (self.summary is None or self.summary.primary is None)
        self.chips_caption.setVisible((abstained or unsourced) and bool(answer.docs))
        if abstained:
            # Not found: said plainly in the text's place; the guess is one click away.
            self._set_status(not_found_text(answer.snapshot), not_found=True)
        elif not answer.tokens:
            self._set_status(EMPTY_ANSWER)
        elif answer.cancelled:
            self._set_status("Stopped.")
        else:
            self.status_label.setVisible(False)
        self.show_guess(not abstained)
        self.copy_button.setEnabled(True)
        self.heat_button.setEnabled(bool(answer.tokens))
        self._update_meta()
        self.answered.emit(answer)

    def fail(self, message: str, cancelled: bool = False) -> None:
        self.state = CardState.CANCELLED if cancelled else CardState.FAILED
        text = "Stopped before the answer was finished." if cancelled else message
        self._set_status(text, error=not cancelled)
        self.copy_button.setEnabled(False)
        self._update_meta()

    def show_guess(self, shown: bool) -> None:
        """Show the answer's text and where it came from (for an abstained answer, its best
        guess), or only the verdict."""
        has_text = bool(self.text.tokens)
        self.text.setVisible(shown and has_text)
        self.legend.setVisible(shown and has_text and self.legend.k > 0)
        if self.verdict.guess_button.isChecked() != shown and self.verdict.isVisible() \
                and self.verdict.guess_button.isVisible():
            self.verdict.guess_button.setChecked(shown)
        if self.answer is not None and self.answer.abstained:  # only there can it hide
            self.guessShown.emit(self, shown)

    @property
    def guess_hidden(self) -> bool:
        """An answer that abstained whose guess the card does not show: no other view shows
        its words or where they came from either."""
        a = self.answer
        return (a is not None and a.abstained and not a.cancelled
                and not self.verdict.guess_shown)

    def _set_status(self, text: str, error: bool = False, not_found: bool = False) -> None:
        set_flagged_text(self.status_label, text, error=error, notfound=not_found)
        self.status_label.setVisible(True)

    def _update_legend(self) -> None:
        toks = self.text.tokens
        if not toks:
            return
        if not toks[0].posterior:
            # read from no passage (an answer from memory no passage holds): no sources to
            # draw, not the streamed tokens' ones left standing
            self.legend.set_counts(0, [])
            self.legend.setVisible(False)
            return
        k = len(toks[0].posterior)
        counts = [0] * k
        for t in toks:
            if 0 <= t.source < k:
                counts[t.source] += 1
        a, summary = self.answer, self.summary
        self.legend.set_counts(k, counts, mixed=bool(summary and summary.mixed),
                               guess=bool(a is not None and a.abstained and not a.cancelled))
        if self.answer is None:  # streaming; finish() decides what a finished card shows
            self.legend.setVisible(True)

    def _build_chips(self, docs: Sequence[RetrievedDoc]) -> None:
        while self.chips.count():
            item = self.chips.takeAt(0)
            w = item.widget() if item is not None else None
            if w is not None:
                w.deleteLater()
        for k, doc in enumerate(docs):
            chip = CitationChip(k, doc)
            chip.clicked.connect(lambda _=False, k=k: self.passageClicked.emit(self, k))
            self.chips.addWidget(chip)
        self.chips_box.setVisible(bool(docs))

    def chip(self, k: int) -> CitationChip:
        item = self.chips.itemAt(k)
        w = item.widget() if item is not None else None
        assert isinstance(w, CitationChip)
        return w

    def set_places(self, places: dict[int, CitationPlace]) -> None:
        """Where the cited passages sit in their files, by rank (folder snapshots only)."""
        for k, chip in enumerate(self.chip_widgets()):
            if k in places:
                chip.set_place(places[k])

    def chip_widgets(self) -> list[CitationChip]:
        out = []
        for i in range(self.chips.count()):
            item = self.chips.itemAt(i)
            w = item.widget() if item is not None else None
            if isinstance(w, CitationChip):
                out.append(w)
        return out

    def _update_meta(self) -> None:
        p = self.params
        # How the answer was read, once it says so; until then what was asked for.
        mode = self.answer.mode if self.answer is not None else p.mode
        parts = [MODE_NAMES.get(mode, mode)]
        if mode == "sequence":
            parts.append(f"{p.decoding} decoding")
        a = self.answer
        if a is not None and a.docs and len(a.docs) < p.n_docs:
            # A snapshot smaller than K answers with all it holds (the core's rule).
            parts.append(f"K = {len(a.docs)}: all the snapshot holds ({p.n_docs} asked)")
        else:
            parts.append(f"K = {p.n_docs}")
        # What really retrieved (a snapshot still computing its vectors answers with BM25);
        # passages chosen on the map were retrieved by none.
        used = a.retriever if a is not None and a.retriever else p.retriever
        if used != "dense" and not self.chosen_passages:
            label = retriever_in_sentence(used)
            if used != p.retriever:
                label += " (dense index not ready yet)"
            parts.append(label)
        if p.num_beams > 1:
            parts.append(f"{p.num_beams} beams")
        snap = (a.snapshot if a is not None and a.snapshot else self.snapshot)
        if snap:
            parts.append(f"snapshot {snap}")
        if a is not None:
            parts.append(plural(len(a.tokens), "token"))
            total = a.timings.get("total_s")
            if total:
                parts.append(f"{total:.2f} s")
            parts.append(logprob_text(a.logprob))
        # Wrap between the facts, never inside one ("log p(answer)" / "= -0.39").
        self.meta_label.setText("  ·  ".join(unbroken(x) for x in parts))

    # ---- selection ------------------------------------------------------------------------

    def set_selected(self, selected: bool) -> None:
        self.selected = selected
        self.setProperty("selected", selected)
        self.style().unpolish(self)
        self.style().polish(self)

    def mousePressEvent(self, event: QMouseEvent) -> None:
        self.activated.emit(self)
        super().mousePressEvent(event)


def _wrapped_label(name: str, text: str = "") -> QLabel:
    """A line of the card that wraps, styled by its object name (ragdesk.qss)."""
    label = QLabel(text)
    label.setObjectName(name)
    label.setWordWrap(True)
    return label
