"""An interrupted starter setup carries on by itself when the app starts again.

Quitting during the setup's long part (the dense vectors) leaves its snapshot answering with
BM25 only, marked failed but resumable. Nobody looks in the index manager for that, so the
first snapshot list of a session that shows it (and nothing ready besides) starts the setup
again, which picks up where it stopped; the status bar says so, and that answers use keyword
search until it is done.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import QObject

from ragdesk.ui.infos import SnapshotInfo
from ragdesk.ui.library import STARTER_TITLE, Library
from ragdesk.ui.ops import Lane, OpRunner
from ragdesk.ui.state import AppState

# Short: the status bar holds it beside the job's phase and progress, and a longer one lost
# its second half at 1440 px; the snapshot's label there says "BM25 for now" with the why.
RESUMING = "Setup resumed; BM25 answers until it is done."


def should_resume(snapshots: Sequence[SnapshotInfo]) -> bool:
    """Whether the starter setup was left unfinished and nothing else can answer densely (a
    ready snapshot: then the setup would not rebuild the starter snapshot, see
    ``ensure_starter_snapshot``)."""
    return (any(s.interrupted_setup for s in snapshots)
            and not any(s.ready for s in snapshots))


class SetupResume(QObject):
    """Looks at the first snapshot list once; resumes the setup when it should."""

    def __init__(self, state: AppState, library: Library, ops: OpRunner,
                 show: Callable[[str], None]) -> None:
        super().__init__(library)
        self.library = library
        self.ops = ops
        self.show = show
        self.resumed = False
        self._looked = False
        state.snapshotsChanged.connect(self._snapshots)

    def _snapshots(self, snapshots: list[SnapshotInfo]) -> None:
        if self._looked:
            return
        self._looked = True
        running = self.ops.current(Lane.JOBS)
        if not should_resume(snapshots) or (running is not None
                                            and running.title == STARTER_TITLE):
            return
        self.resumed = True
        # After the status bar's own "Building …" line, which the job's start writes.
        self.library.start_starter_pack().started(lambda: self.show(RESUMING))
