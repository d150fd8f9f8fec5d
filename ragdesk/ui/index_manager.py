"""The index manager: every snapshot in a table, and the jobs that change them.

Long jobs (import, quantize, verify) run through the :class:`~ragdesk.ui.library.Library` on
the jobs lane and keep running when this dialog is closed; the removal and switches go to the
writes lane. The table follows :attr:`AppState.snapshotsChanged`. A job started here reports
its outcome here while the dialog is open (and in an error dialog once it is closed), never
both.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMessageBox,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ragdesk.core.units import human_bytes, plural, shown_time
from ragdesk.ui.dialogs import JobPanel, confirm
from ragdesk.ui.import_dialog import ImportDialog, ImportSpec, short_model
from ragdesk.ui.infos import VARIANTS, FolderImportSummary, PackInfo, SnapshotInfo
from ragdesk.ui.library import Library
from ragdesk.ui.ops import FailureHandler, Lane, OpRunner
from ragdesk.ui.reports import ErrorReport
from ragdesk.ui.resources import icon
from ragdesk.ui.state import AppState


class QuantizeDialog(QDialog):
    def __init__(self, parent: QWidget | None, snapshot: SnapshotInfo) -> None:
        super().__init__(parent)
        self.setObjectName("QuantizeDialog")
        self.setWindowTitle(f"Build an index variant of {snapshot.name}")
        lay = QVBoxLayout(self)
        have = ", ".join(v.variant for v in snapshot.variants) or "none"
        intro = QLabel(f"Builds another FAISS index from the stored vectors (no re-encoding) "
                       f"and measures its recall@20 against exact search.<br/>"
                       f"Existing variants: <b>{have}</b>.")
        intro.setWordWrap(True)
        lay.addWidget(intro)
        self.variant = QComboBox()
        for key, desc in VARIANTS.items():
            self.variant.addItem(f"{key} — {desc}", key)
        if self.variant.findData("ivf-pq") >= 0:
            self.variant.setCurrentIndex(self.variant.findData("ivf-pq"))
        form = QFormLayout()
        form.addRow("&Variant", self.variant)
        lay.addLayout(form)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                   | QDialogButtonBox.StandardButton.Cancel)
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText("&Build")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        lay.addWidget(buttons)

    def chosen(self) -> str:
        return str(self.variant.currentData())


COLUMNS = ("", "Name", "Passages", "Encoder", "Variants (size, recall@20)", "Created", "State")


class IndexManagerDialog(QDialog):
    """Non-modal: the user can chat while a job started here runs."""

    snapshotsChanged = Signal()

    def __init__(self, parent: QWidget, state: AppState, ops: OpRunner, library: Library,
                 report: FailureHandler) -> None:
        super().__init__(parent)
        self.state = state
        self.library = library
        self.report = report
        self.setObjectName("IndexManager")
        self.setWindowTitle("Manage indexes")
        self.setModal(False)
        self.snapshots: list[SnapshotInfo] = []
        self.import_dialog: ImportDialog | None = None
        self.quantize_dialog: QuantizeDialog | None = None
        self.confirm_box: QMessageBox | None = None

        lay = QVBoxLayout(self)
        lay.setContentsMargins(14, 14, 14, 12)
        lay.setSpacing(10)
        top = QHBoxLayout()
        self._build_table()
        top.addWidget(self.table, 1)

        top.addLayout(self._build_buttons())
        lay.addLayout(top, 1)

        self.job_panel = JobPanel()
        self.job_panel.cancelRequested.connect(lambda op_id: ops.cancel(Lane.JOBS, op_id))
        lay.addWidget(self.job_panel)
        self.message = QLabel()
        self.message.setObjectName("ManagerMessage")
        self.message.setWordWrap(True)
        lay.addWidget(self.message)

        bottom = QHBoxLayout()
        bottom.addStretch(1)
        close = QPushButton("Close")
        close.clicked.connect(self.close)
        bottom.addWidget(close)
        lay.addLayout(bottom)

        self._follow_jobs(ops)
        state.snapshotsChanged.connect(self.set_snapshots)
        state.packsChanged.connect(self._packs_listed)
        # Wide enough for the encoder's hub id beside the sizes where the screen allows.
        screen = parent.screen().availableGeometry() if parent.screen() else None
        self.resize(min(1160, screen.width() - 80) if screen else 980, 440)
        self.set_snapshots(state.snapshots)
        self._update_buttons()

    def _build_buttons(self) -> QVBoxLayout:
        side = QVBoxLayout()
        side.setSpacing(6)

        def button(icon_name: str, text: str, tip: str, slot: Callable[[], object]) -> QPushButton:
            b = QPushButton(icon(icon_name), text)
            b.setToolTip(tip)
            b.clicked.connect(slot)
            side.addWidget(b)
            return b

        # Not the method itself: clicked passes its checked flag, which would land in
        # ``reimport``.
        self.import_button = button("import", "&Import…", "Import passages as a new snapshot",
                                    lambda: self.open_import())
        self.reimport_button = button("refresh", "Re-im&port…",
                                      "Import this snapshot's folder of documents again: "
                                      "new and changed files are encoded, deleted ones leave",
                                      self.open_reimport)
        self.quantize_button = button("quantize", "&Quantize…",
                                      "Build a smaller index variant from the stored vectors",
                                      self.open_quantize)
        self.switch_button = button("switch", "S&witch to", "Make this the active snapshot",
                                    self.switch_selected)
        self.verify_button = button("verify", "&Verify", "Check every checksum and that the "
                                    "index answers", self.verify_selected)
        self.remove_button = button("trash", "&Remove…", "Delete this snapshot from disk",
                                    self.remove_selected)
        side.addSpacing(12)
        self.refresh_button = button("refresh", "Re&fresh", "Reload the list", self.refresh)
        side.addStretch(1)
        return side

    def _build_table(self) -> None:
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setObjectName("SnapshotTable")
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setAlternatingRowColors(True)
        self.table.verticalHeader().setVisible(False)
        self.table.setShowGrid(False)
        self.table.setWordWrap(False)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        # The encoder (a hub id or a long path, whole in its tooltip) takes what is left and
        # shortens with "…"; the sizes and recall beside it stay whole.
        header.setSectionResizeMode(3, QHeaderView.ResizeMode.Stretch)
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        header.setHighlightSections(False)
        self.table.itemSelectionChanged.connect(self._update_buttons)
        self.table.doubleClicked.connect(lambda _i: self.switch_selected())

    def _follow_jobs(self, ops: OpRunner) -> None:
        """The panel shows whatever job runs, wherever it was started."""
        jobs = ops.events(Lane.JOBS)
        jobs.started.connect(self.job_panel.start)
        jobs.progressed.connect(self.job_panel.update_progress)
        jobs.finished.connect(lambda op, _r: self.job_panel.finish(op))
        jobs.failed.connect(lambda op, _r: self.job_panel.finish(op))
        current = ops.current(Lane.JOBS)
        if current is not None:
            self.job_panel.start(current)

    # ---- table -----------------------------------------------------------------------------

    def refresh(self) -> None:
        self.library.reload_snapshots()

    def set_snapshots(self, snapshots: Sequence[SnapshotInfo]) -> None:
        selected = self.selected()
        self.snapshots = list(snapshots)
        self.table.setRowCount(len(self.snapshots))
        for row, s in enumerate(self.snapshots):
            variants = ", ".join(
                f"{v.variant} {human_bytes(v.bytes)}"
                + (f" ({v.recall_at_20:.3f})" if v.recall_at_20 is not None else "")
                for v in s.variants) or "–"
            enc = short_model(s.encoder) + (f" ({s.dim}-d)" if s.dim else "")
            state = s.state + (f": {s.error}" if s.error and s.state == "failed" else "")
            cells = ["●" if s.active else "", s.name, f"{s.passages:,}", enc, variants,
                     shown_time(s.created), state]
            for col, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if col == 2:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight
                                          | Qt.AlignmentFlag.AlignVCenter)
                if col == 3:
                    item.setToolTip(s.encoder or "")
                if col == 6 and s.unusable_reason and s.state == "ready":
                    item.setToolTip(s.unusable_reason)
                if col == 0:
                    item.setToolTip("active snapshot" if s.active else "")
                    item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
                self.table.setItem(row, col, item)
            if selected is not None and s.name == selected.name:
                self.table.selectRow(row)
        if self.table.currentRow() < 0 and self.snapshots:
            active = next((i for i, s in enumerate(self.snapshots) if s.active), 0)
            self.table.selectRow(active)
        self._update_buttons()

    def selected(self) -> SnapshotInfo | None:
        rows = self.table.selectionModel().selectedRows() if self.table.selectionModel() else []
        if not rows:
            return None
        r = rows[0].row()
        return self.snapshots[r] if 0 <= r < len(self.snapshots) else None

    def select(self, name: str) -> None:
        for row, s in enumerate(self.snapshots):
            if s.name == name:
                self.table.selectRow(row)
                return

    def _update_buttons(self) -> None:
        s = self.selected()
        ready = s is not None and s.ready
        self.quantize_button.setEnabled(ready)
        self.verify_button.setEnabled(ready)
        self.switch_button.setEnabled(bool(ready and s is not None and not s.active
                                           and not s.unusable_reason))
        self.switch_button.setToolTip(s.unusable_reason if s is not None and s.unusable_reason
                                      else "Make this the active snapshot")
        self.remove_button.setEnabled(s is not None and s.state != "importing")
        self.reimport_button.setEnabled(bool(s is not None and s.documents and s.source
                                             and s.state != "importing"))

    # ---- actions ---------------------------------------------------------------------------

    def _encoder_choices(self, reimport: SnapshotInfo | None
                         ) -> tuple[list[str], str | None, dict[str, str]]:
        """The packs' passage encoders, the one to choose first, and their hub ids."""
        pack = self.state.pack_info()
        encoders = [p.passage_encoder for p in self.state.packs if p.passage_encoder]
        default = pack.passage_encoder if pack else None
        if reimport is not None:
            default = self._built_with(reimport) or default
        names = {p.passage_encoder: p.passage_encoder_name for p in self.state.packs
                 if p.passage_encoder and p.passage_encoder_name}
        return list(dict.fromkeys(encoders)), default, names

    def _packs_listed(self, _packs: Sequence[PackInfo]) -> None:
        # The packs are listed after the window opens: an import dialog opened sooner lists
        # them (and chooses the pack's encoder) when they arrive.
        d = self.import_dialog
        if d is not None and d.isVisible():
            d.offer_encoders(*self._encoder_choices(d.reimport))

    def open_import(self, reimport: SnapshotInfo | None = None) -> ImportDialog:
        encoders, default, names = self._encoder_choices(reimport)
        self.import_dialog = ImportDialog(
            self, taken=[s.name for s in self.snapshots], encoders=encoders,
            default_encoder=default, reimport=reimport, names=names)
        self.import_dialog.accepted.connect(
            lambda: self.start_import(self.import_dialog.spec()) if self.import_dialog else None)
        self.import_dialog.open()
        return self.import_dialog

    def open_reimport(self) -> ImportDialog | None:
        s = self.selected()
        return self.open_import(reimport=s) if s is not None and s.documents else None

    def _built_with(self, s: SnapshotInfo) -> str | None:
        """The passage encoder a snapshot was built with, as a pack names it: the same
        encoder again keeps the vectors of unchanged files."""
        for p in self.state.packs:
            if p.passage_encoder and s.encoder and p.passage_encoder == s.encoder:
                return p.passage_encoder
        pack = self.state.pack_info(s.default_pack) if s.default_pack else None
        return pack.passage_encoder if pack is not None else None

    def start_import(self, spec: ImportSpec) -> None:
        self.message.setText("")
        if spec.fmt == "docs" and spec.source:
            self._import_folder(spec.source, spec.name, spec.encoder)
            return

        def imported(name: str) -> None:
            self.message.setText(f"Imported “{name}”.")
            self.select(name)

        self.library.start_import(spec.source, name=spec.name, encoder=spec.encoder,
                                  fmt=spec.fmt, limit=spec.limit, on_done=imported,
                                  on_failure=self._failed(f"Importing {spec.name}"))

    def _import_folder(self, folder: str, name: str, encoder: str) -> None:
        def imported(summary: FolderImportSummary) -> None:
            self.message.setText(summary.text)
            self.select(summary.name)

        self.library.start_folder_import(folder, name=name, encoder=encoder or None,
                                         on_done=imported,
                                         on_failure=self._failed(f"Importing {name}"))

    def open_quantize(self) -> QuantizeDialog | None:
        s = self.selected()
        if s is None:
            return None
        self.quantize_dialog = QuantizeDialog(self, s)
        self.quantize_dialog.accepted.connect(lambda: self._quantize(s.name))
        self.quantize_dialog.open()
        return self.quantize_dialog

    def switch_selected(self) -> None:
        s = self.selected()
        if s is not None and s.ready and not s.unusable_reason:
            self.library.switch_snapshot(s.name)

    def verify_selected(self) -> None:
        s = self.selected()
        if s is not None:
            self.library.start_verify(
                s.name, on_done=lambda report: self.message.setText(report.text),
                on_failure=self._failed(f"Verifying {s.name}"))

    def remove_selected(self) -> None:
        s = self.selected()
        if s is None:
            return
        extra = " It is the active snapshot; ragdesk will need another one to answer." \
            if s.active else ""
        self.confirm_box = confirm(
            self, "Remove snapshot", f"Remove the snapshot “{s.name}”?",
            f"This deletes its {plural(s.passages, 'passage')}, vectors and indexes from "
            f"disk. It cannot be undone.{extra}",
            lambda: self.library.remove_snapshot(s.name))

    def _quantize(self, name: str) -> None:
        if self.quantize_dialog is None:
            return
        self.library.start_quantize(
            name, self.quantize_dialog.chosen(),
            on_done=lambda r: self.message.setText(
                f"Built a new index variant of “{name}”."
                + (f" Warning: {r.warning}" if getattr(r, "warning", "") else "")),
            on_failure=self._failed(f"Building an index variant of {name}"))

    def _failed(self, title: str) -> Callable[[ErrorReport], None]:
        """A job started here reports here while the dialog is open, else in a dialog of its
        own: either way once."""
        def failed(report: ErrorReport) -> None:
            if report.cancelled:
                self.message.setText(f"{title}: cancelled.")
            elif self.isVisible():
                self.message.setText(f"{title} failed: {report.message}")
            else:
                self.report(report, title)
        return failed
