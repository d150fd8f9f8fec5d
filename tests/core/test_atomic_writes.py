"""ragdesk/core/atomic.py's streamed writes: the file appears whole or not at all, and a writer
that fails leaves neither a partial file nor its temporary file behind."""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

import pytest

from ragdesk.core.atomic import write_atomic, write_bytes_atomic


def test_a_streamed_write_replaces_the_file_whole(tmp_path: Path) -> None:
    path = tmp_path / "big.bin"
    write_bytes_atomic(path, b"old")

    def chunks(fh: BinaryIO) -> None:
        for i in range(10):
            fh.write(bytes([i]) * 1000)

    write_atomic(path, chunks)
    assert path.read_bytes() == b"".join(bytes([i]) * 1000 for i in range(10))
    assert [p.name for p in tmp_path.iterdir()] == ["big.bin"]


@pytest.mark.parametrize("error", [OSError(5, "I/O error"), ValueError("bad tensor")])
def test_a_failing_writer_leaves_the_old_file_and_no_temporary(tmp_path: Path,
                                                               error: Exception) -> None:
    path = tmp_path / "big.bin"
    write_bytes_atomic(path, b"old")

    def half(fh: BinaryIO) -> None:
        fh.write(b"new, half of it")
        raise error

    with pytest.raises(type(error)):
        write_atomic(path, half)
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["big.bin"]
