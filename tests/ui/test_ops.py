"""The op API on its own: no window, no models (ragdesk.ui.ops)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from PySide6.QtCore import QObject, QThread

from ragdesk.core.errors import BadInputError
from ragdesk.core.progress import Progress, ProgressUpdate
from ragdesk.ui.ops import Lane, Op, OpContext, OpRunner, OpState
from ragdesk.ui.reports import ErrorReport

TIMEOUT_MS = 10_000


@pytest.fixture()
def modal() -> list[tuple[ErrorReport, str]]:
    return []


@pytest.fixture()
def runner(qapp: Any, modal: list[tuple[ErrorReport, str]]) -> Iterator[OpRunner]:
    r = OpRunner(on_failure=lambda report, title: modal.append((report, title)))
    yield r
    assert r.shutdown(5_000)
    r.deleteLater()


def gui_thread() -> QThread:
    return QObject().thread()


def test_a_serial_lane_runs_in_order_on_one_thread_and_delivers_on_the_gui_thread(
        qtbot: Any, runner: OpRunner) -> None:
    ran: list[int] = []
    threads: set[int] = set()
    delivered: list[tuple[int, bool]] = []

    def work(i: int) -> Any:
        def fn(_ctx: OpContext) -> int:
            threads.add(threading.get_ident())
            time.sleep(0.01 * (5 - i))  # later ops are quicker: order must still hold
            ran.append(i)
            return i
        return fn

    for i in range(5):
        Op(work(i), lane=Lane.JOBS).success(
            lambda r: delivered.append((r, QThread.currentThread() is gui_thread()))
        ).run(runner)
    qtbot.waitUntil(lambda: len(delivered) == 5, timeout=TIMEOUT_MS)
    assert ran == [0, 1, 2, 3, 4]
    assert [r for r, _ in delivered] == [0, 1, 2, 3, 4]
    assert all(on_gui for _, on_gui in delivered)
    assert len(threads) == 1 and threading.main_thread().ident not in threads
    assert not runner.busy(Lane.JOBS)


def test_lanes_are_independent(qtbot: Any, runner: OpRunner) -> None:
    """A write never waits behind a long job."""
    release = threading.Event()
    done: list[str] = []
    Op(lambda _c: release.wait(10), lane=Lane.JOBS).success(
        lambda _r: done.append("job")).run(runner)
    Op(lambda _c: "w", lane=Lane.WRITES).success(done.append).run(runner)
    qtbot.waitUntil(lambda: done == ["w"], timeout=TIMEOUT_MS)
    assert runner.busy(Lane.JOBS) and runner.current(Lane.JOBS) is not None
    release.set()
    qtbot.waitUntil(lambda: done == ["w", "job"], timeout=TIMEOUT_MS)


def test_callbacks_never_run_inside_the_callers_call(qtbot: Any, runner: OpRunner) -> None:
    seen: list[int] = []
    Op(lambda _c: 1).success(seen.append).run(runner)
    assert seen == []
    qtbot.waitUntil(lambda: seen == [1], timeout=TIMEOUT_MS)


def test_progress_and_stream_reach_the_gui_thread_in_order(
        qtbot: Any, runner: OpRunner) -> None:
    updates: list[ProgressUpdate] = []
    items: list[tuple[object, bool]] = []
    result: list[str] = []

    def fn(ctx: OpContext) -> str:
        for i in range(3):
            ctx.stream(i)
        p = Progress(total=4, message="counting", callback=ctx.progress)
        for _ in range(4):
            p.update(1)
        return "ok"

    op = Op(fn, lane=Lane.ENGINE).progress(updates.append).stream(
        lambda item: items.append((item, QThread.currentThread() is gui_thread()))
    ).success(result.append).run(runner)
    qtbot.waitUntil(lambda: result == ["ok"], timeout=TIMEOUT_MS)
    assert items == [(0, True), (1, True), (2, True)]
    assert updates and updates[-1].done == 4 and updates[-1].total == 4  # the final one
    assert op.state is OpState.DONE


def test_cancel_stops_a_running_op_and_a_queued_one_never_starts(
        qtbot: Any, runner: OpRunner) -> None:
    started = threading.Event()
    reports: list[ErrorReport] = []
    ran_second: list[bool] = []

    def long(ctx: OpContext) -> None:
        started.set()
        while True:
            ctx.cancel.raise_if_cancelled()
            time.sleep(0.01)

    first = Op(long, lane=Lane.JOBS).failure(reports.append).run(runner)
    second = Op(lambda _c: ran_second.append(True), lane=Lane.JOBS).failure(
        reports.append).run(runner)
    assert started.wait(5)
    runner.cancel(Lane.JOBS)
    qtbot.waitUntil(lambda: len(reports) == 2, timeout=TIMEOUT_MS)
    assert all(r.cancelled for r in reports)
    assert ran_second == []
    assert first.state is OpState.CANCELLED and second.state is OpState.CANCELLED


def test_a_failure_is_reported_once_by_the_op_or_else_by_the_runner(
        qtbot: Any, runner: OpRunner, modal: list[tuple[ErrorReport, str]]) -> None:
    def bad(_c: OpContext) -> None:
        raise BadInputError("That file is not JSON lines.", line=2)

    own: list[ErrorReport] = []
    failed_events: list[object] = []
    runner.events(Lane.JOBS).failed.connect(lambda op, r: failed_events.append(op))
    Op(bad, lane=Lane.JOBS, title="Importing").failure(own.append).run(runner)
    qtbot.waitUntil(lambda: len(failed_events) == 1, timeout=TIMEOUT_MS)
    assert len(own) == 1 and "not JSON" in own[0].message and modal == []

    Op(bad, lane=Lane.JOBS, title="Importing").run(runner)
    qtbot.waitUntil(lambda: len(failed_events) == 2, timeout=TIMEOUT_MS)
    assert len(modal) == 1 and modal[0][1] == "Importing" and not modal[0][0].is_bug

    def bug(_c: OpContext) -> None:
        raise ZeroDivisionError("oops")

    Op(bug).run(runner)
    qtbot.waitUntil(lambda: len(modal) == 2, timeout=TIMEOUT_MS)
    assert modal[1][0].is_bug and "ZeroDivisionError" in modal[1][0].details


def test_a_cancellation_is_never_an_error_dialog(qtbot: Any, runner: OpRunner,
                                                 modal: list[tuple[ErrorReport, str]]) -> None:
    events: list[object] = []
    runner.events(Lane.JOBS).failed.connect(lambda op, r: events.append(r))
    op = Op(lambda _c: None, lane=Lane.JOBS)
    op.cancel()
    op.run(runner)
    qtbot.waitUntil(lambda: len(events) == 1, timeout=TIMEOUT_MS)
    assert modal == [] and op.state is OpState.CANCELLED


def test_callbacks_are_dropped_once_the_parent_is_deleted(qtbot: Any,
                                                         runner: OpRunner) -> None:
    parent = QObject()
    release = threading.Event()
    seen: list[object] = []
    finished: list[object] = []
    runner.events(Lane.READS).finished.connect(lambda op, r: finished.append(r))
    Op(lambda _c: release.wait(10), parent=parent).success(seen.append).run(runner)
    parent.deleteLater()
    qtbot.waitUntil(lambda: not _valid(parent), timeout=TIMEOUT_MS)
    release.set()
    qtbot.waitUntil(lambda: finished == [True], timeout=TIMEOUT_MS)
    assert seen == []


def _valid(obj: QObject) -> bool:
    import shiboken6

    return bool(shiboken6.isValid(obj))


def test_busy_changes_once_per_burst(qtbot: Any, runner: OpRunner) -> None:
    busy: list[bool] = []
    runner.events(Lane.WRITES).busyChanged.connect(busy.append)
    for i in range(3):
        def value(_c: OpContext, i: int = i) -> int:
            return i

        Op(value, lane=Lane.WRITES).run(runner)
    assert busy == [True] and runner.busy() and len(runner.ops(Lane.WRITES)) == 3
    qtbot.waitUntil(lambda: busy == [True, False], timeout=TIMEOUT_MS)


def test_shutdown_cancels_work_lets_writes_finish_and_joins(qtbot: Any, qapp: Any) -> None:
    runner = OpRunner()
    started = threading.Event()
    wrote: list[bool] = []

    def long(ctx: OpContext) -> None:
        started.set()
        while True:
            ctx.cancel.raise_if_cancelled()
            time.sleep(0.01)

    job = Op(long, lane=Lane.JOBS).run(runner)
    engine = Op(long, lane=Lane.ENGINE).run(runner)
    def slow_write(_c: OpContext) -> None:
        time.sleep(0.2)
        wrote.append(True)

    write = Op(slow_write, lane=Lane.WRITES, cancellable=False).run(runner)
    assert started.wait(5)
    assert runner.shutdown(5_000)
    assert job.cancelled and engine.cancelled and not write.cancelled
    assert wrote == [True]  # a write that cannot be undone is finished, not dropped
    assert runner.idle()
    # After shutdown new work is refused (as a cancellation), and shutdown is idempotent.
    late: list[ErrorReport] = []
    Op(lambda _c: None).failure(late.append).run(runner)
    qtbot.waitUntil(lambda: len(late) == 1, timeout=TIMEOUT_MS)
    assert late[0].cancelled
    assert runner.shutdown(1_000)
    runner.deleteLater()


def test_reads_run_in_parallel(qtbot: Any, runner: OpRunner) -> None:
    both = threading.Barrier(2, timeout=5)
    done: list[int] = []
    for i in range(2):
        def meet(_c: OpContext, i: int = i) -> int:
            both.wait()
            return i

        Op(meet).success(done.append).run(runner)
    qtbot.waitUntil(lambda: sorted(done) == [0, 1], timeout=TIMEOUT_MS)
