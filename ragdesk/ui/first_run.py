"""The first-run dialog: with nothing to answer from, offer the ways to get started."""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (
    QButtonGroup,
    QCheckBox,
    QComboBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QRadioButton,
    QVBoxLayout,
    QWidget,
)

from ragdesk.core.progress import ProgressUpdate
from ragdesk.core.units import human_bytes
from ragdesk.ui.backend import Backend
from ragdesk.ui.dialogs import FittedDialog, JobPanel, report_html, set_flagged_text
from ragdesk.ui.infos import PackInfo
from ragdesk.ui.library import READER_TITLE, Library
from ragdesk.ui.models_dialog import CANCELLED_TEXT, PackOffer
from ragdesk.ui.ops import Op
from ragdesk.ui.reports import ErrorReport
from ragdesk.ui.resources import app_icon
from ragdesk.ui.state import AppState

PAPER_PACKS = ("rag-sequence-nq", "rag-token-nq", "dpr-bart")
READER_PACK = "reader-1.5b"


class FirstRunDialog(FittedDialog):
    def __init__(self, parent: QWidget, state: AppState, library: Library, backend: Backend,
                 open_import: Callable[[], object]) -> None:
        super().__init__(parent)
        self.library = library
        self.backend = backend
        self.open_import = open_import
        self.setObjectName("FirstRunDialog")
        self.setWindowTitle("Welcome to ragdesk")
        self.job: Op[None] | None = None
        self.reader_job: Op[None] | None = None  # queued behind the starter's on the jobs lane
        self._answerable = False  # the starter setup can answer (its first stage is done)
        self._starter_job = False  # the job started here builds the starter pack

        lay = QVBoxLayout(self)
        lay.setContentsMargins(22, 20, 22, 16)
        lay.setSpacing(12)
        lay.addLayout(self._header())

        self.group = QButtonGroup(self)
        self.starter = self._option(
            lay, "&Offline starter pack (recommended)",
            "About 10,000 Wikipedia Vital Articles, the all-MiniLM-L6-v2 retriever and the "
            "Gemma 3 270M generator, installed with the app, so setting it up needs no "
            "network. You can ask within about a minute (answers use BM25 keyword search "
            "first); the dense "
            "index of about 12,000 passages is computed meanwhile, with a progress bar.")
        self._reader_option(lay)
        self.paper = self._option(
            lay, "&Download a paper pack",
            "The fine-tuned RAG checkpoints of Lewis et al. (2020) from huggingface.co. You "
            "will also need a snapshot encoded with the matching DPR passage encoder.")
        prow = QHBoxLayout()
        prow.setContentsMargins(26, 0, 0, 0)
        self.paper_pack = QComboBox()
        self.paper_pack.setEnabled(False)
        prow.addWidget(self.paper_pack)
        prow.addStretch(1)
        lay.addLayout(prow)
        self.local = self._option(
            lay, "&Import local files",
            "Build a snapshot from a folder of your documents (PDF, DOCX, Markdown, HTML, "
            "text), or from a JSONL, DPR TSV or MediaWiki XML file you already have.")
        self.starter.setChecked(True)
        self.paper.toggled.connect(self.paper_pack.setEnabled)
        self.starter.toggled.connect(lambda _on: self._update_reader())

        self._progress_area(lay)
        self._buttons(lay)
        state.packsChanged.connect(self.set_packs)
        self.set_packs(state.packs)
        self.setMinimumWidth(600)

    def _progress_area(self, lay: QVBoxLayout) -> None:
        line = QFrame()
        line.setFrameShape(QFrame.Shape.HLine)
        line.setObjectName("Rule")
        lay.addWidget(line)
        self.job_panel = JobPanel()
        self.job_panel.cancelRequested.connect(lambda _id: self._cancel())
        lay.addWidget(self.job_panel)
        self.message = QLabel()
        self.message.setWordWrap(True)
        self.message.setObjectName("FirstRunMessage")
        lay.addWidget(self.message)

    def _buttons(self, lay: QVBoxLayout) -> None:
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        self.later = QPushButton("&Not now")
        self.later.clicked.connect(self.reject)
        self.start_button = QPushButton("&Start")
        self.start_button.setDefault(True)
        self.start_button.clicked.connect(self.start)
        buttons.addWidget(self.later)
        buttons.addWidget(self.start_button)
        lay.addLayout(buttons)

    def _header(self) -> QHBoxLayout:
        head = QHBoxLayout()
        logo = QLabel()
        logo.setPixmap(app_icon().pixmap(56, 56))
        head.addWidget(logo, 0, Qt.AlignmentFlag.AlignTop)
        title_box = QVBoxLayout()
        title = QLabel("Welcome to ragdesk")
        tf = QFont(title.font())
        tf.setPointSizeF(tf.pointSizeF() * 1.5)
        tf.setWeight(QFont.Weight.DemiBold)
        title.setFont(tf)
        title_box.addWidget(title)
        sub = QLabel("ragdesk answers questions from a Wikipedia snapshot on your disk and "
                     "shows which passage every word came from. Choose how to start:")
        sub.setWordWrap(True)
        title_box.addWidget(sub)
        head.addLayout(title_box, 1)
        return head

    def _option(self, lay: QVBoxLayout, title: str, text: str) -> QRadioButton:
        radio = QRadioButton(title)
        f = QFont(radio.font())
        f.setWeight(QFont.Weight.DemiBold)
        radio.setFont(f)
        self.group.addButton(radio)
        lay.addWidget(radio)
        desc = QLabel(text)
        desc.setWordWrap(True)
        desc.setObjectName("OptionText")
        desc.setContentsMargins(26, 0, 0, 2)
        lay.addWidget(desc)
        return radio

    def _reader_option(self, lay: QVBoxLayout) -> None:
        """Under the starter: also add the stronger reader, its costs said before it is
        chosen (they come with the pack list; until then it cannot be ticked)."""
        self.reader_info: PackInfo | None = None
        self.reader = QCheckBox("Also add the stronger &reader pack (reader-1.5b)")
        self.reader.setObjectName("ReaderOption")
        self.reader.setContentsMargins(26, 0, 0, 0)
        self.reader.setEnabled(False)
        row = QHBoxLayout()
        row.setContentsMargins(26, 0, 0, 0)
        row.addWidget(self.reader)
        row.addStretch(1)
        lay.addLayout(row)
        self.reader_text = QLabel(
            "Qwen2.5-Coder 1.5B Instruct reads the retrieved passages together and answers "
            "right more often than Gemma 3 270M. It is set up after the starter pack, and "
            "you can add it later from Index › Model packs.")
        self.reader_text.setWordWrap(True)
        self.reader_text.setObjectName("OptionText")
        self.reader_text.setContentsMargins(52, 0, 0, 0)
        lay.addWidget(self.reader_text)
        self.reader_offer = PackOffer(indent=52)
        lay.addWidget(self.reader_offer)
        self.reader_offer.setVisible(False)

    def _update_reader(self) -> None:
        info = self.reader_info
        offered = info is not None and not info.installed
        self.reader.setEnabled(offered and self.starter.isChecked() and self.job is None)
        if info is not None and info.installed:
            self.reader.setText("The reader pack (reader-1.5b) is set up already")
        self.reader_offer.set_pack(info if offered else None)

    def set_packs(self, packs: Sequence[PackInfo]) -> None:
        self.reader_info = next((p for p in packs if p.name == READER_PACK), None)
        self._update_reader()
        self.paper_pack.clear()
        for p in packs:
            if p.name in PAPER_PACKS:
                size = f"  ({human_bytes(p.size_bytes)})" if p.size_bytes else ""
                self.paper_pack.addItem(f"{p.name}{size}", p.name)
        if self.paper_pack.count() == 0:
            for name in PAPER_PACKS:
                self.paper_pack.addItem(name, name)

    def start(self) -> None:
        self._say("")
        if self.local.isChecked():
            self.accept()
            self.open_import()
            return
        self._starter_job = self.starter.isChecked()
        if self._starter_job:
            op = self.library.start_starter_pack(on_failure=self._job_failed)
        else:
            op = self.library.start_download(str(self.paper_pack.currentData()),
                                             on_failure=self._job_failed)
        self.job = op.started(lambda: self.job_panel.start(op)).progress(
            lambda u: self._job_progress(op, u)).success(lambda _r: self._job_finished(op))
        if self._starter_job and self.reader.isEnabled() and self.reader.isChecked():
            r = self.library.start_reader_pack(on_failure=self._reader_failed)
            self.reader_job = r.started(lambda: self.job_panel.start(r)).progress(
                lambda u: self.job_panel.update_progress(r, u)).success(
                lambda _r: self._job_finished(r))
        self.start_button.setEnabled(False)
        self._update_reader()
        self.later.setText("Continue in the &background")

    def _cancel(self) -> None:
        for op in (self.job, self.reader_job):
            if op is not None:
                op.cancel()

    def _job_progress(self, op: Op[None], update: ProgressUpdate) -> None:
        self.job_panel.update_progress(op, update)
        if (self._starter_job and not self._answerable
                and not self.backend.setup.pending):
            self._answerable = True
            self._say("<b>Ready for questions.</b> Answers use BM25 keyword search until the "
                      "dense index above is done; then dense retrieval switches on by itself.")
            self.later.setText("Start &asking")

    def _job_finished(self, op: Op[None]) -> None:
        self.job_panel.finish(op)
        if self.reader_job is not None and op is not self.reader_job:
            self.job = self.reader_job  # the reader pack's setup comes next
            self._say("<b>Ready for questions</b> with the starter pack. The reader pack is "
                      "set up next; it is used once it is ready.")
            return
        self.job = self.reader_job = None
        self.accept()

    def _reader_failed(self, report: ErrorReport) -> None:
        if self.reader_job is None:
            return  # cancelled because the starter's setup did not finish: said there
        self.job_panel.finish(self.reader_job)
        self.job = self.reader_job = None
        self.start_button.setEnabled(True)
        self._update_reader()
        if report.cancelled:
            self._say(CANCELLED_TEXT)
        elif not self.isVisible():
            self.library.report(report, READER_TITLE)
        else:
            self._say(f"<b>{html.escape(report.message)}</b>"
                      + (f"<br/>{html.escape(report.hint)}" if report.hint else ""), error=True)

    def _job_failed(self, report: ErrorReport) -> None:
        """Shown here while the dialog is open, else in a dialog of its own: once."""
        if self.job is not None:
            self.job_panel.finish(self.job)
        title = self.job.title if self.job is not None else "ragdesk"
        self.job = None
        if self.reader_job is not None:  # queued behind it: it needs the starter's snapshot
            queued, self.reader_job = self.reader_job, None
            queued.cancel()
        self._update_reader()
        self.start_button.setEnabled(True)
        self.later.setText("&Not now")
        if report.cancelled:
            self._say("Cancelled. Nothing half-built was kept.")
        elif not self.isVisible():
            self.library.report(report, title)
        else:
            self._say(report_html(report), error=True)

    def _say(self, text: str, error: bool = False) -> None:
        set_flagged_text(self.message, text, error=error)
