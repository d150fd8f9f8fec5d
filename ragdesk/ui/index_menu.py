"""Index ▸ the snapshots, one checkable entry each (the active one checked), then the
index actions."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QAction, QActionGroup
from PySide6.QtWidgets import QMenu

from ragdesk.core.units import plural
from ragdesk.ui.actions import literal
from ragdesk.ui.infos import SnapshotInfo
from ragdesk.ui.state import AppState
from ragdesk.ui.texts import elide


class IndexMenu(QObject):
    switchRequested = Signal(str)

    def __init__(self, menu: QMenu, state: AppState, trailing: Sequence[QAction]) -> None:
        super().__init__(menu)
        self.menu = menu
        self.state = state
        self.trailing = list(trailing)
        self.group = QActionGroup(self)
        self.group.setExclusive(True)
        self.actions: dict[str, QAction] = {}
        menu.setToolTipsVisible(True)
        state.snapshotsChanged.connect(lambda _s: self.rebuild())
        state.activeSnapshotChanged.connect(self._check)
        self.rebuild()

    def rebuild(self) -> None:
        for a in self.group.actions():
            self.group.removeAction(a)
        self.menu.clear()
        self.menu.addAction("Active snapshot").setEnabled(False)
        self.actions = {}
        snapshots = self.state.snapshots
        if not snapshots:
            self.menu.addAction("    (no snapshots yet)").setEnabled(False)
        for s in snapshots:
            self.actions[s.name] = self._entry(s)
        self.menu.addSeparator()
        self.menu.addActions(self.trailing)

    def _entry(self, s: SnapshotInfo) -> QAction:
        label = f"{s.name}    {plural(s.passages, 'passage')}"
        if s.unusable_reason:
            label += f"  —  {elide(s.unusable_reason, 100)}"
        act = self.menu.addAction(literal(label))
        act.setCheckable(True)
        act.setChecked(s.name == self.state.active_snapshot)
        act.setEnabled(s.searchable and not s.unusable_reason)
        act.setToolTip(s.unusable_reason or f"{s.encoder or ''} ({s.dim or '?'}-d)")
        act.triggered.connect(lambda _c=False, n=s.name: self.switchRequested.emit(n))
        self.group.addAction(act)
        return act

    def _check(self, name: str | None) -> None:
        act = self.actions.get(name) if name else None
        if act is not None:
            act.setChecked(True)
