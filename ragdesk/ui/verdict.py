"""How far to trust an answer, on its card: the confidence in words, and for an answer the
snapshot does not seem to hold, the best guess one click away.

The words are the core's (``ragdesk.core.confidence``: the CLI and the API say the same); the
card adds a coloured dot so the level reads at a glance, and never hides the guess for good.
"""

from __future__ import annotations

import html

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QSizePolicy, QWidget

from ragdesk.core.types import Answer

# The dot before the words: green, amber, red; grey when no model judged the answer.
LEVEL_COLOURS = {"high": "#2da44e", "medium": "#bf8700", "low": "#cf222e", "unknown": "#8c959f"}
SHOW_GUESS = "Show the guess"
HIDE_GUESS = "Hide the guess"


def confidence_level(p: float | None) -> str:
    from ragdesk.core.confidence.wording import confidence_level as level

    return level(p)


def confidence_text(p: float | None, abstained: bool = False) -> str:
    # Imported here: the package brings numpy, which the window need not load to open.
    from ragdesk.core.confidence import confidence_label

    return confidence_label(p, abstained)


def origin_text(answer: Answer) -> str | None:
    from ragdesk.core.confidence import origin_note

    return origin_note(answer)


def not_found_text(snapshot: str | None) -> str:
    from ragdesk.core.confidence import not_found_message

    return not_found_message(snapshot)


class VerdictRow(QWidget):
    """The confidence of a finished answer and, when it abstained, "Show the guess"."""

    guessToggled = Signal(bool)  # True: the guess is shown

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("VerdictRow")
        self.level = "unknown"
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(10)
        self.confidence = QLabel()
        self.confidence.setObjectName("CardConfidence")
        self.confidence.setWordWrap(True)
        self.confidence.setTextFormat(Qt.TextFormat.RichText)
        self.confidence.setSizePolicy(QSizePolicy.Policy.Expanding,
                                      QSizePolicy.Policy.Preferred)
        lay.addWidget(self.confidence, 1)
        self.guess_button = QPushButton(SHOW_GUESS)
        self.guess_button.setObjectName("GuessButton")
        self.guess_button.setCheckable(True)
        self.guess_button.setToolTip("The answer the model would have given: the passages do "
                                     "not seem to hold it, so it is likely wrong")
        self.guess_button.toggled.connect(self._toggled)
        lay.addWidget(self.guess_button, 0, Qt.AlignmentFlag.AlignVCenter)
        self.guess_button.hide()
        self.hide()

    def set_answer(self, answer: Answer) -> None:
        self.level = confidence_level(answer.confidence)
        dot = LEVEL_COLOURS[self.level]
        note = origin_text(answer)
        origin = f"<br/>{html.escape(note)}" if note else ""
        words = confidence_text(answer.confidence, answer.abstained)
        self.confidence.setText(f"<span style='color:{dot}'>●</span>&nbsp;"
                                f"{html.escape(words)}{origin}")
        self.confidence.setToolTip(
            "How likely this answer is right, from a model fitted on held-out questions "
            "(features of the answer and its passages)." if answer.confidence is not None
            else "No confidence model was fitted for this snapshot, generator and reading "
                 "mode (ragdesk index calibrate --confidence fits one for the mode answers "
                 "are read in).")
        self.guess_button.blockSignals(True)
        self.guess_button.setChecked(False)
        self.guess_button.setText(SHOW_GUESS)
        self.guess_button.blockSignals(False)
        self.guess_button.setVisible(answer.abstained and bool(answer.tokens))
        self.setVisible(not answer.cancelled)

    @property
    def guess_shown(self) -> bool:
        return self.guess_button.isChecked()

    def _toggled(self, on: bool) -> None:
        self.guess_button.setText(HIDE_GUESS if on else SHOW_GUESS)
        self.guessToggled.emit(on)
