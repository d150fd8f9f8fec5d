"""Small shared dialogs: error reports, confirmations, and the job progress panel.

Dialogs open window-modal with ``open()`` rather than ``exec()``, so the event loop (and the
tokens streaming into the chat) keeps running while one is up.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import (
    QDialog,
    QHBoxLayout,
    QLabel,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from ragdesk.core.progress import ProgressUpdate
from ragdesk.core.units import fmt_seconds, human_bytes, human_rate
from ragdesk.ui.elided import ElidedLabel
from ragdesk.ui.reports import ErrorReport
from ragdesk.ui.resources import icon

log = logging.getLogger(__name__)


class Work(Protocol):
    """What a progress panel shows of a piece of work (an :class:`~ragdesk.ui.ops.Op`)."""

    @property
    def id(self) -> int: ...
    @property
    def title(self) -> str: ...
    @property
    def cancellable(self) -> bool: ...


def show_error(parent: QWidget | None, report: ErrorReport,
               title: str = "ragdesk") -> QMessageBox:
    """A readable dialog: what went wrong (message) and what to do (hint); never a traceback
    unless the error is a bug, and then only under "Show Details"."""
    box = QMessageBox(parent)
    box.setObjectName("ErrorDialog")
    box.setWindowTitle(title)
    box.setIcon(QMessageBox.Icon.Critical if report.is_bug else QMessageBox.Icon.Warning)
    box.setText(report.message)
    if report.hint:
        box.setInformativeText(report.hint)
    if report.details:
        box.setDetailedText(report.details)
    box.setStandardButtons(QMessageBox.StandardButton.Ok)
    box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    box.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    box.open()
    return box


def set_flagged_text(label: QLabel, text: str, **flags: bool) -> None:
    """Show ``text`` with the stylesheet's flags (``error``, ``notfound``) set as given:
    red only for an error, since good news in red reads as a failure. The style is
    re-polished because Qt does not restyle on a dynamic property change."""
    label.setText(text)
    for name, on in flags.items():
        label.setProperty(name, on)
    label.style().unpolish(label)
    label.style().polish(label)


def start_folder(path: str = "") -> str:
    """Where a file or folder chooser opens: at ``path`` (the folder it names or the one its
    file is in) when that is there, else in the user's home. Never the process's working
    folder, which is wherever ragdesk happened to be started from."""
    text = path.strip()
    if text:
        try:
            p = Path(text).expanduser()
        except RuntimeError:  # "~nosuchuser/...": no such home to start in
            return str(Path.home())
        for folder in (p, p.parent):
            if folder.is_absolute() and folder.is_dir():
                return str(folder)
    return str(Path.home())


def report_html(report: ErrorReport) -> str:
    """A failure as a dialog's message line shows it: the message in bold, the hint below."""
    hint = f"<br/>{report.hint}" if report.hint else ""
    return f"<b>{report.message}</b>{hint}"


def confirm(parent: QWidget, title: str, text: str, informative: str,
            on_yes: Callable[[], None], yes_text: str = "Remove") -> QMessageBox:
    box = QMessageBox(parent)
    box.setObjectName("ConfirmDialog")
    box.setWindowTitle(title)
    box.setIcon(QMessageBox.Icon.Question)
    box.setText(text)
    box.setInformativeText(informative)
    yes = box.addButton(yes_text, QMessageBox.ButtonRole.DestructiveRole)
    cancel = box.addButton(QMessageBox.StandardButton.Cancel)
    box.setDefaultButton(cancel)
    box.setEscapeButton(cancel)
    box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)

    def done(_result: int) -> None:
        if box.clickedButton() is yes:
            on_yes()

    box.finished.connect(done)
    box.open()
    return box


def fit_height(dialog: QWidget, exact: bool = False) -> None:
    """Grow ``dialog`` to the height its wrapped texts need at its width (``exact``: shrink
    to it too). A dialog's minimum size ignores height-for-width, so without this a line
    appearing later (a message, a progress panel) squeezes the wrapped labels above it until
    their descenders are cut. Call it on each LayoutRequest event."""
    lay = dialog.layout()
    # Before it is shown the dialog sizes itself to its contents; a resize then would keep the
    # default 640x480 instead.
    if lay is None or not lay.hasHeightForWidth() or not dialog.isVisible():
        return
    need = lay.totalHeightForWidth(dialog.width())
    if need > dialog.height() or (exact and need < dialog.height()):
        screen = dialog.screen().availableGeometry().height() if dialog.screen() else need
        dialog.resize(dialog.width(), min(need, screen - 40))


class FittedDialog(QDialog):
    """A dialog whose height follows its wrapped texts (see :func:`fit_height`): grown on
    every layout change, fitted exactly when shown (Qt sizes a dialog by its texts' heights
    at their preferred width, narrower than the minimum width: too tall, with the rest
    spread between the rows)."""

    def event(self, e: QEvent) -> bool:
        handled = super().event(e)
        if e.type() == QEvent.Type.LayoutRequest:
            fit_height(self)
        return handled

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        fit_height(self, exact=True)


def describe_progress(u: ProgressUpdate, compact: bool = False) -> str:
    """"4,032 of 12,324  ·  51.0/s  ·  about 2 min 45 s left" (sizes in KB/MB when the job
    counts bytes); ``compact`` (the status bar) keeps the percentage and the time left."""
    left = u.time_left_s
    eta = f"about {fmt_seconds(left)} left" if left is not None else ""
    if compact:
        frac = u.fraction
        return "  ·  ".join(x for x in (f"{frac:.0%}" if frac is not None else "", eta) if x)

    def size(n: float) -> str:
        return human_bytes(n) if u.unit == "bytes" else f"{n:,}"

    parts = []
    if u.total:
        parts.append(f"{size(u.done)} of {size(u.total)}")
    elif u.done:
        parts.append(size(u.done))
    if u.rate:
        parts.append(human_rate(u.rate, u.unit))
    if eta:
        parts.append(eta)
    return "  ·  ".join(parts)


class JobPanel(QWidget):
    """Title, progress bar with rate and ETA, and a Cancel button for the running job."""

    cancelRequested = Signal(int)  # the op's id

    def __init__(self, parent: QWidget | None = None, compact: bool = False) -> None:
        super().__init__(parent)
        self.setObjectName("JobPanel")
        self.job: Work | None = None
        self.last_update: ProgressUpdate | None = None
        lay = QVBoxLayout(self) if not compact else QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(4 if not compact else 8)
        self.compact = compact
        # In the status bar the title shares a line with the snapshot and pack: it shortens
        # with "…" (whole text in the tooltip) rather than being cut mid-word.
        self.title: QLabel = ElidedLabel(min_chars=14) if compact else QLabel()
        self.title.setObjectName("JobTitle")
        row = QHBoxLayout()
        row.setSpacing(8)
        self.bar = QProgressBar()
        self.bar.setTextVisible(not compact)
        self.bar.setMinimumWidth(120)
        if compact:
            self.bar.setMaximumWidth(160)
            self.bar.setMaximumHeight(14)
        self.cancel_button = QPushButton(icon("cancel"), "Cancel" if not compact else "")
        self.cancel_button.setToolTip("Cancel this job (it stops after the current batch)")
        self.cancel_button.clicked.connect(self._cancel)
        self.detail = QLabel()
        self.detail.setObjectName("JobDetail")
        if compact:
            lay.addWidget(self.title)
            lay.addWidget(self.bar)
            lay.addWidget(self.detail)
            lay.addWidget(self.cancel_button)
            self.cancel_button.setFlat(True)
        else:
            lay.addWidget(self.title)
            row.addWidget(self.bar, 1)
            row.addWidget(self.cancel_button)
            lay.addLayout(row)
            lay.addWidget(self.detail)
        self.setVisible(False)

    def start(self, job: Work) -> None:
        self.job = job
        self.last_update = None
        self.title.setText(job.title)
        self.title.setToolTip("")
        self.bar.setRange(0, 0)  # busy until the first update says how much there is
        self.detail.setText("Starting…")
        self.cancel_button.setEnabled(job.cancellable)
        self.setVisible(True)

    def update_progress(self, job: Work, u: ProgressUpdate) -> None:
        if self.job is None or job.id != self.job.id:
            self.start(job)
        self.last_update = u
        if u.total:
            self.bar.setRange(0, 1000)
            self.bar.setValue(round(1000 * (u.fraction or 0.0)))
        else:
            self.bar.setRange(0, 0)
        if u.message:
            full = f"{job.title} — {u.message}"
            # The status bar has room for the phase only; the whole title is its tooltip.
            self.title.setText(u.message if self.compact else full)
            if self.compact:
                self.title.setToolTip(f"{full}\n{describe_progress(u)}")
        self.detail.setText(describe_progress(u, compact=self.compact))

    def finish(self, job: Work, text: str = "") -> None:
        if self.job is not None and job.id == self.job.id:
            self.job = None
            self.setVisible(False)
            if text:
                self.detail.setText(text)

    def _cancel(self) -> None:
        if self.job is not None:
            self.cancel_button.setEnabled(False)
            self.detail.setText("Cancelling after the current batch…")
            self.cancelRequested.emit(self.job.id)
