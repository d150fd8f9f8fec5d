"""p(z|x) with a temperature: one implementation, τ = 1 as transformers, and the fit."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ragdesk.core.posterior import (
    NORMALIZED_TEMPERATURE,
    default_temperature,
    entropy,
    fit_temperature,
    log_probs,
    probs_np,
)


def test_temperature_one_is_plain_log_softmax() -> None:
    import torch

    s = torch.tensor([[12.5, 11.0, 9.75, 3.0]], dtype=torch.float32)
    assert torch.equal(log_probs(s, 1.0), torch.log_softmax(s, dim=-1))


def test_torch_and_numpy_forms_agree() -> None:
    import torch

    s = [0.71, 0.65, 0.64, 0.52, 0.50]
    for t in (1.0, 0.05, 0.02):
        a = log_probs(torch.tensor(s), t).exp().numpy()
        b = probs_np(s, t)
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
        # against the formula written out
        e = [math.exp(x / t) for x in s]
        np.testing.assert_allclose(b, [x / sum(e) for x in e], rtol=1e-9)


def test_cosines_without_temperature_are_nearly_uniform() -> None:
    """The defect the temperature fixes: cosines of 0.5-0.8 give every passage ~0.2."""
    s = [0.72, 0.70, 0.66, 0.61, 0.55]
    assert max(probs_np(s, 1.0)) < 0.23
    assert max(probs_np(s, NORMALIZED_TEMPERATURE)) > 0.3


def test_default_temperature() -> None:
    assert default_temperature("facebook/dpr-question_encoder-single-nq-base", False) == 1.0
    assert default_temperature("some/normalized-encoder", True) == NORMALIZED_TEMPERATURE


def test_entropy() -> None:
    assert entropy([1.0, 0.0]) == 0.0
    assert entropy([0.25] * 4) == pytest.approx(math.log(4))


@pytest.mark.parametrize("true_t", [0.05, 0.2, 1.0])
def test_fit_recovers_a_known_temperature(true_t: float) -> None:
    """Positives drawn from softmax(s / τ₀): the maximum-likelihood τ is close to τ₀."""
    rng = np.random.default_rng(7)
    scores, positives = [], []
    for _ in range(4000):
        s = np.sort(rng.uniform(0.3, 0.9, size=10))[::-1] * (10 if true_t == 1.0 else 1)
        p = probs_np(s, true_t)
        z = rng.choice(10, p=p)
        scores.append(s.tolist())
        positives.append([i == z for i in range(10)])
    fit = fit_temperature(scores, positives)
    assert fit.temperature == pytest.approx(true_t, rel=0.1)
    assert fit.questions == 4000
    assert fit.log_likelihood >= fit.log_likelihood_at_1 - 1e-9


def test_fit_skips_questions_without_information() -> None:
    scores = [[0.9, 0.5], [0.8, 0.7], [0.6, 0.4]]
    positives = [[False, False], [True, True], [True, False]]
    assert fit_temperature(scores, positives).questions == 1
    with pytest.raises(ValueError):
        fit_temperature(scores[:2], positives[:2])
