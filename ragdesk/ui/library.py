"""What the GUI does to the catalog and the model packs, each as an op on its lane.

Reads (the snapshot and pack lists) run on the reads pool and land in :class:`AppState`;
short writes (switch, remove, the chosen pack) on the writes lane; long jobs (import,
quantize, verify, the starter pack, downloads) on the jobs lane. Each job's own follow-up is
its op's callback; what every job needs afterwards (a fresh snapshot list) hangs on the jobs
lane's events. A dialog that starts a job passes its own callbacks and so reports the outcome
itself (see :mod:`ragdesk.ui.ops` for why a failure is then not a modal too).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from PySide6.QtCore import QObject, Signal

from ragdesk.core.pack_choice import STARTER, fallback_note
from ragdesk.core.progress import ProgressUpdate
from ragdesk.ui.backend import Backend
from ragdesk.ui.infos import FolderImportSummary, PackInfo, SnapshotInfo, VerifyReport
from ragdesk.ui.ops import FailureHandler, Lane, Op, OpContext, OpRunner
from ragdesk.ui.reports import ErrorReport
from ragdesk.ui.state import AppState

if TYPE_CHECKING:
    from ragdesk.ui.backend import QuantizeResult

log = logging.getLogger(__name__)

T = TypeVar("T")
OnFailure = Callable[[ErrorReport], None]

STARTER_TITLE = "Building the starter snapshot"
READER_TITLE = "Setting up the reader pack"


class Library(QObject):
    activity = Signal(str)  # a line for the status bar
    setupProgress = Signal(object)  # ProgressUpdate of the starter pack's setup

    def __init__(self, state: AppState, ops: OpRunner, backend: Backend,
                 report: FailureHandler, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.state = state
        self.ops = ops
        self.backend = backend
        self.report = report
        self._reload_seq = 0
        self._explained: tuple[str, str, str] | None = None  # the pack note last shown
        jobs = ops.events(Lane.JOBS)
        jobs.finished.connect(lambda _op, _r: self.reload_snapshots())
        jobs.failed.connect(lambda _op, _r: self.reload_snapshots())

    # ---- reads ----------------------------------------------------------------------------

    def reload_snapshots(self) -> None:
        """Read the snapshot list, each with the pack that answers from it (the core's rule:
        it reads the catalog and the packs' files, so off the GUI thread)."""
        # Taken here, not read from the settings on the worker: the write of a pack just
        # chosen runs on the writes lane and may not have landed yet.
        chosen = self.state.chosen_pack
        self._reload_seq += 1
        seq = self._reload_seq

        def apply(snapshots: list[SnapshotInfo]) -> None:
            if seq == self._reload_seq:  # two reads may finish out of order on the pool
                self.state.set_snapshots(snapshots)
                self._explain_pack()

        Op(lambda _c: self.backend.snapshots(chosen), parent=self).success(apply).run(
            self.ops)

    def reload_packs(self) -> None:
        def unavailable(report: ErrorReport) -> None:
            log.info("model packs unavailable: %s", report.message)

        Op[list[PackInfo]](lambda _c: self.backend.packs(), parent=self).success(
            self.state.set_packs).failure(unavailable).run(self.ops)

    # ---- writes ---------------------------------------------------------------------------

    def switch_snapshot(self, name: str) -> None:
        """The next question uses ``name`` at once; an answer in flight keeps its own."""
        info = self.state.snapshot(name)
        if info is not None and info.unusable_reason:
            pack = info.answer_pack or self.state.pack
            self.report(ErrorReport(
                f"The snapshot {name} cannot be used with the {pack} pack: "
                f"{info.unusable_reason}", "Choose the model pack whose passage encoder built "
                "it."), "ragdesk")
            return
        previous = self.state.active_snapshot
        self.state.set_active_snapshot(name)  # the pack that answers from it follows
        why = self._pack_note()
        self.activity.emit(f"Switched to {name}; the next question uses it."
                           + (f" {why}" if why else ""))

        def failed(report: ErrorReport) -> None:
            if self.state.active_snapshot == name:
                self.state.set_active_snapshot(previous)
            self._report_and_reload(report)

        Op(lambda _c: self.backend.switch(name), lane=Lane.WRITES, title=f"Switch to {name}",
           cancellable=False).success(lambda _r: self.reload_snapshots()).failure(
            failed).run(self.ops)

    def remove_snapshot(self, name: str) -> None:
        def removed(_result: None) -> None:
            if self.state.active_snapshot == name:
                self.state.set_active_snapshot(None)
            self.activity.emit(f"Removed {name}.")
            self.reload_snapshots()

        Op(lambda _c: self.backend.remove(name), lane=Lane.WRITES, title=f"Remove {name}",
           cancellable=False).success(removed).failure(self._report_and_reload).run(self.ops)

    def set_pack(self, name: str) -> None:
        """The user chose ``name``: it answers at once; the list read next says whether the
        active snapshot needs its own pack instead, and the combo goes back to that one."""
        if name == self.state.pack and name == self.state.chosen_pack:
            return
        self.state.set_chosen_pack(name)
        self.state.set_pack(name)
        self._explained = None  # choosing again a pack that cannot answer says why again
        Op(lambda _c: self.backend.set_pack(name), lane=Lane.WRITES,
           title="Remember the model pack", cancellable=False).run(self.ops)
        self.reload_snapshots()  # which pack answers, and which snapshots fit, follow

    def _pack_note(self) -> str | None:
        """Why the pack that answers is not the one chosen, once per case; None otherwise."""
        chosen, pack = self.state.chosen_pack, self.state.pack
        name = self.state.active_snapshot
        if not chosen or chosen == pack or name is None:
            self._explained = None
            return None
        if self._explained == (chosen, pack, name):
            return None
        self._explained = (chosen, pack, name)
        # The core gives way to the snapshot's own pack only when the choice cannot query it.
        return fallback_note(chosen, name, pack)

    def _explain_pack(self) -> None:
        note = self._pack_note()
        if note:
            self.activity.emit(note)

    def _report_and_reload(self, report: ErrorReport) -> None:
        if not report.cancelled:
            self.report(report, "ragdesk")
        self.reload_snapshots()

    # ---- long jobs ------------------------------------------------------------------------

    def _job(self, title: str, fn: Callable[[OpContext], T],
             on_failure: OnFailure | None) -> Op[T]:
        op = Op(fn, lane=Lane.JOBS, title=title)
        if on_failure is not None:
            op.failure(on_failure)
        return op

    def start_import(self, source: str | None, *, name: str, encoder: str, fmt: str | None,
                     limit: int | None = None, on_done: Callable[[str], None] | None = None,
                     on_failure: OnFailure | None = None) -> Op[str]:
        def work(ctx: OpContext) -> str:
            return self.backend.import_snapshot(source, name=name, encoder=encoder, fmt=fmt,
                                                limit=limit, progress=ctx.progress,
                                                cancel=ctx.cancel)

        op = self._job(f"Importing {name}", work, on_failure).progress(self._first_progress())
        return _then(op, on_done).run(self.ops)

    def _first_progress(self) -> Callable[[ProgressUpdate], None]:
        shown = [False]

        def first_progress(_u: ProgressUpdate) -> None:
            # The importer has made its catalog record by now: show the "importing" row.
            if not shown[0]:
                shown[0] = True
                self.reload_snapshots()

        return first_progress

    def start_folder_import(self, folder: str, *, name: str, encoder: str | None,
                            on_done: Callable[[FolderImportSummary], None] | None = None,
                            on_failure: OnFailure | None = None) -> Op[FolderImportSummary]:
        """Import a folder of documents, or re-import it into the snapshot of that name
        (new and changed files are encoded, the rest kept)."""
        op = self._job(f"Importing {name}",
                       lambda c: self.backend.import_folder(folder, name=name, encoder=encoder,
                                                            progress=c.progress,
                                                            cancel=c.cancel), on_failure)
        op.progress(self._first_progress()).success(
            lambda summary: self.activity.emit(summary.text))
        return _then(op, on_done).run(self.ops)

    def start_quantize(self, name: str, variant: str, *,
                       on_done: Callable[[QuantizeResult], None] | None = None,
                       on_failure: OnFailure | None = None) -> Op[QuantizeResult]:
        op = self._job(f"Building {variant} for {name}",
                       lambda c: self.backend.quantize(name, variant, c.progress, c.cancel),
                       on_failure)
        return _then(op, on_done).run(self.ops)

    def start_verify(self, name: str, *,
                     on_done: Callable[[VerifyReport], None] | None = None,
                     on_failure: OnFailure | None = None) -> Op[VerifyReport]:
        op = self._job(f"Verifying {name}",
                       lambda c: self.backend.verify(name, c.progress, c.cancel), on_failure)
        op.success(lambda report: self.activity.emit(report.text))
        return _then(op, on_done).run(self.ops)

    def start_starter_pack(self, *, on_failure: OnFailure | None = None) -> Op[None]:
        answerable = [False]

        def progressed(update: ProgressUpdate) -> None:
            self.setupProgress.emit(update)
            if not answerable[0] and not self.backend.setup.pending:
                answerable[0] = True
                self.reload_snapshots()  # the staged snapshot can answer: show it usable

        op = self._job(STARTER_TITLE,
                       lambda c: self.backend.build_starter(c.progress, c.cancel), on_failure)
        return op.progress(progressed).success(self._pack_installed).run(self.ops)

    def start_reader_pack(self, *, on_failure: OnFailure | None = None) -> Op[None]:
        """Download, verify and convert the reader pack, then choose it (jobs lane)."""
        def failed(report: ErrorReport) -> None:
            # What is on disk may have changed anyway (a verified file not yet converted).
            self.reload_packs()
            if on_failure is not None:
                on_failure(report)
            elif not report.cancelled:
                self.report(report, READER_TITLE)

        op = self._job(READER_TITLE,
                       lambda c: self.backend.setup_reader(c.progress, c.cancel), failed)
        return op.success(self._pack_installed).run(self.ops)

    def remove_reader_pack(self, *, on_done: Callable[[None], None] | None = None,
                           on_failure: OnFailure | None = None) -> Op[None]:
        """Delete the reader pack's files (jobs lane: never while it is being set up)."""
        op = self._job("Removing the reader pack", lambda _c: self.backend.remove_reader(),
                       on_failure)
        op.success(self._pack_installed)  # the pack in use may have changed back
        return _then(op, on_done).run(self.ops)

    def start_download(self, pack: str, *,
                       on_failure: OnFailure | None = None) -> Op[None]:
        op = self._job(f"Downloading {pack}",
                       lambda c: self.backend.download_pack(pack, c.progress, c.cancel),
                       on_failure)
        return op.success(self._pack_installed).run(self.ops)

    def _pack_installed(self, _result: None) -> None:
        # The job chose the pack it installed (a settings write of its own, under the
        # settings' lock): follow it; the list read next says whether it answers here.
        chosen = self.backend.chosen_pack()
        self.state.set_chosen_pack(chosen)
        self.state.set_pack(chosen or STARTER)
        self._explained = None
        self.reload_packs()
        self.reload_snapshots()  # which snapshots fit depends on the pack (the newest read wins)


def _then(op: Op[T], on_done: Callable[[T], None] | None) -> Op[T]:
    return op if on_done is None else op.success(on_done)
