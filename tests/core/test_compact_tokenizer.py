"""The compact copy of a tokenizer.json in ragdesk's own folders
(ragdesk/core/compact_tokenizer.py): it reads back as the same tokenizer, is read instead of
the file once made, follows a changed file, is never made for a tokenizer whose merges hold a
space or for a folder that is not ragdesk's, and a damaged copy is made again."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

from ragdesk.core import compact_tokenizer
from ragdesk.core.compact_tokenizer import compact_path, read_tokenizer_file
from ragdesk.core.errors import DiskFullError
from ragdesk.core.lean_tokenizer import read_lean_tokenizer
from tests.core.test_lean_tokenizer import _gemma

TEXTS = ["who wrote the first book", "Der Zauberberg, 1924: «Hans» — naïve ☃ 💡",
         "<start_of_turn>user\nhi<end_of_turn>", "   spaces   and\ttabs\n\nlines"]


@pytest.fixture(autouse=True)
def _small_files_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compact_tokenizer, "MIN_BYTES", 0)


def _reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files Tokenizer.from_file is called on, from now on."""
    calls: list[str] = []
    real = Tokenizer.from_file

    def spy(path: str) -> Tokenizer:
        calls.append(Path(path).name)
        return real(path)

    monkeypatch.setattr(Tokenizer, "from_file", spy)
    return calls


def test_the_copy_is_the_same_tokenizer_and_is_read_instead(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _gemma(tmp_path)
    source = folder / "tokenizer.json"
    original = Tokenizer.from_file(str(source))
    first = read_tokenizer_file(source, keep_compact=True)
    compact = compact_path(source)
    assert compact.is_file() and compact.stat().st_size < source.stat().st_size
    merges = json.loads(compact.read_text(encoding="utf-8"))["model"]["merges"]
    assert merges and all(isinstance(m, str) and m.count(" ") == 1 for m in merges)
    calls = _reads(monkeypatch)
    second = read_tokenizer_file(source, keep_compact=True)
    assert calls == [compact.name]
    assert second.to_str() == original.to_str() == first.to_str()
    for text in TEXTS:
        assert second.encode(text).ids == original.encode(text).ids
        assert second.decode(second.encode(text).ids) == original.decode(
            original.encode(text).ids)
    # the lean tokenizer over ragdesk's folder reads the copy and tokenizes the same
    own = read_lean_tokenizer(folder, own_folder=True)
    plain = read_lean_tokenizer(folder)
    assert own is not None and plain is not None
    for text in TEXTS:
        assert own(text)["input_ids"] == plain(text)["input_ids"]


def test_a_changed_file_gets_a_new_copy_and_the_old_one_goes(tmp_path: Path) -> None:
    source = _gemma(tmp_path) / "tokenizer.json"
    read_tokenizer_file(source, keep_compact=True)
    old = compact_path(source)
    st = source.stat()
    os.utime(source, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    read_tokenizer_file(source, keep_compact=True)
    assert compact_path(source) != old and compact_path(source).is_file()
    assert not old.exists()


def test_a_damaged_copy_is_made_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                      ) -> None:
    source = _gemma(tmp_path) / "tokenizer.json"
    read_tokenizer_file(source, keep_compact=True)
    compact_path(source).write_text('{"model": ', encoding="utf-8")
    calls = _reads(monkeypatch)
    tok = read_tokenizer_file(source, keep_compact=True)
    assert calls == [compact_path(source).name, source.name]
    assert tok.to_str() == Tokenizer.from_file(str(source)).to_str()
    assert Tokenizer.from_file(str(compact_path(source))).to_str() == tok.to_str()


def test_no_copy_outside_ragdesk_folders_or_for_merges_with_spaces(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = _gemma(tmp_path) / "tokenizer.json"
    read_tokenizer_file(source)
    assert not compact_path(source).exists()
    spaced = Tokenizer(models.BPE(vocab={"a": 0, "b": 1, " ": 2, "a ": 3, "a b": 4},
                                  merges=[("a", " "), ("a ", "b")]))
    spaced.pre_tokenizer = pre_tokenizers.Whitespace()
    path = tmp_path / "spaced" / "tokenizer.json"
    path.parent.mkdir()
    spaced.save(str(path))
    assert read_tokenizer_file(path, keep_compact=True).to_str() == spaced.to_str()
    assert not compact_path(path).exists()
    # and it is not tried again at every start
    assert compact_path(path).with_suffix(".none").exists()
    tried: list[object] = []
    monkeypatch.setattr(compact_tokenizer, "_keep_compact", lambda *a: tried.append(a))
    read_tokenizer_file(path, keep_compact=True)
    assert tried == []


def test_a_full_disk_leaves_the_file_read_as_it_is(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    source = _gemma(tmp_path) / "tokenizer.json"

    def full(path: Path, data: bytes) -> None:
        raise DiskFullError(f"No room for {path}")

    monkeypatch.setattr(compact_tokenizer, "write_bytes_atomic", full)
    tok = read_tokenizer_file(source, keep_compact=True)
    assert tok.to_str() == Tokenizer.from_file(str(source)).to_str()
    assert sorted(p.name for p in source.parent.iterdir()
                  if p.name.startswith("ragdesk-compact-")) == []
