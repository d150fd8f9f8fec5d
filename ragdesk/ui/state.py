"""The application's state on the Qt side: what the catalog holds and what the user chose.

One :class:`AppState` per window; the window, its docks and its dialogs read it and subscribe
to its change signals (napari's evented models) instead of reaching into each other. It only
holds values: the ops that change the catalog live in :mod:`ragdesk.ui.library`, and they
update the state when their results arrive (on the GUI thread).

The pack that answers (:attr:`AppState.pack`) is kept apart from the one the user chose
(:attr:`AppState.chosen_pack`): each listed snapshot carries the pack the core would answer
from it with for that choice, and the state follows the active snapshot's.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QObject, Signal

from ragdesk.core.pack_choice import STARTER
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

    def __init__(self, pack: str, parent: QObject | None = None, *,
                 chosen: str | None = None) -> None:
        super().__init__(parent)
        self._snapshots: list[SnapshotInfo] = []
        self._packs: list[PackInfo] = []
        self._pack = pack
        self._chosen = chosen
        self._active: str | None = None
        self._catalog_active: str | None = None  # the catalog's, as the last list said
        self._answer: Answer | None = None
        # the selected answer's guess is behind "Show the guess" on its card: views show
        # none of its words (an answer not found in the snapshot)
        self.guess_hidden = False
        self._busy: set[Lane] = set()
        self._loaded = False

    @classmethod
    def for_choice(cls, chosen: str | None, parent: QObject | None = None) -> AppState:
        """The state as a window opens, from the settings' choice alone (a cheap read): the
        pack that answers is worked out with the first snapshot list, on a reads lane."""
        return cls(chosen or STARTER, parent, chosen=chosen)

    # ---- reading -------------------------------------------------------------------------

    @property
    def snapshots(self) -> list[SnapshotInfo]:
        return list(self._snapshots)

    @property
    def packs(self) -> list[PackInfo]:
        return list(self._packs)

    @property
    def pack(self) -> str:
        """The pack that answers: the user's choice, unless it cannot query the active
        snapshot and that snapshot has a pack of its own (the core's rule)."""
        return self._pack

    @property
    def chosen_pack(self) -> str | None:
        """The pack the user chose; None: never chose one."""
        return self._chosen

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
        """Those that can be asked now, each with the pack that would answer from it."""
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
        # Before the list is announced: what listens to it (the preload) reads the pack.
        self._follow_active_pack()
        self.snapshotsChanged.emit(self.snapshots)

    def set_packs(self, packs: Sequence[PackInfo]) -> None:
        self._packs = list(packs)
        self.packsChanged.emit(self.packs)

    def set_pack(self, name: str) -> None:
        if name != self._pack:
            self._pack = name
            self.packChanged.emit(name)

    def set_chosen_pack(self, name: str | None) -> None:
        """What the user chose; the pack that answers follows with the next list, which is
        worked out for this choice (it reads the catalog and the packs' files)."""
        self._chosen = name

    def set_active_snapshot(self, name: str | None) -> None:
        self._set_active(name)

    def _set_active(self, name: str | None) -> None:
        if name != self._active:
            self._active = name
            self._follow_active_pack()
            self.activeSnapshotChanged.emit(name)

    def _follow_active_pack(self) -> None:
        # The list says which pack answers from each snapshot: a switch takes that one at
        # once, without waiting for the list read after the switch.
        info = self.snapshot(self._active)
        if info is not None and info.answer_pack:
            self.set_pack(info.answer_pack)

    def select_answer(self, answer: Answer | None, guess_hidden: bool = False) -> None:
        """Select ``answer`` (None: none), telling the views again when only whether its
        guess is hidden changed."""
        self._answer = answer
        self.guess_hidden = answer is not None and guess_hidden
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
