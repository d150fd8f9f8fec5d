"""What an error dialog shows, built on a worker thread and shown on the GUI thread.

A pure value type (no Qt), so the op runner, the backend and the widgets share one.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass

from ragdesk.core.errors import Cancelled, RagdeskError


@dataclass(frozen=True)
class ErrorReport:
    """The user-facing text of a failure: what went wrong, and what to do about it."""

    message: str
    hint: str = ""
    details: str = ""
    is_bug: bool = False
    cancelled: bool = False
    # The GUI action that fixes it (ragdesk.core.errors.ACTIONS), offered as a button.
    action: str | None = None

    @classmethod
    def from_exception(cls, exc: BaseException) -> ErrorReport:
        if isinstance(exc, Cancelled):
            return cls(exc.message, cancelled=True)
        if isinstance(exc, RagdeskError):
            # The GUI's own words: what to click, never a command to type.
            return cls(exc.message, exc.gui_hint, action=exc.action)
        if isinstance(exc, MemoryError):
            return cls("ragdesk ran out of memory.",
                       "Use fewer passages (K) or beams, or a smaller model pack.")
        details = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        return cls(f"Something went wrong inside ragdesk: {type(exc).__name__}: {exc}",
                   "This is a bug. The details below are also in the log file; please "
                   "include them when you report it.", details=details, is_bug=True)

    @classmethod
    def cancelled_report(cls) -> ErrorReport:
        return cls("Cancelled.", cancelled=True)
