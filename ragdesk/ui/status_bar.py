"""The status bar: a line of activity, the running job's progress (with Cancel), and the
active snapshot and model pack. It follows the jobs lane and the state by itself."""

from __future__ import annotations

import html
import logging

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QLabel, QStatusBar

from ragdesk.core.pack_choice import fallback_note
from ragdesk.core.units import plural
from ragdesk.ui.dialogs import JobPanel
from ragdesk.ui.elided import ElidedLabel
from ragdesk.ui.ops import Lane, Op, OpRunner
from ragdesk.ui.reports import ErrorReport
from ragdesk.ui.state import AppState

log = logging.getLogger(__name__)

READY = "Ready"
# How long "Checking the questions: done." stays: it reports a moment, not a state, and
# left up for minutes it reads as what is going on now.
JOB_LINE_MS = 8_000


class StatusLine:
    def __init__(self, bar: QStatusBar, state: AppState, ops: OpRunner, *,
                 line_ms: int = JOB_LINE_MS) -> None:
        self.state = state
        # How long a job's line stays (read at each line): the tests shorten the user's 8 s.
        self.line_ms = line_ms
        self.text = ElidedLabel(READY)
        self._fade = QTimer(bar)
        self._fade.setSingleShot(True)
        # a coarse timer may end the line up to 5 % early; one timer of seconds costs nothing
        self._fade.setTimerType(Qt.TimerType.PreciseTimer)
        self._fade.timeout.connect(lambda: self.text.setText(READY))
        self.text.setObjectName("StatusText")
        bar.addWidget(self.text, 1)
        self.job = JobPanel(compact=True)
        self.job.cancelRequested.connect(lambda op_id: ops.cancel(Lane.JOBS, op_id))
        bar.addPermanentWidget(self.job)
        self.snapshot = QLabel()
        self.snapshot.setObjectName("StatusSnapshot")
        bar.addPermanentWidget(self.snapshot)
        self.pack = QLabel()
        self.pack.setObjectName("StatusPack")
        bar.addPermanentWidget(self.pack)
        jobs = ops.events(Lane.JOBS)
        jobs.started.connect(self.job.start)
        jobs.started.connect(lambda op: self.show(f"{op.title}…"))
        jobs.progressed.connect(self.job.update_progress)
        jobs.finished.connect(self._job_finished)
        jobs.failed.connect(self._job_failed)

    def show(self, text: str) -> None:
        self._fade.stop()
        self.text.setText(text)

    def _show_for_a_while(self, text: str) -> None:
        self.show(text)
        self._fade.start(self.line_ms)

    def update(self) -> None:
        info = self.state.snapshot(self.state.active_snapshot)
        count = f" ({plural(info.passages, 'passage')})" if info else ""
        name = html.escape(self.state.active_snapshot or "none")
        # Said where the snapshot is named, for as long as it lasts: the card of each answer
        # says it too, but a user who has not asked yet should know before asking. Short:
        # the status bar also holds the job's progress at 1280 px.
        pending = " · <i>BM25 for now</i>" if info is not None and info.keyword_only else ""
        self.snapshot.setText(f"Snapshot: <b>{name}</b>{count}{pending}")
        self.snapshot.setToolTip(
            "Its dense index is still being computed (or its computation was interrupted): "
            "answers use keyword search (BM25) until it is done." if pending else "")
        self.pack.setText(f"Pack: <b>{html.escape(self.state.pack)}</b>")
        chosen, snapshot = self.state.chosen_pack, self.state.active_snapshot
        # The activity line says it once and is soon replaced; this stays while it holds.
        self.pack.setToolTip(
            fallback_note(chosen, snapshot, self.state.pack)
            if chosen and snapshot and chosen != self.state.pack else "")

    def _job_finished(self, op: Op[object], _result: object) -> None:
        self.job.finish(op)
        self._show_for_a_while(f"{op.title}: done.")
        log.info("job finished: %s", op.title)

    def _job_failed(self, op: Op[object], report: ErrorReport) -> None:
        # Only the line: the error itself is reported once, by the op's owner or the runner.
        self.job.finish(op)
        outcome = "cancelled" if report.cancelled else "failed"
        self._show_for_a_while(f"{op.title}: {outcome}.")
        log.info("job %s: %s", outcome, op.title)
