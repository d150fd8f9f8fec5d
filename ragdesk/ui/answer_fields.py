"""The answer options' field names and the token-count box, shared by the Controls dock and
the settings dialog's default answer options, so that both name a field the same way."""

from __future__ import annotations

from PySide6.QtWidgets import QSpinBox, QWidget

from ragdesk.core.units import plural

# Keyed as ragdesk.core.options names the options; "&" marks each field's shortcut letter,
# which is free in both forms.
ANSWER_LABELS: dict[str, str] = {
    "mode": "&Mode", "decoding": "&Decoding", "retriever": "&Retriever",
    "n_docs": "Passages (&K)", "num_beams": "&Beams", "max_new_tokens": "Answer &length"}


def unit_word(n: int, singular: str) -> str:
    """The noun that goes after ``n``: "token" after 1, "tokens" after any other count."""
    return plural(n, singular).split(" ", 1)[1]


class TokenCountSpin(QSpinBox):
    """A count of tokens whose unit agrees with the number: "1 token", "32 tokens"."""

    def __init__(self, lo: int, hi: int, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setRange(lo, hi)
        self.valueChanged.connect(self._name_unit)
        self._name_unit(self.value())

    def setValue(self, n: int) -> None:
        super().setValue(n)
        self._name_unit(self.value())  # also when the caller blocks the signals

    def _name_unit(self, n: int) -> None:
        self.setSuffix(f" {unit_word(n, 'token')}")
