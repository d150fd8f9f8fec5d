"""The thread count an answer fits into the cores other programs leave free: the arithmetic
over fake CPU readings, the real readings on Linux, and the answer path setting it."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, cast

import pytest

import ragdesk.core.cpu as cpu
import ragdesk.core.free_cores as free_cores
from ragdesk.core.free_cores import CpuTimes, FreeCores, fit_threads, read_cpu_times

if TYPE_CHECKING:
    from ragdesk.core.encoders.runtime import TextEncoder


class _Clock:
    """CPU readings a test sets: machine busy, own, wall (seconds since an origin)."""

    def __init__(self) -> None:
        self.now: CpuTimes | None = CpuTimes(0.0, 0.0, 0.0)

    def advance(self, wall: float, machine: float, own: float) -> None:
        assert self.now is not None
        self.now = CpuTimes(self.now.machine_busy + machine, self.now.own + own,
                            self.now.wall + wall)

    def __call__(self) -> CpuTimes | None:
        return self.now


def test_all_threads_while_the_other_programs_leave_the_cores_free() -> None:
    clock = _Clock()
    gauge = FreeCores(clock, cores=2)
    clock.advance(wall=2.0, machine=0.3, own=0.0)  # a desktop's background: 0.15 of a core
    assert gauge.threads_for(2) == 2
    # this process's own answer used both cores: not another program's
    clock.advance(wall=1.0, machine=2.0, own=2.0)
    assert gauge.others_busy() == pytest.approx(0.0)
    assert gauge.threads_for(2) == 2


def test_one_thread_fewer_for_each_core_another_program_keeps_busy() -> None:
    clock = _Clock()
    gauge = FreeCores(clock, cores=4)
    clock.advance(wall=1.0, machine=1.0 + 1.5, own=1.5)  # one busy program beside our 1.5
    assert gauge.others_busy() == pytest.approx(1.0)
    assert gauge.threads_for(4) == 3
    assert gauge.threads_for(2) == 2  # the chosen count is the most, never raised
    clock.advance(wall=1.0, machine=3.0, own=0.0)
    assert gauge.threads_for(4) == 1
    clock.advance(wall=1.0, machine=6.0, own=0.0)  # more than the machine: still one
    assert gauge.threads_for(4) == 1


def test_a_short_look_keeps_the_count_decided_before() -> None:
    clock = _Clock()
    gauge = FreeCores(clock, cores=2)
    clock.advance(wall=1.0, machine=1.0, own=0.0)
    assert gauge.threads_for(2) == 1
    # answers back to back: 0.1 s of an idle machine says too little to change it
    clock.advance(wall=0.1, machine=0.0, own=0.0)
    assert gauge.threads_for(2) == 1
    # the short window is not lost: it counts in the next long enough look
    clock.advance(wall=0.9, machine=0.0, own=0.0)
    assert gauge.others_busy() == pytest.approx(0.0)
    assert gauge.threads_for(2) == 2


def test_where_the_machine_does_not_say_the_count_stays_as_chosen() -> None:
    clock = _Clock()
    gauge = FreeCores(clock, cores=2)
    clock.now = None
    assert gauge.others_busy() is None
    assert gauge.threads_for(2) == 2


def _burn(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="reads Linux's /proc/stat")
def test_the_real_readings_count_this_process_in_the_machine_and_in_its_own_time() -> None:
    before = read_cpu_times()
    _burn(0.4)
    after = read_cpu_times()
    assert before is not None and after is not None
    own = after.own - before.own
    machine = after.machine_busy - before.machine_busy
    wall = after.wall - before.wall
    assert own >= 0.35
    # the machine's busy time holds this process's (clock ticks of 10 ms round both)
    assert machine >= own - 0.05
    assert machine <= (os.cpu_count() or 1) * wall + 0.05


@pytest.fixture()
def fitted(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Clock]:
    """Spinning waits as a front end sets them, a 2-core gauge on fake readings, 2 threads
    chosen; torch's count restored afterwards."""
    import torch

    before = torch.get_num_threads()
    clock = _Clock()
    monkeypatch.setattr(cpu, "_SPINNING", True)
    monkeypatch.setattr(free_cores, "_GAUGE", FreeCores(clock, cores=2))
    monkeypatch.setattr(free_cores, "_WANTED", 2)
    yield clock
    torch.set_num_threads(before)


def test_fit_threads_sets_torchs_count_and_gives_it_back_when_the_cores_free_up(
        fitted: _Clock) -> None:
    import torch

    fitted.advance(wall=1.0, machine=1.0, own=0.0)
    assert fit_threads() == 1
    assert torch.get_num_threads() == 1
    fitted.advance(wall=1.0, machine=0.0, own=0.0)
    assert fit_threads() == 2
    assert torch.get_num_threads() == 2


def test_without_spinning_waits_nothing_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setattr(cpu, "_SPINNING", False)
    before = torch.get_num_threads()
    assert fit_threads() is None
    assert torch.get_num_threads() == before


def test_the_settings_thread_count_is_the_most_an_answer_gets(fitted: _Clock) -> None:
    from ragdesk.core.preferences import apply_threads

    apply_threads(1)
    fitted.advance(wall=1.0, machine=0.0, own=0.0)
    assert fit_threads() == 1
    apply_threads(2)
    fitted.advance(wall=1.0, machine=0.0, own=0.0)
    assert fit_threads() == 2


def test_an_answer_runs_on_the_threads_the_free_cores_take(fitted: _Clock,
                                                          bart_gen: Any) -> None:
    import torch

    from ragdesk.core.engine import Engine
    from ragdesk.core.types import AnswerToken, Hit

    # ask_from_docs retrieves nothing: no question encoder is asked
    engine = Engine(cast("TextEncoder", None), bart_gen)
    fitted.advance(wall=1.0, machine=1.0, own=0.0)
    seen: list[int] = []

    def on_token(_: AnswerToken) -> None:
        seen.append(torch.get_num_threads())

    docs = [Hit(id=i, score=1.0 - i / 10, title=f"t{i}", text="the city was founded in 1850")
            for i in range(2)]
    engine.ask_from_docs("when was the city founded", docs, on_token=on_token)
    assert seen and set(seen) == {1}


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="reads Linux's /proc/stat")
def test_the_readings_cover_the_cpus_this_process_may_use() -> None:
    from ragdesk.core.free_cores import usable_cpus

    cpus = usable_cpus()
    if cpus is None:
        pytest.skip("no CPU affinity here")
    whole = read_cpu_times(set(range(4096)))
    ours = read_cpu_times(cpus)
    none = read_cpu_times(set())
    assert whole is not None and ours is not None and none is not None
    assert none.machine_busy == 0.0
    assert 0.0 < ours.machine_busy <= whole.machine_busy + 0.05
    first = min(cpus)
    one = read_cpu_times({first})
    assert one is not None and 0.0 < one.machine_busy <= ours.machine_busy + 0.05
