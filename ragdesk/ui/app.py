"""Starting and stopping the desktop app."""

from __future__ import annotations

import logging
import os
import signal
import sys
import traceback
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication, QMessageBox, QWidget

from ragdesk.core.app import AppContext
from ragdesk.core.cpu import prepare_for_models
from ragdesk.core.errors import RagdeskError
from ragdesk.core.preferences import apply_environment
from ragdesk.ui.backend import Backend
from ragdesk.ui.reports import ErrorReport

if TYPE_CHECKING:
    from ragdesk.ui.main_window import MainWindow

log = logging.getLogger(__name__)


def make_application(argv: list[str] | None = None) -> QApplication:
    app = QApplication.instance()
    if not isinstance(app, QApplication):
        app = QApplication(argv if argv is not None else sys.argv[:1])
    app.setApplicationName("ragdesk")
    app.setApplicationDisplayName("ragdesk")
    app.setOrganizationName("ragdesk")
    app.setDesktopFileName("ragdesk")
    app.setStyle("Fusion")  # the same look on every platform, and it honours our palettes
    from ragdesk.ui.resources import app_icon

    app.setWindowIcon(app_icon())
    return app


def _install_excepthook() -> None:
    """A bug inside a slot becomes a logged error and a dialog, not a dead app."""
    previous = sys.excepthook

    def hook(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        if issubclass(kind, KeyboardInterrupt):
            previous(kind, exc, tb)
            return
        log.error("unhandled exception in the GUI", exc_info=(kind, exc, tb))
        report = ErrorReport.from_exception(exc) if isinstance(exc, RagdeskError) else \
            ErrorReport(f"Something went wrong inside ragdesk: {kind.__name__}: {exc}",
                        "This is a bug; the details are also in the log file.",
                        details="".join(traceback.format_exception(kind, exc, tb)),
                        is_bug=True)
        app = QApplication.instance()
        parent = app.activeWindow() if isinstance(app, QApplication) else None
        from ragdesk.ui.dialogs import show_error

        show_error(parent, report)

    sys.excepthook = hook


def _close_on_signals(window: QWidget) -> None:
    """SIGINT (Ctrl+C in the terminal) and SIGTERM close the window like its close button:
    running work is cancelled and the workers are joined before the process exits."""
    def handler(signum: int, _frame: object) -> None:
        log.info("signal %d: closing the window", signum)
        QTimer.singleShot(0, window.close)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, handler)
    # Python runs signal handlers only when it gets control; a timer gives it control.
    timer = QTimer(window)
    timer.timeout.connect(lambda: None)
    timer.start(200)


def run_app(ctx: AppContext, on_shown: Callable[[MainWindow], None] | None = None) -> int:
    """Show the main window and run until it closes; returns the exit code.

    ``on_shown(window)`` runs once the window is up (scripts/screenshots.py drives it).
    """
    apply_environment(ctx.settings)  # the settings dialog's device, cache and threads
    prepare_for_models()  # before the engine thread imports torch
    app = make_application()
    try:
        backend = Backend(ctx)
    except RagdeskError as exc:
        box = QMessageBox(QMessageBox.Icon.Critical, "ragdesk", exc.message)
        if exc.hint:
            box.setInformativeText(exc.hint)
        box.exec()
        return exc.exit_code

    from ragdesk.ui.main_window import MainWindow

    window = MainWindow(backend)
    _install_excepthook()
    _close_on_signals(window)
    app.setQuitOnLastWindowClosed(True)
    window.show()
    QTimer.singleShot(0, window.start)
    if on_shown is not None:
        QTimer.singleShot(0, lambda: on_shown(window))
    log.info("window shown")
    code = int(app.exec())
    clean = window.shutdown()
    window.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, False)
    if not clean:
        # A worker is stuck in a call that cannot be interrupted (e.g. loading weights);
        # letting Python tear down a running QThread would abort, so leave at once instead.
        log.warning("a worker did not stop; exiting without waiting for it")
        logging.shutdown()
        ctx.close()
        os._exit(code)
    return code
