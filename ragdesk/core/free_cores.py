"""The cores other programs leave free, and the thread count an answer's products fit into.

OpenMP threads spin briefly before they sleep (:func:`ragdesk.core.cpu.brief_openmp_waits`):
on an idle machine that saves the wake-up of a sleeping thread at every product, but when
another program keeps a core busy a spinning thread takes turns with it, and every product
waits for the thread that lost its turn. So before an answer the products get as many threads
as there are cores left free, at most the chosen count (measured in docs/benchmarks.md,
"OpenMP threads that spin briefly").

What other programs used is read from Linux's ``/proc/stat`` (the busy time of the CPUs this
process may run on) less this process's own CPU time, since the answer before; elsewhere the
count stays as chosen.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ragdesk.core.cpu_quota import quota_threads

log = logging.getLogger(__name__)

# a shorter look than this says too little of the machine: the count decided before stays
_MIN_WINDOW_S = 0.25


@dataclass(frozen=True)
class CpuTimes:
    """Seconds of CPU time (all cores together) since some origin, and when they were read."""

    machine_busy: float
    own: float
    wall: float


def usable_cpus() -> set[int] | None:
    """The CPUs this process may run on (its affinity: ``taskset``, a container's cpuset);
    None where the system does not say."""
    getaffinity = getattr(os, "sched_getaffinity", None)
    if getaffinity is None:
        return None
    try:
        return set(getaffinity(0))
    except OSError:
        return None


def affinity_cores() -> int:
    """How many CPUs this process may run on (all of the machine's where unknown)."""
    return len(usable_cpus() or ()) or os.cpu_count() or 1


def usable_cores() -> int:
    """How many threads this process's CPUs keep busy: those of its affinity, at most what
    its control group's CPU quota allows (a container's ``--cpus``)."""
    n = affinity_cores()
    cap = quota_threads()
    return n if cap is None else min(n, cap)


def read_cpu_times(cpus: set[int] | None = None) -> CpuTimes | None:
    """The busy time of ``cpus`` (default: those this process may run on; all where unknown)
    from ``/proc/stat`` (user, nice, system, irq, softirq and steal: steal is a core a
    virtual machine's host gave to another), this process's own from ``os.times()``; None
    where there is no ``/proc/stat``."""
    cpus = usable_cpus() if cpus is None else cpus
    busy = 0
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            for line in fh:
                fields = line.split()
                if not fields or not fields[0].startswith("cpu"):
                    break  # the cpu lines come first
                name = fields[0][3:]
                # the machine's total line where the CPUs are unknown, else their own lines
                wanted = name == "" if cpus is None else name != "" and int(name) in cpus
                if not wanted or len(fields) < 9:
                    continue
                user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fields[1:9])
                busy += user + nice + system + irq + softirq + steal
        ticks = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        return None
    t = os.times()
    return CpuTimes(busy / ticks, t.user + t.system, time.monotonic())


class FreeCores:
    """How many threads the next answer's products should run on (:meth:`threads_for`)."""

    def __init__(self, read: Callable[[], CpuTimes | None] = read_cpu_times,
                 cores: int | None = None, quota: int | None = None) -> None:
        """``cores``: the CPUs read (default: the affinity's); ``quota``: the most threads
        the control group's CPU quota keeps busy (default: read; None: no quota)."""
        self._read = read
        self._cores = cores or affinity_cores()
        self._quota = quota_threads() if cores is None and quota is None else quota
        self._last = read()
        self._others = 0.0
        self._lock = threading.Lock()

    @property
    def last_others(self) -> float:
        """What :meth:`others_busy` said last."""
        return self._others

    def others_busy(self) -> float | None:
        """Cores' worth of CPU the other programs used since the last look (the one before
        stands while the window is shorter than a quarter of a second); None where the
        machine does not say."""
        with self._lock:
            now = self._read()
            if now is None or self._last is None:
                return None
            wall = now.wall - self._last.wall
            if wall >= _MIN_WINDOW_S:
                used = (now.machine_busy - self._last.machine_busy) - (now.own - self._last.own)
                self._others = max(0.0, used / wall)
                self._last = now
            return self._others

    def threads_for(self, wanted: int) -> int:
        """``wanted`` threads, fewer where other programs left fewer cores free (at least
        one; a core counts as free when at most half of it was used) or where the CPU quota
        keeps fewer busy."""
        if self._quota is not None:
            wanted = max(1, min(wanted, self._quota))
        others = self.others_busy()
        if others is None:
            return wanted
        return max(1, min(wanted, int(self._cores - others + 0.5)))


# made at import (when the engine loads), so that the first answer looks back over the load
_GAUGE = FreeCores()
_WANTED: int | None = None
_GUARD = threading.Lock()


def want_threads(n: int) -> None:
    """The thread count chosen (the settings' or the environment's): what
    :func:`fit_threads` gives when the cores are free."""
    global _WANTED
    with _GUARD:
        _WANTED = max(1, n)


def fit_threads() -> int | None:
    """Before an answer, on the thread that runs the models (OpenMP keeps the count per
    calling thread): where this process's OpenMP threads spin
    (:func:`ragdesk.core.cpu.spinning_waits`), set torch's thread count to what the free
    cores take and return it; None (nothing changed) elsewhere."""
    global _WANTED
    from ragdesk.core.cpu import spinning_waits

    if not spinning_waits():
        return None
    import torch

    with _GUARD:
        if _WANTED is None:
            _WANTED = torch.get_num_threads()
        wanted = _WANTED
    n = _GAUGE.threads_for(wanted)
    if n != torch.get_num_threads():
        log.info("other programs kept %.1f cores busy: %d of %d threads",
                 _GAUGE.last_others, n, wanted)
        torch.set_num_threads(n)
    return n
