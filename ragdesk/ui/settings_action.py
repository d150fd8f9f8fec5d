"""Edit ▸ Settings…: the :class:`~ragdesk.ui.settings_dialog.SettingsDialog` over the
window's settings, and what its saved changes do at once: the theme, the answer controls'
defaults and the models' thread count (set on the engine lane: OpenMP keeps the count per
calling thread). The rest waits for the next start, and the dialog says so."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ragdesk.core.options import AnswerOptions
from ragdesk.core.preferences import Preferences, apply_threads, load_preferences
from ragdesk.ui.background import op_background
from ragdesk.ui.ops import Lane, Op
from ragdesk.ui.settings_dialog import SettingsDialog

if TYPE_CHECKING:
    from ragdesk.ui.main_window import MainWindow


def open_settings(window: MainWindow) -> SettingsDialog:
    """Show the settings dialog (one per window, made on first use)."""
    dialog = window.findChild(SettingsDialog)
    if dialog is None:
        dialog = SettingsDialog(window.settings, window.backend.data.root,
                                op_background(window.ops, window, title="Settings"),
                                parent=window)
        dialog.applied.connect(lambda new, restart: apply_preferences(window, new, restart))
    # The answer controls change the same settings meanwhile (written a moment later).
    prefs = load_preferences(window.settings, window.backend.data.root)
    chosen = window.controls.params().to_settings()
    dialog.current = replace(prefs, answer={k: chosen.get(k, v) for k, v in prefs.answer.items()})
    dialog.show_preferences(dialog.current)
    dialog.show()
    dialog.raise_()
    dialog.activateWindow()
    return dialog


def apply_preferences(window: MainWindow, new: Preferences, restart: list[str]) -> None:
    """What can change while the app runs, changes now."""
    window.apply_theme(new.theme)
    params = window.controls.params().to_settings()
    window.controls.set_params(AnswerOptions.from_settings({**params, **new.answer}))
    threads = new.threads
    Op(lambda _ctx: apply_threads(threads), lane=Lane.ENGINE, title="Set the threads",
       cancellable=False).run(window.ops)
    if restart:
        window.status.show("Settings saved; restart ragdesk to use the new "
                           + ", ".join(restart) + ".")
    else:
        window.status.show("Settings saved and applied.")
