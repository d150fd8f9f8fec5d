"""A conversion kept for the first question (the starter setup) is handed to the next load
instead of being read back from disk, once, and behaves like the converted copy."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ragdesk.core.models import gguf_files, load_generator_parts
from tests.core.models.test_gguf import _assert_same_as_source


def test_kept_conversion_is_handed_over_once(tiny_models, gguf_copy: Path,  # type: ignore[no-untyped-def]
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from transformers import AutoModelForCausalLM

    copy_written_at_signal: list[bool] = []
    model, tokenizer = gguf_files.load_gguf_causal_lm(
        gguf_copy, keep=True,
        on_loaded=lambda: copy_written_at_signal.append(gguf_files.cache_is_valid(gguf_copy)))
    # Signalled once in memory, before the converted copy was written; written after it.
    assert copy_written_at_signal == [False]
    assert gguf_files.cache_is_valid(gguf_copy)

    def no_read(*a: object, **k: object) -> None:
        raise AssertionError("read back from disk")

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", no_read)
    monkeypatch.setattr(gguf_files, "_load_from_gguf", no_read)
    parts = load_generator_parts(gguf_copy)
    assert parts.model is model and parts.tokenizer is tokenizer
    _assert_same_as_source(parts, tiny_models.causal_lm)
    monkeypatch.undo()
    # Handed over once: the next load reads the converted copy, a separate model.
    again = load_generator_parts(gguf_copy)
    assert again.model is not model
    theirs = dict(model.named_parameters())
    for name, p in again.model.named_parameters():  # the same weights, bit for bit
        assert torch.equal(p, theirs[name]), name
    ids = torch.tensor([[5, 6, 7, 8]])
    with torch.inference_mode():
        # and so the same logits, up to the order of float32 sums: the copy read back is laid
        # out contiguously, the converted weights may not be, and on some CPUs (AVX-512) the
        # matmul kernels then sum in another order (7.6e-06 apart for logits of about 1)
        torch.testing.assert_close(again.model(ids).logits, model(ids).logits,
                                   rtol=1e-5, atol=2e-5)


def test_nothing_is_kept_unless_asked(gguf_copy: Path) -> None:
    gguf_files.load_gguf_causal_lm(gguf_copy)
    assert not gguf_files._kept
