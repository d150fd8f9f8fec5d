"""How the self-contained widgets (conversations sidebar, article view, settings dialog) get
disk work done off the GUI thread without knowing the window's machinery.

A widget is handed a :class:`Background` callable: ``background(fn, on_done, on_error=...,
write=...)`` runs ``fn()`` elsewhere and calls ``on_done(result)`` (or ``on_error(message)``)
later, on the GUI thread. :func:`op_background` makes one from the window's
:class:`~ragdesk.ui.ops.OpRunner` (reads on the reads lane, writes on the serialized writes
lane); tests and tools may pass any other callable with the same behaviour.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from PySide6.QtCore import QObject

from ragdesk.ui.ops import Lane, Op, OpContext, OpRunner
from ragdesk.ui.reports import ErrorReport

OnError = Callable[[str], None]
T = TypeVar("T")


class Background(Protocol):
    def __call__(self, fn: Callable[[], T], on_done: Callable[[T], None], *,
                 on_error: OnError | None = None, write: bool = False) -> None: ...


def op_background(runner: OpRunner, parent: QObject | None = None, *,
                  title: str = "") -> Background:
    """A :class:`Background` on ``runner``'s lanes; callbacks stop when ``parent`` is gone.
    Failures without ``on_error`` go to the runner's own handler (the error dialog)."""

    def run(fn: Callable[[], T], on_done: Callable[[T], None], *,
            on_error: OnError | None = None, write: bool = False) -> None:
        def body(_ctx: OpContext) -> T:
            return fn()

        # A write is one short transaction: closing the window waits for it (a saved answer
        # or a rename queued just before closing must not be dropped); reads may be.
        op: Op[T] = Op(body, lane=Lane.WRITES if write else Lane.READS, title=title,
                         parent=parent, cancellable=not write).success(on_done)
        if on_error is not None:
            def failed(report: ErrorReport) -> None:
                if not report.cancelled:
                    on_error(report.message)

            op.failure(failed)
        op.run(runner)

    return run
