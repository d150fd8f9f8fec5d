"""The main window's actions, declared in one table: each row's text, slot, shortcut,
icon, tip and menu. ``ui.actions`` builds the ``QAction``s and menus from it.

A row's slot gets the :class:`Commands` it is built with (the main window offers them), so
the table names what it calls without importing the window."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeAlias

from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QWidget

from ragdesk.ui.actions import ActionSpec
from ragdesk.ui.backend import Backend
from ragdesk.ui.controls import ControlsPanel
from ragdesk.ui.library import Library
from ragdesk.ui.ops import OpRunner
from ragdesk.ui.selection import AnswerSelection
from ragdesk.ui.state import AppState
from ragdesk.ui.transcript import Transcript
from ragdesk.ui.tune_dialog import ReadingMode, open_tune_dialog


class Commands(Protocol):
    """What the rows' slots call."""

    selection: AnswerSelection
    transcript: Transcript
    library: Library
    state: AppState
    ops: OpRunner
    backend: Backend
    controls: ControlsPanel

    def window(self) -> QWidget: ...

    def new_conversation(self) -> None: ...
    def close(self) -> bool: ...
    def send(self) -> object: ...
    def stop(self) -> None: ...
    def focus_question(self) -> None: ...
    def open_settings(self) -> object: ...
    def open_compare(self) -> object: ...
    def open_index_manager(self) -> object: ...
    def open_models(self) -> object: ...
    def open_first_run(self) -> object: ...
    def show_shortcuts(self) -> object: ...
    def show_about(self) -> None: ...


A: TypeAlias = ActionSpec[Commands]


def _show_passage(k: int) -> Callable[[Commands], None]:
    return lambda w: w.selection.show_passage(k)


def _tune(w: Commands) -> object:
    mode = w.controls.mode

    def pick(name: str) -> None:
        # As if picked in the controls: remembered for the pack shown there.
        mode.setCurrentIndex(mode.findData(name))

    return open_tune_dialog(w.window(), w.state, w.ops, w.library, w.backend,
                            ReadingMode(lambda: w.controls.params().mode, pick))


Std = QKeySequence.StandardKey
MENUS = ("&File", "&Edit", "&Answer", "&Index", "&View", "&Help")
ACTIONS: tuple[A, ...] = (
    A("new", "&New conversation", lambda w: w.new_conversation(), Std.New, "new-chat",
      "Start a new conversation (the one shown stays saved)", "&File"),
    A("export", "&Export conversation as Markdown…", lambda w: w.transcript.export_dialog(),
      "Ctrl+E", "export", "Save the conversation with its citations", "&File"),
    A("quit", "&Quit", lambda w: w.close(), "Ctrl+Q", menu="&File", separator_before=True),
    A("copy", "&Copy", lambda w: w.transcript.copy(), Std.Copy, "copy",
      "Copy the selection, or the selected answer as Markdown", "&Edit"),
    A("copy_md", "Copy answer as &Markdown", lambda w: w.transcript.copy_answer(), "Ctrl+Shift+C",
      menu="&Edit"),
    A("copy_all", "Copy co&nversation as Markdown", lambda w: w.transcript.copy_conversation(),
      "Ctrl+Alt+C", menu="&Edit"),
    A("settings", "&Settings…", lambda w: w.open_settings(), "Ctrl+,", None,
      "Data folder, device, threads, theme and the default answer options", "&Edit",
      separator_before=True),
    A("focus", "&Focus the question box", lambda w: w.focus_question(), "Ctrl+L",
      menu="&Edit", separator_before=True),
    A("send", "&Send", lambda w: w.send(), "Ctrl+Return", "send", menu="&Answer"),
    A("stop", "S&top", lambda w: w.stop(), "Esc", "stop", "Stop generating", "&Answer",
      enabled=False),
    A("prev", "&Previous answer", lambda w: w.selection.step(-1), "Alt+Up", menu="&Answer",
      separator_before=True),
    A("next", "&Next answer", lambda w: w.selection.step(1), "Alt+Down", menu="&Answer"),
    *(A(f"passage_{n}", f"Show passage [&{n}]", _show_passage(n - 1), f"Ctrl+{n}",
        menu="&Answer/Show p&assage") for n in range(1, 10)),
    A("heat_focus", "Focus the &heat map", lambda w: w.selection.focus_heatmap(),
      "Ctrl+Shift+H", "heatmap", menu="&Answer"),
    A("compare", "&Compare snapshots…", lambda w: w.open_compare(), "Ctrl+Shift+K",
      "compare", "Ask one question against two snapshots", "&Index"),
    A("manage", "&Manage indexes…", lambda w: w.open_index_manager(), "Ctrl+I", "database",
      "Import, quantize, verify and remove snapshots", "&Index"),
    A("packs", "Model &packs…", lambda w: w.open_models(), None, "package",
      "The model packs on this machine; add the stronger reader pack", "&Index"),
    A("tune", "&Tune the retriever…", _tune, None, "sliders",
      "Train the pack's question encoder on your questions and answers", "&Index"),
    A("reload", "&Reload list", lambda w: w.library.reload_snapshots(), "F5", "refresh",
      menu="&Index"),
    A("get_started", "&Get started…", lambda w: w.open_first_run(), None, None,
      "The starter pack, a paper pack or your own files", "&Help"),
    A("shortcuts", "&Keyboard shortcuts", lambda w: w.show_shortcuts(), "F1", "keyboard",
      menu="&Help"),
    A("about", "&About ragdesk", lambda w: w.show_about(), None, "info", menu="&Help"),
)
DOCK_KEYS = ("Ctrl+Shift+1", "Ctrl+Shift+2", "Ctrl+Shift+3", "Ctrl+Shift+4")
