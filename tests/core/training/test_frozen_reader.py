"""Retriever-only training: a frozen generator read through the engine's inference path gives
the loss and the question encoder's gradient of the differentiable path."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.core.training.helpers import examples as _examples

GENERATORS = ["gemma3", "causal_lm", "bart"]


def _generator(tiny_models: Any, which: str) -> Any:
    from ragdesk.core.models import load_generator

    path = getattr(tiny_models, which)
    if path is None:
        pytest.skip("this transformers has no Gemma 3")
    # float32: the lean decoder's exact path (bfloat16 is tested for agreement elsewhere)
    return load_generator(path, precision="float32")


def _trainer(tiny_models: Any, index: Any, gen: Any, **cfg: Any) -> Any:
    from ragdesk.core.models import load_question_encoder
    from ragdesk.core.training.config import TrainConfig
    from ragdesk.core.training.trainer import RagTrainer

    enc = load_question_encoder(tiny_models.st_encoder)
    base: dict[str, Any] = {"n_docs": 4, "batch_size": 4, "eval_ks": (1, 2),
                            "generator_layers": 0}
    base.update(cfg)
    return RagTrainer(enc, gen, index, TrainConfig(**base), device="cpu")


def _loss_and_grads(tr: Any, exs: list[Any]) -> tuple[float, dict[str, np.ndarray]]:
    """The mean loss of a batch and the question encoder's gradient, dropout seeded alike."""
    import torch

    tr.encoder.model.train()
    tr.encoder.model.zero_grad(set_to_none=True)
    torch.manual_seed(1234)
    total = 0.0
    for ex in exs:
        loss = tr.example_loss(ex) / len(exs)
        loss.backward()
        total += float(loss.detach())
    grads = {n: p.grad.detach().numpy().copy() for n, p in tr.encoder.model.named_parameters()
             if p.grad is not None}
    return total, grads


@pytest.mark.parametrize("mode", ["token", "sequence"])
@pytest.mark.parametrize("which", GENERATORS)
def test_engine_reader_gives_the_differentiable_loss_and_gradient(
        tiny_models: Any, index: Any, which: str, mode: str) -> None:
    gen = _generator(tiny_models, which)
    exs = _examples()[:4]
    slow = _trainer(tiny_models, index, gen, mode=mode, inference_reader=False)
    ref_loss, ref_grads = _loss_and_grads(slow, exs)
    fast = _trainer(tiny_models, index, gen, mode=mode)
    if which == "gemma3":
        assert gen.lean_decoder is not None
        # the engine's lean decoder must do the reading, not the model's forward
        gen.model.forward = _refuse
    loss, grads = _loss_and_grads(fast, exs)
    assert np.isfinite(ref_loss) and ref_loss > 0
    assert loss == pytest.approx(ref_loss, rel=1e-5, abs=1e-5)
    assert grads.keys() == ref_grads.keys() and grads
    assert any(float(np.abs(g).max()) > 1e-6 for g in ref_grads.values())
    for name, g in grads.items():
        np.testing.assert_allclose(g, ref_grads[name], rtol=1e-3, atol=1e-6, err_msg=name)
    assert all(p.grad is None for p in gen.model.parameters())


def _refuse(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("the generator's own forward ran")


def test_reader_logprobs_equal_the_differentiable_forward(tiny_models) -> None:  # type: ignore[no-untyped-def]
    import torch

    from ragdesk.core.engine.generators import PassageText
    from ragdesk.core.training.forward import answer_ids, answer_logprobs, reader_logprobs

    gen = _generator(tiny_models, "gemma3")
    # "Alice" in the passages: the engine recases the question's "alice" from them, and
    # the differentiable path must read the same prompt
    passages = [PassageText("Alice", "the secret word of Alice is apple."),
                PassageText("Bob", "Bob has a long story " * 8)]
    target = answer_ids(gen, "apple")
    ref = answer_logprobs(gen, "what is the secret word of alice", passages, target)
    got = reader_logprobs(gen, "what is the secret word of alice", passages, target)
    assert not got.requires_grad and got.shape == ref.shape == (2, len(target))
    torch.testing.assert_close(got, ref.detach(), rtol=1e-4, atol=1e-4)
