"""The ETA follows the recent rate, not the first minute's."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ragdesk.core import progress as progress_mod
from ragdesk.core.progress import RATE_WINDOW_S, Progress, ProgressUpdate


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_eta_follows_the_recent_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(progress_mod, "time", SimpleNamespace(monotonic=clock))
    seen: list[ProgressUpdate] = []
    p = Progress(12_000, "encoding", seen.append)
    # A slow first minute (5/s: models loading, machine busy), then 50/s.
    for _ in range(60):
        clock.t += 1.0
        p.update(5)
    for _ in range(60):
        clock.t += 1.0
        p.update(50)
    last = seen[-1]
    assert last.rate == pytest.approx(50.0)
    assert last.eta_s == pytest.approx((12_000 - 3_300) / 50.0)
    # The whole-run average would have said 27.5/s and an ETA almost twice as long.
    assert last.eta_s is not None
    assert last.eta_s < (12_000 - 3_300) / 27.5 * 0.6


def test_rate_over_everything_until_the_window_has_passed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(progress_mod, "time", SimpleNamespace(monotonic=clock))
    p = Progress(100, start_done=40)  # a resumed job: the earlier work is not this run's rate
    clock.t += 2.0
    p.set(50)
    assert p.snapshot().rate == pytest.approx(5.0)
    clock.t += RATE_WINDOW_S * 3
    p.set(50 + int(RATE_WINDOW_S * 3))  # 1/s since
    assert p.snapshot().rate == pytest.approx(1.0)


def test_no_rate_before_any_work(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(progress_mod, "time", SimpleNamespace(monotonic=clock))
    p = Progress(10)
    clock.t += 5
    assert p.snapshot().rate is None and p.snapshot().eta_s is None


@pytest.mark.parametrize(("done", "total", "eta"), [(12_324, 12_324, 0.0), (5, 5, 3.0),
                                                     (0, None, 0.0), (3, 10, 0.2)])
def test_no_time_left_is_said_when_nothing_is_left(done: int, total: int | None,
                                                  eta: float) -> None:
    """A finished or uncounted step says no "ETA 0s" (the GUI's words: tests/ui)."""
    u = ProgressUpdate(done, total, "step", 10.0, eta)
    assert u.time_left_s is None
    assert "ETA" not in u.describe()
    running = ProgressUpdate(3, 10, "step", 10.0, 42.0)
    assert running.time_left_s == 42.0 and "ETA 42s" in running.describe()
