"""The features read from the tokens' posteriors, against a naive recomputation of each
passage's likelihood from the per-passage token probabilities they were built from."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ragdesk.core.confidence import answer_features
from ragdesk.core.types import Answer, AnswerToken, RetrievedDoc


def _answer(seed: int, mode: str) -> tuple[Answer, np.ndarray, np.ndarray]:
    """An answer whose per-token posteriors come from known p(z|x) and p(y_i|x,z,y_<i)."""
    rng = np.random.default_rng(seed)
    k, t = 4, 5
    prior = rng.dirichlet(np.ones(k))
    q = rng.uniform(0.01, 0.9, size=(t, k))  # p(y_i | x, z, y_<i)
    if mode == "token":
        joint = prior[None, :] * q
        posts = joint / joint.sum(axis=1, keepdims=True)
        logprob = float(np.log(joint.sum(axis=1)).sum())
    else:
        cum = prior[None, :] * np.cumprod(q, axis=0)
        posts = cum / cum.sum(axis=1, keepdims=True)
        logprob = float(np.log(cum[-1].sum()))
    docs = [RetrievedDoc(id=i, title=f"T{i}", text="Paris is the capital" if i == 2 else "x y",
                         score=float(-i), prob=float(prior[i])) for i in range(k)]
    tokens = [AnswerToken(id=i, text=" w", posterior=[float(v) for v in row])
              for i, row in enumerate(posts)]
    ans = Answer(question="what is the capital", text="Paris", token_ids=list(range(t)),
                 tokens=tokens, docs=docs, logprob=logprob, mode=mode)
    return ans, prior, q


@pytest.mark.parametrize("mode", ["token", "sequence"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_passage_likelihoods_equal_a_naive_loop(mode: str, seed: int) -> None:
    ans, prior, q = _answer(seed, mode)
    f = answer_features(ans, 0.0, 0)
    per_passage = [sum(math.log(q[i, z]) for i in range(q.shape[0])) for z in range(len(prior))]
    assert f["best_passage_lp"] == pytest.approx(max(per_passage), abs=1e-6)
    assert f["best_passage_lp_per_token"] == pytest.approx(max(per_passage) / q.shape[0])
    read = [prior[z] * math.exp(per_passage[z]) for z in range(len(prior))]
    read = [r / sum(read) for r in read]
    best = int(np.argmax(read))
    assert f["read_posterior_max"] == pytest.approx(read[best], abs=1e-9)
    assert f["read_on_holders"] == pytest.approx(read[2], abs=1e-9)  # only T2 holds "Paris"
    assert f["read_shift"] == pytest.approx(read[best] - prior[best], abs=1e-9)


@pytest.mark.parametrize("mode", ["token", "together"])
def test_nothing_read_passage_by_passage_reads_as_the_prior(mode: str) -> None:
    """An answer cut to nothing (or read together) gets every reading feature, the same at
    fitting and at answering time: the reading is the prior, the same under every passage."""
    ans, prior, _ = _answer(1, "token")
    ans.mode = mode
    if mode == "token":
        ans.tokens, ans.text = [], ""
    f = answer_features(ans, 0.0, 0)
    assert f["best_passage_lp"] == pytest.approx(max(-40.0, ans.logprob))
    assert f["read_posterior_max"] == pytest.approx(prior.max())
    assert f["read_shift"] == pytest.approx(0.0, abs=1e-9)
    assert f["token_source_max"] == pytest.approx(prior.max())
