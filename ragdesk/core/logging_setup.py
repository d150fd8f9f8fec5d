"""Logging to a rotating file in the data directory, and to stderr when asked."""

from __future__ import annotations

import logging
import logging.handlers
from pathlib import Path

from ragdesk.core.terminal_text import terminal_safe

_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"


class _QuietFileHandler(logging.handlers.RotatingFileHandler):
    """A log file that fails quietly: on a full disk, logging's own report of the failed
    write (a traceback on stderr per record) would bury the one message that explains it."""

    def handleError(self, record: logging.LogRecord) -> None:
        pass


class _SafeFormatter(logging.Formatter):
    """A record's message with its control characters escaped (a file name holding a
    newline writes no forged log line, one holding ESC sequences does not drive the
    terminal under -v); a traceback after it keeps its lines."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = terminal_safe(record.message)
        return super().formatMessage(record)


def setup_logging(logs_dir: Path | None, verbosity: int = 0) -> None:
    root = logging.getLogger()
    for h in list(root.handlers):
        if getattr(h, "_ragdesk", False):
            root.removeHandler(h)
            h.close()
    root.setLevel(logging.DEBUG)
    # Some handler always: with none, logging's last resort prints every warning on stderr,
    # and the front ends already tell the user what the warnings say (a damaged settings
    # file was reported twice).
    quiet = logging.NullHandler()
    quiet._ragdesk = True  # type: ignore[attr-defined]
    root.addHandler(quiet)
    if logs_dir is not None:
        try:
            logs_dir.mkdir(parents=True, exist_ok=True)
            fh = _QuietFileHandler(
                logs_dir / "ragdesk.log", maxBytes=2_000_000, backupCount=3, encoding="utf-8"
            )
        except OSError:
            fh = None
        if fh is not None:
            fh.setLevel(logging.DEBUG)
            fh.setFormatter(_SafeFormatter(_FORMAT))
            fh._ragdesk = True  # type: ignore[attr-defined]
            root.addHandler(fh)
    if verbosity > 0:
        sh = logging.StreamHandler()
        sh.setLevel(logging.DEBUG if verbosity > 1 else logging.INFO)
        sh.setFormatter(_SafeFormatter(_FORMAT))
        sh._ragdesk = True  # type: ignore[attr-defined]
        root.addHandler(sh)
    for noisy in ("urllib3", "httpx", "httpcore", "filelock", "huggingface_hub"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
