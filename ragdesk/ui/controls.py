"""The controls panel: model pack, retriever, RAG mode, decoding, answer style, grounding, K,
beams, answer length."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QLabel,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from ragdesk.core.options import STYLES
from ragdesk.ui.backend import AskParams, PackInfo

MODES = (("token", "RAG-Token"), ("sequence", "RAG-Sequence"))
DECODINGS = (("thorough", "Thorough"), ("fast", "Fast"))
RETRIEVERS = (("dense", "Dense"), ("sparse", "BM25"), ("hybrid", "Hybrid"))
STYLE_NAMES = {"short": "Short answer", "sentence": "Full sentence"}
# Qt item data cannot hold None reliably, so the three grounding choices travel as strings.
GROUNDING = (("auto", "Automatic"), ("on", "Always"), ("off", "Never"))
GROUNDING_VALUES: dict[str, bool | None] = {"auto": None, "on": True, "off": False}
GROUNDING_KEYS = {v: k for k, v in GROUNDING_VALUES.items()}


class ControlsPanel(QWidget):
    paramsChanged = Signal(object)  # AskParams
    packChanged = Signal(str)

    def __init__(self, params: AskParams, pack: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ControlsPanel")
        lay = QVBoxLayout(self)
        lay.setContentsMargins(12, 10, 12, 10)
        lay.setSpacing(10)
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.setVerticalSpacing(8)
        form.setLabelAlignment(Qt.AlignmentFlag.AlignLeft)

        self.pack = QComboBox()
        self.pack.setToolTip("The question encoder and generator that answer")
        self._pack_names: list[str] = [pack]
        self.pack.addItem(pack, pack)
        self.pack.currentIndexChanged.connect(self._on_pack)
        form.addRow(self._label("Model &pack", self.pack), self.pack)

        self.retriever = QComboBox()
        for key, name in RETRIEVERS:
            self.retriever.addItem(name, key)
        self.retriever.setToolTip(
            "<b>Dense</b>: the question encoder's inner product with the passage vectors "
            "(DPR).<br/><b>BM25</b>: word matches only.<br/><b>Hybrid</b>: dense and BM25 "
            "candidates re-ranked together; the best top-20 accuracy on the starter snapshot. "
            "BM25 and hybrid index a snapshot's words the first time they are used.")
        form.addRow(self._label("&Retriever", self.retriever), self.retriever)

        self.mode = QComboBox()
        for key, name in MODES:
            self.mode.addItem(name, key)
        self.mode.setToolTip(
            "<b>RAG-Token</b> may draw each token from a different passage.<br/>"
            "<b>RAG-Sequence</b> writes the whole answer from one passage at a time and "
            "mixes the complete answers.")
        form.addRow(self._label("&Mode", self.mode), self.mode)

        self.decoding = QComboBox()
        for key, name in DECODINGS:
            self.decoding.addItem(name, key)
        self.decoding.setToolTip(
            "RAG-Sequence only. <b>Thorough</b> scores every candidate answer under every "
            "passage; <b>Fast</b> skips those extra passes and streams as it goes.")
        form.addRow(self._label("&Decoding", self.decoding), self.decoding)

        self.n_docs = QSpinBox()
        self.n_docs.setRange(1, 50)
        self.n_docs.setToolTip("How many passages to retrieve and marginalize over (K)")
        form.addRow(self._label("Passages &K", self.n_docs), self.n_docs)

        self.beams = QSpinBox()
        self.beams.setRange(1, 16)
        self.beams.setToolTip("Beam width; 1 is greedy decoding")
        form.addRow(self._label("&Beams", self.beams), self.beams)

        self.answer_style = QComboBox()
        for key in STYLES:
            self.answer_style.addItem(STYLE_NAMES.get(key, key), key)
        self.answer_style.setToolTip(
            "<b>Short answer</b>: the answer alone (a name, a date, a number), what factoid "
            "questions want.<br/><b>Full sentence</b>: the answer in a sentence. Only "
            "generators that take instructions (the starter pack's) read this.")
        form.addRow(self._label("Answer &style", self.answer_style), self.answer_style)

        self.grounded = QComboBox()
        for key, name in GROUNDING:
            self.grounded.addItem(name, key)
        self.grounded.setToolTip(
            "Grounded decoding: the answer may only be a span of the retrieved passages, so "
            "every word has a literal source.<br/><b>Automatic</b>: on for generators that "
            "write freely (the starter pack's), where it gives more right answers; off for "
            "the paper's BART checkpoints.")
        form.addRow(self._label("&Quote passages", self.grounded), self.grounded)

        self.max_len = QSpinBox()
        self.max_len.setRange(1, 512)
        self.max_len.setSuffix(" tokens")
        # "1 token", not "1 tokens".
        self.max_len.valueChanged.connect(
            lambda v: self.max_len.setSuffix(" token" if v == 1 else " tokens"))
        self.max_len.setToolTip("The longest answer to generate")
        form.addRow(self._label("Max &length", self.max_len), self.max_len)
        lay.addLayout(form)

        self.note = QLabel()
        self.note.setObjectName("ControlsNote")
        self.note.setWordWrap(True)
        lay.addWidget(self.note)
        lay.addStretch(1)

        self._min_new_tokens = params.min_new_tokens
        self.set_params(params)
        for w in (self.retriever, self.mode, self.decoding, self.answer_style, self.grounded):
            w.currentIndexChanged.connect(self._changed)
        for s in (self.n_docs, self.beams, self.max_len):
            s.valueChanged.connect(self._changed)
        self._select_pack(pack)

    @staticmethod
    def _label(text: str, buddy: QWidget) -> QLabel:
        lab = QLabel(text)
        lab.setBuddy(buddy)
        return lab

    def set_params(self, params: AskParams) -> None:
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
        for w in self._inputs():
            w.blockSignals(False)
        self._update_enabled()

    def _inputs(self) -> tuple[QWidget, ...]:
        return (self.retriever, self.mode, self.decoding, self.answer_style, self.grounded,
                self.n_docs, self.beams, self.max_len)

    def params(self) -> AskParams:
        return AskParams(mode=str(self.mode.currentData()),
                         decoding=str(self.decoding.currentData()),
                         n_docs=self.n_docs.value(), num_beams=self.beams.value(),
                         max_new_tokens=self.max_len.value(),
                         min_new_tokens=self._min_new_tokens,
                         retriever=str(self.retriever.currentData()),
                         style=str(self.answer_style.currentData()),
                         grounded=GROUNDING_VALUES[str(self.grounded.currentData())])

    def set_packs(self, packs: Sequence[PackInfo], current: str) -> None:
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

    def _select_pack(self, name: str) -> None:
        self.pack.blockSignals(True)
        self.pack.setCurrentIndex(max(0, self.pack.findData(name)))
        self.pack.blockSignals(False)

    def _on_pack(self, index: int) -> None:
        name = self.pack.itemData(index)
        if name:
            self.packChanged.emit(str(name))

    def _update_enabled(self) -> None:
        seq = self.mode.currentData() == "sequence"
        self.decoding.setEnabled(seq)
        if seq and self.decoding.currentData() == "thorough":
            self.note.setText("Thorough RAG-Sequence re-scores the candidates after decoding, "
                              "so the answer appears when it is complete.")
        elif seq:
            self.note.setText("Fast RAG-Sequence streams each token as it is decided.")
        else:
            self.note.setText("RAG-Token marginalizes over the passages at every token and "
                              "streams as it goes.")

    def _changed(self, *_: object) -> None:
        self._update_enabled()
        self.paramsChanged.emit(self.params())
