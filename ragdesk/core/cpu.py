"""What this CPU can do, for choosing arithmetic."""

from __future__ import annotations

_BF16_FLAGS = ("avx512_bf16", "amx_bf16")


def cpu_has_native_bf16() -> bool:
    """Whether this CPU multiplies bfloat16 in hardware (AVX512-BF16 or AMX).

    Elsewhere oneDNN emulates bf16 and it is slower than float32, so callers stay in float32
    there.
    """
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return any(f in flags for f in _BF16_FLAGS)
    except OSError:
        pass
    return False


def passive_openmp_waits() -> None:
    """Ask OpenMP threads to sleep, not spin, while they wait (unless the user chose).

    Must run before torch starts its threads. Spinning threads make every 2-thread product
    several times slower when other programs use the cores (measured on a loaded 2-core
    machine: 36 s for an answer that took 8 s with one thread); a desktop is rarely idle.
    """
    import os

    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
