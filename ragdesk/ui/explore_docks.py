"""View ▸ Explore: views that plug into the window as docks, built on first use.

A view gets a :class:`ViewContext` (the state, the op runner, the backend and a way to ask),
never the window, so it works in any window that offers those.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QApplication, QDockWidget, QMainWindow, QMenu, QWidget

from ragdesk.ui.view_context import ViewContext

log = logging.getLogger(__name__)

ViewFactory = Callable[[ViewContext], QWidget]


class ExploreDocks:
    def __init__(self, window: QMainWindow, menu: QMenu, tab_with: QDockWidget,
                 context: ViewContext) -> None:
        self.window = window
        self.menu = menu
        self.tab_with = tab_with
        self.context = context
        self._views: dict[str, tuple[QAction, ViewFactory]] = {}
        self._docks: dict[str, QDockWidget] = {}
        self._restore_widths: dict[QDockWidget, int] | None = None
        self._placeholder: QAction | None = menu.addAction("No explore views installed")
        self._placeholder.setEnabled(False)

    def add(self, title: str, factory: ViewFactory, shortcut: str | None = None) -> QAction:
        if self._placeholder is not None:
            self.menu.removeAction(self._placeholder)
            self._placeholder = None
        act = QAction(f"&{title}", self.window)  # its first letter, from the keyboard
        act.setCheckable(True)
        if shortcut:
            act.setShortcut(QKeySequence(shortcut))
        self.window.addAction(act)
        self.menu.addAction(act)
        self._views[title] = (act, factory)
        act.toggled.connect(lambda on, t=title: self.toggle(t, on))
        return act

    def dock(self, title: str) -> QDockWidget | None:
        return self._docks.get(title)

    def open_titles(self) -> list[str]:
        """The views open now (in front or behind another tab), for the next start."""
        return [t for t, d in self._docks.items() if not d.isHidden()]

    def reopen(self, titles: object) -> None:
        """Open again the views that were open at the last quit, where the window's restored
        state had them: their docks did not exist when that state was restored. Not brought
        forward: the tab that was in front at the quit stays there."""
        if not isinstance(titles, list):
            return
        for title in titles:
            if not isinstance(title, str) or title not in self._views or title in self._docks:
                continue
            act = self._views[title][0]
            act.blockSignals(True)  # toggled would bring the view forward
            act.setChecked(True)
            act.blockSignals(False)
            self._build(title, saved_place=True).setVisible(True)

    def toggle(self, title: str, on: bool) -> None:
        """Show (``on``) or hide a view. A view that is open but behind another tab is
        brought forward instead of hidden: its shortcut means "show me" until it is in front,
        and only then "hide"."""
        dock = self._docks.get(title)
        if dock is None and on:
            dock = self._build(title)
        if dock is None:
            return
        if not on and not dock.isHidden() and not in_front(dock):
            self._views[title][0].setChecked(True)  # back here with on=True, which raises it
            return
        dock.setVisible(on)
        if on:
            self._bring_forward(dock)

    def _bring_forward(self, dock: QDockWidget) -> None:
        """In front of the docks tabbed with it, with the keyboard, so that its keys work
        without a click inside first."""
        dock.raise_()
        if dock.isFloating():
            dock.activateWindow()
        # After the layout has placed a new or re-shown dock: a widget not shown yet ignores
        # setFocus.
        QTimer.singleShot(0, dock, lambda: _focus_view(dock))

    def _build(self, title: str, *, saved_place: bool = False) -> QDockWidget:
        act, factory = self._views[title]
        dock = QDockWidget(title, self.window)
        dock.setObjectName("Explore-" + re.sub(r"\W+", "-", title))
        dock.setWidget(factory(self.context))
        # Where the restored window state had it (False: that state never held it).
        if not (saved_place and self.window.restoreDockWidget(dock)):
            self._place_beside_passage(dock)
        dock.visibilityChanged.connect(
            lambda vis, a=act, d=dock: a.setChecked(vis or not d.isHidden()))
        dock.visibilityChanged.connect(lambda vis, d=dock: _clicked_forward(d, vis))
        self._docks[title] = dock
        answer = self.context.state.selected_answer
        if answer is not None:
            self.context.state.answerSelected.emit(answer)  # the new view shows it too
        return dock

    def _place_beside_passage(self, dock: QDockWidget) -> None:
        # The new tab would widen the whole right-hand area to its own preferred width, taking
        # it from the left-hand docks (the conversations sidebar went down to its minimum, and
        # stayed there in the saved layout): every side dock keeps the width it had. Views
        # opened together keep the widths from before the first.
        restore = self._restore_widths is None
        widths = self._restore_widths = self._restore_widths or self._side_widths()
        self.window.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, dock)
        self.window.tabifyDockWidget(self.tab_with, dock)
        if self.tab_with in widths:
            widths[dock] = widths[self.tab_with]
        if restore:  # after the layout has taken the new tab in, on its next pass
            QTimer.singleShot(0, self.tab_with, self._restore)

    def _restore(self) -> None:
        widths, self._restore_widths = self._restore_widths or {}, None
        self.window.resizeDocks(list(widths), list(widths.values()),
                                Qt.Orientation.Horizontal)

    def _side_widths(self) -> dict[QDockWidget, int]:
        """The widths of the docks shown beside the conversation, left and right."""
        sides = (Qt.DockWidgetArea.LeftDockWidgetArea, Qt.DockWidgetArea.RightDockWidgetArea)
        return {d: d.width() for d in self.window.findChildren(QDockWidget)
                if d.isVisible() and not d.isFloating()
                and self.window.dockWidgetArea(d) in sides}

    def shutdown(self) -> None:
        """Views with a ``shutdown()`` stop their work (the window is closing)."""
        for dock in self._docks.values():
            stop = getattr(dock.widget(), "shutdown", None)
            if callable(stop):
                try:
                    stop()
                except Exception:
                    log.warning("an explore view failed to shut down", exc_info=True)



def in_front(dock: QDockWidget) -> bool:
    """Shown and not behind another tab (Qt moves a tab's hidden docks off the window)."""
    return dock.isVisible() and not dock.visibleRegion().isEmpty()


def _focus_view(dock: QDockWidget) -> None:
    view = dock.widget()
    if view is not None and in_front(dock):
        view.setFocus(Qt.FocusReason.ShortcutFocusReason)


def _clicked_forward(dock: QDockWidget, visible: bool) -> None:
    """A click on a view's tab gives it the keyboard too. Only a click: a view that comes
    forward because another closed leaves the focus where the user was typing."""
    if visible and QApplication.mouseButtons() & Qt.MouseButton.LeftButton:
        QTimer.singleShot(0, dock, lambda: _focus_view(dock))
