"""Background work: each worker is a QObject moved to its own QThread.

The window talks to workers only through signals (queued across threads), and workers talk
back the same way. Three kinds:

- :class:`EngineClient` owns the thread that loads models and answers questions; tokens are
  re-emitted as signals the moment the engine decides them.
- :class:`SerialQueue` runs submitted jobs one at a time. The window has two: ``writes`` for
  the short catalog writes it makes itself (switching the active snapshot, removing one), and
  ``jobs`` for long work (import, quantize, verify, starter pack, downloads) whose own catalog
  writes are short transactions inside the core. A switch therefore never waits behind an
  hour-long import.
- :func:`run_async` runs a read (catalog listing, manifests) on the global thread pool.

Every job carries a :class:`CancelToken`; ``shutdown()`` cancels everything, stops the event
loops and joins the threads, which is what closing the window does.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import shiboken6
from PySide6.QtCore import QObject, QRunnable, QThread, QThreadPool, Signal, Slot

from ragdesk.core.errors import Cancelled
from ragdesk.core.progress import CancelToken, ProgressCallback, ProgressUpdate
from ragdesk.core.types import Answer, AnswerToken, Hit
from ragdesk.ui.backend import AskParams, Backend, ErrorReport

log = logging.getLogger(__name__)

_ids = itertools.count(1)

# The GUI repaints progress at most this often; the core may report every batch.
PROGRESS_INTERVAL_S = 0.05


def _throttled(emit: Callable[[ProgressUpdate], None]) -> ProgressCallback:
    last = [0.0]

    def cb(update: ProgressUpdate) -> None:
        now = time.monotonic()
        final = update.total is not None and update.done >= update.total
        if final or now - last[0] >= PROGRESS_INTERVAL_S:
            last[0] = now
            emit(update)

    return cb


# ---- engine -------------------------------------------------------------------------------


@dataclass
class AskRequest:
    question: str
    params: AskParams
    pack: str
    snapshot: str | None
    id: int = field(default_factory=lambda: next(_ids))
    cancel: CancelToken = field(default_factory=CancelToken)
    tag: str = "chat"
    docs: list[Hit] | None = None  # answer from these passages instead of retrieving


class _EngineRunner(QObject):
    status = Signal(str)
    started = Signal(int)
    tokenStreamed = Signal(int, object)  # request id, AnswerToken
    finished = Signal(int, object)  # request id, Answer
    failed = Signal(int, object)  # request id, ErrorReport
    engineReady = Signal(str)  # pack name

    def __init__(self, backend: Backend) -> None:
        super().__init__()
        self.backend = backend

    @Slot(str)
    def preload(self, pack: str) -> None:
        """Load the models before the first question, so that it is answered at once."""
        if self.backend.engine_loaded(pack):
            return
        try:
            self.status.emit(f"Loading the {pack} models…")
            self.backend.engine(pack)
        except Exception as exc:
            # Not worth a dialog: the first question reports the same problem properly.
            log.info("preloading the %s models failed: %s", pack, exc)
            self.status.emit(f"The {pack} models could not be loaded yet.")
        else:
            self.engineReady.emit(pack)

    @Slot(object)
    def run(self, req: AskRequest) -> None:
        if req.cancel.cancelled:
            self.failed.emit(req.id, ErrorReport("Cancelled.", cancelled=True))
            return
        self.started.emit(req.id)
        try:
            if self.backend.setup.pending:
                # Asked while the starter pack is being set up: the card shows the setup's
                # progress until it can answer (BM25 + generator), then this runs.
                self.status.emit("Waiting for the starter pack…")
                self.backend.wait_for_setup(req.cancel)
                self.started.emit(req.id)
            if not self.backend.engine_loaded(req.pack):
                self.status.emit(f"Loading the {req.pack} models…")
                self.backend.engine(req.pack)
                self.engineReady.emit(req.pack)
            req.cancel.raise_if_cancelled()
            self.status.emit("Retrieving and generating…")

            def on_token(tok: AnswerToken) -> None:
                self.tokenStreamed.emit(req.id, tok)

            if req.docs is not None:
                answer = self.backend.answer_from_docs(
                    req.question, req.docs, req.params, pack=req.pack, snapshot=req.snapshot,
                    on_token=on_token, cancel=req.cancel)
            else:
                answer = self.backend.answer(req.question, req.params, pack=req.pack,
                                             snapshot=req.snapshot, on_token=on_token,
                                             cancel=req.cancel)
        except Cancelled as exc:
            self.failed.emit(req.id, ErrorReport.from_exception(exc))
        except Exception as exc:
            log.exception("answering %r failed", req.question)
            self.failed.emit(req.id, ErrorReport.from_exception(exc))
        else:
            self.finished.emit(req.id, answer)


class EngineClient(QObject):
    """Lives on the GUI thread; forwards requests to the engine thread."""

    status = Signal(str)
    started = Signal(int)
    tokenStreamed = Signal(int, object)
    answerFinished = Signal(int, object)
    failed = Signal(int, object)
    engineReady = Signal(str)
    busyChanged = Signal(bool)
    _request = Signal(object)
    _preload = Signal(str)

    def __init__(self, backend: Backend, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._thread = QThread()
        self._thread.setObjectName("ragdesk-engine")
        self._runner = _EngineRunner(backend)
        self._runner.moveToThread(self._thread)
        self._thread.finished.connect(self._runner.deleteLater)
        self._request.connect(self._runner.run)
        self._preload.connect(self._runner.preload)
        self._runner.status.connect(self.status)
        self._runner.started.connect(self.started)
        self._runner.tokenStreamed.connect(self.tokenStreamed)
        self._runner.engineReady.connect(self.engineReady)
        self._runner.finished.connect(self._on_finished)
        self._runner.failed.connect(self._on_failed)
        self._pending: dict[int, AskRequest] = {}
        self._thread.start()

    def ask(self, question: str, params: AskParams, *, pack: str, snapshot: str | None,
            tag: str = "chat", docs: list[Hit] | None = None) -> AskRequest:
        req = AskRequest(question, params, pack, snapshot, tag=tag, docs=docs)
        self._pending[req.id] = req
        if len(self._pending) == 1:
            self.busyChanged.emit(True)
        self._request.emit(req)
        return req

    def preload(self, pack: str) -> None:
        self._preload.emit(pack)

    @property
    def busy(self) -> bool:
        return bool(self._pending)

    def pending(self) -> list[AskRequest]:
        return list(self._pending.values())

    def cancel(self, request_id: int | None = None) -> None:
        for rid, req in self._pending.items():
            if request_id is None or rid == request_id:
                req.cancel.cancel()

    def _done(self, rid: int) -> None:
        self._pending.pop(rid, None)
        if not self._pending:
            self.busyChanged.emit(False)

    def _on_finished(self, rid: int, answer: Answer) -> None:
        self._done(rid)
        self.answerFinished.emit(rid, answer)

    def _on_failed(self, rid: int, report: ErrorReport) -> None:
        self._done(rid)
        self.failed.emit(rid, report)

    def shutdown(self, timeout_ms: int = 10_000) -> bool:
        """Cancel everything and join the thread; False if it did not stop in time."""
        self.cancel()
        self._thread.quit()
        ok = self._thread.wait(timeout_ms)
        if not ok:
            log.warning("the engine thread did not stop within %d ms", timeout_ms)
        return bool(ok)


# ---- serialized jobs ---------------------------------------------------------------------


@dataclass
class Job:
    title: str
    fn: Callable[[ProgressCallback, CancelToken], Any]
    kind: str = "job"
    target: str | None = None  # the snapshot or pack the job is about
    id: int = field(default_factory=lambda: next(_ids))
    cancel: CancelToken = field(default_factory=CancelToken)
    cancellable: bool = True


class _JobRunner(QObject):
    started = Signal(object)  # Job
    progressed = Signal(object, object)  # Job, ProgressUpdate
    finished = Signal(object, object)  # Job, result
    failed = Signal(object, object)  # Job, ErrorReport

    @Slot(object)
    def run(self, job: Job) -> None:
        if job.cancel.cancelled:
            self.failed.emit(job, ErrorReport("Cancelled.", cancelled=True))
            return
        self.started.emit(job)
        try:
            result = job.fn(_throttled(lambda u: self.progressed.emit(job, u)), job.cancel)
        except Exception as exc:
            if not isinstance(exc, Cancelled):
                log.warning("job %r failed", job.title, exc_info=True)
            self.failed.emit(job, ErrorReport.from_exception(exc))
        else:
            self.finished.emit(job, result)


class SerialQueue(QObject):
    """Runs jobs one at a time, in submission order, on one dedicated thread."""

    jobStarted = Signal(object)
    jobProgress = Signal(object, object)
    jobFinished = Signal(object, object)
    jobFailed = Signal(object, object)
    busyChanged = Signal(bool)
    _submit = Signal(object)

    def __init__(self, name: str, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._thread = QThread()
        self._thread.setObjectName(f"ragdesk-{name}")
        self._runner = _JobRunner()
        self._runner.moveToThread(self._thread)
        self._thread.finished.connect(self._runner.deleteLater)
        self._submit.connect(self._runner.run)
        self._runner.started.connect(self._on_started)
        self._runner.progressed.connect(self.jobProgress)
        self._runner.finished.connect(self._on_finished)
        self._runner.failed.connect(self._on_failed)
        self._jobs: dict[int, Job] = {}
        self.current: Job | None = None
        self._thread.start()

    def submit(self, job: Job) -> Job:
        self._jobs[job.id] = job
        if len(self._jobs) == 1:
            self.busyChanged.emit(True)
        self._submit.emit(job)
        return job

    def run(self, title: str, fn: Callable[[ProgressCallback, CancelToken], Any], *,
            kind: str = "job", target: str | None = None, cancellable: bool = True) -> Job:
        return self.submit(Job(title, fn, kind=kind, target=target, cancellable=cancellable))

    @property
    def busy(self) -> bool:
        return bool(self._jobs)

    def jobs(self) -> list[Job]:
        return list(self._jobs.values())

    def cancel(self, job_id: int | None = None) -> None:
        for jid, job in self._jobs.items():
            if job_id is None or jid == job_id:
                job.cancel.cancel()

    def _on_started(self, job: Job) -> None:
        self.current = job
        self.jobStarted.emit(job)

    def _done(self, job: Job) -> None:
        self._jobs.pop(job.id, None)
        if self.current is job:
            self.current = None
        if not self._jobs:
            self.busyChanged.emit(False)

    def _on_finished(self, job: Job, result: object) -> None:
        self._done(job)
        self.jobFinished.emit(job, result)

    def _on_failed(self, job: Job, report: ErrorReport) -> None:
        self._done(job)
        self.jobFailed.emit(job, report)

    def shutdown(self, timeout_ms: int = 10_000) -> bool:
        self.cancel()
        self._thread.quit()
        ok = self._thread.wait(timeout_ms)
        if not ok:
            log.warning("worker thread %s did not stop within %d ms",
                        self._thread.objectName(), timeout_ms)
        return bool(ok)


# ---- reads on the thread pool -----------------------------------------------------------


class _TaskSignals(QObject):
    """Lives on the GUI thread; the pool thread emits, the GUI thread delivers (queued)."""

    done = Signal(object)
    failed = Signal(object)

    def __init__(self, on_done: Callable[[Any], None],
                 on_error: Callable[[ErrorReport], None] | None,
                 context: QObject | None) -> None:
        super().__init__()
        self._on_done = on_done
        self._on_error = on_error
        self._context = context
        self.done.connect(self._deliver_done)
        self.failed.connect(self._deliver_failed)

    def _alive(self) -> bool:
        _live_tasks.discard(self)
        return self._context is None or shiboken6.isValid(self._context)

    @Slot(object)
    def _deliver_done(self, result: Any) -> None:
        if self._alive():
            self._on_done(result)

    @Slot(object)
    def _deliver_failed(self, report: ErrorReport) -> None:
        if self._alive() and self._on_error is not None:
            self._on_error(report)


class _Task(QRunnable):
    def __init__(self, fn: Callable[[], Any], signals: _TaskSignals) -> None:
        super().__init__()
        self.fn = fn
        self.signals = signals
        self.setAutoDelete(True)

    def run(self) -> None:
        try:
            result = self.fn()
        except Exception as exc:
            log.warning("background read failed", exc_info=True)
            self.signals.failed.emit(ErrorReport.from_exception(exc))
        else:
            self.signals.done.emit(result)


# Python must keep the signal objects alive until their result is delivered.
_live_tasks: set[_TaskSignals] = set()


def run_async(fn: Callable[[], Any], on_done: Callable[[Any], None],
              on_error: Callable[[ErrorReport], None] | None = None,
              context: QObject | None = None) -> None:
    """Run ``fn`` on the thread pool and call back on the GUI thread.

    ``context``: when that QObject is deleted before the result arrives, the callback is
    dropped (a closed dialog must not be touched).
    """
    signals = _TaskSignals(on_done, on_error, context)
    _live_tasks.add(signals)
    QThreadPool.globalInstance().start(_Task(fn, signals))


def wait_for_pool(timeout_ms: int = 5_000) -> bool:
    return bool(QThreadPool.globalInstance().waitForDone(timeout_ms))
