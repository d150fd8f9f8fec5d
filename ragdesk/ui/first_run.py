"""The first-run dialog: with nothing to answer from, offer the ways to get started."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

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
)

from ragdesk.core.units import human_bytes
from ragdesk.ui.backend import PackInfo
from ragdesk.ui.dialogs import JobPanel
from ragdesk.ui.resources import app_icon

if TYPE_CHECKING:
    from ragdesk.ui.main_window import MainWindow

PAPER_PACKS = ("rag-sequence-nq", "rag-token-nq", "dpr-bart")


class FirstRunDialog(QDialog):
    def __init__(self, window: MainWindow) -> None:
        super().__init__(window)
        self.window_ = window
        self.setObjectName("FirstRunDialog")
        self.setWindowTitle("Welcome to ragdesk")
        self.job: Any = None
        self._answerable = False  # the starter setup can answer (its first stage is done)

        lay = QVBoxLayout(self)
        lay.setContentsMargins(22, 20, 22, 16)
        lay.setSpacing(12)
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
        lay.addLayout(head)

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
            "Build a snapshot from a JSONL, DPR TSV or MediaWiki XML file you already have.")
        self.starter.setChecked(True)
        self.paper.toggled.connect(self.paper_pack.setEnabled)

        line = QFrame()
        line.setFrameShape(QFrame.Shape.HLine)
        line.setObjectName("Rule")
        lay.addWidget(line)
        self.job_panel = JobPanel()
        self.job_panel.cancelRequested.connect(window.jobs.cancel)
        lay.addWidget(self.job_panel)
        self.message = QLabel()
        self.message.setWordWrap(True)
        self.message.setObjectName("FirstRunMessage")
        lay.addWidget(self.message)

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

        jobs = window.jobs
        jobs.jobStarted.connect(self._job_started)
        jobs.jobProgress.connect(self._job_progress)
        jobs.jobFinished.connect(self._job_finished)
        jobs.jobFailed.connect(self._job_failed)
        self.set_packs(window.packs)
        self.setMinimumWidth(600)

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
        """Grow to the height the wrapped texts need at this width (``exact``: shrink to it
        too). A dialog's minimum size ignores height-for-width, so without this the progress
        panel or a message appearing squeezes the subtitle and the descriptions until their
        lines are cut."""
        lay = self.layout()
        # Before it is shown the dialog sizes itself to its contents; a resize then would
        # keep the default 640x480 instead.
        if lay is None or not lay.hasHeightForWidth() or not self.isVisible():
            return
        need = lay.totalHeightForWidth(self.width())
        if need > self.height() or (exact and need < self.height()):
            screen = self.screen().availableGeometry().height() if self.screen() else need
            self.resize(self.width(), min(need, screen - 40))

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
        w = self.window_
        self.message.setText("")
        if self.local.isChecked():
            self.accept()
            w.open_index_manager().open_import()
            return
        if self.starter.isChecked():
            self.job = w.start_starter_pack()
        else:
            self.job = w.start_download(str(self.paper_pack.currentData()))
        self.start_button.setEnabled(False)
        self.later.setText("Continue in the &background")

    def _mine(self, job: Any) -> bool:
        return self.job is not None and job is self.job

    def _job_started(self, job: Any) -> None:
        if self._mine(job):
            self.job_panel.start(job)

    def _job_progress(self, job: Any, update: Any) -> None:
        if self._mine(job):
            self.job_panel.update_progress(job, update)
            if (getattr(job, "kind", None) == "starter" and not self._answerable
                    and not self.window_.backend.setup.pending):
                self._answerable = True
                self.message.setText(
                    "<b>Ready for questions.</b> Answers use BM25 keyword search until the "
                    "dense index above is done; then dense retrieval switches on by itself.")
                self.later.setText("Start &asking")

    def _job_finished(self, job: Any, _result: object) -> None:
        if self._mine(job):
            self.job_panel.finish(job)
            self.job = None
            self.accept()

    def _job_failed(self, job: Any, report: Any) -> None:
        if self._mine(job):
            self.job_panel.finish(job)
            self.job = None
            self.start_button.setEnabled(True)
            self.later.setText("&Not now")
            if report.cancelled:
                self.message.setText("Cancelled. Nothing half-built was kept.")
            else:
                hint = f"<br/>{report.hint}" if report.hint else ""
                self.message.setText(f"<b>{report.message}</b>{hint}")
