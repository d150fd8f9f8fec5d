"""Per-token sources, log-likelihoods and causal-LM marginalization against a naive loop
that runs every passage separately (tests/core/engine/naive.py)."""

from __future__ import annotations

from typing import Any

import pytest

from ragdesk.core.engine.rag_sequence import rag_sequence_generate
from ragdesk.core.engine.rag_token import rag_token_generate

from . import naive

NEW = 8
TOL = 1e-4


def _gen_and_lp(kind: str, bart_gen: Any, causal_gen: Any, case: Any) -> tuple[Any, Any]:
    if kind == "seq2seq":
        return bart_gen, naive.seq2seq_next_lp(bart_gen, case.question, case.hits)
    return causal_gen, naive.causal_next_lp(causal_gen, case.question, case.hits)


def _assert_same(gen: Any, ans: Any, ref: naive.NaiveAnswer) -> None:
    ids, posts = naive.visible(gen, ref)
    assert ans.token_ids == ids
    assert len(ans.tokens) == len(posts)
    for tok, want in zip(ans.tokens, posts, strict=True):
        assert sum(tok.posterior) == pytest.approx(1.0, abs=1e-5)
        assert tok.posterior == pytest.approx(want, abs=TOL)
    assert ans.logprob == pytest.approx(ref.logprob, abs=TOL)


@pytest.mark.parametrize("kind", ["seq2seq", "causal"])
@pytest.mark.parametrize("seed", [0, 1])
def test_rag_token_against_naive_loop(bart_gen: Any, causal_gen: Any, make_cases: Any,
                                      kind: str, seed: int) -> None:
    # equal input lengths: no padding, so batched and one-by-one runs round alike
    case = make_cases(seed, equal_length=60)
    gen, next_lp = _gen_and_lp(kind, bart_gen, causal_gen, case)
    eos = gen.settings.eos_token_ids[0]
    ans = rag_token_generate(gen, case.question, case.hits, max_new_tokens=NEW)
    if kind == "causal":  # no forced EOS in the tiny GPT-2's generation config
        ref = naive.causal_token_greedy(next_lp, naive.doc_lp_of(case.hits), NEW,
                                        _causal_stops(gen))
    else:
        ref = naive.rag_token_greedy(next_lp, naive.doc_lp_of(case.hits), NEW, eos)
    _assert_same(gen, ans, ref)


def _causal_stops(gen: Any) -> set[int]:
    """EOS and, by the causal-LM stop rule, every token whose text holds a newline."""
    return {gen.tokenizer.eos_token_id, *naive.newline_ids_by_decoding(gen.tokenizer)}


@pytest.mark.parametrize("decoding", ["thorough", "fast"])
@pytest.mark.parametrize("seed", [0, 1])
def test_rag_sequence_against_naive_loop(bart_gen: Any, make_cases: Any, decoding: str,
                                         seed: int) -> None:
    case = make_cases(seed, equal_length=60)
    gen, next_lp = _gen_and_lp("seq2seq", bart_gen, None, case)
    eos = gen.settings.eos_token_ids[0]
    ans = rag_sequence_generate(gen, case.question, case.hits, decoding=decoding,
                                max_new_tokens=NEW)
    ref = naive.rag_sequence_greedy(next_lp, naive.doc_lp_of(case.hits), NEW, eos,
                                    fast=decoding == "fast")
    _assert_same(gen, ans, ref)


def test_rag_sequence_causal_lm_against_naive_loop(causal_gen: Any, make_cases: Any) -> None:
    case = make_cases(2)
    next_lp = naive.causal_next_lp(causal_gen, case.question, case.hits)
    stops = _causal_stops(causal_gen)
    ans = rag_sequence_generate(causal_gen, case.question, case.hits, decoding="thorough",
                                max_new_tokens=NEW)
    hyps = [_causal_greedy(next_lp, z, NEW, stops) for z in range(len(case.hits))]
    doc_lp = naive.doc_lp_of(case.hits)
    import torch

    best, best_score = None, float("-inf")
    for y in {tuple(h) for h in hyps}:
        lp = torch.stack([naive.token_lps(next_lp, z, list(y)).sum()
                          for z in range(len(case.hits))])
        score = float(torch.logsumexp(doc_lp + lp, 0))
        if score > best_score:
            best, best_score = list(y), score
    assert best is not None
    hidden = set(causal_gen.tokenizer.all_special_ids) | stops
    assert ans.token_ids == [t for t in best if t not in hidden]
    assert ans.logprob == pytest.approx(best_score, abs=TOL)


def _causal_greedy(next_lp: Any, z: int, max_new: int, stops: set[int]) -> list[int]:
    import torch

    seq: list[int] = []
    for _ in range(max_new):
        tok = int(torch.argmax(next_lp(z, seq)))
        seq.append(tok)
        if tok in stops:
            break
    return seq


def test_sources_differ_between_tokens(bart_gen: Any, make_cases: Any) -> None:
    """Attribution is per token, not one distribution copied to all tokens."""
    case = make_cases(0)
    ans = rag_token_generate(bart_gen, case.question, case.hits, max_new_tokens=NEW)
    assert len({tuple(round(p, 4) for p in t.posterior) for t in ans.tokens}) > 1
    assert [d.prob for d in ans.docs] == pytest.approx(
        naive.doc_lp_of(case.hits).exp().tolist(), abs=1e-6)
    assert [d.score for d in ans.docs] == [h.score for h in case.hits]
