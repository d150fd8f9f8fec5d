"""What this CPU can do, for choosing arithmetic."""

from __future__ import annotations

import functools

_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
# x86 instructions that add u8 x s8 products straight into 32-bit sums
_INT8_DOT_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")


@functools.cache
def _x86_flags() -> frozenset[str] | None:
    """The ``flags`` of /proc/cpuinfo (x86 Linux); None elsewhere."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return None


def cpu_has_native_bf16() -> bool:
    """Whether this CPU multiplies bfloat16 in hardware (AVX512-BF16 or AMX).

    Elsewhere oneDNN emulates bf16 and it is slower than float32, so callers stay in float32
    there.
    """
    flags = _x86_flags()
    return flags is not None and any(f in flags for f in _BF16_FLAGS)


def int8_weight_levels() -> int:
    """The largest magnitude an int8 weight may take for products with u8 activations.

    Without VNNI, x86 int8 kernels (fbgemm, oneDNN) multiply u8 x s8 pairs with
    ``vpmaddubsw``, which sums two products into a saturating int16: 255 x 127 x 2 overflows
    it, and a product of all-large inputs came out at half its value (323.8 for 639).
    Weights of at most 63 keep every pair sum within int16 (255 x 64 x 2 = 32,640), at one
    bit of weight precision; activations keep their 8 bits, whose per-tensor range is the
    coarser of the two. With VNNI (or off x86) the sums are 32-bit and weights use 127.
    """
    flags = _x86_flags()
    if flags is None or cpu_has_int8_dot():
        return 127
    return 63


def cpu_has_int8_dot() -> bool:
    """Whether this x86 CPU adds u8 x s8 products straight into 32-bit sums (VNNI or AMX)."""
    flags = _x86_flags()
    return flags is not None and any(f in flags for f in _INT8_DOT_FLAGS)


# libgomp's spins before a waiting OpenMP thread sleeps (about 100,000 a millisecond by its
# own estimate): long enough to catch the next product of a decoding step (a step runs about
# a hundred parallel products back to back; waking a sleeping thread for each cost a K = 5
# step a quarter of its time), short enough that a thread of an idle process gives its core
# back within a fraction of a millisecond. Spinning hurts when other programs use the cores;
# :mod:`ragdesk.core.free_cores` gives the products fewer threads then. Measured in
# docs/benchmarks.md ("OpenMP threads that spin briefly").
_GOMP_SPINS = "30000"
_SPINNING = False
# set beside them: the waits in the environment are the ones ragdesk chose
_OURS = "RAGDESK_OPENMP_WAITS"


def brief_openmp_waits() -> None:
    """Let OpenMP threads spin briefly, then sleep, while they wait (unless the user chose).

    Must run before torch starts its threads. libgomp (torch's on Linux) reads
    ``GOMP_SPINCOUNT``; other OpenMP runtimes read ``OMP_WAIT_POLICY=PASSIVE`` alone and sleep
    at once, as spinning threads make every 2-thread product several times slower when other
    programs use the cores (measured on a loaded 2-core machine: 36 s for an answer that took
    8 s with one thread); a desktop is rarely idle.
    """
    import os
    import sys

    global _SPINNING
    # a child of a ragdesk process inherits these variables: they are still ragdesk's choice
    ours = os.environ.get(_OURS) == _GOMP_SPINS
    if not ours and ("OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ):
        return
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    os.environ["GOMP_SPINCOUNT"] = _GOMP_SPINS
    os.environ[_OURS] = _GOMP_SPINS
    # torch's OpenMP runtime reads the environment once, when torch loads: once loaded, its
    # threads wait as they did (a caller that imported torch first, a test process)
    _SPINNING = "torch" not in sys.modules


def spinning_waits() -> bool:
    """Whether :func:`brief_openmp_waits` set this process's threads to spin (a front end
    asked for it, the user's environment chose nothing): then an answer fits its thread count
    to the free cores (:mod:`ragdesk.core.free_cores`)."""
    return _SPINNING


# glibc's malloc: blocks up to this size come from the heap rather than from a mapping of
# their own (its default starts at 128 KiB and adapts up to this), and up to this much freed
# memory at the heap's top is kept for the next blocks rather than given back
_HEAP_BLOCKS_UP_TO = 32 << 20
_HEAP_TOP_KEPT = 512 << 20
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def keep_freed_memory() -> bool:
    """Let glibc's malloc reuse the blocks torch allocates and frees in every forward pass
    (activations of tens of MB for the reader pack's prefill) instead of giving them back to
    the system and faulting in fresh zeroed pages for the next ones; True where set (Linux
    with glibc). The process keeps up to ``_HEAP_TOP_KEPT`` of freed memory between answers,
    about what an answer takes anyway. Measured in docs/benchmarks.md ("glibc's heap")."""
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018  (glibc's, not musl's no-op mallopt)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, _HEAP_BLOCKS_UP_TO)
                and mallopt(_M_TRIM_THRESHOLD, _HEAP_TOP_KEPT))


# oneDNN keeps a compiled kernel for every product shape it meets (every prompt length is a
# new one), 1,024 by default; a one-shot answer or a decoding step reuses a handful
_ONEDNN_KERNELS_KEPT = "64"


def bounded_onednn_cache() -> None:
    """Keep oneDNN's cache of compiled kernels small (unless the user chose): a process that
    answers question after question otherwise grows by megabytes per answer until a thousand
    kernels are cached, with no gain in speed (docs/benchmarks.md). Before torch loads oneDNN."""
    import os

    os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", _ONEDNN_KERNELS_KEPT)


def prepare_for_models() -> None:
    """What a front end that runs models sets before it loads them: OpenMP threads that
    spin briefly, then sleep, while they wait (:func:`brief_openmp_waits`), a bounded oneDNN
    kernel cache (:func:`bounded_onednn_cache`) and a heap that keeps torch's freed blocks
    (:func:`keep_freed_memory`)."""
    brief_openmp_waits()
    bounded_onednn_cache()
    keep_freed_memory()
