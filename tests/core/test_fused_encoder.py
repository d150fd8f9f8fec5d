"""The fused passage kernel (``TextEncoder.fast``) against the transformers forward."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from ragdesk.core.encoders import EXACT, FAST_ENV, FusedBertKernel, load_encoder, passage_input


def _texts(tiny_models, enc):  # type: ignore[no-untyped-def]
    # Different lengths in one batch, so padding and the attention mask are exercised.
    return [passage_input(enc, t, x[: 40 + 60 * i]) for i, (t, x) in
            enumerate(tiny_models.corpus[:7])]


@pytest.mark.parametrize("which", ["st_encoder", "ctx_encoder"])
def test_float32_kernel_reproduces_the_transformers_forward(tiny_models, which: str) -> None:  # type: ignore[no-untyped-def]
    enc = load_encoder(getattr(tiny_models, which), role="passage")
    texts = _texts(tiny_models, enc)
    exact = enc.encode(texts, batch_size=4)
    kernel = FusedBertKernel.build(enc.model, enc.info, torch.float32)
    assert kernel is not None
    fused = load_encoder(getattr(tiny_models, which), role="passage")
    fused.kernel = kernel
    np.testing.assert_allclose(fused.encode(texts, batch_size=4), exact, atol=2e-5)


def test_bfloat16_kernel_stays_close_and_leaves_the_original_exact(
        tiny_models: Any, bf16_kernel_here: bool,
        monkeypatch: pytest.MonkeyPatch) -> None:
    if not bf16_kernel_here:
        pytest.skip("this CPU cannot run oneDNN's packed bfloat16 products")
    monkeypatch.delenv(FAST_ENV, raising=False)
    enc = load_encoder(tiny_models.st_encoder, role="passage")
    texts = _texts(tiny_models, enc)
    before = enc.encode(texts)
    kernel = FusedBertKernel.build(enc.model, enc.info, torch.bfloat16)
    assert kernel is not None and kernel.label == "bfloat16"
    twin = load_encoder(tiny_models.st_encoder, role="passage")
    twin.kernel = kernel
    got = twin.encode(texts)
    cos = (got * before).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(before, axis=1)
    assert cos.min() > 0.999
    assert not np.array_equal(got, before)  # it really ran in bf16
    fast = enc.fast()
    assert fast is not enc and fast.model is enc.model and fast.precision != EXACT
    assert enc.kernel is None and enc.precision == EXACT
    np.testing.assert_array_equal(enc.encode(texts), before)


def test_fast_mode_can_be_turned_off(tiny_models, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    enc = load_encoder(tiny_models.st_encoder, role="passage")
    monkeypatch.setenv(FAST_ENV, "float32")
    assert enc.fast() is enc


def test_kernel_refuses_models_it_does_not_reproduce(tiny_models) -> None:  # type: ignore[no-untyped-def]
    enc = load_encoder(tiny_models.st_encoder, role="passage")
    enc.model.config.position_embedding_type = "relative_key"
    try:
        assert FusedBertKernel.build(enc.model, enc.info) is None
    finally:
        enc.model.config.position_embedding_type = "absolute"
