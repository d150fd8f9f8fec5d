"""The main window: conversation in the middle, controls on the left, the passage inspector
on the right and the posterior heat map below; menus for everything.

Threads: the window never calls the core itself. Questions go to the engine thread, long jobs
to the serialized job queue, the window's own catalog writes (switch, remove) to the
serialized writer, and catalog reads to the thread pool (see :mod:`ragdesk.ui.workers`).

Explore views (issue 10) plug in with :meth:`MainWindow.add_explore_view` and follow the
selected answer through :attr:`MainWindow.answerSelected`.
"""

from __future__ import annotations

import functools
import html
import logging
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import QByteArray, QEvent, QObject, Qt, QTimer, Signal
from PySide6.QtGui import (
    QAction,
    QActionGroup,
    QCloseEvent,
    QGuiApplication,
    QKeyEvent,
    QKeySequence,
)
from PySide6.QtWidgets import (
    QApplication,
    QDialog,
    QDockWidget,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMainWindow,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QTextEdit,
    QVBoxLayout,
    QWidget,
)

from ragdesk._version import __version__
from ragdesk.core.progress import CancelToken, ProgressCallback, ProgressUpdate
from ragdesk.core.types import Answer, AnswerToken, Hit
from ragdesk.core.units import plural
from ragdesk.ui.backend import AskParams, Backend, ErrorReport, PackInfo, SnapshotInfo
from ragdesk.ui.chat import AnswerCard, ChatView, elide
from ragdesk.ui.compare import CompareDialog
from ragdesk.ui.controls import ControlsPanel
from ragdesk.ui.dialogs import JobPanel, show_error
from ragdesk.ui.elided import ElidedLabel
from ragdesk.ui.heatmap import HeatMapPanel
from ragdesk.ui.inspector import PassageInspector
from ragdesk.ui.markdown import answer_markdown, conversation_markdown
from ragdesk.ui.resources import app_icon, icon, stylesheet
from ragdesk.ui.theme import THEMES, palette_for
from ragdesk.ui.workers import EngineClient, Job, SerialQueue, run_async, wait_for_pool

log = logging.getLogger(__name__)


class QuestionBox(QPlainTextEdit):
    """Enter sends, Shift+Enter starts a new line; grows to a few lines as the user types."""

    submitted = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("QuestionBox")
        self.setPlaceholderText("Ask a question…   (Enter sends, Shift+Enter adds a line)")
        self.setTabChangesFocus(True)
        self.setAccessibleName("Question")
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self.document().contentsChanged.connect(self._fit)
        self._fit()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            if event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
                self.insertPlainText("\n")
            else:
                self.submitted.emit()
            return
        super().keyPressEvent(event)

    def _fit(self) -> None:
        lines = max(2, min(6, int(self.document().size().height())))
        fm = self.fontMetrics()
        # Padding from the stylesheet (6 px each side) plus the frame and document margins.
        self.setFixedHeight(lines * fm.lineSpacing() + 2 * self.frameWidth()
                            + int(self.document().documentMargin() * 2) + 14)


class _CopyPassThrough(QObject):
    """Lets the window's Copy action run when a read-only text has no selection."""

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        if (event.type() == QEvent.Type.ShortcutOverride and isinstance(event, QKeyEvent)
                and event.matches(QKeySequence.StandardKey.Copy)
                and isinstance(obj, QTextEdit) and obj.isReadOnly()
                and not obj.textCursor().hasSelection()):
            event.ignore()
            return True
        return False


class MainWindow(QMainWindow):
    answerSelected = Signal(object)  # Answer: the answer the inspector and heat map show
    snapshotsLoaded = Signal(list)  # list[SnapshotInfo]
    packsLoaded = Signal(list)  # list[PackInfo]
    snapshotSwitched = Signal(str)

    def __init__(self, backend: Backend, *, apply_theme: bool = True) -> None:
        super().__init__()
        self.backend = backend
        self.settings = backend.ctx.settings
        self.setObjectName("MainWindow")
        self.setWindowTitle("ragdesk")
        self.setWindowIcon(app_icon())
        self.snapshots: list[SnapshotInfo] = []
        self.packs: list[PackInfo] = []
        self.pack = backend.pack_name()
        self.active_snapshot: str | None = None
        self.selected_card: AnswerCard | None = None
        self.selected_passage: int | None = None
        self._cards: dict[int, AnswerCard] = {}
        self._started: dict[int, float] = {}
        self._explore: dict[str, tuple[QAction, Callable[[MainWindow], QWidget]]] = {}
        self._explore_docks: dict[str, QDockWidget] = {}
        self.index_manager: Any = None
        self.compare_dialog: CompareDialog | None = None
        self.first_run: Any = None
        self.last_error: ErrorReport | None = None
        self.error_box: QMessageBox | None = None
        self.stopped_cleanly = True
        self._shut_down = False
        self._first_load_done = False
        self._queue_shown = False  # a card shows the starter setup's progress
        self._setup_update: ProgressUpdate | None = None
        self._preloaded: str | None = None
        self._pending_params: AskParams | None = None
        self._save_params_timer = QTimer(self)
        self._save_params_timer.setSingleShot(True)
        self._save_params_timer.setInterval(400)
        self._save_params_timer.timeout.connect(self._save_params)

        self.engine = EngineClient(backend, self)
        self.jobs = SerialQueue("jobs", self)
        self.writes = SerialQueue("catalog-writer", self)
        self._build_ui()
        self._build_actions()
        self._build_menus()
        self._connect_workers()
        if apply_theme:
            self.apply_theme(str(self.settings.get("theme", "system")))
        self._restore_geometry()
        self._copy_filter = _CopyPassThrough(self)
        self.update_status()

    # ---- construction ----------------------------------------------------------------------

    def _build_ui(self) -> None:
        self.chat = ChatView()
        self.chat.empty.exampleChosen.connect(self._ask_example)
        self.question = QuestionBox()
        self.question.submitted.connect(self.send)
        self.send_button = QPushButton(icon("send"), "Send")
        self.send_button.setObjectName("SendButton")
        self.send_button.setToolTip("Send the question (Enter)")
        self.send_button.clicked.connect(self.send)
        self.stop_button = QPushButton(icon("stop"), "Stop")
        self.stop_button.setObjectName("StopButton")
        self.stop_button.setToolTip("Stop generating (Esc)")
        self.stop_button.clicked.connect(self.stop)
        self.stop_button.setEnabled(False)

        composer = QWidget()
        composer.setObjectName("Composer")
        row = QHBoxLayout(composer)
        row.setContentsMargins(20, 10, 20, 14)
        row.setSpacing(8)
        row.addWidget(self.question, 1)
        buttons = QVBoxLayout()
        buttons.setSpacing(6)
        buttons.addWidget(self.send_button)
        buttons.addWidget(self.stop_button)
        buttons.addStretch(1)
        row.addLayout(buttons)

        central = QWidget()
        central.setObjectName("Central")
        # Docks widened (or a layout saved on a larger screen) leave the conversation this
        # much at least, so questions and answers are never squeezed into a sliver.
        central.setMinimumWidth(380)
        col = QVBoxLayout(central)
        col.setContentsMargins(0, 0, 0, 0)
        col.setSpacing(0)
        col.addWidget(self.chat, 1)
        col.addWidget(composer)
        self.setCentralWidget(central)

        params = AskParams.from_settings(self.settings.as_dict())
        self.controls = ControlsPanel(params, self.pack)
        self.controls.paramsChanged.connect(self._params_changed)
        self.controls.packChanged.connect(self.set_pack)
        self.controls_dock = self._dock("Controls", "ControlsDock", self.controls,
                                        Qt.DockWidgetArea.LeftDockWidgetArea)

        self.inspector = PassageInspector()
        self.inspector.passageChanged.connect(self._inspector_passage)
        self.inspector_dock = self._dock("Passage", "InspectorDock", self.inspector,
                                         Qt.DockWidgetArea.RightDockWidgetArea)

        self.heatmap = HeatMapPanel()
        self.heatmap.map.cellClicked.connect(self._heat_cell)
        self.heatmap_dock = self._dock("Posterior heat map", "HeatMapDock", self.heatmap,
                                       Qt.DockWidgetArea.BottomDockWidgetArea)
        self.setCorner(Qt.Corner.BottomLeftCorner, Qt.DockWidgetArea.LeftDockWidgetArea)
        self.setCorner(Qt.Corner.BottomRightCorner, Qt.DockWidgetArea.RightDockWidgetArea)
        self.resizeDocks([self.controls_dock, self.inspector_dock], [230, 400],
                         Qt.Orientation.Horizontal)
        self.resizeDocks([self.heatmap_dock], [300], Qt.Orientation.Vertical)

        bar = self.statusBar()
        self.status_text = ElidedLabel("Ready")
        self.status_text.setObjectName("StatusText")
        bar.addWidget(self.status_text, 1)
        self.status_job = JobPanel(compact=True)
        self.status_job.cancelRequested.connect(self.jobs.cancel)
        bar.addPermanentWidget(self.status_job)
        self.status_snapshot = QLabel()
        self.status_snapshot.setObjectName("StatusSnapshot")
        bar.addPermanentWidget(self.status_snapshot)
        self.status_pack = QLabel()
        self.status_pack.setObjectName("StatusPack")
        bar.addPermanentWidget(self.status_pack)

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

    def _action(self, text: str, slot: Callable[[], Any], shortcut: Any = None,
                icon_name: str | None = None, tip: str | None = None) -> QAction:
        a = QAction(text, self)
        if shortcut is not None:
            if isinstance(shortcut, list):
                a.setShortcuts(shortcut)
            else:
                a.setShortcut(QKeySequence(shortcut))
        if icon_name:
            a.setIcon(icon(icon_name))
            a.setData(icon_name)
        if tip:
            a.setStatusTip(tip)
            a.setToolTip(tip)
        a.triggered.connect(lambda _checked=False: slot())
        self.addAction(a)  # shortcuts work even with the menu bar hidden
        return a

    def _build_actions(self) -> None:
        A = self._action
        self.act_new = A("&New conversation", self.new_conversation, QKeySequence.StandardKey.New,
                         "new-chat", "Clear the conversation")
        self.act_export = A("&Export conversation as Markdown…", self.export_dialog, "Ctrl+E",
                            "export", "Save the conversation with its citations")
        self.act_quit = A("&Quit", self.close, QKeySequence.StandardKey.Quit)
        self.act_quit.setShortcuts([QKeySequence("Ctrl+Q")])
        self.act_copy = A("&Copy", self.copy, QKeySequence.StandardKey.Copy, "copy",
                          "Copy the selection, or the selected answer as Markdown")
        self.act_copy_md = A("Copy answer as &Markdown", self.copy_answer, "Ctrl+Shift+C")
        self.act_copy_all = A("Copy &conversation as Markdown", self.copy_conversation,
                              "Ctrl+Alt+C")
        self.act_focus = A("&Focus the question box", self.focus_question, "Ctrl+L")
        self.act_send = A("&Send", self.send, "Ctrl+Return", "send")
        self.act_stop = A("S&top", self.stop, "Esc", "stop", "Stop generating")
        self.act_stop.setEnabled(False)
        self.act_prev = A("&Previous answer", lambda: self.step_selection(-1), "Alt+Up")
        self.act_next = A("&Next answer", lambda: self.step_selection(1), "Alt+Down")
        self.act_passages = [
            A(f"Show passage [{n}]", functools.partial(self.show_passage, n - 1), f"Ctrl+{n}")
            for n in range(1, 10)]
        self.act_heat_focus = A("Focus the &heat map", self.focus_heatmap, "Ctrl+Shift+H",
                                "heatmap")
        self.act_compare = A("&Compare snapshots…", self.open_compare, "Ctrl+Shift+K",
                             "compare", "Ask one question against two snapshots")
        self.act_manage = A("&Manage indexes…", self.open_index_manager, "Ctrl+I",
                            "database", "Import, quantize, verify and remove snapshots")
        self.act_reload = A("&Reload list", self.reload_snapshots, "F5", "refresh")
        self.act_shortcuts = A("&Keyboard shortcuts", self.show_shortcuts, "F1", "keyboard")
        self.act_about = A("&About ragdesk", self.show_about, None, "info")
        self.act_get_started = A("&Get started…", self.open_first_run, None, None,
                                 "The starter pack, a paper pack or your own files")

    def _build_menus(self) -> None:
        mb = self.menuBar()
        m = mb.addMenu("&File")
        m.addActions([self.act_new, self.act_export])
        m.addSeparator()
        m.addAction(self.act_quit)

        m = mb.addMenu("&Edit")
        m.addActions([self.act_copy, self.act_copy_md, self.act_copy_all])
        m.addSeparator()
        m.addAction(self.act_focus)

        m = mb.addMenu("&Answer")
        m.addActions([self.act_send, self.act_stop])
        m.addSeparator()
        m.addActions([self.act_prev, self.act_next])
        sub = m.addMenu("Show &passage")
        sub.addActions(self.act_passages)
        m.addAction(self.act_heat_focus)

        self.index_menu = mb.addMenu("&Index")
        self.snapshot_group = QActionGroup(self)
        self.snapshot_group.setExclusive(True)
        self._rebuild_index_menu()

        m = self.view_menu = mb.addMenu("&View")
        for dock, key in ((self.controls_dock, "Ctrl+Shift+1"), (self.inspector_dock,
                                                                 "Ctrl+Shift+2"),
                          (self.heatmap_dock, "Ctrl+Shift+3")):
            act = dock.toggleViewAction()
            act.setShortcut(QKeySequence(key))
            m.addAction(act)
        m.addSeparator()
        self.explore_menu = m.addMenu("&Explore")
        self._explore_placeholder: QAction | None = self.explore_menu.addAction(
            "No explore views installed")
        self._explore_placeholder.setEnabled(False)
        m.addSeparator()
        theme_menu = m.addMenu("&Theme")
        self.theme_group = QActionGroup(self)
        self.theme_actions: dict[str, QAction] = {}
        for key in THEMES:
            act = theme_menu.addAction(key.capitalize() if key != "system" else "Follow system")
            act.setCheckable(True)
            act.triggered.connect(lambda _c=False, k=key: self.apply_theme(k))
            self.theme_group.addAction(act)
            self.theme_actions[key] = act

        m = mb.addMenu("&Help")
        m.addActions([self.act_get_started, self.act_shortcuts, self.act_about])

    def _rebuild_index_menu(self) -> None:
        menu = self.index_menu
        for a in self.snapshot_group.actions():
            self.snapshot_group.removeAction(a)
        menu.clear()
        header = menu.addAction("Active snapshot")
        header.setEnabled(False)
        self.snapshot_actions: dict[str, QAction] = {}
        if not self.snapshots:
            none = menu.addAction("    (no snapshots yet)")
            none.setEnabled(False)
        for s in self.snapshots:
            label = f"{s.name}    {plural(s.passages, 'passage')}"
            if s.unusable_reason:
                label += f"  —  {elide(s.unusable_reason, 100)}"
            act = menu.addAction(label)
            act.setCheckable(True)
            act.setData(s.name)
            act.setChecked(s.name == self.active_snapshot)
            act.setEnabled(s.searchable and not s.unusable_reason)
            act.setToolTip(s.unusable_reason or f"{s.encoder or ''} ({s.dim or '?'}-d)")
            act.triggered.connect(lambda _c=False, n=s.name: self.switch_snapshot(n))
            self.snapshot_group.addAction(act)
            self.snapshot_actions[s.name] = act
        menu.setToolTipsVisible(True)
        menu.addSeparator()
        menu.addActions([self.act_compare, self.act_manage, self.act_reload])

    def _connect_workers(self) -> None:
        e = self.engine
        e.started.connect(self._on_started)
        e.tokenStreamed.connect(self._on_token)
        e.answerFinished.connect(self._on_answer)
        e.failed.connect(self._on_answer_failed)
        e.status.connect(self._set_activity)
        e.busyChanged.connect(self._busy_changed)
        e.engineReady.connect(lambda pack: self._set_activity(f"Models of {pack} loaded."))
        j = self.jobs
        j.jobStarted.connect(self.status_job.start)
        j.jobStarted.connect(lambda job: self._set_activity(f"{job.title}…"))
        j.jobProgress.connect(self.status_job.update_progress)
        j.jobProgress.connect(self._show_setup_queue)
        j.jobFinished.connect(self._job_finished)
        j.jobFailed.connect(self._job_failed)
        self.writes.jobFinished.connect(self._write_finished)
        self.writes.jobFailed.connect(self._write_failed)

    # ---- theme and geometry ---------------------------------------------------------------

    def apply_theme(self, theme: str) -> None:
        if theme not in THEMES:
            theme = "system"
        app = QApplication.instance()
        if isinstance(app, QApplication):
            system = app.style().standardPalette()
            hints = QGuiApplication.styleHints()
            if theme == "system" and hints.colorScheme() == Qt.ColorScheme.Dark:
                from ragdesk.ui.theme import dark_palette

                pal = dark_palette()
            else:
                pal = palette_for(theme, system)
            app.setPalette(pal)
            app.setStyleSheet(stylesheet())
        self.theme_actions[theme].setChecked(True)
        if self.settings.get("theme") != theme:
            self.settings.set("theme", theme)
        self.refresh_icons()

    def refresh_icons(self) -> None:
        for a in self.findChildren(QAction):
            name = a.data()
            if isinstance(name, str) and name:
                a.setIcon(icon(name))
        self.send_button.setIcon(icon("send"))
        self.stop_button.setIcon(icon("stop"))
        for card in self._cards.values():
            card.refresh_icons()

    def _restore_geometry(self) -> None:
        geo = self.settings.get("window_geometry")
        state = self.settings.get("window_state")
        if isinstance(geo, str) and geo:
            self.restoreGeometry(QByteArray.fromBase64(geo.encode("ascii")))
        else:
            self.resize(1320, 860)
        if isinstance(state, str) and state:
            self.restoreState(QByteArray.fromBase64(state.encode("ascii")))

    def _save_geometry(self) -> None:
        try:
            self.settings.update({
                "window_geometry": bytes(self.saveGeometry().toBase64().data()).decode("ascii"),
                "window_state": bytes(self.saveState().toBase64().data()).decode("ascii")})
        except OSError:
            log.warning("could not save the window layout", exc_info=True)

    # ---- loading lists ----------------------------------------------------------------------

    def start(self) -> None:
        """Called once the window is shown: read the catalog, then offer first-run help."""
        self.reload_packs()
        self.reload_snapshots()

    def reload_snapshots(self) -> None:
        pack = self.pack
        run_async(lambda: self.backend.snapshots(pack), self._snapshots_loaded,
                  self._report, context=self)

    def reload_packs(self) -> None:
        run_async(self.backend.packs, self._packs_loaded, lambda r: log.info(
            "model packs unavailable: %s", r.message), context=self)

    def _packs_loaded(self, packs: list[PackInfo]) -> None:
        self.packs = packs
        self.controls.set_packs(packs, self.pack)
        self.packsLoaded.emit(packs)

    def _snapshots_loaded(self, snapshots: list[SnapshotInfo]) -> None:
        self.snapshots = snapshots
        names = {s.name for s in snapshots}
        if self.active_snapshot not in names:
            self.active_snapshot = next((s.name for s in snapshots if s.active), None)
        self._rebuild_index_menu()
        self.update_status()
        self.snapshotsLoaded.emit(snapshots)
        usable = any(s.searchable and not s.unusable_reason for s in snapshots)
        if usable and self._preloaded != self.pack:
            self._preloaded = self.pack
            self.engine.preload(self.pack)
        if not self._first_load_done:
            self._first_load_done = True
            if not any(s.searchable for s in snapshots) and self.first_run is None \
                    and not self.jobs.busy and self.property("offer_first_run") is not False:
                self.open_first_run()

    # ---- asking -----------------------------------------------------------------------------

    def params(self) -> AskParams:
        return self.controls.params()

    def _params_changed(self, params: AskParams) -> None:
        # Spin boxes change in quick steps; write the settings file once they settle.
        self._pending_params = params
        self._save_params_timer.start()

    def _save_params(self) -> None:
        if self._pending_params is not None:
            self.settings.update(self._pending_params.to_settings())
            self._pending_params = None

    def set_pack(self, name: str) -> None:
        if name == self.pack:
            return
        self.pack = name
        self.backend.set_pack(name)
        self.update_status()
        self.reload_snapshots()  # which snapshots fit depends on the pack

    def focus_question(self) -> None:
        self.activateWindow()
        self.question.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.question.selectAll()

    def _ask_example(self, q: str) -> None:
        self.question.setPlainText(q)
        self.send()

    def send(self) -> AnswerCard | None:
        q = self.question.toPlainText().strip()
        if not q:
            self.question.setFocus()
            return None
        if self.engine.busy:
            self._set_activity("Still answering the last question — press Esc to stop it.")
            return None
        self.question.clear()
        card = self.ask_for(q, snapshot=self.active_snapshot, tag="chat")
        self.chat.add_card(card)
        self.select_card(card)
        return card

    def ask_from_docs(self, question: str, hits: Sequence[Hit], *,
                      snapshot: str | None = None) -> AnswerCard | None:
        """Answer ``question`` from the given passages (rank order, exact scores) instead of
        retrieving; the answer joins the conversation like any other."""
        if self.engine.busy:
            self._set_activity("Still answering the last question — press Esc to stop it.")
            return None
        card = self.ask_for(question, snapshot=snapshot, tag="chat", docs=list(hits))
        self.chat.add_card(card)
        self.select_card(card)
        return card

    def ask_for(self, question: str, *, snapshot: str | None, tag: str = "chat",
                params: AskParams | None = None,
                docs: list[Hit] | None = None) -> AnswerCard:
        """Send a question to the engine thread; returns the card its answer streams into."""
        p = params or self.params()
        req = self.engine.ask(question, p, pack=self.pack, snapshot=snapshot, tag=tag,
                              docs=docs)
        card = AnswerCard(req.id, question, p, snapshot)
        card.setProperty("tag", tag)
        card.passageClicked.connect(self._card_passage)
        card.tokenClicked.connect(self._card_token)
        card.activated.connect(self.select_card)
        card.copyRequested.connect(lambda c: self._copy_text(answer_markdown(c.answer))
                                   if c.answer else None)
        card.heatmapRequested.connect(self._show_heatmap_for)
        card.text.installEventFilter(self._copy_filter)
        self._cards[req.id] = card
        self._started[req.id] = time.monotonic()
        return card

    def forget_card(self, card: AnswerCard) -> None:
        """Stop streaming into ``card`` (it is going away); cancels its answer if running."""
        if card.state in ("waiting", "running"):
            self.engine.cancel(card.request_id)
        self._cards.pop(card.request_id, None)
        if self.selected_card is card:
            self.selected_card = None

    def stop(self) -> None:
        if self.engine.busy:
            self.engine.cancel()
            self._set_activity("Stopping…")

    def _busy_changed(self, busy: bool) -> None:
        self.stop_button.setEnabled(busy)
        self.act_stop.setEnabled(busy)
        self.send_button.setEnabled(not busy)
        if not busy and not self.jobs.busy:
            QTimer.singleShot(0, self.update_status)

    def _on_started(self, rid: int) -> None:
        card = self._cards.get(rid)
        if card is not None:
            if self.backend.setup.pending:
                card.set_queued(self._queue_text())  # started again once it can answer
                self._queue_shown = True
            else:
                card.set_running()

    def _on_token(self, rid: int, tok: AnswerToken) -> None:
        card = self._cards.get(rid)
        if card is None:
            return
        card.append_token(tok)
        if card is self.selected_card:
            self.heatmap.map.append_token(tok)
        self.status_text.setText(f"Generating…  {plural(len(card.tokens), 'token')}")

    def _on_answer(self, rid: int, answer: Answer) -> None:
        card = self._cards.get(rid)
        if card is None:
            return
        card.finish(answer)
        took = time.monotonic() - self._started.pop(rid, time.monotonic())
        where = f" from {answer.snapshot}" if answer.snapshot else ""
        state = "Stopped" if answer.cancelled else "Answered"
        self._set_activity(f"{state} in {took:.1f} s{where}.")
        log.info("answer finished: request %d, %d tokens, snapshot %s, %.2f s", rid,
                 len(answer.tokens), answer.snapshot, took)
        if card.property("tag") == "chat" and (self.selected_card is card
                                               or self.selected_card is None):
            self.select_card(card, force=True)

    def _on_answer_failed(self, rid: int, report: ErrorReport) -> None:
        card = self._cards.get(rid)
        self._started.pop(rid, None)
        if card is not None:
            card.fail(report.message, cancelled=report.cancelled)
        if report.cancelled:
            self._set_activity("Stopped.")
            log.info("answer cancelled: request %d", rid)
        else:
            self._set_activity("The question could not be answered.")
            self._report(report)

    # ---- selection, inspector, heat map -------------------------------------------------------

    @property
    def selected_answer(self) -> Answer | None:
        return self.selected_card.answer if self.selected_card is not None else None

    def chat_cards(self) -> list[AnswerCard]:
        return list(self.chat.cards)

    def select_card(self, card: AnswerCard, force: bool = False) -> None:
        if card is self.selected_card and not force:
            return
        if self.selected_card is not None and self.selected_card is not card:
            self.selected_card.set_selected(False)
            self.selected_card.text.set_focus_passage(None)
        self.selected_card = card
        card.set_selected(True)
        self.selected_passage = None
        a = card.answer
        self.heatmap.set_mode(card.params.mode if a is None else a.mode, card.question)
        self.heatmap.map.set_data(card.tokens if a is None else a.tokens,
                                  None if a is None else a.docs)
        self.heatmap.map.set_selected_passage(None)
        self.inspector.set_answer(a)
        if a is not None:
            self.answerSelected.emit(a)

    def step_selection(self, delta: int) -> None:
        cards = self.chat.cards
        if not cards:
            return
        i = cards.index(self.selected_card) if self.selected_card in cards else len(cards)
        j = min(max(i + delta, 0), len(cards) - 1)
        self.select_card(cards[j])
        self.chat.ensureWidgetVisible(cards[j])

    def _card_passage(self, card: AnswerCard, k: int) -> None:
        self.select_card(card)
        self.show_passage(k)

    def _card_token(self, card: AnswerCard, i: int) -> None:
        self.select_card(card)
        if 0 <= i < len(card.tokens) and card.tokens[i].posterior:
            self.show_passage(card.tokens[i].source)

    def show_passage(self, k: int) -> None:
        """Select passage ``k`` of the selected answer everywhere: text, heat map, inspector."""
        card = self.selected_card
        if card is None:
            return
        self.selected_passage = k
        card.text.set_focus_passage(k)
        self.heatmap.map.set_selected_passage(k)
        if card.answer is not None and k < len(card.answer.docs):
            self.inspector.show_passage(k, notify=False)
            self.inspector_dock.show()
            self.inspector_dock.raise_()

    def _inspector_passage(self, k: int) -> None:
        self.show_passage(k)

    def _heat_cell(self, _i: int, k: int) -> None:
        self.show_passage(k)

    def _show_heatmap_for(self, card: AnswerCard) -> None:
        self.select_card(card)
        self.heatmap_dock.show()
        self.heatmap_dock.raise_()

    def focus_heatmap(self) -> None:
        self.heatmap_dock.show()
        self.heatmap_dock.raise_()
        self.heatmap.map.setFocus(Qt.FocusReason.ShortcutFocusReason)

    # ---- copy and export --------------------------------------------------------------------

    def _copy_text(self, text: str) -> None:
        QGuiApplication.clipboard().setText(text)
        self._set_activity("Copied.")

    def copy(self) -> None:
        w = QApplication.focusWidget()
        if isinstance(w, (QTextEdit, QPlainTextEdit)) and w.textCursor().hasSelection():
            w.copy()
            return
        if isinstance(w, QLineEdit) and w.hasSelectedText():
            w.copy()
            return
        self.copy_answer()

    def copy_answer(self) -> None:
        a = self.selected_answer
        if a is not None:
            self._copy_text(answer_markdown(a))

    def answers(self) -> list[Answer]:
        return [c.answer for c in self.chat.cards if c.answer is not None]

    def copy_conversation(self) -> None:
        if self.answers():
            self._copy_text(conversation_markdown(self.answers()))

    def export_markdown(self, path: str | Path) -> Path:
        p = Path(path)
        p.write_text(conversation_markdown(self.answers()), encoding="utf-8")
        self._set_activity(f"Exported the conversation to {p}.")
        return p

    def export_dialog(self) -> None:
        if not self.answers():
            self._set_activity("Nothing to export yet.")
            return
        first = self.answers()[0].question
        stem = re.sub(r"[^A-Za-z0-9]+", "-", first).strip("-").lower()[:40] or "conversation"
        path, _ = QFileDialog.getSaveFileName(self, "Export conversation",
                                              str(Path.home() / f"{stem}.md"),
                                              "Markdown (*.md);;All files (*)")
        if path:
            try:
                self.export_markdown(path)
            except OSError as exc:
                self._report(ErrorReport(f"Could not write {path}: {exc.strerror or exc}.",
                                         "Choose another folder."))

    def new_conversation(self) -> None:
        for card in self.chat.cards:
            self.forget_card(card)
        self.chat.clear()
        self.selected_card = None
        self.inspector.set_answer(None)
        self.heatmap.set_mode(None)
        self.heatmap.map.set_data([], None)
        self.focus_question()

    # ---- snapshots ---------------------------------------------------------------------------

    def switch_snapshot(self, name: str) -> None:
        """The next question uses ``name`` at once; an answer in flight keeps its own."""
        info = next((s for s in self.snapshots if s.name == name), None)
        if info is not None and info.unusable_reason:
            self._report(ErrorReport(f"The snapshot {name} cannot be used with the "
                                     f"{self.pack} pack: {info.unusable_reason}",
                                     "Choose the model pack whose passage encoder built it."))
            return
        previous = self.active_snapshot
        self.active_snapshot = name
        act = getattr(self, "snapshot_actions", {}).get(name)
        if act is not None:
            act.setChecked(True)
        self.update_status()
        self.snapshotSwitched.emit(name)
        self._set_activity(f"Switched to {name}; the next question uses it.")

        def write(_p: ProgressCallback, _c: CancelToken) -> None:
            self.backend.switch(name)

        job = self.writes.run(f"Switch to {name}", write, kind="switch", target=name,
                              cancellable=False)
        job.previous = previous  # type: ignore[attr-defined]

    def remove_snapshot(self, name: str) -> None:
        def write(_p: ProgressCallback, _c: CancelToken) -> None:
            self.backend.remove(name)

        self.writes.run(f"Remove {name}", write, kind="remove", target=name, cancellable=False)

    def _write_finished(self, job: Job, _result: object) -> None:
        if job.kind == "remove":
            if self.active_snapshot == job.target:
                self.active_snapshot = None
            self._set_activity(f"Removed {job.target}.")
        self.reload_snapshots()

    def _write_failed(self, job: Job, report: ErrorReport) -> None:
        if job.kind == "switch" and self.active_snapshot == job.target:
            self.active_snapshot = getattr(job, "previous", None)
        self._report(report)
        self.reload_snapshots()

    # ---- long jobs ----------------------------------------------------------------------------

    def start_import(self, source: str | None, *, name: str, encoder: str,
                     fmt: str | None, limit: int | None = None) -> Job:
        def work(progress: ProgressCallback, cancel: CancelToken) -> str:
            return self.backend.import_snapshot(source, name=name, encoder=encoder, fmt=fmt,
                                                limit=limit, progress=progress, cancel=cancel)

        job = self.jobs.run(f"Importing {name}", work, kind="import", target=name)
        QTimer.singleShot(300, self.reload_snapshots)  # shows the "importing" row
        return job

    def start_quantize(self, name: str, variant: str) -> Job:
        return self.jobs.run(
            f"Building {variant} for {name}",
            lambda p, c: self.backend.quantize(name, variant, p, c),
            kind="quantize", target=name)

    def start_verify(self, name: str) -> Job:
        return self.jobs.run(f"Verifying {name}",
                             lambda p, c: self.backend.verify(name, p, c),
                             kind="verify", target=name)

    def start_starter_pack(self) -> Job:
        return self.jobs.run("Building the starter snapshot", self.backend.build_starter,
                             kind="starter", target="starter")

    def start_download(self, pack: str) -> Job:
        return self.jobs.run(f"Downloading {pack}",
                             lambda p, c: self.backend.download_pack(pack, p, c),
                             kind="download", target=pack)

    def _job_finished(self, job: Job, result: object) -> None:
        self.status_job.finish(job)
        self._set_activity(f"{job.title}: done.")
        log.info("job finished: %s", job.title)
        if job.kind in ("starter", "download"):
            self.pack = self.backend.pack_name()
            self.reload_packs()
        if job.kind == "verify":
            self._set_activity(getattr(result, "text", f"{job.target} verified."))
        self.reload_snapshots()

    def _job_failed(self, job: Job, report: ErrorReport) -> None:
        self.status_job.finish(job)
        if report.cancelled:
            self._set_activity(f"{job.title}: cancelled.")
            log.info("job cancelled: %s", job.title)
        else:
            self._set_activity(f"{job.title}: failed.")
            self._report(report, title=job.title)
        self.reload_snapshots()

    # ---- dialogs -----------------------------------------------------------------------------

    def open_index_manager(self) -> Any:
        from ragdesk.ui.index_manager import IndexManagerDialog

        if self.index_manager is None:
            self.index_manager = IndexManagerDialog(self)
        self.index_manager.show()
        self.index_manager.raise_()
        self.index_manager.activateWindow()
        self.reload_snapshots()
        return self.index_manager

    def open_compare(self) -> CompareDialog:
        if self.compare_dialog is None:
            self.compare_dialog = CompareDialog(self)
        d = self.compare_dialog
        if not d.question.text() and self.selected_card is not None:
            d.question.setText(self.selected_card.question)
        d.show()
        d.raise_()
        d.activateWindow()
        d.question.setFocus()
        return d

    def open_first_run(self) -> Any:
        from ragdesk.ui.first_run import FirstRunDialog

        self.first_run = FirstRunDialog(self)
        self.first_run.open()
        return self.first_run

    def show_shortcuts(self) -> QDialog:
        d = QDialog(self)
        d.setObjectName("ShortcutsDialog")
        d.setWindowTitle("Keyboard shortcuts")
        lay = QVBoxLayout(d)
        rows: list[tuple[str, str]] = [("Send the question", "Enter"),
                                       ("New line in the question", "Shift+Enter")]
        for a in self.actions():
            if not a.shortcut().isEmpty():
                rows.append((a.text().replace("&", "").rstrip("…"),
                             a.shortcut().toString(QKeySequence.SequenceFormat.NativeText)))
        for dock in (self.controls_dock, self.inspector_dock, self.heatmap_dock):
            a = dock.toggleViewAction()
            rows.append((f"Show or hide {a.text()}",
                         a.shortcut().toString(QKeySequence.SequenceFormat.NativeText)))
        rows.append(("Menus", "Alt + the underlined letter"))
        table = QTableWidget(len(rows), 2)
        table.setHorizontalHeaderLabels(["Action", "Keys"])
        table.verticalHeader().setVisible(False)
        table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        table.setShowGrid(False)
        table.setAlternatingRowColors(True)
        for r, (what, keys) in enumerate(rows):
            table.setItem(r, 0, QTableWidgetItem(what))
            table.setItem(r, 1, QTableWidgetItem(keys))
        table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        table.horizontalHeader().setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        lay.addWidget(table)
        close = QPushButton("Close")
        close.clicked.connect(d.accept)
        lay.addWidget(close, 0, Qt.AlignmentFlag.AlignRight)
        d.resize(460, 560)
        d.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        d.open()
        return d

    def show_about(self) -> None:
        box = QMessageBox(self)
        box.setWindowTitle("About ragdesk")
        box.setIconPixmap(app_icon().pixmap(64, 64))
        box.setText(f"<b>ragdesk {html.escape(__version__)}</b>")
        box.setInformativeText(
            "Retrieval-Augmented Generation over local Wikipedia snapshots, after Lewis et "
            "al. (2020), <i>Retrieval-Augmented Generation for Knowledge-Intensive NLP "
            f"Tasks</i>.<br/><br/>Data directory: {html.escape(str(self.backend.data.root))}")
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        box.open()

    # ---- explore views (issue 10) -----------------------------------------------------------

    def add_explore_view(self, title: str, widget_factory: Callable[[MainWindow], QWidget], *,
                         shortcut: str | None = None,
                         area: Qt.DockWidgetArea = Qt.DockWidgetArea.RightDockWidgetArea
                         ) -> QAction:
        """Add ``title`` to View ▸ Explore. The widget is built on first use by
        ``widget_factory(window)`` and shown in a dock; the factory can subscribe to
        :attr:`answerSelected` and use :attr:`backend` (always from worker threads). If the
        widget has a ``shutdown()`` method, closing the window calls it."""
        if self._explore_placeholder is not None:
            self.explore_menu.removeAction(self._explore_placeholder)
            self._explore_placeholder = None
        act = QAction(title, self)
        act.setCheckable(True)
        if shortcut:
            act.setShortcut(QKeySequence(shortcut))
        self.addAction(act)
        self.explore_menu.addAction(act)
        self._explore[title] = (act, widget_factory)
        act.toggled.connect(lambda on, t=title: self._toggle_explore(t, on))
        return act

    def explore_dock(self, title: str) -> QDockWidget | None:
        return self._explore_docks.get(title)

    def _toggle_explore(self, title: str, on: bool) -> None:
        dock = self._explore_docks.get(title)
        if dock is None and on:
            act, factory = self._explore[title]
            widget = factory(self)
            dock = QDockWidget(title, self)
            dock.setObjectName("Explore-" + re.sub(r"\W+", "-", title))
            dock.setWidget(widget)
            self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, dock)
            self.tabifyDockWidget(self.inspector_dock, dock)
            dock.visibilityChanged.connect(
                lambda vis, a=act, d=dock: a.setChecked(vis or not d.isHidden()))
            self._explore_docks[title] = dock
            if self.selected_answer is not None:
                self.answerSelected.emit(self.selected_answer)
        if dock is not None:
            dock.setVisible(on)
            if on:
                dock.raise_()

    # ---- status and errors ------------------------------------------------------------------

    def _set_activity(self, text: str) -> None:
        self.status_text.setText(text)

    def update_status(self) -> None:
        snap = self.active_snapshot or "none"
        info = next((s for s in self.snapshots if s.name == self.active_snapshot), None)
        count = f" ({plural(info.passages, 'passage')})" if info else ""
        self.status_snapshot.setText(f"Snapshot: <b>{html.escape(snap)}</b>{count}")
        self.status_pack.setText(f"Pack: <b>{html.escape(self.pack)}</b>")
        self.setWindowTitle(window_title(self.active_snapshot))

    def _report(self, report: ErrorReport, title: str = "ragdesk") -> None:
        self.last_error = report
        if self._shut_down:
            return
        self.error_box = show_error(self, report, title)
        # The error names the GUI action that fixes it: offer it as a button.
        actions = {"first-run": ("Get started…", self.open_first_run),
                   "manage-indexes": ("Manage indexes…", self.open_index_manager),
                   "choose-pack": ("Choose a model pack", self.focus_pack_selector)}
        if report.action in actions:
            text, slot = actions[report.action]
            button = self.error_box.addButton(text, QMessageBox.ButtonRole.ActionRole)
            button.clicked.connect(lambda _c=False, f=slot: f())

    def focus_pack_selector(self) -> None:
        pack = getattr(self.controls, "pack", None)
        if isinstance(pack, QWidget):
            pack.setFocus(Qt.FocusReason.OtherFocusReason)

    def _queue_text(self) -> str:
        u = self._setup_update
        where = f" — {u.describe()}" if u is not None else ""
        return (f"Waiting for the starter pack{where}. This question runs as soon as the "
                "passages are searchable and the generator is ready.")

    def _show_setup_queue(self, job: Job, update: ProgressUpdate) -> None:
        """Questions asked before the starter pack can answer wait in line; their cards show
        how far the setup is (and they start by themselves when it can answer)."""
        if job.kind != "starter":
            return
        if not self.backend.setup.pending:
            if self._queue_shown:
                self._queue_shown = False
                self.reload_snapshots()  # the staged snapshot shows up as usable
            return
        self._setup_update = update
        text = self._queue_text()
        for card in self._cards.values():
            if card.state in ("waiting", "running") and not card.tokens:
                card.set_queued(text)
                self._queue_shown = True

    # ---- closing -------------------------------------------------------------------------------

    def busy(self) -> bool:
        return self.engine.busy or self.jobs.busy or self.writes.busy

    def closeEvent(self, event: QCloseEvent) -> None:
        self._save_params()
        self._save_geometry()
        # Gone from the screen at once; the workers finish their current step meanwhile.
        self.hide()
        self.shutdown()
        super().closeEvent(event)

    def shutdown(self, timeout_ms: int = 15_000) -> bool:
        """Cancel all work and join every worker thread; safe to call twice."""
        if self._shut_down:
            return self.stopped_cleanly
        self._shut_down = True
        if self.busy():
            self._set_activity("Stopping the running work…")
            log.info("closing during work: cancelling")
        for dock in self._explore_docks.values():
            stop = getattr(dock.widget(), "shutdown", None)
            if callable(stop):
                try:
                    stop()
                except Exception:
                    log.warning("an explore view failed to shut down", exc_info=True)
        # Cancel everything first so the workers stop in parallel, then join them, all within
        # one deadline.
        self.engine.cancel()
        self.jobs.cancel()
        deadline = time.monotonic() + timeout_ms / 1000

        def left() -> int:
            return max(1, int((deadline - time.monotonic()) * 1000))

        ok = all([self.engine.shutdown(left()), self.jobs.shutdown(left()),
                  self.writes.shutdown(left()), wait_for_pool(left())])
        self.stopped_cleanly = ok
        if ok:
            self.backend.close()
        return ok


def window_title(snapshot: str | None) -> str:
    """The window's title: the active snapshot. Qt adds the application's display name
    ("… — ragdesk") on Linux and Windows, so naming the app here would show it twice."""
    return snapshot or "ragdesk"


def explore_views_installer() -> Callable[[MainWindow], None] | None:
    """``ragdesk.ui.explore.install(window)`` when that package provides one."""
    try:
        from ragdesk.ui import explore
    except Exception:
        log.warning("explore views could not be loaded", exc_info=True)
        return None
    install = getattr(explore, "install", None)
    return install if callable(install) else None
