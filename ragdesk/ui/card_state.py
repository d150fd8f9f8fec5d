"""Where an answer card is in its life; the one definition every view tests against."""

from __future__ import annotations

from enum import Enum


class CardState(str, Enum):
    # A str Enum: compares equal to its value, so logs and older callers read naturally.
    WAITING = "waiting"  # sent; not started (or waiting for the starter setup)
    RUNNING = "running"  # retrieving and generating; tokens stream in
    DONE = "done"
    CANCELLED = "cancelled"
    FAILED = "failed"

    @property
    def active(self) -> bool:
        """Still going: a new question waits, closing cancels it."""
        return self in (CardState.WAITING, CardState.RUNNING)
