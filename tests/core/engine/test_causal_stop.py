"""The causal-LM stop rule: an answer ends at a token whose text contains a newline.

Checked against a naive loop (RAG-Token) and transformers' own ``generate`` with the newline
tokens as ``eos_token_id`` (RAG-Sequence), the newline tokens found by decoding the whole
vocabulary."""

from __future__ import annotations

from typing import Any

import pytest

from ragdesk.core.engine.generators import CausalLMGenerator, PassageText
from ragdesk.core.engine.rag_sequence import rag_sequence_generate
from ragdesk.core.engine.rag_token import rag_token_generate

from . import naive

NEW = 12
TOL = 1e-4
# The tiny GPT-2 hardly ever writes its newline token; with the token's (tied) embedding
# scaled by 2 it does, after a different number of tokens under each passage.
NEWLINE_SCALE = 2.0


@pytest.fixture(scope="module")
def newline_gen(tiny_models: Any) -> Any:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(str(tiny_models.causal_lm),
                                                 use_safetensors=True)
    tok = AutoTokenizer.from_pretrained(str(tiny_models.causal_lm))
    nl = sorted(naive.newline_ids_by_decoding(tok))
    with torch.no_grad():
        model.get_output_embeddings().weight[nl] *= NEWLINE_SCALE
    return CausalLMGenerator(model, tok, "tiny-gpt2-newline")


def _hidden(gen: Any) -> set[int]:
    tok = gen.tokenizer
    return set(tok.all_special_ids) | naive.newline_ids_by_decoding(tok)


def test_stop_tokens_are_the_newline_tokens(causal_gen: Any) -> None:
    tok = causal_gen.tokenizer
    want = naive.newline_ids_by_decoding(tok) - set(tok.all_special_ids)
    assert want and causal_gen.stop_ids == want
    eos = causal_gen.settings.eos_token_ids
    assert eos[0] == tok.eos_token_id and set(eos) == {tok.eos_token_id, *want}
    assert all(causal_gen.is_special(i) for i in want)


def test_stop_at_newline_can_be_turned_off(causal_gen: Any) -> None:
    gen = CausalLMGenerator(causal_gen.model, causal_gen.tokenizer, "plain",
                            stop_at_newline=False)
    assert gen.stop_ids == frozenset()
    assert gen.settings.eos_token_ids == (causal_gen.tokenizer.eos_token_id,)


@pytest.mark.parametrize("seed", [1, 2])
def test_rag_token_stops_at_newline(newline_gen: Any, make_cases: Any, seed: int) -> None:
    case = make_cases(seed, equal_length=60)
    gen = newline_gen
    tok = gen.tokenizer
    newline = naive.newline_ids_by_decoding(tok)
    ref = naive.causal_token_greedy(naive.causal_next_lp(gen, case.question, case.hits),
                                    naive.doc_lp_of(case.hits), NEW,
                                    {tok.eos_token_id, *newline})
    assert ref.tokens[-1] in newline and len(ref.tokens) < NEW  # the rule is exercised

    streamed: list[Any] = []
    ans = rag_token_generate(gen, case.question, case.hits, max_new_tokens=NEW,
                             on_token=streamed.append)
    hidden = _hidden(gen)
    want = [(t, p) for t, p in zip(ref.tokens, ref.posteriors, strict=True)
            if t not in hidden]
    assert ans.token_ids == [t for t, _ in want] == ref.tokens[:-1]
    for got, (_, post) in zip(ans.tokens, want, strict=True):
        assert got.posterior == pytest.approx(post, abs=TOL)
    # the stop token counts in log p(y|x) as EOS does
    assert ans.logprob == pytest.approx(ref.logprob, abs=TOL)
    assert "\n" not in ans.text and all("\n" not in t.text for t in streamed)
    assert [t.id for t in streamed] == ans.token_ids


def _reference_hypotheses(gen: Any, prompt: list[int], num_beams: int,
                          stops: set[int]) -> list[list[int]]:
    """transformers' generate under one passage, the stop tokens as EOS; each hypothesis up
    to and including its stop token."""
    import torch

    out = gen.model.generate(
        torch.tensor([prompt]), max_new_tokens=NEW, do_sample=False, num_beams=num_beams,
        num_return_sequences=num_beams, eos_token_id=sorted(stops),
        pad_token_id=gen.tokenizer.pad_token_id)
    hyps = []
    for row in out[:, len(prompt):].tolist():
        end = next((i for i, t in enumerate(row) if t in stops), len(row) - 1)
        hyps.append(row[:end + 1])
    return hyps


@pytest.mark.parametrize("num_beams", [1, 2])
def test_rag_sequence_stops_at_newline(newline_gen: Any, make_cases: Any,
                                       num_beams: int) -> None:
    import torch

    case = make_cases(1, equal_length=60)
    gen = newline_gen
    tok = gen.tokenizer
    newline = naive.newline_ids_by_decoding(tok)
    stops = {tok.eos_token_id, *newline}
    prompts = gen.prepare(case.question,
                          [PassageText(h.title, h.text) for h in case.hits]).input_ids
    union: list[list[int]] = []
    for p in prompts:
        for h in _reference_hypotheses(gen, p, num_beams, stops):
            if h not in union:
                union.append(h)
    stopped = {len(h) for h in union if h[-1] in newline}
    assert len(stopped) > 1  # hypotheses stop at the newline after different lengths

    next_lp = naive.causal_next_lp(gen, case.question, case.hits)
    doc_lp = naive.doc_lp_of(case.hits)
    best, best_score, best_lp = None, float("-inf"), None
    for y in union:
        lp = torch.stack([naive.token_lps(next_lp, z, y) for z in range(len(case.hits))])
        score = float(torch.logsumexp(doc_lp + lp.sum(1), 0))
        if score > best_score:
            best, best_score, best_lp = y, score, lp
    assert best is not None and best_lp is not None

    ans = rag_sequence_generate(gen, case.question, case.hits, decoding="thorough",
                                num_beams=num_beams, max_new_tokens=NEW)
    hidden = _hidden(gen)
    shown = [i for i, t in enumerate(best) if t not in hidden]
    assert ans.token_ids == [best[i] for i in shown]
    assert "\n" not in ans.text
    assert ans.logprob == pytest.approx(best_score, abs=TOL)
    posts = torch.softmax(doc_lp[:, None] + best_lp.cumsum(1), dim=0).T  # [T, K]
    for got, i in zip(ans.tokens, shown, strict=True):
        assert got.posterior == pytest.approx(posts[i].tolist(), abs=TOL)
