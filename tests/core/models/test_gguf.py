"""A GGUF causal LM written from the tiny GPT-2 loads as the same model with the same
tokenizer, first from the file and then from the converted copy kept next to it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from ragdesk.core.errors import MissingModelError
from ragdesk.core.models import gguf_files, load_generator_parts
from ragdesk.core.models.gguf_files import cache_dir_for, cache_is_valid

TEXTS = ["The capital of France is Paris, which lies on the Seine.",
         "Who wrote Hamlet? William Shakespeare did, around 1600."]


def _assert_same_as_source(parts, source_dir: Path) -> None:  # type: ignore[no-untyped-def]
    from transformers import AutoTokenizer, GPT2LMHeadModel

    src_model = GPT2LMHeadModel.from_pretrained(str(source_dir)).eval()
    src_tok = AutoTokenizer.from_pretrained(str(source_dir))
    for text in TEXTS:
        ids = src_tok(text, return_tensors="pt")["input_ids"]
        assert parts.tokenizer(text, return_tensors="pt")["input_ids"].tolist() == ids.tolist()
        with torch.inference_mode():
            expected = src_model(ids).logits
            got = parts.model(ids).logits
        torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)


def test_gguf_loads_as_the_source_model(tiny_models, gguf_copy: Path) -> None:  # type: ignore[no-untyped-def]
    parts = load_generator_parts(gguf_copy)
    assert parts.kind == "causal"
    assert parts.source.is_gguf
    _assert_same_as_source(parts, tiny_models.causal_lm)
    # The first load left a converted copy that records which file it came from.
    assert cache_is_valid(gguf_copy)


def test_second_load_reads_the_converted_copy(tiny_models, gguf_copy: Path,  # type: ignore[no-untyped-def]
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    load_generator_parts(gguf_copy)

    def no_gguf(*a: object, **k: object) -> None:
        raise AssertionError("the GGUF was parsed again")

    monkeypatch.setattr(gguf_files, "_load_from_gguf", no_gguf)
    parts = load_generator_parts(gguf_copy)
    _assert_same_as_source(parts, tiny_models.causal_lm)


def test_changed_gguf_invalidates_the_copy(gguf_copy: Path) -> None:
    load_generator_parts(gguf_copy)
    assert cache_is_valid(gguf_copy)
    st = gguf_copy.stat()
    os.utime(gguf_copy, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert not cache_is_valid(gguf_copy)
    load_generator_parts(gguf_copy)  # converts again
    assert cache_is_valid(gguf_copy)


def test_unwritable_folder_still_loads(tiny_models, gguf_copy: Path,  # type: ignore[no-untyped-def]
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    def refuse(*a: object, **k: object) -> str:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkdtemp", refuse)
    parts = load_generator_parts(gguf_copy)
    assert not cache_dir_for(gguf_copy).exists()
    _assert_same_as_source(parts, tiny_models.causal_lm)


def test_corrupt_gguf(tmp_path: Path) -> None:
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + os.urandom(300))
    with pytest.raises(MissingModelError, match=r"broken\.gguf"):
        load_generator_parts(bad)
    assert not cache_dir_for(bad).exists()


def test_truncated_gguf(tiny_gguf: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.gguf"
    data = tiny_gguf.read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(MissingModelError, match=r"cut\.gguf"):
        load_generator_parts(cut)


def test_pack_size_counts_the_converted_copy(gguf_copy: Path) -> None:
    from ragdesk.core.models.packs import _part_status

    before = _part_status("generator", str(gguf_copy))
    assert before.installed and before.bytes == gguf_copy.stat().st_size
    load_generator_parts(gguf_copy)
    after = _part_status("generator", str(gguf_copy))
    copy_bytes = sum(f.stat().st_size for f in cache_dir_for(gguf_copy).rglob("*") if f.is_file())
    assert after.bytes == gguf_copy.stat().st_size + copy_bytes > before.bytes
