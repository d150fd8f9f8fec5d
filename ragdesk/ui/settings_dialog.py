"""The settings dialog: data folder, device, threads, Hugging Face cache, theme and the
default answer options.

Apply and OK validate first (folder checks read the disk, so validation and saving run
through the injected :class:`Background`), show each problem beside its field, and save
only a valid whole. What takes effect at once (theme, threads, answer options) is the
caller's to apply from :attr:`SettingsDialog.applied` (threads with
:func:`ragdesk.core.preferences.apply_threads` on the engine's thread: OpenMP counts threads
per calling thread); the dialog says which changes wait for the next start. An environment
variable set by the user still wins over a setting; the dialog says so beside the field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractButton,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from ragdesk.core.export import MODE_NAMES
from ragdesk.core.preferences import (
    ANSWER_CHOICES,
    ANSWER_RANGES,
    MAX_THREADS,
    Preferences,
    environment_overrides,
    load_preferences,
    save_preferences,
    validate,
)
from ragdesk.core.retriever_names import RETRIEVER_TITLES
from ragdesk.core.settings import Settings
from ragdesk.ui.answer_fields import ANSWER_LABELS, TokenCountSpin
from ragdesk.ui.background import Background
from ragdesk.ui.controls import DECODING_NAMES
from ragdesk.ui.dialogs import fit_height, start_folder
from ragdesk.ui.theme import THEMES, theme_name

DEVICES = ("cpu", "auto", "cuda", "mps")
CHOICE_NAMES = {**MODE_NAMES, **DECODING_NAMES, **RETRIEVER_TITLES}
ANSWER_TIPS = {"mode": "For model packs with no reading mode of their own; a pack that has one "
                       "reads in it until another is picked for it in the controls"}


class SettingsDialog(QDialog):
    """Signals: ``applied(new: Preferences, restart: list[str])`` after a valid save
    (``restart``: what the dialog calls the changes that wait for the next start);
    ``checked(problems: dict)`` after each validation (empty when all is well)."""

    applied = Signal(object, list)
    checked = Signal(dict)

    def __init__(self, settings: Settings, data_dir: Path, background: Background, *,
                 overrides: Mapping[str, str] | None = None, themes: Sequence[str] = THEMES,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Settings")
        self.setObjectName("SettingsDialog")
        self.settings = settings
        self._background = background
        self.current = load_preferences(settings, data_dir)
        self._overrides = dict(environment_overrides() if overrides is None else overrides)
        self._busy = False
        self._close_after = False
        self.errors: dict[str, QLabel] = {}

        outer = QVBoxLayout(self)
        groups = (self._where_group(themes), self._answers_group())
        for group in groups:
            outer.addWidget(group)
        self._align_fields(groups)

        self.setMinimumWidth(560)  # room for a full folder path
        self.status = QLabel()
        self.status.setWordWrap(True)
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        self.status.hide()
        outer.addWidget(self.status)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                        | QDialogButtonBox.StandardButton.Apply
                                        | QDialogButtonBox.StandardButton.Cancel)
        self.buttons.clicked.connect(self._on_button)
        outer.addWidget(self.buttons)
        self.show_preferences(self.current)

    def event(self, e: QEvent) -> bool:
        handled = super().event(e)
        if e.type() == QEvent.Type.LayoutRequest:
            fit_height(self)  # "Saved." appearing below must not squeeze the notes above
        return handled

    # ---- building ----------------------------------------------------------------------

    def _where_group(self, themes: Sequence[str]) -> QGroupBox:
        where = QGroupBox("Files, models and appearance")
        form = QFormLayout(where)
        self.data_dir = QLineEdit()
        form.addRow(self._label("&Data folder", self.data_dir),
                    self._with_browse(self.data_dir, "Choose the data folder"))
        self._note_row(form, "data_dir", "ragdesk uses this folder from its next start; "
                       "what the current folder holds stays there.")
        self.device = QComboBox()
        self.device.setEditable(True)
        self.device.addItems(list(DEVICES))
        self.device.setToolTip("cpu, auto (CUDA, then MPS, then the CPU), cuda, cuda:N or mps")
        form.addRow(self._label("De&vice", self.device), self.device)
        self._note_row(form, "device")
        self.threads = QSpinBox()
        self.threads.setRange(0, MAX_THREADS)
        self.threads.setSpecialValueText("Automatic")
        self.threads.setToolTip("The most CPU threads an answer uses; fewer leave the "
                                "computer responsive while an answer is written. On Linux "
                                "an answer uses fewer when other programs keep cores busy")
        form.addRow(self._label("&Threads", self.threads), self.threads)
        self._note_row(form, "threads")
        self.hf_cache = QLineEdit()
        self.hf_cache.setPlaceholderText("Default: ~/.cache/huggingface/hub")
        form.addRow(self._label("Hugging Face &cache", self.hf_cache),
                    self._with_browse(self.hf_cache, "Choose the Hugging Face cache folder"))
        self._note_row(form, "hf_cache")
        self.theme = QComboBox()
        for name in themes:
            self.theme.addItem(theme_name(name), name)
        form.addRow(self._label("T&heme", self.theme), self.theme)
        return where

    def _answers_group(self) -> QGroupBox:
        answers = QGroupBox("Default answer options")
        aform = QFormLayout(answers)
        self.answer_combos: dict[str, QComboBox] = {}
        self.answer_spins: dict[str, QSpinBox] = {}
        for key, allowed in ANSWER_CHOICES.items():
            combo = QComboBox()
            for value in allowed:
                combo.addItem(CHOICE_NAMES.get(value, value), value)
            self.answer_combos[key] = combo
            combo.setToolTip(ANSWER_TIPS.get(key, ""))
            aform.addRow(self._label(ANSWER_LABELS[key], combo), combo)
            self._note_row(aform, f"answer.{key}")
        for key, (lo, hi) in ANSWER_RANGES.items():
            spin = TokenCountSpin(lo, hi) if key == "max_new_tokens" else QSpinBox()
            spin.setRange(lo, hi)
            self.answer_spins[key] = spin
            aform.addRow(self._label(ANSWER_LABELS[key], spin), spin)
            self._note_row(aform, f"answer.{key}")
        return answers

    @staticmethod
    def _align_fields(groups: Sequence[QGroupBox]) -> None:
        """One label column for both groups: each form sizes its own to its longest label
        ("Hugging Face cache", "Passages (K)"), so the fields of the two groups
        started at different places."""
        labels = []
        for group in groups:
            form = group.layout()
            if not isinstance(form, QFormLayout):
                continue
            for row in range(form.rowCount()):
                item = form.itemAt(row, QFormLayout.ItemRole.LabelRole)
                widget = item.widget() if item is not None else None
                if isinstance(widget, QLabel) and widget.text():
                    labels.append(widget)
        width = max((label.sizeHint().width() for label in labels), default=0)
        for label in labels:
            label.setMinimumWidth(width)

    @staticmethod
    def _label(text: str, buddy: QWidget) -> QLabel:
        label = QLabel(text)
        label.setBuddy(buddy)
        return label

    def _with_browse(self, edit: QLineEdit, title: str) -> QWidget:
        box = QWidget()
        lay = QHBoxLayout(box)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(edit, 1)
        button = QPushButton("Browse…")

        def browse() -> None:
            chosen = QFileDialog.getExistingDirectory(self, title, start_folder(edit.text()))
            if chosen:
                edit.setText(chosen)

        button.clicked.connect(browse)
        lay.addWidget(button)
        return box

    def _note_row(self, form: QFormLayout, field: str, hint: str | None = None) -> None:
        """An error label for ``field`` (hidden until validation finds a problem), and the
        field's note: the environment variable overriding it, else ``hint``."""
        override = self._overrides.get(field.split(".")[0])
        note_text = (f"{override} is set in the environment and wins over this setting."
                     if override else hint)
        if note_text:
            note = QLabel(note_text)
            note.setWordWrap(True)
            note.setTextFormat(Qt.TextFormat.PlainText)
            note.setObjectName(f"note_{field}")
            form.addRow("", note)
        error = QLabel()
        error.setWordWrap(True)
        error.setTextFormat(Qt.TextFormat.PlainText)
        error.setObjectName(f"error_{field}")
        error.setStyleSheet("color: #c62828")
        error.hide()
        form.addRow("", error)
        self.errors[field] = error

    # ---- values ------------------------------------------------------------------------

    def show_preferences(self, prefs: Preferences) -> None:
        self.data_dir.setText(prefs.data_dir)
        self.data_dir.setCursorPosition(0)
        self.device.setCurrentText(prefs.device)
        self.threads.setValue(prefs.threads)
        self.hf_cache.setText(prefs.hf_cache)
        i = self.theme.findData(prefs.theme)
        self.theme.setCurrentIndex(max(i, 0))
        for key, combo in self.answer_combos.items():
            combo.setCurrentIndex(max(combo.findData(prefs.answer.get(key)), 0))
        for key, spin in self.answer_spins.items():
            value = prefs.answer.get(key)
            if isinstance(value, int):
                spin.setValue(value)

    def preferences(self) -> Preferences:
        """What the fields say now."""
        answer = dict(self.current.answer)
        answer.update({k: c.currentData() for k, c in self.answer_combos.items()})
        answer.update({k: s.value() for k, s in self.answer_spins.items()})
        return replace(self.current, data_dir=self.data_dir.text(),
                       device=self.device.currentText(), threads=self.threads.value(),
                       hf_cache=self.hf_cache.text(), theme=str(self.theme.currentData()),
                       answer=answer)

    # ---- apply -------------------------------------------------------------------------

    def _on_button(self, button: QAbstractButton) -> None:
        role = self.buttons.buttonRole(button)
        if role == QDialogButtonBox.ButtonRole.RejectRole:
            self.reject()
        elif role == QDialogButtonBox.ButtonRole.AcceptRole:
            self.apply(close=True)
        elif role == QDialogButtonBox.ButtonRole.ApplyRole:
            self.apply(close=False)

    def apply(self, *, close: bool = False) -> None:
        """Validate and, when valid, save (both in the background); ``close``: then accept."""
        if self._busy:
            return
        self._busy = True
        self._close_after = close
        self.buttons.setEnabled(False)
        new = self.preferences()
        old = self.current

        def work() -> tuple[dict[str, str], list[str] | None]:
            problems = validate(new)
            if problems:
                return problems, None
            return {}, save_preferences(self.settings, old, new)

        self._background(work, lambda result: self._saved(new, *result),
                         on_error=self._failed, write=True)

    def _saved(self, new: Preferences, problems: dict[str, str],
               restart: list[str] | None) -> None:
        self._busy = False
        self.buttons.setEnabled(True)
        for field, label in self.errors.items():
            label.setText(problems.get(field, ""))
            label.setVisible(field in problems)
        self.checked.emit(problems)
        if restart is None:
            self.status.setText("Nothing was saved: correct the settings marked in red.")
            self.status.show()
            return
        self.current = new
        if restart:
            self.status.setText("Saved. Restart ragdesk to use the new "
                                + ", ".join(restart) + ".")
        else:
            self.status.setText("Saved.")
        self.status.show()
        self.applied.emit(new, restart)
        if self._close_after:
            self.accept()

    def _failed(self, message: str) -> None:
        self._busy = False
        self.buttons.setEnabled(True)
        self.status.setText(f"The settings could not be saved: {message}")
        self.status.show()
