"""Which version of a file derived data was made from: its size and modification time.

A copy that ragdesk derives from a file it owns (a converted GGUF folder from the GGUF, the
weight copies from the converted weights, a compact tokenizer from ``tokenizer.json``) names
the version it was made from, and is not used for any other. Hashing would be surer but reads
the whole file (a gigabyte) at every start; a file replaced in place gets a new modification
time from every writer ragdesk knows of.
"""

from __future__ import annotations

from pathlib import Path


def file_stamp(path: Path) -> tuple[int, int]:
    """(size in bytes, modification time in nanoseconds) of ``path``."""
    st = path.stat()
    return st.st_size, st.st_mtime_ns
