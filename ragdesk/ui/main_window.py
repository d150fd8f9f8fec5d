"""The main window: a shell around the conversation, with the controls on the left, the
passage inspector on the right and the posterior heat map below; menus from
:data:`ragdesk.ui.window_actions.ACTIONS`.

The window holds no domain state and does no work: :class:`~ragdesk.ui.state.AppState`
holds what the catalog and the user chose, :class:`~ragdesk.ui.ops.OpRunner` runs the work
on its lanes, :class:`~ragdesk.ui.library.Library` changes the catalog and
:class:`~ragdesk.ui.conversation.Conversation` asks the questions. Dialogs and explore views
get those, not the window.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QCloseEvent, QKeySequence
from PySide6.QtWidgets import QDialog, QDockWidget, QMainWindow, QVBoxLayout, QWidget

from ragdesk.core.options import AnswerOptions
from ragdesk.core.types import Hit
from ragdesk.ui import help_dialogs
from ragdesk.ui.actions import add_mnemonics, build_actions, build_menus, in_menu
from ragdesk.ui.article_view import ArticleView
from ragdesk.ui.backend import Backend
from ragdesk.ui.background import op_background
from ragdesk.ui.chat.card import AnswerCard
from ragdesk.ui.chat.view import ChatView
from ragdesk.ui.citations import install_citations
from ragdesk.ui.compare import CompareDialog
from ragdesk.ui.composer import Composer, CopyPassThrough
from ragdesk.ui.controls import ControlsPanel
from ragdesk.ui.conversation import Conversation
from ragdesk.ui.error_reporter import ErrorReporter
from ragdesk.ui.explore import install as install_explore_views
from ragdesk.ui.explore_docks import ExploreDocks, ViewFactory
from ragdesk.ui.heatmap_panel import HeatMapPanel
from ragdesk.ui.history import LAST_KEY, install_history
from ragdesk.ui.index_menu import IndexMenu
from ragdesk.ui.inspector import PassageInspector
from ragdesk.ui.library import Library
from ragdesk.ui.models_dialog import ModelsDialog, open_models_dialog
from ragdesk.ui.ops import Lane, OpRunner
from ragdesk.ui.resources import app_icon, icon
from ragdesk.ui.selection import AnswerSelection
from ragdesk.ui.settings_action import SettingsTarget, open_settings
from ragdesk.ui.settings_dialog import SettingsDialog
from ragdesk.ui.state import AppState
from ragdesk.ui.status_bar import StatusLine
from ragdesk.ui.theme import install_theme, theme_menu
from ragdesk.ui.transcript import Transcript
from ragdesk.ui.view_context import ViewContext
from ragdesk.ui.window_actions import ACTIONS, DOCK_KEYS, MENUS
from ragdesk.ui.window_settings import SettingsWriter, layout_values, restore_layout
from ragdesk.ui.window_upkeep import install_upkeep

if TYPE_CHECKING:
    from ragdesk.ui.first_run import FirstRunDialog
    from ragdesk.ui.index_manager import IndexManagerDialog
    from ragdesk.ui.infos import SnapshotInfo

log = logging.getLogger(__name__)


class MainWindow(QMainWindow):
    def __init__(self, backend: Backend, *, apply_theme: bool = True,
                 offer_first_run: bool = True) -> None:
        super().__init__()
        self.backend = backend
        self.settings = backend.ctx.settings
        self.offer_first_run = offer_first_run
        self.setObjectName("MainWindow")
        self.setWindowIcon(app_icon())
        self.errors = ErrorReporter(self, {
            "first-run": ("Get started…", self.open_first_run),
            "manage-indexes": ("Manage indexes…", self.open_index_manager),
            "choose-pack": ("Choose a model pack", self.focus_pack_selector)})
        self.state = AppState.for_choice(backend.chosen_pack(), self)
        self.ops = OpRunner(self, on_failure=self.errors.report)
        self.library: Library = Library(self.state, self.ops, backend, self.errors.report, self)
        self.conversation = Conversation(backend, self.ops, lambda: self.state.pack,
                                         self.errors.report, self)
        self.settings_writer = SettingsWriter(self.settings, self.ops, self)
        self.context = ViewContext(self.state, self.ops, backend, lambda q, hits, snap:
                                   self.ask_from_docs(q, hits, snapshot=snap))
        self.index_manager: IndexManagerDialog | None = None
        self.compare_dialog: CompareDialog | None = None
        self.first_run: FirstRunDialog | None = None
        self.stopped_cleanly = True
        self._shut_down = False
        self._first_load_done = False
        self._build_ui()
        self._build_menus()
        self._connect()
        if apply_theme:
            self.apply_theme(str(self.settings.get("theme", "system")))
        restore_layout(self, self.settings, self.explore)
        self.update_status()

    # ---- construction ----------------------------------------------------------------------

    def _build_ui(self) -> None:
        self.chat = ChatView()
        self.composer = Composer()
        self.question = self.composer.question
        central = QWidget()
        central.setObjectName("Central")
        # Docks widened (or a layout saved on a larger screen) leave the conversation this
        # much at least, so questions and answers are never squeezed into a sliver.
        central.setMinimumWidth(380)
        col = QVBoxLayout(central)
        col.setContentsMargins(0, 0, 0, 0)
        col.setSpacing(0)
        col.addWidget(self.chat, 1)
        col.addWidget(self.composer)
        self.setCentralWidget(central)
        self.controls = ControlsPanel.from_settings(self.settings.as_dict(), self.state.pack)
        area = Qt.DockWidgetArea
        self.controls_dock = self._dock("Controls", "ControlsDock", self.controls,
                                        area.LeftDockWidgetArea)
        self.inspector = PassageInspector()
        self.inspector.add_article_view(ArticleView(op_background(self.ops, self)),
                                        lambda doc: lambda: self.backend.article(doc))
        self.inspector_dock = self._dock("Passage", "InspectorDock", self.inspector,
                                         area.RightDockWidgetArea)
        self.heatmap = HeatMapPanel()
        self.heatmap_dock = self._dock("Posterior heat map", "HeatMapDock", self.heatmap,
                                       area.BottomDockWidgetArea)
        self.setCorner(Qt.Corner.BottomLeftCorner, area.LeftDockWidgetArea)
        self.setCorner(Qt.Corner.BottomRightCorner, area.RightDockWidgetArea)
        self.resizeDocks([self.controls_dock, self.inspector_dock], [230, 400],
                         Qt.Orientation.Horizontal)
        self.resizeDocks([self.heatmap_dock], [300], Qt.Orientation.Vertical)
        self.selection: AnswerSelection = AnswerSelection(
            self.state, self.chat, self.inspector, self.inspector_dock, self.heatmap,
            self.heatmap_dock, self)
        # "report.pdf · p. 2" on the chips and in the inspector, and opening it
        self.citations = install_citations(self.ops, self.backend.citation_places,
                                           self.inspector, self)
        self.status = StatusLine(self.statusBar(), self.state, self.ops)
        self.transcript: Transcript = Transcript(self.chat, self.selection, self.status.show,
                                                 self.ops)
        self.history, self.sidebar_dock = install_history(
            self, self.controls_dock, self.context, self.chat, self.selection,
            self.conversation, wire_card=self.wire_card, remember=self.settings_writer.write,
            show=self.status.show)
        # setup resumed, catalog followed, packs shown, models preloaded, snapshot named
        self.upkeep = install_upkeep(
            self.context, self.library, self.chat.empty, self.status.show, self.controls,
            lambda: self.conversation.preload(self.state.pack, self.params()))

    def _dock(self, title: str, name: str, widget: QWidget,
              area: Qt.DockWidgetArea) -> QDockWidget:
        dock = QDockWidget(title, self)
        dock.setObjectName(name)
        dock.setWidget(widget)
        dock.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetClosable
                         | QDockWidget.DockWidgetFeature.DockWidgetMovable
                         | QDockWidget.DockWidgetFeature.DockWidgetFloatable)
        self.addDockWidget(area, dock)
        return dock

    def _build_menus(self) -> None:
        self.actions_by_name = build_actions(self, self, ACTIONS)
        menus = build_menus(self.menuBar(), MENUS, ACTIONS, self.actions_by_name)
        self.index_menu = IndexMenu(menus["&Index"], self.state,
                                    in_menu(ACTIONS, "&Index", self.actions_by_name))
        view = menus["&View"]
        for dock, key in zip(self.docks(), DOCK_KEYS, strict=True):
            dock.toggleViewAction().setShortcut(QKeySequence(key))
            view.addAction(dock.toggleViewAction())
        view.addSeparator()
        self.explore_menu = view.addMenu("&Explore")
        self.explore = ExploreDocks(self, self.explore_menu, self.inspector_dock, self.context)
        install_explore_views(self.explore)
        view.addSeparator()
        self.theme_actions = theme_menu(view.addMenu("&Theme"), self.apply_theme)
        add_mnemonics(view)

    def _connect(self) -> None:
        c, s = self.composer, self.state
        self.chat.empty.exampleChosen.connect(self._ask_example)
        c.question.submitted.connect(self.send)
        c.send_button.clicked.connect(self.send)
        c.stop_button.clicked.connect(self.stop)
        self.controls.paramsChanged.connect(self.settings_writer.params_changed)
        self.controls.modeChosen.connect(self.settings_writer.choose_pack_mode)
        self.controls.packChanged.connect(self.library.set_pack)
        self.index_menu.switchRequested.connect(self.library.switch_snapshot)
        for source in (self.library.activity, self.conversation.activity):
            source.connect(self.status.show)
        conv = self.conversation
        conv.cardCreated.connect(self.wire_card)
        conv.tokenShown.connect(self.selection.token_shown)
        conv.chatAnswered.connect(self.selection.answered)
        conv.busyChanged.connect(self._answering)
        self.library.setupProgress.connect(conv.show_setup_progress)
        self.selection.copyRequested.connect(self.transcript.copy_card)
        s.snapshotsChanged.connect(self._snapshots_changed)
        s.packChanged.connect(self.controls.show_pack)
        for signal in (s.activeSnapshotChanged, s.packChanged):
            signal.connect(lambda _v: self.update_status())
        s.follow_lanes(self.ops)
        self._copy_filter = CopyPassThrough(self)

    def docks(self) -> tuple[QDockWidget, ...]:
        return self.controls_dock, self.inspector_dock, self.heatmap_dock, self.sidebar_dock

    # ---- state ---------------------------------------------------------------------------

    def params(self) -> AnswerOptions:
        return self.controls.params()

    def start(self) -> None:
        """Called once the window is shown: read the catalog, then offer first-run help."""
        self.library.reload_packs()
        self.library.reload_snapshots()
        self.history.start(self.settings.get(LAST_KEY))

    def _snapshots_changed(self, snapshots: list[SnapshotInfo]) -> None:
        self.update_status()
        first, self._first_load_done = not self._first_load_done, True
        if first and self.offer_first_run and self.first_run is None \
                and not any(s.searchable for s in snapshots) and not self.ops.busy(Lane.JOBS):
            self.open_first_run()

    def update_status(self) -> None:
        self.status.update()
        self.setWindowTitle(window_title(self.state.active_snapshot))

    # ---- asking ----------------------------------------------------------------------------

    def send(self) -> AnswerCard | None:
        q = self.question.toPlainText().strip()
        if not q:
            self.question.setFocus()
            return None
        if self.conversation.busy:
            self.status.show("Still answering the last question — press Esc to stop it.")
            return None
        self.question.clear()
        return self._ask_in_chat(q, self.state.active_snapshot, None)

    def ask_from_docs(self, question: str, hits: Sequence[Hit], *,
                      snapshot: str | None = None) -> AnswerCard | None:
        """Answer ``question`` from the given passages (rank order, exact scores) instead of
        retrieving; the answer joins the conversation like any other."""
        if self.conversation.busy:
            self.status.show("Still answering the last question — press Esc to stop it.")
            return None
        return self._ask_in_chat(question, snapshot, list(hits))

    def _ask_in_chat(self, q: str, snapshot: str | None, docs: list[Hit] | None) -> AnswerCard:
        card = self.conversation.ask(q, self.params(), snapshot=snapshot, docs=docs)
        self.chat.add_card(card)
        self.selection.select(card)
        return card

    def wire_card(self, card: AnswerCard) -> None:
        self.selection.wire(card)
        self.citations.watch(card)
        card.text.installEventFilter(self._copy_filter)

    def _ask_example(self, q: str) -> None:
        self.question.setPlainText(q)
        self.send()

    def stop(self) -> None:
        if self.conversation.busy:
            self.conversation.cancel()
            self.status.show("Stopping…")

    def _answering(self, busy: bool) -> None:
        self.composer.set_answering(busy)
        self.actions_by_name["stop"].setEnabled(busy)

    def focus_question(self) -> None:
        self.activateWindow()
        self.question.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.question.selectAll()

    def focus_pack_selector(self) -> None:
        self.controls.pack.setFocus(Qt.FocusReason.OtherFocusReason)

    def new_conversation(self) -> None:
        self.history.new()  # the conversation shown stays saved, in the sidebar
        self.focus_question()

    # ---- dialogs, views and theme ----------------------------------------------------------

    def open_index_manager(self) -> IndexManagerDialog:
        from ragdesk.ui.index_manager import IndexManagerDialog

        if self.index_manager is None:
            self.index_manager = IndexManagerDialog(self, self.state, self.ops, self.library,
                                                    self.errors.report)
        _present(self.index_manager)
        self.library.reload_snapshots()
        return self.index_manager

    def open_compare(self) -> CompareDialog:
        if self.compare_dialog is None:
            self.compare_dialog = CompareDialog(self, self.state, self.conversation,
                                                self.params)
        d = self.compare_dialog
        if not d.question.text() and self.selection.card is not None:
            d.question.setText(self.selection.card.question)
        _present(d)
        d.question.setFocus()
        return d

    def open_first_run(self) -> FirstRunDialog:
        from ragdesk.ui.first_run import FirstRunDialog

        self.first_run = FirstRunDialog(self, self.state, self.library, self.backend,
                                        lambda: self.open_index_manager().open_import())
        self.first_run.open()
        return self.first_run

    def open_settings(self) -> SettingsDialog:
        return open_settings(self, SettingsTarget(self.context, self.controls, self.apply_theme,
                                                  self.status.show))

    def open_models(self) -> ModelsDialog:
        return open_models_dialog(self, self.state, self.ops, self.library)

    def show_shortcuts(self) -> QDialog:
        toggles = [d.toggleViewAction() for d in self.docks()]
        return help_dialogs.show_shortcuts(self, help_dialogs.shortcut_rows(self.actions(),
                                                                            toggles))

    def show_about(self) -> None:
        help_dialogs.show_about(self, str(self.backend.data.root))

    def add_explore_view(self, title: str, factory: ViewFactory, *,
                         shortcut: str | None = None) -> QAction:
        """Add ``title`` to View ▸ Explore; ``factory(context)`` builds it on first use."""
        return self.explore.add(title, factory, shortcut)

    def explore_dock(self, title: str) -> QDockWidget | None:
        return self.explore.dock(title)

    def apply_theme(self, theme: str) -> None:
        theme = install_theme(theme)
        self.theme_actions[theme].setChecked(True)
        if self.settings.get("theme") != theme:
            self.settings_writer.write({"theme": theme})
        for a in self.findChildren(QAction):
            if isinstance(a.data(), str) and a.data():
                a.setIcon(icon(a.data()))
        self.composer.refresh_icons()
        for card in self.chat.cards:
            card.refresh_icons()

    # ---- closing ---------------------------------------------------------------------------

    def busy(self) -> bool:
        """Questions or jobs are running (the short writes always finish)."""
        return self.ops.busy(Lane.ENGINE) or self.ops.busy(Lane.JOBS)

    def closeEvent(self, event: QCloseEvent) -> None:
        self.settings_writer.flush_params()
        self.settings_writer.write(layout_values(self, self.explore))
        # Gone from the screen at once; the workers finish their current step meanwhile.
        self.hide()
        self.shutdown()
        super().closeEvent(event)

    def shutdown(self, timeout_ms: int = 15_000) -> bool:
        """Cancel all work and wait for every lane (settings writes finish); idempotent."""
        if self._shut_down:
            return self.stopped_cleanly
        self._shut_down = True
        self.errors.silent = True
        if self.busy():
            self.status.show("Stopping the running work…")
            log.info("closing during work: cancelling")
        self.explore.shutdown()
        self.stopped_cleanly = self.ops.shutdown(timeout_ms)
        if self.stopped_cleanly:
            self.backend.close()
        return self.stopped_cleanly


def _present(dialog: QDialog) -> None:
    dialog.show()
    dialog.raise_()
    dialog.activateWindow()


def window_title(snapshot: str | None) -> str:
    """The window's title: the active snapshot. Qt adds the application's display name
    ("… — ragdesk") on Linux and Windows, so naming the app here would show it twice."""
    return snapshot or "ragdesk"

