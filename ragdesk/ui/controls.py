"""The controls panel: model pack, retriever, RAG mode, decoding, answer style, grounding, K,
beams, answer length, and whether to say "not found" below the confidence threshold. The
choices and defaults are the core's (``ragdesk.core.options``); only their display names live
here."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import cast

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from ragdesk.core.export import MODE_NAMES
from ragdesk.core.options import (
    DECODINGS,
    MODES,
    PACK_MODES_KEY,
    RETRIEVERS,
    STYLES,
    AnswerOptions,
    Decoding,
    Mode,
    RetrieverName,
    Style,
    pack_mode_choices,
    with_pack_mode,
)
from ragdesk.core.retriever_names import retriever_in_sentence, retriever_title
from ragdesk.ui.answer_fields import ANSWER_LABELS, TokenCountSpin
from ragdesk.ui.infos import PackInfo

DECODING_NAMES: dict[str, str] = {"thorough": "Thorough", "fast": "Fast"}
STYLE_NAMES: dict[str, str] = {"short": "Short answer", "sentence": "Full sentence"}
# Qt item data cannot hold None reliably, so the three grounding choices travel as strings.
GROUNDING = (("auto", "Automatic"), ("on", "Always"), ("off", "Never"))
GROUNDING_VALUES: dict[str, bool | None] = {"auto": None, "on": True, "off": False}
GROUNDING_KEYS = {v: k for k, v in GROUNDING_VALUES.items()}

TIPS = {
    "pack": "The question encoder and generator that answer",
    "retriever": (
        f"<b>{retriever_title('dense')}</b>: the question encoder's inner product with the "
        f"passage vectors (DPR).<br/><b>{retriever_title('sparse')}</b>: word matches only."
        f"<br/><b>{retriever_title('hybrid')}</b>: dense and {retriever_in_sentence('sparse')} "
        "candidates re-ranked together; the best top-20 accuracy on the starter snapshot. "
        f"{retriever_title('sparse')} and {retriever_in_sentence('hybrid')} index a "
        "snapshot's words the first time they are used."),
    "mode": (
        "<b>RAG-Token</b> may draw each token from a different passage.<br/>"
        "<b>RAG-Sequence</b> writes the whole answer from one passage at a time and "
        "mixes the complete answers."),
    "decoding": (
        "RAG-Sequence only. <b>Thorough</b> scores every candidate answer under every "
        "passage; <b>Fast</b> skips those extra passes and streams as it goes."),
    "n_docs": "How many passages to retrieve and marginalize over (K)",
    "beams": "Beam width; 1 is greedy decoding",
    "style": (
        "<b>Short answer</b>: the answer alone (a name, a date, a number), what factoid "
        "questions want.<br/><b>Full sentence</b>: the answer in a sentence. Only "
        "generators that take instructions (the starter pack's) read this."),
    "grounded": (
        "Grounded decoding: the answer may only be a span of the retrieved passages, so "
        "every word has a literal source.<br/><b>Automatic</b>: on for generators that "
        "write freely (the starter pack's), where it gives more right answers; off for "
        "the paper's BART checkpoints."),
    "max_len": "The longest answer to generate",
    "abstain": (
        "When the answer's confidence is below the level measured for it, the card says "
        "“Not found in this snapshot” and shows the closest passages; the best guess stays "
        "one click away. Off: the guess is always given as the answer."),
}
ABSTAIN_TEXT = "Say &when the snapshot does not hold the answer"


class _WordsLabel(QLabel):
    clicked = Signal()

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            self.clicked.emit()
        super().mouseReleaseEvent(event)


class WrappedCheck(QWidget):
    """A check box whose words wrap in a narrow panel (a QCheckBox's text never wraps); a
    click on the words toggles it, as on a check box's own text."""

    def __init__(self, text: str, tip: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(6)
        self.box = QCheckBox()
        self.box.setToolTip(tip)
        self.label = _WordsLabel(text)
        self.label.setWordWrap(True)
        self.label.setBuddy(self.box)
        self.label.setToolTip(tip)
        self.label.clicked.connect(self.box.toggle)
        lay.addWidget(self.box, 0, Qt.AlignmentFlag.AlignTop)
        lay.addWidget(self.label, 1)


def _combo(choices: Sequence[tuple[str, str]], tip: str) -> QComboBox:
    box = QComboBox()
    for key, name in choices:
        box.addItem(name, key)
    box.setToolTip(tip)
    return box


def _spin(lo: int, hi: int, tip: str) -> QSpinBox:
    box = QSpinBox()
    box.setRange(lo, hi)
    box.setToolTip(tip)
    return box


class ControlsPanel(QWidget):
    paramsChanged = Signal(object)  # AnswerOptions
    packChanged = Signal(str)
    modeChosen = Signal(str, str)  # (pack, mode): the user picked a reading mode for a pack

    def __init__(self, params: AnswerOptions, pack: str, parent: QWidget | None = None, *,
                 pack_modes: Mapping[str, str] | None = None) -> None:
        """``pack_modes``: the reading mode the user picked per pack (the settings' keep
        them). A pack with none reads in its own, once the packs are listed, as for `ragdesk
        ask`; one with no mode of its own in ``params.mode``."""
        super().__init__(parent)
        self._choices: dict[str, str] = dict(pack_modes or {})
        self._fallback = params.mode
        self.setObjectName("ControlsPanel")
        # What the panel does not show (precision, ...) is kept as it came.
        self._base = params
        self._min_new_tokens = params.min_new_tokens
        self._pack_names: list[str] = [pack]
        self._modes: dict[str, str | None] = {}  # each pack's own reading mode
        lay = QVBoxLayout(self)
        lay.setContentsMargins(12, 10, 12, 10)
        lay.setSpacing(10)
        lay.addLayout(self._build_form(pack))
        self.abstain_check = WrappedCheck(ABSTAIN_TEXT, TIPS["abstain"])
        self.abstain = self.abstain_check.box
        lay.addWidget(self.abstain_check)
        self.note = QLabel()
        self.note.setObjectName("ControlsNote")
        self.note.setWordWrap(True)
        lay.addWidget(self.note)
        lay.addStretch(1)
        self.set_params(params)
        for w in (self.retriever, self.mode, self.decoding, self.answer_style, self.grounded):
            w.currentIndexChanged.connect(self._changed)
        self.mode.currentIndexChanged.connect(self._mode_picked)
        for s in (self.n_docs, self.beams, self.max_len):
            s.valueChanged.connect(self._changed)
        self.abstain.toggled.connect(self._changed)
        self._select_pack(pack)

    @classmethod
    def from_settings(cls, values: Mapping[str, object], pack: str) -> ControlsPanel:
        """The panel showing the answer options and per-pack mode picks the settings hold."""
        return cls(AnswerOptions.from_settings(values), pack,
                   pack_modes=pack_mode_choices(values.get(PACK_MODES_KEY)))

    def _build_form(self, pack: str) -> QFormLayout:
        self.pack = _combo([(pack, pack)], TIPS["pack"])
        self.pack.currentIndexChanged.connect(self._on_pack)
        self.retriever = _combo([(r, retriever_title(r)) for r in RETRIEVERS],
                                TIPS["retriever"])
        self.mode = _combo([(m, MODE_NAMES[m]) for m in MODES], TIPS["mode"])
        self.decoding = _combo([(d, DECODING_NAMES[d]) for d in DECODINGS], TIPS["decoding"])
        self.n_docs = _spin(1, 50, TIPS["n_docs"])
        self.beams = _spin(1, 16, TIPS["beams"])
        self.answer_style = _combo([(k, STYLE_NAMES.get(k, k)) for k in STYLES], TIPS["style"])
        self.grounded = _combo(GROUNDING, TIPS["grounded"])
        self.max_len = TokenCountSpin(1, 512)
        self.max_len.setToolTip(TIPS["max_len"])
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.setVerticalSpacing(8)
        form.setLabelAlignment(Qt.AlignmentFlag.AlignLeft)
        names = ANSWER_LABELS
        for text, w in (("Model &pack", self.pack), (names["retriever"], self.retriever),
                        (names["mode"], self.mode), (names["decoding"], self.decoding),
                        (names["n_docs"], self.n_docs), (names["num_beams"], self.beams),
                        ("Answer &style", self.answer_style),
                        ("&Quote passages", self.grounded),
                        (names["max_new_tokens"], self.max_len)):
            form.addRow(self._label(text, w), w)
        return form

    @staticmethod
    def _label(text: str, buddy: QWidget) -> QLabel:
        lab = QLabel(text)
        lab.setBuddy(buddy)
        return lab

    def set_params(self, params: AnswerOptions) -> None:
        for w in self._inputs():
            w.blockSignals(True)
        self.retriever.setCurrentIndex(max(0, self.retriever.findData(params.retriever)))
        self.mode.setCurrentIndex(max(0, self.mode.findData(params.mode)))
        self.decoding.setCurrentIndex(max(0, self.decoding.findData(params.decoding)))
        self.answer_style.setCurrentIndex(max(0, self.answer_style.findData(params.style)))
        self.grounded.setCurrentIndex(max(0, self.grounded.findData(
            GROUNDING_KEYS[params.grounded])))
        self.n_docs.setValue(params.n_docs)
        self.beams.setValue(params.num_beams)
        self.max_len.setValue(params.max_new_tokens)
        self.abstain.setChecked(params.abstain)
        for w in self._inputs():
            w.blockSignals(False)
        self._fallback = params.mode
        self._follow_pack_mode(str(self.pack.currentData()))
        self._update_enabled()

    def _inputs(self) -> tuple[QWidget, ...]:
        return (self.retriever, self.mode, self.decoding, self.answer_style, self.grounded,
                self.n_docs, self.beams, self.max_len, self.abstain)

    def params(self) -> AnswerOptions:
        return dataclasses.replace(
            self._base, mode=cast(Mode, self.mode.currentData()),
            decoding=cast(Decoding, self.decoding.currentData()), n_docs=self.n_docs.value(),
            num_beams=self.beams.value(), max_new_tokens=self.max_len.value(),
            min_new_tokens=self._min_new_tokens,
            retriever=cast(RetrieverName, self.retriever.currentData()),
            style=cast(Style, self.answer_style.currentData()),
            grounded=GROUNDING_VALUES[str(self.grounded.currentData())],
            abstain=self.abstain.isChecked())

    def set_packs(self, packs: Sequence[PackInfo], current: str) -> None:
        self._modes = {p.name: p.default_mode for p in packs}
        names = [p.name for p in packs if p.installed]
        if current not in names:
            names.insert(0, current)
        self.pack.blockSignals(True)
        self.pack.clear()
        for name in names:
            info = next((p for p in packs if p.name == name), None)
            self.pack.addItem(name, name)
            if info is not None and info.description:
                self.pack.setItemData(self.pack.count() - 1, info.description,
                                      Qt.ItemDataRole.ToolTipRole)
        self._pack_names = names
        self.pack.blockSignals(False)
        self._select_pack(current)
        self._follow_pack_mode(current)

    def show_pack(self, name: str) -> None:
        """Show ``name`` as the pack that answers: chosen elsewhere, or the active snapshot's
        own where the one chosen cannot query it (the combo goes back)."""
        if self.pack.currentData() == name:
            return
        if self.pack.findData(name) < 0:  # not installed yet: listed, as set_packs lists it
            self.pack.blockSignals(True)
            self.pack.insertItem(0, name, name)
            self.pack.blockSignals(False)
            self._pack_names.insert(0, name)
        self._select_pack(name)
        self._follow_pack_mode(name)

    def _follow_pack_mode(self, name: str) -> None:
        """Show the mode ``name`` reads in: the one the user picked for it, else its own (the
        reader pack: read together, measured best for it), else the settings' mode. Shown,
        not picked: nothing is remembered for the pack."""
        fallback = dataclasses.replace(self.params(), mode=self._fallback)
        mode = with_pack_mode(fallback, self._modes.get(name), self._choices.get(name)).mode
        if mode == self.mode.currentData():
            return
        self.mode.blockSignals(True)
        self.mode.setCurrentIndex(self.mode.findData(mode))
        self.mode.blockSignals(False)
        self._update_enabled()

    def _mode_picked(self, index: int) -> None:
        pack, mode = self.pack.currentData(), self.mode.itemData(index)
        if pack and mode:
            self._choices[str(pack)] = str(mode)
            self.modeChosen.emit(str(pack), str(mode))

    def _select_pack(self, name: str) -> None:
        self.pack.blockSignals(True)
        self.pack.setCurrentIndex(max(0, self.pack.findData(name)))
        self.pack.blockSignals(False)

    def _on_pack(self, index: int) -> None:
        name = self.pack.itemData(index)
        if name:
            self._follow_pack_mode(str(name))
            self.packChanged.emit(str(name))

    def _update_enabled(self) -> None:
        seq = self.mode.currentData() == "sequence"
        self.decoding.setEnabled(seq)
        if seq and self.decoding.currentData() == "thorough":
            self.note.setText("Thorough RAG-Sequence re-scores the candidates after decoding, "
                              "so the answer appears when it is complete.")
        elif seq:
            self.note.setText("Fast RAG-Sequence streams each token as it is decided.")
        elif self.mode.currentData() == "together":
            self.note.setText("Read together puts all K passages in one prompt, as chat apps "
                              "do; each word's source is the passage its span is quoted from.")
        else:
            self.note.setText("RAG-Token marginalizes over the passages at every token and "
                              "streams as it goes.")

    def _changed(self, *_: object) -> None:
        self._update_enabled()
        self.paramsChanged.emit(self.params())
