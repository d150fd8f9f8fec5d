"""One engine shared by all requests: loaded once in the background, run on one worker
thread (answers are CPU-bound and the engine decodes one at a time), with a bounded number
of requests admitted at once so that a burst is refused (429) instead of queueing forever."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from ragdesk.core.engine.api import Engine

log = logging.getLogger(__name__)

T = TypeVar("T")


class EngineUnavailable(Exception):
    """The engine is still loading or failed to load (503)."""


class QueueFull(Exception):
    """Too many requests are waiting for the engine (429)."""


class EngineHost:
    def __init__(self, loader: Callable[[], Engine], queue_limit: int) -> None:
        self._loader = loader
        self.queue_limit = queue_limit
        self._engine: Engine | None = None
        self.error: str | None = None
        self._loaded = threading.Event()
        self._admit = threading.Lock()
        self._in_flight = 0
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragdesk-engine")

    # ---- loading ----------------------------------------------------------------------

    def start(self) -> None:
        """Load the engine on the worker thread: the server answers /v1/models (and 503 to
        questions) while the models load."""
        self._worker.submit(self._load)

    def _load(self) -> None:
        try:
            self._engine = self._loader()
        except BaseException as exc:  # any failure is reported to every request, not raised
            log.exception("the engine failed to load")
            self.error = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
        finally:
            self._loaded.set()

    def wait_loaded(self, timeout: float | None = None) -> bool:
        return self._loaded.wait(timeout)

    @property
    def state(self) -> str:
        if not self._loaded.is_set():
            return "loading"
        return "failed" if self._engine is None else "ready"

    @property
    def engine(self) -> Engine:
        if not self._loaded.is_set():
            raise EngineUnavailable("The engine is still loading its models; try again in a "
                                    "moment.")
        if self._engine is None:
            raise EngineUnavailable(f"The engine failed to load: {self.error}")
        return self._engine

    # ---- work -------------------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def submit(self, fn: Callable[[Engine], T]) -> Future[T]:
        """Run ``fn(engine)`` on the engine thread; refused at once when the queue is full."""
        engine = self.engine
        with self._admit:
            if self._in_flight >= self.queue_limit:
                raise QueueFull(f"{self._in_flight} requests are already waiting for the "
                                "engine; try again later.")
            self._in_flight += 1
        try:
            future = self._worker.submit(fn, engine)
        except BaseException:
            self._release()
            raise
        future.add_done_callback(lambda _f: self._release())
        return future

    def _release(self) -> None:
        with self._admit:
            self._in_flight -= 1

    def close(self) -> None:
        self._worker.shutdown(wait=False, cancel_futures=True)
        engine, self._engine = self._engine, None
        if engine is not None and hasattr(engine, "close"):
            engine.close()
