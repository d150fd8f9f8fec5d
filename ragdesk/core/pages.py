"""Dropping a memory-mapped file's pages from this process's resident set.

A pass over a mapped file (copying shards in, adding vectors to an index) maps every page it
touches, and they stay counted in the process's RSS until it unmaps them: 1.5 GB per million
768-d float16 vectors, so a job's peak RSS grew with the corpus although the kernel could
reclaim those pages at any time. ``release_pages`` unmaps the rows a pass is done with
(MADV_DONTNEED). The page cache keeps their data, and a shared mapping's written pages stay
dirty there until written back, so nothing is lost; a later read maps them again.
"""

from __future__ import annotations

import mmap

import numpy as np


def _shared_mapping(arr: np.ndarray) -> mmap.mmap | None:
    """The mmap under ``arr`` when its pages can be dropped without losing data."""
    mm = arr.base
    if not isinstance(mm, mmap.mmap) or not arr.flags["C_CONTIGUOUS"] \
            or not hasattr(mmap, "MADV_DONTNEED"):  # Windows has no madvise
        return None
    # A writable copy-on-write mapping (np.memmap mode "c") keeps its changes only in the
    # pages that MADV_DONTNEED would drop.
    if arr.flags.writeable and getattr(arr, "mode", None) not in ("r+", "w+"):
        return None
    return mm


def release_pages(arr: np.ndarray, start: int = 0, stop: int | None = None) -> None:
    """Unmap rows ``start:stop`` of a memory-mapped array from this process (whole pages
    inside them only). Arrays that are not a shared file mapping are left alone."""
    mm = _shared_mapping(arr)
    if mm is None or arr.ndim == 0:
        return
    stop = arr.shape[0] if stop is None else min(stop, arr.shape[0])
    if stop <= start:
        return
    row = arr.strides[0]
    origin = arr.ctypes.data - np.frombuffer(mm, dtype=np.uint8).ctypes.data
    page = mmap.PAGESIZE
    first = -(-(origin + start * row) // page) * page
    last = (origin + stop * row) // page * page
    if last > first:
        mm.madvise(mmap.MADV_DONTNEED, first, last - first)
