"""CPU capability checks and the OpenMP wait policy."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ragdesk.core.cpu import cpu_has_native_bf16, passive_openmp_waits


def test_passive_waits_unless_the_user_chose(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    passive_openmp_waits()
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    passive_openmp_waits()
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"


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
