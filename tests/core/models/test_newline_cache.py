"""The newline token ids kept in a converted GGUF's folder: the same set as a whole-vocabulary
decode, read back instead of found again, and found again whenever what was kept cannot be
trusted."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ragdesk.core.engine import generators
from ragdesk.core.models import load_generator, load_generator_parts
from ragdesk.core.models.gguf_files import cache_dir_for
from ragdesk.core.models.newline_cache import NEWLINE_FILE, converted_newline_ids
from tests.core.engine import naive


def _no_walk(*a: object, **k: object) -> frozenset[int]:
    raise AssertionError("the vocabulary was walked again")


def _walks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the walks (the real one still runs)."""
    calls: list[int] = []
    real = generators.newline_token_ids

    def counted(tokenizer: object) -> frozenset[int]:
        calls.append(1)
        return real(tokenizer)  # type: ignore[arg-type]

    monkeypatch.setattr(generators, "newline_token_ids", counted)
    return calls


def test_kept_ids_are_the_decoded_newlines_and_are_read_back(
        gguf_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = load_generator(gguf_copy)
    want = naive.newline_ids_by_decoding(first.tokenizer)
    assert want, "the tiny tokenizer has newline tokens"
    assert first.stop_ids == want - first.special_ids
    kept = json.loads((cache_dir_for(gguf_copy) / NEWLINE_FILE).read_text(encoding="utf-8"))
    assert set(kept["ids"]) == want

    monkeypatch.setattr(generators, "newline_token_ids", _no_walk)
    again = load_generator(gguf_copy)
    assert again.stop_ids == first.stop_ids
    assert again.settings.eos_token_ids == first.settings.eos_token_ids


@pytest.mark.parametrize("damage", ["garbage", "other_stamp", "out_of_range", "deep"])
def test_untrusted_kept_ids_are_found_again(gguf_copy: Path, monkeypatch: pytest.MonkeyPatch,
                                            damage: str) -> None:
    parts = load_generator_parts(gguf_copy)
    folder = cache_dir_for(gguf_copy)
    want = converted_newline_ids(folder, parts.tokenizer)
    path = folder / NEWLINE_FILE
    kept = json.loads(path.read_text(encoding="utf-8"))
    if damage == "garbage":
        path.write_bytes(b"\x00{not json")
    elif damage == "other_stamp":
        kept["tokenizer"]["size"] += 1
        kept["ids"] = [0]
        path.write_text(json.dumps(kept), encoding="utf-8")
    elif damage == "out_of_range":
        kept["ids"] = [len(parts.tokenizer) + 5]
        path.write_text(json.dumps(kept), encoding="utf-8")
    else:
        path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    calls = _walks(monkeypatch)
    assert converted_newline_ids(folder, parts.tokenizer) == want
    assert calls == [1]
    # found again, and kept again for the next start
    assert set(json.loads(path.read_text(encoding="utf-8"))["ids"]) == want


def test_a_changed_tokenizer_file_is_walked_again(gguf_copy: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    parts = load_generator_parts(gguf_copy)
    folder = cache_dir_for(gguf_copy)
    converted_newline_ids(folder, parts.tokenizer)
    st = (folder / "tokenizer.json").stat()
    os.utime(folder / "tokenizer.json", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    calls = _walks(monkeypatch)
    converted_newline_ids(folder, parts.tokenizer)
    assert calls == [1]


def test_an_unwritable_folder_still_gives_the_ids(gguf_copy: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from ragdesk.core.models import newline_cache

    parts = load_generator_parts(gguf_copy)
    folder = cache_dir_for(gguf_copy)

    def refuse(path: Path, obj: object) -> None:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(newline_cache, "write_json_atomic", refuse)
    got = converted_newline_ids(folder, parts.tokenizer)
    assert got == naive.newline_ids_by_decoding(parts.tokenizer)
    assert not (folder / NEWLINE_FILE).exists()


def test_a_model_folder_of_the_user_is_not_written_into(tiny_models) -> None:  # type: ignore[no-untyped-def]
    before = sorted(p.name for p in Path(tiny_models.causal_lm).iterdir())
    gen = load_generator(tiny_models.causal_lm)
    assert gen.stop_ids == naive.newline_ids_by_decoding(gen.tokenizer) - gen.special_ids
    assert sorted(p.name for p in Path(tiny_models.causal_lm).iterdir()) == before
