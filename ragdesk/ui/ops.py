"""One way to run work off the GUI thread: an :class:`Op` on a named :class:`Lane`.

In the spirit of Anki's ``aqt.operations`` (``QueryOp``/``CollectionOp``) and its task
manager: the caller builds an op from a function of an :class:`OpContext`, attaches callbacks,
and runs it::

    Op(lambda ctx: backend.quantize(name, variant, ctx.progress, ctx.cancel),
       lane=Lane.JOBS, title=f"Building {variant}")
        .success(lambda result: ...).failure(lambda report: ...).run(ops)

Lanes: ``engine`` (models and answers), ``jobs`` (long imports, downloads, verification) and
``writes`` (short catalog and settings writes) each run on one thread, in submission order,
so a switch never waits behind an hour-long import and two writes never race; ``reads``
(catalog listings, manifests) is a small pool.

Every callback runs on the GUI thread, never inside the caller's call (even an op refused at
once reports later), and never after ``parent`` is deleted: a closed dialog is not touched.
A failure is reported exactly once: to the op's ``failure`` callback when it has one (a dialog
shows it in its own label), else to the runner's ``on_failure`` (the window's error dialog); a
cancellation is never an error dialog. Observers that only track work (status bar, progress
panels, tests) subscribe to :meth:`OpRunner.events` of a lane.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Generic, TypeVar

import shiboken6
from PySide6.QtCore import QObject, QRunnable, Qt, QThreadPool, Signal, SignalInstance

from ragdesk.core.errors import Cancelled
from ragdesk.core.progress import CancelToken, ProgressCallback, ProgressUpdate
from ragdesk.ui.reports import ErrorReport

log = logging.getLogger(__name__)

T = TypeVar("T")

# The GUI repaints progress at most this often; the core may report every batch.
PROGRESS_INTERVAL_S = 0.05
# Catalog reads are short and mostly wait on SQLite; more threads would only contend for the
# two cores the app is usually given.
READS_THREADS = 2

_ids = itertools.count(1)


class Lane(str, Enum):
    ENGINE = "engine"
    JOBS = "jobs"
    WRITES = "writes"
    READS = "reads"


class OpState(Enum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self in (OpState.DONE, OpState.FAILED, OpState.CANCELLED)


@dataclass(frozen=True)
class OpContext:
    """What the op's function gets on its worker thread."""

    cancel: CancelToken
    progress: ProgressCallback  # throttled; the final update always goes through
    stream: Callable[[object], None]  # each item reaches the op's ``stream`` callback


FailureHandler = Callable[[ErrorReport, str], None]  # report, title


class OpBase:
    """What the runner and the observers of a lane see of an :class:`Op`, whatever its
    result's type: they route it; only the op itself hands its result to its typed callbacks
    (see :meth:`_execute`)."""

    def __init__(self, *, lane: Lane, title: str, parent: QObject | None,
                 cancellable: bool) -> None:
        self.id = next(_ids)
        self.lane = lane
        self.title = title
        self.parent = parent
        self.cancellable = cancellable
        self.token = CancelToken()
        self.state = OpState.QUEUED
        # Each kind of callback may be given more than once (the caller's, then a dialog's);
        # they run in the order given.
        self._on_failure: list[Callable[[ErrorReport], None]] = []
        self._on_progress: list[Callable[[ProgressUpdate], None]] = []
        self._on_stream: list[Callable[[object], None]] = []
        self._on_started: list[Callable[[], None]] = []

    def __repr__(self) -> str:
        return f"Op({self.id}, {self.title!r}, {self.lane.value}, {self.state.value})"

    def _execute(self, ctx: OpContext) -> tuple[object, Callable[[], None]]:
        """Run the work (worker thread): its result, for observers, and the call that hands
        it to the op's own callbacks (GUI thread)."""
        raise NotImplementedError

    # ---- control (GUI thread) ------------------------------------------------------------

    def cancel(self) -> None:
        """Ask the work to stop at its next check (an op not yet started never starts)."""
        self.token.cancel()

    @property
    def cancelled(self) -> bool:
        return self.token.cancelled

    @property
    def active(self) -> bool:
        return not self.state.finished

    # ---- delivery (GUI thread, from the runner) ------------------------------------------

    def _alive(self) -> bool:
        return self.parent is None or shiboken6.isValid(self.parent)

    def _deliver_started(self) -> None:
        self.state = OpState.RUNNING
        if self._alive():
            for cb in self._on_started:
                cb()

    def _deliver_progress(self, update: ProgressUpdate) -> None:
        if self._alive():
            for cb in self._on_progress:
                cb(update)

    def _deliver_stream(self, item: object) -> None:
        if self._alive():
            for cb in self._on_stream:
                cb(item)

    def _deliver_failure(self, report: ErrorReport, fallback: FailureHandler | None) -> None:
        self.state = OpState.CANCELLED if report.cancelled else OpState.FAILED
        if not self._alive():
            return
        if self._on_failure:
            for cb in self._on_failure:
                cb(report)
        elif not report.cancelled and fallback is not None:
            fallback(report, self.title or "ragdesk")


class Op(OpBase, Generic[T]):
    """One piece of background work and what to do with its outcome (on the GUI thread)."""

    def __init__(self, fn: Callable[[OpContext], T], *, lane: Lane = Lane.READS,
                 title: str = "", parent: QObject | None = None,
                 cancellable: bool = True) -> None:
        super().__init__(lane=lane, title=title, parent=parent, cancellable=cancellable)
        self.fn = fn
        self._on_success: list[Callable[[T], None]] = []

    # ---- building (before run) -----------------------------------------------------------

    def success(self, cb: Callable[[T], None]) -> Op[T]:
        self._on_success.append(cb)
        return self

    def failure(self, cb: Callable[[ErrorReport], None]) -> Op[T]:
        """Handle failures here (cancellations too, with ``report.cancelled``) instead of
        the runner's error dialog."""
        self._on_failure.append(cb)
        return self

    def progress(self, cb: Callable[[ProgressUpdate], None]) -> Op[T]:
        self._on_progress.append(cb)
        return self

    def stream(self, cb: Callable[[object], None]) -> Op[T]:
        self._on_stream.append(cb)
        return self

    def started(self, cb: Callable[[], None]) -> Op[T]:
        self._on_started.append(cb)
        return self

    def run(self, runner: OpRunner) -> Op[T]:
        runner.submit(self)
        return self

    # ---- running and delivery ------------------------------------------------------------

    def _execute(self, ctx: OpContext) -> tuple[object, Callable[[], None]]:
        result = self.fn(ctx)
        return result, lambda: self._deliver_success(result)

    def _deliver_success(self, result: T) -> None:
        self.state = OpState.DONE
        if self._alive():
            for cb in self._on_success:
                cb(result)


def _throttled(emit: Callable[[ProgressUpdate], None]) -> ProgressCallback:
    last = [0.0]

    def cb(update: ProgressUpdate) -> None:
        now = time.monotonic()
        final = update.total is not None and update.done >= update.total
        if final or now - last[0] >= PROGRESS_INTERVAL_S:
            last[0] = now
            emit(update)

    return cb


class LaneEvents(QObject):
    """What happens on one lane, for observers that track work rather than own it."""

    started = Signal(object)  # Op
    progressed = Signal(object, object)  # Op, ProgressUpdate
    finished = Signal(object, object)  # Op, result
    failed = Signal(object, object)  # Op, ErrorReport
    busyChanged = Signal(bool)


class _Bridge(QObject):
    """Lives on the GUI thread; workers emit, the GUI thread delivers (queued)."""

    started = Signal(object)
    progressed = Signal(object, object)
    streamed = Signal(object, object)
    finished = Signal(object, object, object)  # op, result, the op's own delivery of it
    failed = Signal(object, object)


class _Task(QRunnable):
    def __init__(self, op: OpBase, bridge: _Bridge) -> None:
        super().__init__()
        self.op = op
        self.bridge = bridge
        self.setAutoDelete(True)

    def run(self) -> None:
        op, bridge = self.op, self.bridge
        if op.token.cancelled:
            _emit(bridge.failed, op, ErrorReport.cancelled_report())
            return
        _emit(bridge.started, op)
        ctx = OpContext(op.token, _throttled(lambda u: _emit(bridge.progressed, op, u)),
                        lambda item: _emit(bridge.streamed, op, item))
        try:
            result, deliver = op._execute(ctx)
        except Exception as exc:
            if not isinstance(exc, Cancelled):
                log.warning("%s failed", op.title or "background work", exc_info=True)
            _emit(bridge.failed, op, ErrorReport.from_exception(exc))
        else:
            _emit(bridge.finished, op, result, deliver)


def _emit(signal: SignalInstance, *args: object) -> None:
    # RuntimeError: the runner is gone (its window was deleted); nobody is listening.
    with contextlib.suppress(RuntimeError):
        signal.emit(*args)


class OpRunner(QObject):
    """The lanes of one window: submit ops, observe them, cancel them, shut them down."""

    def __init__(self, parent: QObject | None = None, *,
                 on_failure: FailureHandler | None = None,
                 reads_threads: int = READS_THREADS) -> None:
        super().__init__(parent)
        self.on_failure = on_failure
        self._pools: dict[Lane, QThreadPool] = {}
        self._events: dict[Lane, LaneEvents] = {}
        self._ops: dict[Lane, dict[int, OpBase]] = {}
        for lane in Lane:
            pool = QThreadPool(self)
            pool.setObjectName(f"ragdesk-{lane.value}")
            if lane is Lane.READS:
                pool.setMaxThreadCount(max(1, reads_threads))
            else:
                pool.setMaxThreadCount(1)
                # One thread for the lane's whole life (torch keeps per-thread state).
                pool.setExpiryTimeout(-1)
            self._pools[lane] = pool
            self._events[lane] = LaneEvents(self)
            self._ops[lane] = {}
        self._closed = False
        self._bridge = _Bridge(self)
        queued = Qt.ConnectionType.QueuedConnection
        self._bridge.started.connect(self._on_started, queued)
        self._bridge.progressed.connect(self._on_progress, queued)
        self._bridge.streamed.connect(self._on_stream, queued)
        self._bridge.finished.connect(self._on_finished, queued)
        self._bridge.failed.connect(self._on_failed, queued)

    # ---- submitting and observing ---------------------------------------------------------

    def submit(self, op: OpBase) -> None:
        lane_ops = self._ops[op.lane]
        lane_ops[op.id] = op
        if len(lane_ops) == 1:
            self._events[op.lane].busyChanged.emit(True)
        if self._closed:
            op.cancel()  # reported as cancelled, later, like any other op
            self._bridge.failed.emit(op, ErrorReport.cancelled_report())
            return
        self._pools[op.lane].start(_Task(op, self._bridge))

    def events(self, lane: Lane) -> LaneEvents:
        return self._events[lane]

    def ops(self, lane: Lane) -> list[OpBase]:
        """The lane's ops not yet finished, in submission order."""
        return list(self._ops[lane].values())

    def current(self, lane: Lane) -> OpBase | None:
        """The op the lane is running now (a serial lane runs one at a time)."""
        return next((op for op in self._ops[lane].values()
                     if op.state is OpState.RUNNING), None)

    def busy(self, lane: Lane | None = None) -> bool:
        lanes = list(Lane) if lane is None else [lane]
        return any(self._ops[x] for x in lanes)

    def cancel(self, lane: Lane | None = None, op_id: int | None = None) -> None:
        """Cancel the lane's cancellable ops (all lanes if None), or only ``op_id``."""
        lanes = list(Lane) if lane is None else [lane]
        for x in lanes:
            for op in self._ops[x].values():
                if op.cancellable and (op_id is None or op.id == op_id):
                    op.cancel()

    # ---- delivery (GUI thread) ------------------------------------------------------------

    # Observers hear of a change before the op's own callbacks run, so that what the op's
    # owner says (e.g. a verification's result) is the last word in a shared status line.

    def _on_started(self, op: OpBase) -> None:
        if op.state.finished:
            return
        self._events[op.lane].started.emit(op)
        op._deliver_started()

    def _on_progress(self, op: OpBase, update: ProgressUpdate) -> None:
        if op.state.finished:
            return  # a late update queued before the op ended
        self._events[op.lane].progressed.emit(op, update)
        op._deliver_progress(update)

    def _on_stream(self, op: OpBase, item: object) -> None:
        op._deliver_stream(item)

    def _retire(self, op: OpBase) -> None:
        lane_ops = self._ops[op.lane]
        if lane_ops.pop(op.id, None) is not None and not lane_ops:
            self._events[op.lane].busyChanged.emit(False)

    def _on_finished(self, op: OpBase, result: object, deliver: Callable[[], None]) -> None:
        self._retire(op)
        op.state = OpState.DONE
        self._events[op.lane].finished.emit(op, result)
        deliver()

    def _on_failed(self, op: OpBase, report: ErrorReport) -> None:
        self._retire(op)
        op.state = OpState.CANCELLED if report.cancelled else OpState.FAILED
        self._events[op.lane].failed.emit(op, report)
        # After shutdown nobody is there to read a dialog; the op's own handler still runs.
        op._deliver_failure(report, None if self._closed else self.on_failure)

    # ---- closing ---------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    def shutdown(self, timeout_ms: int = 15_000) -> bool:
        """Cancel what can be cancelled (writes that cannot finish first), then wait for every
        lane within one deadline; False if some work did not stop in time. Idempotent."""
        self._closed = True
        self.cancel()
        deadline = time.monotonic() + timeout_ms / 1000
        ok = True
        for lane, pool in self._pools.items():
            left = max(1, int((deadline - time.monotonic()) * 1000))
            if not pool.waitForDone(left):
                log.warning("the %s lane did not stop within %d ms", lane.value, timeout_ms)
                ok = False
        return ok

    def idle(self) -> bool:
        """No worker thread is running an op (true after a successful shutdown)."""
        return all(pool.activeThreadCount() == 0 for pool in self._pools.values())
