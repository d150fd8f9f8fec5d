"""Index ▸ Manage indexes ▸ Import…: the dialog that asks what to import (a file and its
format, or a folder of documents), the snapshot's name and the passage encoder, and the
:class:`ImportSpec` it hands to the index manager."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QFocusEvent, QMouseEvent
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from ragdesk.ui.dialogs import start_folder
from ragdesk.ui.infos import IMPORT_FORMATS, SnapshotInfo
from ragdesk.ui.resources import icon


def short_model(ref: str | None) -> str:
    """A model reference as people say it: the hub id, or a folder's last part."""
    if not ref:
        return "–"
    p = Path(ref)
    if not (p.is_absolute() or ref.startswith(".")):
        return ref
    # A packaged model often sits in a folder called "model": name its package too.
    return f"{p.parent.name}/{p.name}" if p.name.lower() in ("model", "models") else p.name


def detect_format(path: str) -> str | None:
    low = path.lower()
    if low.endswith((".jsonl", ".json", ".jsonl.gz")):
        return "jsonl"
    if low.endswith((".tsv", ".tsv.gz")):
        return "dpr-tsv"
    if low.endswith((".xml", ".xml.bz2")):
        return "wiki-xml"
    if low.endswith(".parquet"):
        return "parquet"
    return None


def suggest_name(path: str, taken: Sequence[str]) -> str:
    stem = Path(path.rstrip("/\\")).name
    for ext in (".bz2", ".gz", ".jsonl", ".json", ".tsv", ".xml", ".parquet"):
        if stem.lower().endswith(ext):
            stem = stem[: -len(ext)]
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-.") or "snapshot"
    name, n = base, 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    return name


class SuggestionEdit(QLineEdit):
    """A line edit holding a suggestion (:meth:`suggest`) until the user types: focused, by a
    click too, it selects the suggestion whole, so that typing replaces it instead of being
    added to it."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.suggested = False
        self._select_on_click = False

    def suggest(self, text: str) -> None:
        self.setText(text)
        self.suggested = True

    def focusInEvent(self, event: QFocusEvent) -> None:
        super().focusInEvent(event)
        if self.suggested and not self.isReadOnly():
            self.selectAll()
            # the click that gave the focus would place the cursor and drop the selection
            self._select_on_click = event.reason() == Qt.FocusReason.MouseFocusReason

    def mousePressEvent(self, event: QMouseEvent) -> None:
        super().mousePressEvent(event)
        if self._select_on_click:
            self._select_on_click = False
            self.selectAll()


@dataclass(frozen=True)
class ImportSpec:
    source: str | None
    name: str
    encoder: str
    fmt: str
    limit: int | None


def _source_hint(fmt: str | None) -> str:
    if fmt == "docs":
        return "A folder of PDF, DOCX, Markdown, HTML and text files"
    return "A .jsonl, .tsv, .parquet, .xml or .xml.bz2 file"


def _name_hint(fmt: str | None) -> str:
    # A folder of one's own documents is not a Wikipedia dump of some year.
    return "e.g. my-documents" if fmt == "docs" else "e.g. wiki-2018"


class ImportDialog(QDialog):
    """Source file and format, snapshot name, and the passage encoder to build it with."""

    def __init__(self, parent: QWidget | None, *, taken: Sequence[str],
                 encoders: Sequence[str], default_encoder: str | None,
                 reimport: SnapshotInfo | None = None,
                 names: Mapping[str, str] | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ImportDialog")
        self.setWindowTitle("Import a snapshot")
        self.taken = list(taken)
        self.reimport = reimport
        self._name_edited = False
        lay = QVBoxLayout(self)
        intro = QLabel("Passages are split into 100-word chunks, encoded in batches and "
                       "indexed. You can keep chatting while this runs.")
        intro.setWordWrap(True)
        lay.addWidget(intro)
        form = QFormLayout()

        self.format = QComboBox()
        for key, desc in IMPORT_FORMATS.items():
            self.format.addItem(desc, key)
        self.format.currentIndexChanged.connect(self._on_format)
        form.addRow("&Format", self.format)

        row = QHBoxLayout()
        self.source = QLineEdit()
        self.source.setPlaceholderText(_source_hint(None))
        self.source.textChanged.connect(self._on_source)
        self.browse = QPushButton(icon("folder"), "&Browse…")
        self.browse.clicked.connect(self._browse)
        row.addWidget(self.source, 1)
        row.addWidget(self.browse)
        self.source_label = QLabel("&Source")
        self.source_label.setBuddy(self.source)
        form.addRow(self.source_label, row)

        self.name = SuggestionEdit()
        self.name.setPlaceholderText(_name_hint(None))
        self.name.textEdited.connect(lambda _t: setattr(self, "_name_edited", True))
        self.name.textEdited.connect(lambda _t: setattr(self.name, "suggested", False))
        form.addRow("&Name", self.name)

        self._names = dict(names or {})
        self._encoder_row(form, encoders, default_encoder)
        self.limit = QSpinBox()
        self.limit.setRange(0, 100_000_000)
        self.limit.setSpecialValueText("all")
        self.limit.setToolTip("Import only the first N articles (0: all)")
        form.addRow("&Limit", self.limit)
        lay.addLayout(form)

        self._buttons(lay)
        if reimport is not None:
            self._set_reimport(reimport)
        self.resize(620, self.sizeHint().height())

    def _set_reimport(self, s: SnapshotInfo) -> None:
        """The same folder into the same snapshot: only new and changed files are encoded,
        deleted ones leave it."""
        self.setWindowTitle(f"Re-import {s.name}")
        self.format.setCurrentIndex(self.format.findData("docs"))
        self.format.setEnabled(False)
        self.source.setText(s.source or "")
        self.name.setText(s.name)
        self.name.setReadOnly(True)
        self._name_edited = True
        self.taken = [t for t in self.taken if t != s.name]
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Re-&import")

    def _buttons(self, lay: QVBoxLayout) -> None:
        self.error = QLabel()
        self.error.setObjectName("FormError")
        self.error.setWordWrap(True)
        lay.addWidget(self.error)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                        | QDialogButtonBox.StandardButton.Cancel)
        ok = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        ok.setText("&Import")
        self.buttons.accepted.connect(self._accept)
        self.buttons.rejected.connect(self.reject)
        lay.addWidget(self.buttons)

    def _encoder_row(self, form: QFormLayout, encoders: Sequence[str],
                     default_encoder: str | None) -> None:
        erow = QHBoxLayout()
        self.encoder = QComboBox()
        self.encoder.setEditable(True)
        self.encoder.setMinimumContentsLength(28)
        self.offer_encoders(encoders, default_encoder)
        self.encoder_browse = QPushButton(icon("folder"), "Fol&der…")
        self.encoder_browse.clicked.connect(self._browse_encoder)
        erow.addWidget(self.encoder, 1)
        erow.addWidget(self.encoder_browse)
        enc_label = QLabel("Passage &encoder")
        enc_label.setBuddy(self.encoder)
        form.addRow(enc_label, erow)

    def offer_encoders(self, encoders: Sequence[str], default_encoder: str | None,
                       names: Mapping[str, str] | None = None) -> None:
        """List ``encoders`` (those not listed yet) and choose ``default_encoder`` when no
        encoder is chosen or typed. Called again when the packs are listed: the dialog may
        open before they are (the window is still reading the catalog), and what the user
        chose or typed in the meantime stays."""
        self._names.update(names or {})
        typed, index = self.encoder.currentText(), self.encoder.currentIndex()
        for e in encoders:
            if self.encoder.findData(e) < 0:
                self.encoder.addItem(self._name(e), e)
                self.encoder.setItemData(self.encoder.count() - 1, e,
                                         Qt.ItemDataRole.ToolTipRole)
        if typed.strip():
            # The first item added to an empty list becomes current and replaces the text.
            if index < 0 and self.encoder.currentText() != typed:
                self.encoder.setCurrentIndex(-1)
                self.encoder.setEditText(typed)
            return
        if default_encoder:
            i = self.encoder.findData(default_encoder)
            if i < 0:
                self.encoder.insertItem(0, self._name(default_encoder), default_encoder)
                i = 0
            self.encoder.setCurrentIndex(i)

    def _name(self, ref: str) -> str:
        """An encoder as everything else names it: the hub id its snapshots record."""
        return self._names.get(ref) or short_model(ref)

    def encoder_ref(self) -> str:
        i = self.encoder.currentIndex()
        text = self.encoder.currentText().strip()
        if i >= 0 and self.encoder.itemText(i) == text and self.encoder.itemData(i):
            return str(self.encoder.itemData(i))
        return text

    def spec(self) -> ImportSpec:
        fmt = str(self.format.currentData())
        return ImportSpec(
            source=None if fmt == "vital-articles" else self.source.text().strip(),
            name=self.name.text().strip(), encoder=self.encoder_ref(), fmt=fmt,
            limit=None if fmt == "docs" else self.limit.value() or None)

    def validate(self) -> str | None:
        s = self.spec()
        if s.fmt == "docs":
            if not s.source:
                return "Choose the folder to import."
            if not Path(s.source).exists():
                return f"{s.source} does not exist."
            if not Path(s.source).is_dir():
                return f"{s.source} is not a folder."
        elif s.fmt != "vital-articles":
            if not s.source:
                return "Choose the file to import."
            if not Path(s.source).exists():
                return f"{s.source} does not exist."
            if not Path(s.source).is_file():
                return f"{s.source} is not a file."
        if not s.name:
            return "Give the snapshot a name."
        if s.name in self.taken:
            return f"A snapshot named {s.name!r} already exists; pick another name."
        if not s.encoder:
            return "Choose the passage encoder (a model folder or a Hugging Face id)."
        return None

    def _accept(self) -> None:
        problem = self.validate()
        if problem:
            self.error.setText(problem)
            return
        self.accept()

    def _on_format(self, _i: int) -> None:
        fmt = self.format.currentData()
        file_based = fmt != "vital-articles"
        for w in (self.source, self.browse, self.source_label):
            w.setEnabled(file_based)
        # A folder is imported whole; its files are re-read on every re-import.
        self.limit.setEnabled(fmt != "docs")
        self.source.setPlaceholderText(_source_hint(fmt))
        self.name.setPlaceholderText(_name_hint(fmt))
        if not file_based and not self._name_edited:
            self.name.suggest(suggest_name("vital-articles", self.taken))

    def _on_source(self, text: str) -> None:
        fmt = detect_format(text)
        if fmt is not None:
            self.format.setCurrentIndex(self.format.findData(fmt))
        if text and not self._name_edited:
            self.name.suggest(suggest_name(text, self.taken))

    def _browse(self) -> None:
        if self.format.currentData() == "docs":
            folder = QFileDialog.getExistingDirectory(self, "Folder of documents",
                                                      start_folder(self.source.text()))
            if folder:
                self.source.setText(folder)
            return
        filters = ";;".join([
            "Passages (*.jsonl *.json *.gz *.tsv *.xml *.bz2 *.parquet)",
            "JSON lines (*.jsonl *.json *.jsonl.gz)", "DPR TSV (*.tsv *.tsv.gz)",
            "MediaWiki XML (*.xml *.xml.bz2)", "Parquet (*.parquet)", "All files (*)"])
        path, _ = QFileDialog.getOpenFileName(self, "Import passages",
                                              start_folder(self.source.text()), filters)
        if path:
            self.source.setText(path)

    def _browse_encoder(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Passage encoder folder",
                                                start_folder(self.encoder.currentText()))
        if path:
            self.encoder.setEditText(path)
