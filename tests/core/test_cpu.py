"""CPU capability checks and the process settings for running models (OpenMP waits,
oneDNN's kernel cache, glibc's heap)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable

import pytest

import ragdesk.core.cpu as cpu
from ragdesk.core.cpu import (
    bounded_onednn_cache,
    brief_openmp_waits,
    cpu_has_native_bf16,
    spinning_waits,
)


@pytest.mark.parametrize(("setting", "var", "ours", "users"), [
    (bounded_onednn_cache, "ONEDNN_PRIMITIVE_CACHE_CAPACITY", "64", "1024"),
])
def test_each_environment_setting_unless_the_user_chose(
        monkeypatch: pytest.MonkeyPatch, setting: Callable[[], None], var: str, ours: str,
        users: str) -> None:
    monkeypatch.delenv(var, raising=False)
    setting()
    assert os.environ[var] == ours
    monkeypatch.setenv(var, users)
    setting()
    assert os.environ[var] == users


@pytest.mark.parametrize("users", [{}, {"OMP_WAIT_POLICY": "ACTIVE"},
                                   {"OMP_WAIT_POLICY": "PASSIVE"}, {"GOMP_SPINCOUNT": "0"}])
def test_brief_waits_unless_the_user_chose_either_variable(
        monkeypatch: pytest.MonkeyPatch, users: dict[str, str]) -> None:
    monkeypatch.setattr(cpu, "_SPINNING", False)
    monkeypatch.delitem(sys.modules, "torch", raising=False)  # as before torch loads
    for var in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", cpu._OURS):
        monkeypatch.delenv(var, raising=False)
    for var, value in users.items():
        monkeypatch.setenv(var, value)
    brief_openmp_waits()
    if users:
        # the user's choice alone, and no fitting of threads to free cores on top of it
        assert {v: os.environ.get(v) for v in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")} == {
            "OMP_WAIT_POLICY": None, "GOMP_SPINCOUNT": None, **users}
        assert not spinning_waits()
    else:
        assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"  # runtimes other than libgomp
        assert int(os.environ["GOMP_SPINCOUNT"]) > 0
        assert spinning_waits()


def test_a_child_of_a_ragdesk_process_keeps_ragdesks_waits(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The variables a ragdesk parent set are inherited: not a user's choice."""
    monkeypatch.setattr(cpu, "_SPINNING", False)
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    for var in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", cpu._OURS):
        monkeypatch.delenv(var, raising=False)
    brief_openmp_waits()
    inherited = {v: os.environ[v] for v in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", cpu._OURS)}
    monkeypatch.setattr(cpu, "_SPINNING", False)  # a new process with that environment
    brief_openmp_waits()
    assert spinning_waits()
    assert {v: os.environ[v] for v in inherited} == inherited


def test_once_torch_has_loaded_its_threads_wait_as_they_did(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import torch  # noqa: F401

    monkeypatch.setattr(cpu, "_SPINNING", False)
    for var in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", cpu._OURS):
        monkeypatch.delenv(var, raising=False)
    brief_openmp_waits()
    assert not spinning_waits()


def test_native_bf16_follows_the_cpu_flags() -> None:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as fh:
            flags = next(line for line in fh if line.startswith("flags")).split()
    except (OSError, StopIteration):
        pytest.skip("no /proc/cpuinfo flags here")
    assert cpu_has_native_bf16() == ("avx512_bf16" in flags or "amx_bf16" in flags)


def test_eval_sets_the_policy_before_torch_starts() -> None:
    """`ragdesk eval` (like ask and the app) sets it first thing; checked in a fresh process."""
    code = ("import os, sys; os.environ.pop('OMP_WAIT_POLICY', None); "
            "os.environ.pop('GOMP_SPINCOUNT', None); "
            "from ragdesk.cli.main import main; "
            "rc = main(['--data-dir', sys.argv[1], 'eval', '/nonexistent.jsonl']); "
            "print(os.environ.get('OMP_WAIT_POLICY'), os.environ.get('GOMP_SPINCOUNT'), rc)")
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        out = subprocess.run([sys.executable, "-c", code, d], capture_output=True, text=True,
                             timeout=120, check=False)
    policy, spins, _rc = out.stdout.split()
    assert (policy, spins) == ("PASSIVE", cpu._GOMP_SPINS), out.stderr


_HEAP_PROBE = """
import ctypes, sys
from ragdesk.core.cpu import keep_freed_memory

class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks",
                "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
libc.mallinfo2.restype = MallInfo2
set_ = keep_freed_memory() if sys.argv[1] == "keep" else False
# a forward pass's activation: allocated, written, freed
block = libc.malloc(20 << 20)
ctypes.memset(block, 1, 20 << 20)
libc.free(block)
print(set_, libc.mallinfo2().fordblks >= 20 << 20)
"""


def _heap_probe(mode: str) -> str:
    out = subprocess.run([sys.executable, "-c", _HEAP_PROBE, mode], capture_output=True,
                         text=True, timeout=60, check=True)
    return out.stdout.strip()


def test_freed_blocks_stay_in_the_heap_for_the_next_ones() -> None:
    """With glibc's defaults a 20 MB block is a mapping of its own, unmapped when freed (the
    next one faults in fresh pages); once keep_freed_memory() has run it comes from the heap
    and stays there, free, for the next."""
    import ctypes

    if not sys.platform.startswith("linux") or not hasattr(ctypes.CDLL(None),
                                                           "gnu_get_libc_version"):
        pytest.skip("glibc's malloc only")
    if not hasattr(ctypes.CDLL(None), "mallinfo2"):
        pytest.skip("glibc before 2.33 has no mallinfo2 to look with")
    assert _heap_probe("default") == "False False"
    assert _heap_probe("keep") == "True True"
