"""Noticing what another process changed in the catalog.

`ragdesk index switch` in a terminal, an import from the command line or a second window
change the catalog behind this window's back: its title and status bar kept naming the old
snapshot while the index manager (which reloads) marked the new one active. A cheap read on
the reads lane every few seconds, and whenever the app becomes active again (the user comes
back from the terminal), compares a stamp of the catalog; a change reloads the snapshot list,
and :class:`~ragdesk.ui.state.AppState` follows the catalog's active snapshot.
"""

from __future__ import annotations

from collections.abc import Hashable

from PySide6.QtCore import QObject, Qt, QTimer
from PySide6.QtGui import QGuiApplication

from ragdesk.ui.backend import Backend
from ragdesk.ui.library import Library
from ragdesk.ui.ops import Op, OpRunner
from ragdesk.ui.reports import ErrorReport

INTERVAL_MS = 3_000


class CatalogWatch(QObject):
    def __init__(self, backend: Backend, library: Library, ops: OpRunner,
                 interval_ms: int = INTERVAL_MS) -> None:
        super().__init__(library)
        self.backend = backend
        self.library = library
        self.ops = ops
        self._stamp: Hashable | None = None
        self._reading = False
        self.timer = QTimer(self)
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self.check)
        self.timer.start()
        self.check()
        app = QGuiApplication.instance()
        if isinstance(app, QGuiApplication):
            app.applicationStateChanged.connect(self._app_state)

    def _app_state(self, state: Qt.ApplicationState) -> None:
        if state == Qt.ApplicationState.ApplicationActive:
            self.check()

    def check(self) -> None:
        """Read the catalog's stamp (reads lane); reload the lists when it changed."""
        if self._reading:
            return
        self._reading = True
        Op(lambda _c: self.backend.catalog_stamp(), parent=self).success(
            self._compare).failure(self._unreadable).run(self.ops)

    def _compare(self, stamp: Hashable) -> None:
        self._reading = False
        seen, self._stamp = self._stamp, stamp
        # The first stamp may already hold a change the window's first list missed.
        if stamp != seen:
            self.library.reload_snapshots()

    def _unreadable(self, _report: ErrorReport) -> None:
        # Busy or locked for a moment (another process writing): the next tick reads it.
        self._reading = False
