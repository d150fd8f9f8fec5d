"""A control group's CPU quota read from cgroup v2 and v1 layouts built in a folder, and
what it caps: the threads an answer gets and the "automatic" thread count."""

from __future__ import annotations

from pathlib import Path

import pytest

import ragdesk.core.free_cores as free_cores
from ragdesk.core.cpu_quota import cpu_quota, quota_threads
from ragdesk.core.free_cores import CpuTimes, FreeCores


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="ascii")


def test_v2_the_tightest_limit_of_the_group_and_those_above_it(tmp_path: Path) -> None:
    proc = tmp_path / "proc-cgroup"
    _write(proc, "0::/machine/box\n")
    root = tmp_path / "cg"
    _write(root / "cpu.max", "max 100000\n")
    _write(root / "machine" / "cpu.max", "300000 100000\n")
    _write(root / "machine" / "box" / "cpu.max", "150000 100000\n")
    assert cpu_quota(root, proc) == pytest.approx(1.5)
    assert quota_threads(root, proc) == 2
    _write(root / "machine" / "box" / "cpu.max", "max 100000\n")
    assert cpu_quota(root, proc) == pytest.approx(3.0)


def test_v2_inside_a_container_the_group_is_the_mounts_root(tmp_path: Path) -> None:
    proc = tmp_path / "proc-cgroup"
    _write(proc, "0::/\n")
    root = tmp_path / "cg"
    _write(root / "cpu.max", "200000 100000\n")
    assert quota_threads(root, proc) == 2


def test_v1_quota_and_period_of_the_cpu_controller(tmp_path: Path) -> None:
    proc = tmp_path / "proc-cgroup"
    _write(proc, "4:memory:/x\n2:cpu,cpuacct:/docker/abc\n")
    root = tmp_path / "cg"
    _write(root / "cpu,cpuacct" / "cpu.cfs_quota_us", "-1\n")
    _write(root / "cpu,cpuacct" / "cpu.cfs_period_us", "100000\n")
    assert cpu_quota(root, proc) is None  # no limit: -1
    _write(root / "cpu,cpuacct" / "docker" / "abc" / "cpu.cfs_quota_us", "50000\n")
    _write(root / "cpu,cpuacct" / "docker" / "abc" / "cpu.cfs_period_us", "100000\n")
    assert cpu_quota(root, proc) == pytest.approx(0.5)
    assert quota_threads(root, proc) == 1


def test_nothing_said_or_garbage_is_no_limit(tmp_path: Path) -> None:
    assert cpu_quota(tmp_path / "none", tmp_path / "absent") is None
    proc = tmp_path / "proc-cgroup"
    _write(proc, "0::/../../etc\n")
    _write(tmp_path / "cg" / "cpu.max", "lots 0\n")
    assert cpu_quota(tmp_path / "cg", proc) is None


def test_an_answer_gets_no_more_threads_than_the_quota_keeps_busy() -> None:
    now = CpuTimes(0.0, 0.0, 0.0)
    gauge = FreeCores(lambda: now, cores=16, quota=2)
    assert gauge.threads_for(16) == 2  # an idle 16-core host, two cores' worth of time
    assert gauge.threads_for(1) == 1
    assert FreeCores(lambda: None, cores=16, quota=2).threads_for(16) == 2


def test_automatic_threads_follow_the_quota_where_it_binds(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from ragdesk.core.preferences import apply_environment
    from ragdesk.core.settings import Settings

    monkeypatch.setattr(free_cores, "usable_cpus", lambda: set(range(16)))
    monkeypatch.setattr(free_cores, "quota_threads", lambda: 2)
    assert free_cores.usable_cores() == 2
    env: dict[str, str] = {}
    apply_environment(Settings(tmp_path / "settings.json"), env)
    assert env["OMP_NUM_THREADS"] == "2"
    # the user's own count, or the settings', wins
    env = {"OMP_NUM_THREADS": "8"}
    apply_environment(Settings(tmp_path / "settings.json"), env)
    assert env["OMP_NUM_THREADS"] == "8"
    chosen = Settings(tmp_path / "chosen.json")
    chosen.update({"threads": 3})
    env = {}
    apply_environment(chosen, env)
    assert env["OMP_NUM_THREADS"] == "3"
    # no quota: automatic stays the libraries' own choice
    monkeypatch.setattr(free_cores, "quota_threads", lambda: None)
    env = {}
    apply_environment(Settings(tmp_path / "settings.json"), env)
    assert "OMP_NUM_THREADS" not in env
