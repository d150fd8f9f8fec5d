"""The CPU time a Linux control group lets this process use, in cores.

A container started with ``docker run --cpus=2`` on a 16-core host sees 16 CPUs in its
affinity and in ``os.cpu_count()``, but the kernel throttles it to two cores' worth of time
per period. Sixteen threads there take turns on two cores' worth of time, and OpenMP threads
that spin while waiting (see :mod:`ragdesk.core.cpu`) burn the quota itself. So the quota
caps the thread count the same way a smaller affinity does.

cgroup v2 says it in ``cpu.max`` ("max 100000" or "200000 100000": quota and period in µs)
of the process's group and of every group above it, the tightest binding; cgroup v1 in
``cpu.cfs_quota_us`` (-1: none) and ``cpu.cfs_period_us`` of the ``cpu`` controller's group.
"""

from __future__ import annotations

import math
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_CGROUP = Path("/proc/self/cgroup")


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None


def _cores(quota: str, period: str) -> float | None:
    try:
        q, p = int(quota), int(period)
    except ValueError:
        return None  # "max" (v2) or garbage: no limit said
    return q / p if q > 0 and p > 0 else None


def _groups(proc_cgroup: Path) -> dict[str, str]:
    """Controller -> this process's group path ("" for the v2 unified hierarchy)."""
    text = _read(proc_cgroup)
    out: dict[str, str] = {}
    for line in (text or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        for controller in parts[1].split(","):
            out[controller] = parts[2]
    return out


def _ancestors(root: Path, group: str) -> list[Path]:
    """The group's folder and every folder above it up to ``root``. Inside a container the
    path /proc names may not exist under its own mount (the group is the mount's root): the
    root is always among them."""
    here = root
    out = [root]
    for part in (p for p in group.strip("/").split("/") if p not in ("", ".", "..")):
        here = here / part
        out.append(here)
    return out


def cpu_quota(root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP) -> float | None:
    """Cores' worth of CPU time this process may use (2.0 for ``--cpus=2``); None where no
    limit is set or the system does not say."""
    groups = _groups(proc_cgroup)
    limits: list[float] = []
    if "" in groups:  # v2
        for folder in _ancestors(root, groups[""]):
            fields = (_read(folder / "cpu.max") or "").split()
            if len(fields) == 2:
                cores = _cores(fields[0], fields[1])
                if cores is not None:
                    limits.append(cores)
    for name in ("cpu", "cpu,cpuacct", "cpuacct,cpu"):  # v1: where the controller is mounted
        base = root / name
        if "cpu" not in groups or not base.is_dir():
            continue
        for folder in _ancestors(base, groups["cpu"]):
            quota, period = _read(folder / "cpu.cfs_quota_us"), _read(folder / "cpu.cfs_period_us")
            if quota is not None and period is not None:
                cores = _cores(quota, period)
                if cores is not None:
                    limits.append(cores)
        break
    return min(limits) if limits else None


def quota_threads(root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP) -> int | None:
    """The most threads the quota keeps busy (1.5 cores: 2), None where there is none."""
    cores = cpu_quota(root, proc_cgroup)
    return None if cores is None else max(1, math.ceil(cores - 1e-9))
