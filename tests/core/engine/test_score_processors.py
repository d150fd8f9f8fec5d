"""ragdesk's score processors against transformers' logits processors, one by one and as the
list ``generate`` builds, on random scores and rows with repeated n-grams."""

from __future__ import annotations

import itertools
import subprocess
import sys
from typing import Any

import pytest
import torch

from ragdesk.core.engine.decoding import GenerationSettings, build_processors
from ragdesk.core.engine.score_processors import (
    ForcedFirst,
    ForcedLast,
    MinLength,
    NoRepeatNGram,
    RepetitionPenalty,
)

V = 50


def _rows(length: int, seed: int, vocab: int = V) -> torch.Tensor:
    """Rows drawn from few tokens, so that n-grams repeat; one id past the vocabulary."""
    g = torch.Generator().manual_seed(seed)
    rows = torch.randint(0, 6, (4, length), generator=g)
    if length > 2:
        rows[0, 1] = vocab + 3  # an id the output layer does not have
    return rows


def _scores(seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(1000 + seed)
    return torch.randn(4, V, generator=g) * 3


def _same(got: torch.Tensor, want: torch.Tensor) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype
    assert torch.equal(got, want), (got - want).abs().nan_to_num().max()


def _reference(settings: GenerationSettings, max_length: int, min_new_tokens: int,
               prompt_length: int) -> Any:
    """The list ragdesk built through transformers before it had its own processors."""
    from transformers import (
        ForcedBOSTokenLogitsProcessor,
        ForcedEOSTokenLogitsProcessor,
        LogitsProcessorList,
        MinLengthLogitsProcessor,
        MinNewTokensLengthLogitsProcessor,
        NoRepeatNGramLogitsProcessor,
        RepetitionPenaltyLogitsProcessor,
    )

    eos = list(settings.eos_token_ids)
    procs = LogitsProcessorList()
    if settings.repetition_penalty != 1.0:
        procs.append(RepetitionPenaltyLogitsProcessor(settings.repetition_penalty))
    if settings.no_repeat_ngram_size > 0:
        procs.append(NoRepeatNGramLogitsProcessor(settings.no_repeat_ngram_size))
    if eos and settings.min_length > 0:
        procs.append(MinLengthLogitsProcessor(settings.min_length, eos))
    if eos and min_new_tokens > 0:
        procs.append(MinNewTokensLengthLogitsProcessor(prompt_length, min_new_tokens, eos))
    if settings.forced_bos_token_id is not None:
        procs.append(ForcedBOSTokenLogitsProcessor(int(settings.forced_bos_token_id)))
    if settings.forced_eos_token_ids:
        procs.append(ForcedEOSTokenLogitsProcessor(max_length,
                                                   list(settings.forced_eos_token_ids)))
    return procs


@pytest.mark.parametrize("length", [1, 2, 3, 4, 7, 12])
def test_each_processor_equals_transformers(length: int) -> None:
    from transformers import (
        ForcedBOSTokenLogitsProcessor,
        ForcedEOSTokenLogitsProcessor,
        MinLengthLogitsProcessor,
        MinNewTokensLengthLogitsProcessor,
        NoRepeatNGramLogitsProcessor,
        RepetitionPenaltyLogitsProcessor,
    )

    for seed in range(3):
        rows, scores = _rows(length, seed), _scores(seed)
        pairs: list[tuple[Any, Any]] = [
            (RepetitionPenalty(1.3), RepetitionPenaltyLogitsProcessor(1.3)),
            (RepetitionPenalty(0.7), RepetitionPenaltyLogitsProcessor(0.7)),
            (NoRepeatNGram(2), NoRepeatNGramLogitsProcessor(2)),
            (NoRepeatNGram(3), NoRepeatNGramLogitsProcessor(3)),
            (MinLength(5, [2, 7]), MinLengthLogitsProcessor(5, [2, 7])),
            (MinLength(2, [2], skip=1), MinNewTokensLengthLogitsProcessor(1, 2, [2])),
            (ForcedFirst(4), ForcedBOSTokenLogitsProcessor(4)),
            (ForcedLast(length + 1, [2, 9]), ForcedEOSTokenLogitsProcessor(length + 1, [2, 9])),
            (ForcedLast(length + 3, [2]), ForcedEOSTokenLogitsProcessor(length + 3, [2])),
        ]
        for ours, theirs in pairs:
            _same(ours(rows, scores.clone()), theirs(rows, scores.clone()))


def test_the_repeated_ngram_is_really_banned() -> None:
    rows = torch.tensor([[5, 6, 7, 5, 6]])
    out = NoRepeatNGram(3)(rows, torch.zeros(1, 10))
    assert out[0, 7] == -float("inf") and torch.isfinite(out[0, :7]).all()


SETTINGS = [
    GenerationSettings(start_token_id=0, eos_token_ids=(2,), pad_token_id=1),
    GenerationSettings(start_token_id=2, eos_token_ids=(2, 3), pad_token_id=1,
                       forced_bos_token_id=0, forced_eos_token_ids=(2,),
                       no_repeat_ngram_size=3, repetition_penalty=1.2, min_length=4),
    GenerationSettings(start_token_id=0, eos_token_ids=(), pad_token_id=0,
                       no_repeat_ngram_size=2, min_length=3),
]


@pytest.mark.parametrize("settings", SETTINGS)
def test_the_list_equals_the_one_generate_builds(settings: GenerationSettings) -> None:
    for max_length, min_new, length in itertools.product((6, 9), (0, 2), (1, 3, 5, 8)):
        ours = build_processors(settings, max_length=max_length, min_new_tokens=min_new)
        theirs = _reference(settings, max_length, min_new, 1)
        assert len(ours) == len(theirs)
        for seed in range(2):
            rows, scores = _rows(length, seed), _scores(seed)
            _same(ours(rows, scores.clone()), theirs(rows, scores.clone()))


def test_decoding_imports_no_transformers() -> None:
    code = ("import sys, torch\n"
            "from ragdesk.core.engine.decoding import GenerationSettings, GreedySearch\n"
            "s = GenerationSettings(start_token_id=0, eos_token_ids=(2,), pad_token_id=1,\n"
            "                       no_repeat_ngram_size=3, min_length=2)\n"
            "g = GreedySearch(2, s, max_new_tokens=4, min_new_tokens=1, extras_dim=1)\n"
            "g.step(torch.randn(2, 10), lambda r, t: torch.zeros(1, 2, 1))\n"
            "assert 'transformers' not in sys.modules, 'transformers imported'\n")
    subprocess.run([sys.executable, "-c", code], check=True)
