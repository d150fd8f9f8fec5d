"""The gate that holds questions while the starter pack's setup cannot answer yet."""

from __future__ import annotations

import threading

from ragdesk.core.progress import CancelToken


class SetupGate:
    """Whether the starter pack's setup still keeps questions waiting (thread-safe).

    The setup job begins it; it opens as soon as the setup can answer (the BM25 stage and the
    generator, see ``ensure_starter_snapshot``), and also when the setup ends in any way, so
    that a waiting question then runs and reports whatever is really wrong.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._pending = False

    @property
    def pending(self) -> bool:
        with self._cond:
            return self._pending

    def begin(self) -> None:
        with self._cond:
            self._pending = True

    def open(self) -> None:
        with self._cond:
            self._pending = False
            self._cond.notify_all()

    def wait(self, cancel: CancelToken | None = None, poll_s: float = 0.2) -> None:
        """Block (a worker thread) until the setup can answer; raises Cancelled if asked."""
        with self._cond:
            while self._pending:
                if cancel is not None:
                    cancel.raise_if_cancelled()
                self._cond.wait(poll_s)
        if cancel is not None:
            cancel.raise_if_cancelled()
