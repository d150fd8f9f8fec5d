"""What keeps the window in step with the world outside it, wired in one place: an
interrupted starter setup resumed at start, the catalog followed when another process
changes it, and the empty conversation naming the snapshot its questions go to."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ragdesk.ui.catalog_watch import CatalogWatch
from ragdesk.ui.setup_resume import SetupResume

if TYPE_CHECKING:
    from ragdesk.ui.main_window import MainWindow


@dataclass(frozen=True)
class Upkeep:
    setup_resume: SetupResume
    catalog_watch: CatalogWatch


def install_upkeep(window: MainWindow) -> Upkeep:
    state = window.state
    upkeep = Upkeep(SetupResume(state, window.library, window.ops, window.status.show),
                    CatalogWatch(window.backend, window.library, window.ops))

    def name_the_snapshot(_value: object = None) -> None:
        window.chat.empty.set_snapshot(state.snapshot(state.active_snapshot))

    state.snapshotsChanged.connect(name_the_snapshot)
    state.activeSnapshotChanged.connect(name_the_snapshot)
    return upkeep
