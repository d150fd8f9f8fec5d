"""Step through a finished answer one word at a time, watching the document posterior move.

Step 0 is "before the first word": the bars show the retrieval prior p(z|x). Step i ≥ 1 shows
the answer up to word i, word i itself, and the posterior stored with its pieces
(RAG-Token: p(z | x, y_i, y_<i), the mean over the word's sub-word pieces; RAG-Sequence: the
running p(z | x, y_≤i) after its last piece; see :mod:`ragdesk.ui.words`). "Sub-word pieces"
steps through the pieces the generator wrote instead, each with its own stored posterior.
Nothing is recomputed: the bars are the floats in ``Answer.tokens[i].posterior``.

An answer read together (all passages in one prompt) has no posterior that moves: each of its
tokens carries the retrieval prior. Its steps say so, and name the passage each word's span is
quoted from instead of the passage "mostly" behind it.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from PySide6.QtCore import QEvent, QRectF, QSize, Qt, Signal
from PySide6.QtGui import (
    QFont,
    QFontMetrics,
    QKeyEvent,
    QPainter,
    QPaintEvent,
    QPalette,
)
from PySide6.QtWidgets import (
    QCheckBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSizePolicy,
    QSlider,
    QVBoxLayout,
    QWidget,
)

from ragdesk.core.export import MODE_NAMES
from ragdesk.core.types import Answer
from ragdesk.core.units import percent
from ragdesk.ui.explore.keys import STEP_MOVES
from ragdesk.ui.explore.palette import ink, label_colour, muted, rank_colour
from ragdesk.ui.selection import GUESS_HIDDEN_TEXT
from ragdesk.ui.words import Word, as_words, piece_label, quoted_source

POSTERIOR_NAMES = {"token": "p(z | x, yᵢ, y<ᵢ)", "sequence": "p(z | x, y≤ᵢ)"}
TOGETHER = "together"
EMPTY_TEXT = "Finish an answer to step through how it was generated."
TOGETHER_CAPTION = ("Read together: one prompt held all the passages, so nothing moves from "
                    "word to word; the bars stay the retrieval prior p(z|x)")

ROW_PX = 26
MIN_LABEL_PX = 120
LABEL_FRACTION = 0.42
VALUE_PX = 52


def value_text(v: float) -> str:
    """A bar's value as the chips and the inspector write shares: "95%"."""
    return percent(v)


class PosteriorBars(QWidget):
    """Horizontal bars, one per passage, labelled "[n] title", with the value at the end."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._labels: list[str] = []
        self._values: list[float] = []
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)

    def set_data(self, labels: Sequence[str], values: Sequence[float]) -> None:
        if len(labels) != len(values):
            raise ValueError("one label per value")
        self._labels = list(labels)
        self._values = [float(v) for v in values]
        self.updateGeometry()
        self.update()

    def values(self) -> list[float]:
        return list(self._values)

    def labels(self) -> list[str]:
        return list(self._labels)

    def value_texts(self) -> list[str]:
        """The values as painted at the end of the bars."""
        return [value_text(v) for v in self._values]

    def track_rects(self) -> list[QRectF]:
        """Where each bar may extend (value 1.0 fills its track)."""
        left = self.width() * LABEL_FRACTION
        width = max(1.0, self.width() - left - VALUE_PX - 8)
        return [QRectF(left, 4 + i * ROW_PX + 4, width, ROW_PX - 8)
                for i in range(len(self._values))]

    def bar_rects(self) -> list[QRectF]:
        """The painted bars: each track's width times the value."""
        out = []
        for track, v in zip(self.track_rects(), self._values, strict=True):
            r = QRectF(track)
            r.setWidth(track.width() * min(1.0, max(0.0, v)))
            out.append(r)
        return out

    def sizeHint(self) -> QSize:
        return QSize(360, 8 + ROW_PX * max(1, len(self._values)))

    def minimumSizeHint(self) -> QSize:
        return QSize(200, 8 + ROW_PX * max(1, len(self._values)))

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        fm = QFontMetrics(self.font())
        left = self.width() * LABEL_FRACTION
        bold = QFont(self.font())
        bold.setBold(True)
        for i, (track, bar, label, v) in enumerate(zip(self.track_rects(), self.bar_rects(),
                                                      self._labels, self._values, strict=True)):
            p.fillRect(track, ink(self.palette(), 26))
            p.fillRect(bar, rank_colour(i))
            row = QRectF(0, track.top() - 4, left - 8, ROW_PX)
            p.setPen(self.palette().text().color())
            p.setFont(self.font())
            p.drawText(row, int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter),
                       fm.elidedText(label, Qt.TextElideMode.ElideRight, int(row.width())))
            p.setFont(bold)
            p.setPen(muted(self.palette()))
            p.drawText(QRectF(track.right() + 6, row.top(), VALUE_PX, ROW_PX),
                       int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter),
                       value_text(v))
        p.end()


class AnswerSteps(QWidget):
    """One answer at one step: heading, the answer so far, the chosen token and the bars."""

    def __init__(self, answer: Answer, parent: QWidget | None = None,
                 pieces: bool = False) -> None:
        super().__init__(parent)
        self.answer = answer
        self.pieces = pieces
        self.words: list[Word] = as_words(answer.tokens, answer.mode, pieces)
        self._step = 0
        mode = MODE_NAMES.get(answer.mode, answer.mode)
        posterior = POSTERIOR_NAMES.get(answer.mode, "document posterior")
        self.heading = QLabel(f"<b>{html.escape(mode)}</b>"
                              f"{' · ' + html.escape(answer.decoding) if answer.decoding else ''}",
                              self)
        self.text_label = QLabel(self)
        self.text_label.setTextFormat(Qt.TextFormat.RichText)
        self.text_label.setWordWrap(True)
        self.text_label.setMinimumHeight(48)
        self.text_label.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self.text_label.setFrameShape(QFrame.Shape.StyledPanel)
        self.text_label.setBackgroundRole(QPalette.ColorRole.Base)
        self.text_label.setAutoFillBackground(True)
        self.text_label.setMargin(6)
        self.token_label = QLabel(self)
        self.token_label.setTextFormat(Qt.TextFormat.RichText)
        self.caption = QLabel(self)
        self.caption.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        # Every label wraps, and none asks for the width of its longest word either: a label
        # as wide as its text ("Read together: …", a long token) made the dock, and with it
        # the main window, wider on every step.
        for label in (self.heading, self.text_label, self.token_label, self.caption):
            label.setWordWrap(True)
            label.setMinimumWidth(MIN_LABEL_PX)
        self._posterior_name = posterior
        self.bars = PosteriorBars(self)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.heading)
        lay.addWidget(self.text_label)
        lay.addWidget(self.token_label)
        lay.addWidget(self.caption)
        lay.addWidget(self.bars)
        lay.addStretch(1)
        self._labels = [f"[{i + 1}] {d.title}" for i, d in enumerate(answer.docs)]
        self.set_step(0)

    @property
    def step_count(self) -> int:
        return len(self.words)

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        # (Not while the widget is being made: a parent's palette arrives before the words.)
        if event.type() == QEvent.Type.PaletteChange and hasattr(self, "_labels"):
            self.set_step(self._step)  # the source's colour, readable on the new theme

    @property
    def step(self) -> int:
        return self._step

    def set_pieces(self, pieces: bool) -> None:
        """Step by sub-word piece (True) or by word; stays at the same place in the answer."""
        if pieces == self.pieces:
            return
        token = self.words[self._step - 1].pieces[-1] if self._step else -1
        self.pieces = pieces
        self.words = as_words(self.answer.tokens, self.answer.mode, pieces)
        self.set_step(self.step_of_token(token) if token >= 0 else 0)

    def step_of_token(self, i: int) -> int:
        """The step that shows token ``i`` (the word it belongs to)."""
        return next((n for n, w in enumerate(self.words, 1) if i in w.pieces), 0)

    def expected_values(self, step: int) -> list[float]:
        """What the bars show at ``step`` (clamped to this answer's length)."""
        s = min(max(0, step), self.step_count)
        if s == 0:
            return [d.prob for d in self.answer.docs]
        return list(self.words[s - 1].posterior)

    def set_step(self, step: int) -> None:
        s = min(max(0, step), self.step_count)
        self._step = s
        if s == 0:
            unit = "piece" if self.pieces else "word"
            self.text_label.setText("<i>(nothing generated yet)</i>")
            self.token_label.setText(f"Step 0 of {self.step_count}: before the first {unit}")
            self.caption.setText("Retrieval prior p(z|x)")
        else:
            word = self.words[s - 1]
            together = self.answer.mode == TOGETHER
            # Earlier words get a light tint of their main source, the current one a strong
            # tint: the answer reads as a strip of where each part came from.
            done = "".join(_tinted(w, 0.16, self._tint_source(w)) for w in self.words[: s - 1])
            current = ("<b>" + _tinted(word, 0.5, self._tint_source(word), mark_blank=True)
                       + "</b>")
            rest = "" if s == self.step_count else " …"
            self.text_label.setText(f"<div style='white-space: pre-wrap'>{done}{current}"
                                    f"{rest}</div>")
            finished = " (finished)" if step > self.step_count else ""
            self.token_label.setText(
                f"Step {s} of {self.step_count}{finished}: chose "
                f"<b>“{self._shown(word)}”</b>{self._pieces_note(word)}, "
                + (self._quoted(word) if together else
                   f"mostly from <b style='color:{self._ink(word.source)}'>"
                   f"[{word.source + 1}]</b>"))
            self.caption.setText(TOGETHER_CAPTION if together else
                                 f"Document posterior {self._posterior_name}"
                                 + self._how(word))
        self.bars.set_data(self._labels, self.expected_values(s))

    def _shown(self, word: Word) -> str:
        return _visible(word.text) if self.pieces else html.escape(word.label)

    def _tint_source(self, word: Word) -> int | None:
        """The passage whose colour a word wears: read together, the one it is quoted from
        (none: no tint), else its main source."""
        if self.answer.mode == TOGETHER:
            return quoted_source(self.answer.tokens, word.pieces)
        return word.source

    def _quoted(self, word: Word) -> str:
        """Where a word read together is quoted from, as most of its pieces say."""
        q = quoted_source(self.answer.tokens, word.pieces)
        if q is None:
            return "held by none of the passages"
        return f"quoted from <b style='color:{self._ink(q)}'>[{q + 1}]</b>"

    def _ink(self, rank: int) -> str:
        """Passage ``rank``'s colour as text that reads on this view's background."""
        return label_colour(rank, self.palette().color(QPalette.ColorRole.Window)).name()

    def _pieces_note(self, word: Word) -> str:
        if len(word.pieces) < 2:
            return ""
        parts = ", ".join(f"“{html.escape(piece_label(self.answer.tokens[i].text))}”"
                          for i in word.pieces)
        return f" ({len(word.pieces)} pieces: {parts})"

    def _how(self, word: Word) -> str:
        if len(word.pieces) < 2:
            return ""
        return (", after its last piece" if self.answer.mode == "sequence"
                else ", the mean over its pieces")


def _same_question(a: Answer, b: Answer) -> bool:
    return (a.question == b.question and a.snapshot == b.snapshot
            and [d.id for d in a.docs] == [d.id for d in b.docs])


def _tinted(word: Word, alpha: float, source: int | None, mark_blank: bool = False) -> str:
    text = word.text
    if mark_blank and not text.strip():
        text = text.replace(" ", "␣").replace("\n", "⏎\n")
    if source is None:
        return html.escape(text)
    c = rank_colour(source)
    return (f"<span style='background-color: rgba({c.red()},{c.green()},{c.blue()},"
            f"{alpha})'>{html.escape(text)}</span>")


def _visible(text: str) -> str:
    """Token text as HTML with its spaces and line breaks made visible."""
    if not text.strip():
        return html.escape(text.replace(" ", "␣").replace("\n", "⏎"))
    return html.escape(text).replace("\n", "⏎")


class StepThrough(QWidget):
    """Slider, previous/next buttons and arrow keys over one answer or several side by side
    (e.g. RAG-Token and RAG-Sequence for the same question)."""

    stepChanged = Signal(int)

    def __init__(self, answers: Sequence[Answer] = (), parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.panels: list[AnswerSteps] = []
        self.question_label = QLabel(self)
        self.question_label.setWordWrap(True)
        self.question_label.setTextFormat(Qt.TextFormat.PlainText)
        f = self.question_label.font()
        f.setPointSizeF(f.pointSizeF() * 1.1)
        f.setBold(True)
        self.question_label.setFont(f)
        self._panel_row = QHBoxLayout()
        self._panel_row.setSpacing(18)
        self.prev_button = QPushButton("◀ Previous", self)
        self.next_button = QPushButton("Next ▶", self)
        self.slider = QSlider(Qt.Orientation.Horizontal, self)
        self.slider.setTickPosition(QSlider.TickPosition.TicksBelow)
        self.slider.setPageStep(5)
        self.step_label = QLabel(self)
        self.step_label.setMinimumWidth(QFontMetrics(self.font()).horizontalAdvance("0000 / 0000"))
        self.step_label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self.prev_button.clicked.connect(lambda: self.set_step(self.step() - 1))
        self.next_button.clicked.connect(lambda: self.set_step(self.step() + 1))
        self.slider.valueChanged.connect(self._on_slider)
        for b in (self.prev_button, self.next_button):
            b.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.pieces_box = QCheckBox("Sub-word &pieces", self)
        self.pieces_box.setToolTip("Step through the pieces the generator wrote (“␣”, “1”, "
                                   "“9”…) instead of whole words")
        self.pieces_box.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # arrows keep stepping
        self.pieces_box.toggled.connect(self.set_pieces)
        controls = QHBoxLayout()
        controls.addWidget(self.prev_button)
        controls.addWidget(self.slider, 1)
        controls.addWidget(self.next_button)
        controls.addWidget(self.step_label)
        self.empty_label = QLabel(EMPTY_TEXT, self)
        self.empty_label.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.empty_label.setWordWrap(True)
        self.empty_label.setMinimumWidth(MIN_LABEL_PX)
        lay = QVBoxLayout(self)
        # Beside the question, not in the row of buttons: that row sets the view's minimum
        # width, and a wider one pushed the docks beside the conversation aside.
        top = QHBoxLayout()
        top.addWidget(self.question_label, 1)
        top.addWidget(self.pieces_box, 0, Qt.AlignmentFlag.AlignTop)
        lay.addLayout(top)
        lay.addWidget(self.empty_label)
        lay.addLayout(self._panel_row, 1)
        lay.addLayout(controls)
        self.set_answers(answers)

    def set_answers(self, answers: Sequence[Answer], *, empty_text: str = EMPTY_TEXT,
                    question: str | None = None) -> None:
        """Step through ``answers``; none: say ``empty_text`` under ``question``."""
        for p in self.panels:
            self._panel_row.removeWidget(p)
            p.deleteLater()
        self.panels = [AnswerSteps(a, self, self.pieces_box.isChecked()) for a in answers]
        for p in self.panels:
            self._panel_row.addWidget(p, 1)
        questions = {a.question for a in answers} or ({question} if question else set())
        self.question_label.setText(" / ".join(sorted(questions)))
        self.empty_label.setText(empty_text)
        self.empty_label.setVisible(not self.panels)
        self.pieces_box.setEnabled(bool(self.panels))
        n = self.step_count
        self.slider.blockSignals(True)
        self.slider.setRange(0, n)
        self.slider.setValue(0)
        self.slider.blockSignals(False)
        self.set_step(0)

    def show_answer(self, answer: Answer, guess_hidden: bool = False) -> None:
        """Show ``answer``; if the view shows an answer of the other mode to the same question
        on the same snapshot and passages, keep it and show both side by side (RAG-Token on
        the left). ``guess_hidden``: the answer was not found in the snapshot and its card
        hides the guess, so its words are not shown here either, step by step or at all."""
        if guess_hidden:
            self.set_answers([], empty_text=GUESS_HIDDEN_TEXT, question=answer.question)
            return
        others = [p.answer for p in self.panels
                  if p.answer.mode != answer.mode and _same_question(p.answer, answer)]
        pair = [answer, *others[:1]]
        pair.sort(key=lambda a: (a.mode != "token", a.mode))
        self.set_answers(pair)

    def answers(self) -> list[Answer]:
        return [p.answer for p in self.panels]

    def set_pieces(self, pieces: bool) -> None:
        """Step by sub-word piece or by word, staying at the same place in the answers."""
        if self.pieces_box.isChecked() != pieces:
            self.pieces_box.setChecked(pieces)  # comes back here through toggled
            return
        for p in self.panels:
            p.set_pieces(pieces)
        s = max((p.step for p in self.panels), default=0)
        self.slider.blockSignals(True)
        self.slider.setRange(0, self.step_count)
        self.slider.setValue(s)
        self.slider.blockSignals(False)
        self._apply(s)

    @property
    def step_count(self) -> int:
        return max((p.step_count for p in self.panels), default=0)

    def step(self) -> int:
        return self.slider.value()

    def set_step(self, step: int) -> None:
        s = min(max(0, step), self.step_count)
        if self.slider.value() != s:
            self.slider.setValue(s)  # comes back through _on_slider
            return
        self._apply(s)

    def _on_slider(self, value: int) -> None:
        self._apply(value)

    def _apply(self, s: int) -> None:
        for p in self.panels:
            p.set_step(s)
        n = self.step_count
        self.prev_button.setEnabled(s > 0)
        self.next_button.setEnabled(s < n)
        self.slider.setEnabled(n > 0)
        self.step_label.setText(f"{s} / {n}")
        self.stepChanged.emit(s)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        key = event.key()
        if key in STEP_MOVES:
            self.set_step(self.step() + STEP_MOVES[key])
        elif key == Qt.Key.Key_Home:
            self.set_step(0)
        elif key == Qt.Key.Key_End:
            self.set_step(self.step_count)
        else:
            super().keyPressEvent(event)
            return
        event.accept()
