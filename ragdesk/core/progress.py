"""Progress and cancellation as plain objects: the GUI renders them, the CLI prints them."""

from __future__ import annotations

import collections
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

from ragdesk.core.errors import Cancelled
from ragdesk.core.terminal_text import terminal_safe
from ragdesk.core.units import fmt_seconds, human_bytes, human_rate


class CancelToken:
    """Set from any thread; long work checks it between batches."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def raise_if_cancelled(self) -> None:
        if self._event.is_set():
            raise Cancelled("Cancelled.")


@dataclass(frozen=True)
class ProgressUpdate:
    done: int
    total: int | None
    message: str
    rate: float | None  # units per second over the work so far
    eta_s: float | None
    unit: str = ""  # what done/total count: "bytes" is shown as MB; "" a plain count

    @property
    def fraction(self) -> float | None:
        if not self.total:
            return None
        return min(1.0, self.done / self.total)

    @property
    def time_left_s(self) -> float | None:
        """The time left worth saying: None when unknown, and when nothing is left (a step
        that is done, or one that reports no count, would read "about 0 s left")."""
        if self.eta_s is None or not self.total or self.done >= self.total or \
                self.eta_s < 0.5:
            return None
        return self.eta_s

    def describe(self) -> str:
        parts = [self.message] if self.message else []
        if self.unit == "bytes":
            parts.append(human_bytes(self.done)
                         + (f"/{human_bytes(self.total)}" if self.total else ""))
        elif self.total or self.done:
            # a step that counts nothing (no total, nothing done) has no number to show
            parts.append(f"{self.done:,}" + (f"/{self.total:,}" if self.total else ""))
        if self.rate:
            parts.append(human_rate(self.rate, "bytes" if self.unit == "bytes" else ""))
        if self.time_left_s is not None:
            parts.append(f"ETA {fmt_seconds(self.time_left_s, compact=True)}")
        return "  ".join(parts)


@dataclass(frozen=True)
class TrainingUpdate(ProgressUpdate):
    """A training job's update: ``done``/``total`` count the current stage's work (optimizer
    steps while it trains); the steps, the loss and the held-out accuracy ride along on every
    update, so a front end that drops updates to repaint less never loses them."""

    stage: str = ""
    step: int = 0
    total_steps: int = 0
    loss: float | None = None  # the mean over the last steps
    k: int = 0  # the passages read: the accuracy is held-out top-k
    top_k_before: float | None = None
    top_k: float | None = None  # the latest held-out evaluation's


ProgressCallback = Callable[[ProgressUpdate], None]


# The rate (and so the ETA) is measured over about this much recent time: long enough to
# smooth batch-to-batch noise, short enough to follow a machine whose load changes (the
# first minute of an import is often the slowest: models loading, caches cold, other work).
RATE_WINDOW_S = 30.0


class Progress:
    """Counts work done, derives rate and ETA, and forwards updates to a callback.

    The rate is the one over the last :data:`RATE_WINDOW_S` seconds (over everything while
    less time has passed), so the ETA follows the recent pace rather than the first
    minute's. ``start_done`` lets resumed work report the true total without inflating the
    rate.
    """

    def __init__(
        self,
        total: int | None,
        message: str = "",
        callback: ProgressCallback | None = None,
        start_done: int = 0,
        unit: str = "",
        window_s: float = RATE_WINDOW_S,
    ) -> None:
        self.total = total
        self.unit = unit
        self.message = message
        self.callback = callback
        self.done = start_done
        self._start_done = start_done
        self._t0 = time.monotonic()
        self._window_s = window_s
        # (time, done) samples; the first one at or before the window's start is kept, so
        # that the window always spans its full length once that much time has passed.
        self._samples: collections.deque[tuple[float, int]] = collections.deque(
            [(self._t0, start_done)])

    def update(self, n: int = 1, message: str | None = None) -> None:
        self.set(self.done + n, message)

    def set(self, done: int, message: str | None = None) -> None:
        if done < self.done:  # counting restarted (e.g. a redone batch): a new baseline
            self._samples.clear()
        self.done = done
        now = time.monotonic()
        self._samples.append((now, done))
        while len(self._samples) > 2 and self._samples[1][0] <= now - self._window_s:
            self._samples.popleft()
        if message is not None:
            self.message = message
        if self.callback is not None:
            self.callback(self.snapshot())

    def snapshot(self) -> ProgressUpdate:
        now = time.monotonic()
        t_old, done_old = self._samples[0] if self._samples else (self._t0, self._start_done)
        elapsed = now - t_old
        work = self.done - done_old
        rate = work / elapsed if elapsed > 0 and work > 0 else None
        eta = None
        if rate and self.total is not None:
            eta = max(0.0, (self.total - self.done) / rate)
        return ProgressUpdate(self.done, self.total, self.message, rate, eta, self.unit)


def terminal_printer(stream: TextIO | None = None, min_interval: float = 0.2) -> ProgressCallback:
    """A callback that redraws one status line on a terminal (or prints lines when piped)."""
    out = stream if stream is not None else sys.stderr
    last = [0.0]

    def emit(u: ProgressUpdate) -> None:
        now = time.monotonic()
        final = u.total is not None and u.done >= u.total
        if not final and now - last[0] < min_interval:
            return
        last[0] = now
        frac = u.fraction
        bar = ""
        if frac is not None:
            filled = int(frac * 24)
            bar = "[" + "#" * filled + "-" * (24 - filled) + f"] {frac * 100:5.1f}%  "
        # what it describes may hold a file's name, which may hold a terminal's escapes
        line = bar + terminal_safe(u.describe())
        if out.isatty():
            out.write("\r\x1b[2K" + line + ("\n" if final else ""))
        else:
            out.write(line + "\n")
        out.flush()

    return emit


def after_delay(callback: ProgressCallback, delay_s: float) -> ProgressCallback:
    """``callback``, silent for work that ends within ``delay_s`` seconds of its first
    update: a check that usually takes milliseconds needs no progress line, a long one does."""
    start: list[float] = []
    shown = [False]

    def emit(u: ProgressUpdate) -> None:
        now = time.monotonic()
        if not start:
            start.append(now)
        if shown[0] or now - start[0] >= delay_s:
            shown[0] = True
            callback(u)

    return emit
