"""What the window remembers (theme, layout, the answer controls), written on the writes
lane: the settings file is never written from two of the GUI's threads at once, and the GUI
thread never waits on the disk."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QByteArray, QObject, QSize, Qt, QTimer
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QDockWidget, QMainWindow

from ragdesk.core.options import PACK_MODES_KEY, AnswerOptions, pack_mode_choices
from ragdesk.core.settings import Settings
from ragdesk.ui.ops import Lane, Op, OpRunner
from ragdesk.ui.reports import ErrorReport

if TYPE_CHECKING:
    from ragdesk.ui.explore_docks import ExploreDocks

log = logging.getLogger(__name__)

# Spin boxes change in quick steps; the settings file is written once they settle.
PARAMS_SETTLE_MS = 400


class SettingsWriter(QObject):
    def __init__(self, settings: Settings, ops: OpRunner, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.settings = settings
        self.ops = ops
        self._params: AnswerOptions | None = None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(PARAMS_SETTLE_MS)
        self._timer.timeout.connect(self.flush_params)

    def write(self, values: dict[str, object]) -> None:
        self._run(lambda: self.settings.update(values), sorted(values))

    def choose_pack_mode(self, pack: str, mode: str) -> None:
        """Remember ``mode`` as the reading mode picked for ``pack``, beside the other
        packs' (read when written: another process may have picked one meanwhile)."""
        def write() -> None:
            picked = pack_mode_choices(self.settings.get(PACK_MODES_KEY))
            self.settings.update({PACK_MODES_KEY: {**picked, pack: mode}})

        self._run(write, [PACK_MODES_KEY])

    def _run(self, write: Callable[[], None], keys: list[str]) -> None:
        def failed(report: ErrorReport) -> None:
            log.warning("could not save the settings %s: %s", keys, report.message)

        # Not cancellable: closing the window waits for it rather than dropping it.
        Op(lambda _c: write(), lane=Lane.WRITES, title="Save settings",
           cancellable=False).failure(failed).run(self.ops)

    def params_changed(self, params: AnswerOptions) -> None:
        self._params = params
        self._timer.start()

    def flush_params(self) -> None:
        self._timer.stop()
        if self._params is not None:
            self.write(self._params.to_settings())
            self._params = None


FIRST_SIZE = QSize(1320, 860)
# The titles of the explore views open at the quit: their docks are built on first use, so
# the saved window state alone cannot bring them back.
EXPLORE_KEY = "explore_views"


def first_size(window: QMainWindow) -> QSize:
    """The window's size at its first start: roomy, but never past the screen's free area (on
    a 1280x720 screen the window's bottom and its status bar were off the screen)."""
    screen = window.screen() or QGuiApplication.primaryScreen()
    if screen is None:
        return FIRST_SIZE
    free = screen.availableGeometry()
    return FIRST_SIZE.boundedTo(QSize(free.width() - 16, free.height() - 40))


def restore_layout(window: QMainWindow, settings: Settings, explore: ExploreDocks) -> None:
    geo = settings.get("window_geometry")
    state = settings.get("window_state")
    if isinstance(geo, str) and geo:
        window.restoreGeometry(QByteArray.fromBase64(geo.encode("ascii")))
    else:
        window.resize(first_size(window))
    if isinstance(state, str) and state:
        window.restoreState(QByteArray.fromBase64(state.encode("ascii")))
        explore.reopen(settings.get(EXPLORE_KEY))
        return
    first_layout(window)


def first_layout(window: QMainWindow) -> None:
    """The docks' sizes at a first start, for the window's present size. On a small screen
    the heat map below the chat takes a third of the height at most (at 1280x720 its 300 px
    left the answers a strip of 250); that third holds the five rows of K = 5."""
    heat = window.findChild(QDockWidget, "HeatMapDock")
    if heat is not None:
        window.resizeDocks([heat], [min(300, max(200, window.height() // 3))],
                           Qt.Orientation.Vertical)


def layout_values(window: QMainWindow, explore: ExploreDocks) -> dict[str, object]:
    return {"window_geometry": bytes(window.saveGeometry().toBase64().data()).decode("ascii"),
            "window_state": bytes(window.saveState().toBase64().data()).decode("ascii"),
            EXPLORE_KEY: explore.open_titles()}
