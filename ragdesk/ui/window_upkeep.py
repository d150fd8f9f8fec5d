"""What keeps the window in step with the world outside it, wired in one place: an
interrupted starter setup resumed at start, the catalog followed when another process
changes it, the packs read from disk shown in the controls, the models loaded (and warmed
up) once both the snapshots and the packs are known, and the empty conversation naming the
snapshot its questions go to."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ragdesk.ui.catalog_watch import CatalogWatch
from ragdesk.ui.chat.empty_state import EmptyState
from ragdesk.ui.controls import ControlsPanel
from ragdesk.ui.infos import PackInfo
from ragdesk.ui.library import Library
from ragdesk.ui.setup_resume import SetupResume
from ragdesk.ui.view_context import ViewContext


@dataclass(frozen=True)
class Upkeep:
    setup_resume: SetupResume
    catalog_watch: CatalogWatch


def install_upkeep(ctx: ViewContext, library: Library, empty: EmptyState,
                   show: Callable[[str], None], controls: ControlsPanel,
                   preload: Callable[[], None]) -> Upkeep:
    """``empty``: the empty conversation, told the snapshot; ``show``: the status line;
    ``controls``: shown the packs; ``preload``: loads the models that answer with the
    controls' options."""
    state = ctx.state
    upkeep = Upkeep(SetupResume(state, library, ctx.ops, show),
                    CatalogWatch(ctx.backend, library, ctx.ops))

    def name_the_snapshot(_value: object = None) -> None:
        empty.set_snapshot(state.snapshot(state.active_snapshot))

    def load_models(_value: object = None) -> None:
        # The snapshots and the packs are read side by side, in either order. Until the packs
        # are known the controls show the settings' mode, not the pack's own (the reader
        # pack reads together), and the warm-up would prepare the wrong prompts.
        if state.packs and state.usable_snapshots():
            preload()

    def show_packs(packs: list[PackInfo]) -> None:
        controls.set_packs(packs, state.pack)
        load_models()

    state.packsChanged.connect(show_packs)
    state.snapshotsChanged.connect(load_models)
    state.snapshotsChanged.connect(name_the_snapshot)
    state.activeSnapshotChanged.connect(name_the_snapshot)
    return upkeep
