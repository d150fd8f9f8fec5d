"""The first-run dialog: with nothing to answer from, offer the ways to get started."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QFont, QShowEvent
from PySide6.QtWidgets import (
    QButtonGroup,
    QComboBox,
    QDialog,
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
from ragdesk.ui.backend import Backend, PackInfo
from ragdesk.ui.dialogs import JobPanel, fit_height
from ragdesk.ui.library import Library
from ragdesk.ui.ops import Op
from ragdesk.ui.reports import ErrorReport
from ragdesk.ui.resources import app_icon
from ragdesk.ui.state import AppState

PAPER_PACKS = ("rag-sequence-nq", "rag-token-nq", "dpr-bart")


class FirstRunDialog(QDialog):
    def __init__(self, parent: QWidget, state: AppState, library: Library, backend: Backend,
                 open_import: Callable[[], object]) -> None:
        super().__init__(parent)
        self.library = library
        self.backend = backend
        self.open_import = open_import
        self.setObjectName("FirstRunDialog")
        self.setWindowTitle("Welcome to ragdesk")
        self.job: Op[None] | None = None
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
            "Gemma 3 270M generator, all installed from PyPI; no network is needed. You can "
            "ask within about a minute (answers use BM25 keyword search first); the dense "
            "index of about 12,000 passages is computed meanwhile, with a progress bar.")
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

        line = QFrame()
        line.setFrameShape(QFrame.Shape.HLine)
        line.setObjectName("Rule")
        lay.addWidget(line)
        self.job_panel = JobPanel()
        self.job_panel.cancelRequested.connect(lambda _id: self.job.cancel() if self.job else None)
        lay.addWidget(self.job_panel)
        self.message = QLabel()
        self.message.setWordWrap(True)
        self.message.setObjectName("FirstRunMessage")
        lay.addWidget(self.message)

        self._buttons(lay)
        state.packsChanged.connect(self.set_packs)
        self.set_packs(state.packs)
        self.setMinimumWidth(600)

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

    def event(self, e: QEvent) -> bool:
        handled = super().event(e)
        if e.type() == QEvent.Type.LayoutRequest:
            self._fit_height()
        return handled

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        # Qt sizes a dialog by its texts' heights at their preferred width, narrower than
        # the minimum width: too tall, with the rest spread between the options.
        self._fit_height(exact=True)

    def _fit_height(self, exact: bool = False) -> None:
        fit_height(self, exact)

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

    def set_packs(self, packs: Sequence[PackInfo]) -> None:
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
        self.start_button.setEnabled(False)
        self.later.setText("Continue in the &background")

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
        self.job = None
        self.accept()

    def _job_failed(self, report: ErrorReport) -> None:
        """Shown here while the dialog is open, else in a dialog of its own: once."""
        if self.job is not None:
            self.job_panel.finish(self.job)
        title = self.job.title if self.job is not None else "ragdesk"
        self.job = None
        self.start_button.setEnabled(True)
        self.later.setText("&Not now")
        if report.cancelled:
            self._say("Cancelled. Nothing half-built was kept.")
        elif not self.isVisible():
            self.library.report(report, title)
        else:
            hint = f"<br/>{report.hint}" if report.hint else ""
            self._say(f"<b>{report.message}</b>{hint}", error=True)

    def _say(self, text: str, error: bool = False) -> None:
        """The message line; red only for an error (good news in red reads as a failure)."""
        self.message.setText(text)
        self.message.setProperty("error", error)
        self.message.style().unpolish(self.message)
        self.message.style().polish(self.message)
