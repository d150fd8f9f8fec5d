"""The retriever's own objective (``--objective passages``): its loss against a naive
float64 computation, its checks, and a run on the synthetic task that ranks the passages
holding the answers first, with the generator untouched."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
import torch

from ragdesk.core.errors import BadInputError
from ragdesk.core.training.config import PASSAGES_DEPTH, TrainConfig
from ragdesk.core.training.loss import passages_nll
from tests.core.training.helpers import examples as _examples
from tests.core.training.helpers import make_trainer as _trainer


def test_the_loss_is_minus_the_log_share_of_the_passages_that_hold_the_answer() -> None:
    scores = torch.tensor([0.31, -0.2, 0.05, 0.44, 0.0], requires_grad=True)
    holds = [False, True, False, True, False]
    tau = 0.07
    got = passages_nll(scores, holds, tau)
    exp = [math.exp(float(s) / tau) for s in scores.detach()]
    want = -math.log(sum(e for e, h in zip(exp, holds, strict=True) if h) / sum(exp))
    assert abs(float(got.detach()) - want) < 1e-5
    got.backward()
    assert scores.grad is not None
    grad = scores.grad.tolist()
    # lowering the loss raises the passages that hold the answer and lowers the others
    assert all(g < 0 for g, h in zip(grad, holds, strict=True) if h)
    assert all(g > 0 for g, h in zip(grad, holds, strict=True) if not h)
    assert abs(sum(grad)) < 1e-5  # a softmax: adding a constant to every score changes nothing


def test_no_passage_holding_the_answer_gives_zero_and_no_gradient() -> None:
    scores = torch.tensor([0.3, 0.1], requires_grad=True)
    got = passages_nll(scores, [False, False], 0.05)
    assert float(got.detach()) == 0.0
    got.backward()
    assert scores.grad is not None and float(scores.grad.abs().sum()) == 0.0


def test_the_objective_is_checked() -> None:
    with pytest.raises(BadInputError, match="objective"):
        TrainConfig(objective="answers").check()
    with pytest.raises(BadInputError, match="question encoder alone"):
        TrainConfig(objective="passages").check()  # the generator would train
    with pytest.raises(BadInputError, match="question encoder alone"):
        TrainConfig(objective="passages", generator_layers=0,
                    train_question_encoder=False).check()
    with pytest.raises(BadInputError, match="temperature"):
        TrainConfig(objective="passages", generator_layers=0, passage_temperature=0).check()
    cfg = TrainConfig(objective="passages", generator_layers=0).check()
    assert cfg.depth == PASSAGES_DEPTH and TrainConfig().depth == TrainConfig().n_docs
    assert TrainConfig(objective="passages", generator_layers=0, answer_depth=7).depth == 7
    assert "objective" in TrainConfig.RESUME_KEYS


def _gold_ranks(tr: Any, exs: list[Any]) -> list[int]:
    """Rank (0-based) of the first passage holding a gold answer, by exact search."""
    from ragdesk.core.matching import has_answer
    from ragdesk.core.training.forward import question_vectors

    n = int(tr.index.size)
    with torch.no_grad():
        q = question_vectors(tr.encoder, [e.question for e in exs]).numpy()
    out = []
    for vec, ex in zip(q, exs, strict=True):
        hits = tr.index.search(vec[None].astype(np.float32), n)[0]
        out.append(next(i for i, h in enumerate(hits) if has_answer(h.title, h.text,
                                                                       ex.answers)))
    return out


def test_training_ranks_the_passages_that_hold_the_answers_first(
        tiny_models: Any, index: Any) -> None:
    exs = _examples()
    tr = _trainer(tiny_models, index, objective="passages", generator_layers=0, lr=3e-3,
                  epochs=8, passage_temperature=0.05, evaluate_before=False)
    gen_before = [p.detach().clone() for p in tr.generator.model.parameters()]
    before = _gold_ranks(tr, exs)
    st = tr.run(exs, None)
    after = _gold_ranks(tr, exs)
    assert st.step == 8 * math.ceil(len(exs) / 4)
    assert sum(after) < sum(before), (before, after)
    assert sum(r == 0 for r in after) > sum(r == 0 for r in before), (before, after)
    assert np.mean(st.losses[-2:]) < np.mean(st.losses[:2])
    # the generator plays no part: not one of its weights moved
    assert all(torch.equal(a, b) for a, b in
               zip(gen_before, tr.generator.model.parameters(), strict=True))


def test_the_generator_is_loaded_only_where_something_reads_it() -> None:
    from ragdesk.core.training.run import reads_generator

    passages = TrainConfig(objective="passages", generator_layers=0)
    assert not reads_generator(passages, answers=False)  # no evaluation questions
    assert not reads_generator(replace(passages, eval_em_limit=0), answers=True)
    assert reads_generator(passages, answers=True)  # exact match answers the held-out ones
    assert reads_generator(TrainConfig(), answers=False)  # the RAG objective reads it


def test_a_trainer_without_a_generator_trains_the_passages_objective(
        tiny_models: Any, index: Any) -> None:
    from ragdesk.core.models import load_question_encoder
    from ragdesk.core.training.trainer import RagTrainer

    enc = load_question_encoder(tiny_models.st_encoder)
    cfg = TrainConfig(objective="passages", generator_layers=0, n_docs=4, batch_size=4,
                      eval_ks=(1, 2))
    tr = RagTrainer(enc, None, index, cfg, device="cpu")
    st = tr.run(_examples(), _examples()[:4], held_out=True)
    assert st.step == 2 and tr.evaluate(_examples()).em is None  # nothing answered
    with pytest.raises(ValueError, match="reads the generator"):
        RagTrainer(enc, None, index, TrainConfig(n_docs=4), device="cpu")
