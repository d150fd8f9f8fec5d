"""Seen in the walk-through at 1440x900: restarted after quitting during the starter setup's
dense index, the status bar said "Resuming the starter setup where it stopped; answers use
BM25 keywor…", cut before the part that says how answers are made, beside the job's phase
("encoding passages (resumed at 3,520)") and progress."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from PySide6.QtWidgets import QApplication, QMainWindow

from ragdesk.core.progress import ProgressUpdate
from ragdesk.ui.infos import SnapshotInfo
from ragdesk.ui.ops import OpRunner
from ragdesk.ui.setup_resume import RESUMING
from ragdesk.ui.state import AppState
from ragdesk.ui.status_bar import StatusLine
from ragdesk.ui.theme import install_theme
from tests.ui.settle import settle


@dataclass
class _Job:
    id: int = 1
    title: str = "Building the starter snapshot"
    cancellable: bool = True


def test_the_resume_notice_is_whole_beside_the_jobs_progress(qtbot: Any) -> None:
    # The app's stylesheet, as the real window has it (and as any earlier test that opened a
    # themed main window leaves it): without it the text measured narrower than it is.
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    sheet, palette = app.styleSheet(), app.palette()
    install_theme("light")
    window = QMainWindow()
    qtbot.addWidget(window)
    window.resize(1436, 872)  # the window that fills a 1440x900 screen under openbox
    ops = OpRunner()
    try:
        state = AppState("starter")
        # The starter snapshot as the restart finds it: answering with BM25, vectors not done.
        state.set_snapshots([SnapshotInfo(
            name="vital-articles", state="failed", passages=12_324,
            encoder="sentence-transformers/all-MiniLM-L6-v2", family="st", dim=384,
            created="2026-12-01T12:42:25+00:00", active=True, stage="sparse",
            interrupted_setup=True)])
        line = StatusLine(window.statusBar(), state, ops)
        line.update()
        job = _Job()
        line.job.start(job)
        line.job.update_progress(job, ProgressUpdate(
            done=3_520, total=12_324, message="encoding passages (resumed at 3,520)",
            rate=51.0, eta_s=176.0))
        line.show(RESUMING)
        window.show()
        qtbot.waitExposed(window)
        settle(qtbot, window)
        assert "BM25 for now" in line.snapshot.text()
        assert not line.text.is_elided(), line.text.text()
    finally:
        assert ops.shutdown(5_000)
        ops.deleteLater()
        app.setStyleSheet(sheet)
        app.setPalette(palette)
