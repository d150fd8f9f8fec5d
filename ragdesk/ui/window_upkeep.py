"""What keeps the window in step with the world outside it, wired in one place: an
interrupted starter setup resumed at start, the catalog followed when another process
changes it, and the empty conversation naming the snapshot its questions go to."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ragdesk.ui.catalog_watch import CatalogWatch
from ragdesk.ui.chat.empty_state import EmptyState
from ragdesk.ui.library import Library
from ragdesk.ui.setup_resume import SetupResume
from ragdesk.ui.view_context import ViewContext


@dataclass(frozen=True)
class Upkeep:
    setup_resume: SetupResume
    catalog_watch: CatalogWatch


def install_upkeep(ctx: ViewContext, library: Library, empty: EmptyState,
                   show: Callable[[str], None]) -> Upkeep:
    """``empty``: the empty conversation, told the snapshot; ``show``: the status line."""
    state = ctx.state
    upkeep = Upkeep(SetupResume(state, library, ctx.ops, show),
                    CatalogWatch(ctx.backend, library, ctx.ops))

    def name_the_snapshot(_value: object = None) -> None:
        empty.set_snapshot(state.snapshot(state.active_snapshot))

    state.snapshotsChanged.connect(name_the_snapshot)
    state.activeSnapshotChanged.connect(name_the_snapshot)
    return upkeep
