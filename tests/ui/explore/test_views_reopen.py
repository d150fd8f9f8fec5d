"""The explore views open at the quit open again at the next start, where they were; a view
closed before the quit stays closed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragdesk.ui.explore.install import MAP_TITLE, STEPS_TITLE
from ragdesk.ui.explore_docks import in_front
from tests.ui.conftest import SharedModelsBackend, open_window


def _action(window: Any, title: str) -> Any:
    return next(a for a in window.explore_menu.actions() if a.text() == f"&{title}")


def _reopen(qtbot: Any, window: Any) -> Any:
    root = Path(window.backend.data.root)
    window.close()
    assert window.stopped_cleanly
    return open_window(qtbot, root, SharedModelsBackend)


def _close(window: Any) -> None:
    window.shutdown()
    window.backend.ctx.close()


def test_the_views_open_at_the_quit_open_at_the_next_start(qtbot: Any, window: Any) -> None:
    for title in (STEPS_TITLE, MAP_TITLE):
        _action(window, title).setChecked(True)
    steps, shown_map = window.explore_dock(STEPS_TITLE), window.explore_dock(MAP_TITLE)
    qtbot.waitUntil(lambda: steps.isVisible() and shown_map.isVisible())
    _action(window, MAP_TITLE).setChecked(False)  # hidden, not just behind a tab
    qtbot.waitUntil(lambda: shown_map.isHidden())
    # Not where a first opening puts it (a tab beside the passage): its place comes back.
    steps.setFloating(True)
    qtbot.waitUntil(steps.isFloating)
    again = _reopen(qtbot, window)
    try:
        dock = again.explore_dock(STEPS_TITLE)
        assert dock is not None and not dock.isHidden() and dock.isFloating()
        assert _action(again, STEPS_TITLE).isChecked()
        assert again.explore_dock(MAP_TITLE) is None
        assert not _action(again, MAP_TITLE).isChecked()
        # and it works as one opened from the menu: hidden and shown again
        _action(again, STEPS_TITLE).setChecked(False)
        qtbot.waitUntil(dock.isHidden)
        _action(again, STEPS_TITLE).setChecked(True)
        qtbot.waitUntil(dock.isVisible)
    finally:
        _close(again)


def test_a_view_behind_the_passage_tab_comes_back_behind_it(qtbot: Any, window: Any) -> None:
    _action(window, STEPS_TITLE).setChecked(True)
    qtbot.waitUntil(lambda: in_front(window.explore_dock(STEPS_TITLE)))
    window.inspector_dock.raise_()
    qtbot.waitUntil(lambda: in_front(window.inspector_dock))
    again = _reopen(qtbot, window)
    try:
        dock = again.explore_dock(STEPS_TITLE)
        assert dock is not None and not dock.isHidden() and not dock.isFloating()
        assert dock in again.tabifiedDockWidgets(again.inspector_dock)
        qtbot.waitUntil(lambda: in_front(again.inspector_dock))
        assert not in_front(dock)
    finally:
        _close(again)


def test_a_first_start_opens_no_view(qtbot: Any, window: Any) -> None:
    assert window.explore_dock(STEPS_TITLE) is None and window.explore_dock(MAP_TITLE) is None
