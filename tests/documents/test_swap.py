"""Replacing a folder snapshot by its new version, and finishing a swap a crash cut short."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragdesk.core.documents import swap
from ragdesk.core.paths import DataDir


def _version(folder: Path, tag: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(tag, encoding="utf-8")
    return folder


def _data(tmp_path: Path) -> DataDir:
    data = DataDir(tmp_path / "data")
    data.snapshots_dir.mkdir(parents=True)
    data.staging_dir.mkdir(parents=True)
    return data


def test_replace_puts_the_new_version_in_place(tmp_path: Path) -> None:
    data = _data(tmp_path)
    _version(data.snapshot_dir("s"), "old")
    build = _version(swap.work_dir(data, "s") / swap.BUILD_DIRNAME, "new")
    swap.replace(data, build, "s")
    assert (data.snapshot_dir("s") / "manifest.json").read_text() == "new"
    assert not build.exists() and not swap.old_dir(data, "s").exists()


def test_a_failed_second_rename_puts_the_old_version_back(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    data = _data(tmp_path)
    _version(data.snapshot_dir("s"), "old")
    build = swap.work_dir(data, "s") / swap.BUILD_DIRNAME  # missing: the rename fails
    with pytest.raises(FileNotFoundError):
        swap.replace(data, build, "s")
    assert (data.snapshot_dir("s") / "manifest.json").read_text() == "old"


@pytest.mark.parametrize("complete", [True, False])
def test_a_swap_cut_between_its_renames_is_finished(tmp_path: Path, complete: bool) -> None:
    data = _data(tmp_path)
    _version(swap.old_dir(data, "s"), "old")  # moved out; the crash came before "new in"
    build = swap.work_dir(data, "s") / swap.BUILD_DIRNAME
    if complete:
        _version(build, "new")
    else:
        build.mkdir(parents=True)  # no manifest: the new version was not finished
    swap.finish_interrupted_swap(data, "s")
    assert (data.snapshot_dir("s") / "manifest.json").read_text() == \
        ("new" if complete else "old")
    assert not swap.old_dir(data, "s").exists()


def test_a_leftover_old_version_is_dropped(tmp_path: Path) -> None:
    data = _data(tmp_path)
    _version(data.snapshot_dir("s"), "new")
    _version(swap.old_dir(data, "s"), "old")  # crash after the swap, before the cleanup
    swap.finish_interrupted_swap(data, "s")
    assert (data.snapshot_dir("s") / "manifest.json").read_text() == "new"
    assert not swap.old_dir(data, "s").exists()
