"""The differentiable forward passes agree with the inference code they mirror."""

from __future__ import annotations

import numpy as np
import pytest

QUESTIONS = ["what is the secret word of alice?", "who wrote hamlet", "x"]


@pytest.mark.parametrize("which", ["question_encoder", "st_encoder"])
def test_question_vectors_equal_text_encoder_output(tiny_models, which: str) -> None:  # type: ignore[no-untyped-def]
    import torch

    from ragdesk.core.models import load_question_encoder
    from ragdesk.core.training.forward import question_vectors

    enc = load_question_encoder(getattr(tiny_models, which))
    expected = enc.encode_batch(QUESTIONS)
    q = question_vectors(enc, QUESTIONS)
    assert q.requires_grad
    np.testing.assert_allclose(q.detach().numpy(), expected, rtol=1e-5, atol=1e-5)
    q.sum().backward()
    assert any(p.grad is not None and bool(p.grad.abs().sum() > 0)
               for p in enc.model.parameters())
    del torch


@pytest.mark.parametrize("which", ["bart", "causal_lm"])
def test_answer_logprobs_equal_the_engines_teacher_forced_scores(tiny_models, which: str) -> None:  # type: ignore[no-untyped-def]
    """The engine scores hypotheses under each passage with cached encoder states / prompts;
    training recomputes them in one differentiable pass. Both must agree."""
    import torch

    from ragdesk.core.engine.generators import PassageText
    from ragdesk.core.models import load_generator
    from ragdesk.core.training.forward import answer_ids, answer_logprobs

    gen = load_generator(getattr(tiny_models, which))
    passages = [PassageText("alice", "the secret word of alice is apple."),
                PassageText("A much longer title", "with a longer text " * 5)]
    target = answer_ids(gen, "apple pie")
    decoded = gen.tokenizer.decode(target, skip_special_tokens=True)
    assert isinstance(decoded, str)  # one sequence of ids decodes to one string
    assert len(target) >= 3 and decoded.strip() == "apple pie"
    ours = answer_logprobs(gen, QUESTIONS[0], passages, target)
    assert ours.requires_grad and ours.shape == (2, len(target))
    ctx = gen.prepare(QUESTIONS[0], passages)
    hyps = torch.tensor([target])
    for z in range(len(passages)):
        ref = ctx.score(z, hyps)[0]
        torch.testing.assert_close(ours[z].detach(), ref, rtol=1e-4, atol=1e-4)


def test_causal_answers_end_with_an_eos_token(tiny_models) -> None:  # type: ignore[no-untyped-def]
    from ragdesk.core.models import load_generator
    from ragdesk.core.training.forward import answer_ids

    gen = load_generator(tiny_models.causal_lm)
    ids = answer_ids(gen, "apple")
    assert ids[-1] in gen.settings.eos_token_ids
    assert gen.tokenizer.decode(ids[:-1]) == " apple"  # continues "Answer:" with a space
