"""Progress and cancellation as plain objects: the GUI renders them, the CLI prints them."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

from ragdesk.core.errors import Cancelled
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

    def describe(self) -> str:
        parts = [self.message] if self.message else []
        if self.unit == "bytes":
            parts.append(human_bytes(self.done)
                         + (f"/{human_bytes(self.total)}" if self.total else ""))
        else:
            parts.append(f"{self.done:,}" + (f"/{self.total:,}" if self.total else ""))
        if self.rate:
            parts.append(human_rate(self.rate, "bytes" if self.unit == "bytes" else ""))
        if self.eta_s is not None:
            parts.append(f"ETA {fmt_seconds(self.eta_s, compact=True)}")
        return "  ".join(parts)


ProgressCallback = Callable[[ProgressUpdate], None]


class Progress:
    """Counts work done, derives rate and ETA, and forwards updates to a callback.

    ``start_done`` lets resumed work report the true total without inflating the rate.
    """

    def __init__(
        self,
        total: int | None,
        message: str = "",
        callback: ProgressCallback | None = None,
        start_done: int = 0,
        unit: str = "",
    ) -> None:
        self.total = total
        self.unit = unit
        self.message = message
        self.callback = callback
        self.done = start_done
        self._start_done = start_done
        self._t0 = time.monotonic()

    def update(self, n: int = 1, message: str | None = None) -> None:
        self.set(self.done + n, message)

    def set(self, done: int, message: str | None = None) -> None:
        self.done = done
        if message is not None:
            self.message = message
        if self.callback is not None:
            self.callback(self.snapshot())

    def snapshot(self) -> ProgressUpdate:
        elapsed = time.monotonic() - self._t0
        work = self.done - self._start_done
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
        line = bar + u.describe()
        if out.isatty():
            out.write("\r\x1b[2K" + line + ("\n" if final else ""))
        else:
            out.write(line + "\n")
        out.flush()

    return emit
