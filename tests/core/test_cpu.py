"""CPU capability checks and the process settings for running models (OpenMP waits,
oneDNN's kernel cache, glibc's heap)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable

import pytest

from ragdesk.core.cpu import (
    bounded_onednn_cache,
    cpu_has_native_bf16,
    passive_openmp_waits,
)


@pytest.mark.parametrize(("setting", "var", "ours", "users"), [
    (passive_openmp_waits, "OMP_WAIT_POLICY", "PASSIVE", "ACTIVE"),
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
            "from ragdesk.cli.main import main; "
            "rc = main(['--data-dir', sys.argv[1], 'eval', '/nonexistent.jsonl']); "
            "print(os.environ.get('OMP_WAIT_POLICY'), rc)")
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        out = subprocess.run([sys.executable, "-c", code, d], capture_output=True, text=True,
                             timeout=120, check=False)
    assert out.stdout.split()[0] == "PASSIVE", out.stderr


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
