"""Edit ▸ Settings…: the :class:`~ragdesk.ui.settings_dialog.SettingsDialog` over the
window's settings, and what its saved changes do at once: the theme, the answer controls'
defaults and the models' thread count (set on the engine lane: OpenMP keeps the count per
calling thread). The rest waits for the next start, and the dialog says so."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from PySide6.QtWidgets import QWidget

from ragdesk.core.options import AnswerOptions
from ragdesk.core.preferences import Preferences, apply_threads, load_preferences
from ragdesk.ui.background import op_background
from ragdesk.ui.controls import ControlsPanel
from ragdesk.ui.ops import Lane, Op
from ragdesk.ui.settings_dialog import SettingsDialog
from ragdesk.ui.view_context import ViewContext


@dataclass(frozen=True)
class SettingsTarget:
    """What saved settings change at once, besides the files."""

    ctx: ViewContext
    controls: ControlsPanel  # the answer controls: their defaults follow the settings
    apply_theme: Callable[[str], object]
    show: Callable[[str], None]  # the status line


def open_settings(parent: QWidget, target: SettingsTarget) -> SettingsDialog:
    """Show the settings dialog (one per ``parent``, made on first use)."""
    settings, root = target.ctx.backend.ctx.settings, target.ctx.backend.data.root
    dialog = parent.findChild(SettingsDialog)
    if dialog is None:
        dialog = SettingsDialog(settings, root,
                                op_background(target.ctx.ops, parent, title="Settings"),
                                parent=parent)
        dialog.applied.connect(lambda new, restart: apply_preferences(target, new, restart))
    # The answer controls change the same settings meanwhile (written a moment later).
    prefs = load_preferences(settings, root)
    chosen = target.controls.params().to_settings()
    dialog.current = replace(prefs, answer={k: chosen.get(k, v) for k, v in prefs.answer.items()})
    dialog.show_preferences(dialog.current)
    dialog.show()
    dialog.raise_()
    dialog.activateWindow()
    return dialog


def apply_preferences(target: SettingsTarget, new: Preferences, restart: list[str]) -> None:
    """What can change while the app runs, changes now."""
    target.apply_theme(new.theme)
    controls = target.controls
    params = controls.params().to_settings()
    controls.set_params(AnswerOptions.from_settings({**params, **new.answer}))
    threads = new.threads
    Op(lambda _ctx: apply_threads(threads), lane=Lane.ENGINE, title="Set the threads",
       cancellable=False).run(target.ctx.ops)
    if restart:
        target.show("Settings saved; restart ragdesk to use the new "
                    + ", ".join(restart) + ".")
    else:
        target.show("Settings saved and applied.")
