"""The application's state on the Qt side: what the catalog holds and what the user chose.

One :class:`AppState` per window; the window, its docks and its dialogs read it and subscribe
to its change signals (napari's evented models) instead of reaching into each other. It only
holds values: the ops that change the catalog live in :mod:`ragdesk.ui.library`, and they
update the state when their results arrive (on the GUI thread).
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QObject, Signal

from ragdesk.core.types import Answer
from ragdesk.ui.infos import PackInfo, SnapshotInfo
from ragdesk.ui.ops import Lane, OpRunner


class AppState(QObject):
    snapshotsChanged = Signal(list)  # list[SnapshotInfo]
    packsChanged = Signal(list)  # list[PackInfo]
    activeSnapshotChanged = Signal(object)  # str | None
    packChanged = Signal(str)
    answerSelected = Signal(object)  # Answer: what the inspector, heat map and views show
    answerCleared = Signal()  # no answer is selected any more (a new conversation)
    busyChanged = Signal(object, bool)  # Lane, busy

    def __init__(self, pack: str, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._snapshots: list[SnapshotInfo] = []
        self._packs: list[PackInfo] = []
        self._pack = pack
        self._active: str | None = None
        self._catalog_active: str | None = None  # the catalog's, as the last list said
        self._answer: Answer | None = None
        self._busy: set[Lane] = set()
        self._loaded = False

    # ---- reading -------------------------------------------------------------------------

    @property
    def snapshots(self) -> list[SnapshotInfo]:
        return list(self._snapshots)

    @property
    def packs(self) -> list[PackInfo]:
        return list(self._packs)

    @property
    def pack(self) -> str:
        return self._pack

    @property
    def active_snapshot(self) -> str | None:
        return self._active

    @property
    def selected_answer(self) -> Answer | None:
        return self._answer

    @property
    def snapshots_loaded(self) -> bool:
        """The catalog has been read at least once."""
        return self._loaded

    def snapshot(self, name: str | None) -> SnapshotInfo | None:
        return next((s for s in self._snapshots if s.name == name), None)

    def pack_info(self, name: str | None = None) -> PackInfo | None:
        wanted = self._pack if name is None else name
        return next((p for p in self._packs if p.name == wanted), None)

    def usable_snapshots(self) -> list[SnapshotInfo]:
        """Those the current pack can answer from now."""
        return [s for s in self._snapshots if s.searchable and not s.unusable_reason]

    def busy(self, lane: Lane | None = None) -> bool:
        return bool(self._busy) if lane is None else lane in self._busy

    # ---- changing (GUI thread) -----------------------------------------------------------

    def set_snapshots(self, snapshots: Sequence[SnapshotInfo]) -> None:
        """The catalog's list. The active snapshot follows the catalog's when that changed
        since the last list (another process switched: ``ragdesk index switch``) or when the
        one shown is gone; otherwise the user's choice stays (a switch being written keeps
        its name meanwhile, while the catalog still names the old one)."""
        self._snapshots = list(snapshots)
        self._loaded = True
        in_catalog = next((s.name for s in self._snapshots if s.active), None)
        moved = in_catalog != self._catalog_active and in_catalog is not None
        self._catalog_active = in_catalog
        if moved or self.snapshot(self._active) is None:
            self._set_active(in_catalog)
        self.snapshotsChanged.emit(self.snapshots)

    def set_packs(self, packs: Sequence[PackInfo]) -> None:
        self._packs = list(packs)
        self.packsChanged.emit(self.packs)

    def set_pack(self, name: str) -> None:
        if name != self._pack:
            self._pack = name
            self.packChanged.emit(name)

    def set_active_snapshot(self, name: str | None) -> None:
        self._set_active(name)

    def _set_active(self, name: str | None) -> None:
        if name != self._active:
            self._active = name
            self.activeSnapshotChanged.emit(name)

    def select_answer(self, answer: Answer | None) -> None:
        self._answer = answer
        if answer is not None:
            self.answerSelected.emit(answer)
        else:
            self.answerCleared.emit()

    def follow_lanes(self, ops: OpRunner) -> None:
        """Keep :meth:`busy` in step with ``ops``' lanes."""
        for lane in Lane:
            ops.events(lane).busyChanged.connect(
                lambda busy, ln=lane: self.set_busy(ln, busy))

    def set_busy(self, lane: Lane, busy: bool) -> None:
        if busy != (lane in self._busy):
            if busy:
                self._busy.add(lane)
            else:
                self._busy.discard(lane)
            self.busyChanged.emit(lane, busy)
