"""Naive RAG decoding for the tests: every passage run separately, unbatched and uncached,
the whole prefix recomputed at every step, straight from the formulas in DESIGN.md."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

NextLP = Callable[[int, list[int]], torch.Tensor]  # (passage, generated so far) -> [V]


def seq2seq_next_lp(gen: Any, question: str, hits: list[Any]) -> NextLP:
    from ragdesk.core.engine.generators import PassageText

    inputs = [torch.tensor([gen.input_ids(question, PassageText(h.title, h.text))])
              for h in hits]
    start = gen.settings.start_token_id

    def next_lp(z: int, prefix: list[int]) -> torch.Tensor:
        with torch.no_grad():
            out = gen.model(input_ids=inputs[z], decoder_input_ids=torch.tensor([[start, *prefix]]),
                            use_cache=False)
        return torch.log_softmax(out.logits[0, -1].float(), dim=-1)

    return next_lp


def causal_next_lp(gen: Any, question: str, hits: list[Any]) -> NextLP:
    from ragdesk.core.engine.generators import PassageText, normalize_question

    passages = [PassageText(h.title, h.text) for h in hits]
    # the prompt is the generator's (question recased from all K passages, as prepare does);
    # what this loop checks is the decoding arithmetic
    question = normalize_question(question, passages)
    prompts = [gen.input_ids(question, p) for p in passages]

    def next_lp(z: int, prefix: list[int]) -> torch.Tensor:
        with torch.no_grad():
            out = gen.model(input_ids=torch.tensor([prompts[z] + prefix]), use_cache=False)
        return torch.log_softmax(out.logits[0, -1].float(), dim=-1)

    return next_lp


def doc_lp_of(hits: list[Any]) -> torch.Tensor:
    return torch.log_softmax(torch.tensor([h.score for h in hits], dtype=torch.float32), 0)


@dataclass
class NaiveAnswer:
    tokens: list[int]  # every generated token, EOS included
    posteriors: list[list[float]]  # per generated token
    logprob: float


def _choose(scores: torch.Tensor, step: int, max_new: int, eos: int) -> int:
    if step == max_new - 1:  # the generator's forced EOS at the last position
        return eos
    return int(torch.argmax(scores))


def rag_token_greedy(next_lp: NextLP, doc_lp: torch.Tensor, max_new: int,
                     eos: int) -> NaiveAnswer:
    k = doc_lp.shape[0]
    seq: list[int] = []
    posts: list[list[float]] = []
    logprob = 0.0
    for step in range(max_new):
        lps = torch.stack([next_lp(z, seq) for z in range(k)])  # [K, V]
        marginal = torch.logsumexp(doc_lp[:, None] + lps, dim=0)
        tok = _choose(marginal, step, max_new, eos)
        joint = doc_lp + lps[:, tok]
        posts.append(torch.softmax(joint, 0).tolist())
        logprob += float(torch.logsumexp(joint, 0))
        seq.append(tok)
        if tok == eos:
            break
    return NaiveAnswer(seq, posts, logprob)


def causal_token_greedy(next_lp: NextLP, doc_lp: torch.Tensor, max_new: int,
                        stops: set[int]) -> NaiveAnswer:
    """RAG-Token greedy for a causal LM: no forced EOS; any token in ``stops`` ends it."""
    seq: list[int] = []
    posts: list[list[float]] = []
    logprob = 0.0
    for _ in range(max_new):
        lps = torch.stack([next_lp(z, seq) for z in range(doc_lp.shape[0])])
        tok = int(torch.argmax(torch.logsumexp(doc_lp[:, None] + lps, dim=0)))
        joint = doc_lp + lps[:, tok]
        posts.append(torch.softmax(joint, 0).tolist())
        logprob += float(torch.logsumexp(joint, 0))
        seq.append(tok)
        if tok in stops:
            break
    return NaiveAnswer(seq, posts, logprob)


def greedy_under(next_lp: NextLP, z: int, max_new: int, eos: int) -> list[int]:
    seq: list[int] = []
    for step in range(max_new):
        tok = _choose(next_lp(z, seq), step, max_new, eos)
        seq.append(tok)
        if tok == eos:
            break
    return seq


def token_lps(next_lp: NextLP, z: int, seq: list[int]) -> torch.Tensor:
    return torch.tensor([float(next_lp(z, seq[:t])[seq[t]]) for t in range(len(seq))])


def rag_sequence_greedy(next_lp: NextLP, doc_lp: torch.Tensor, max_new: int, eos: int,
                        fast: bool) -> NaiveAnswer:
    """Greedy per passage, then p(y|x) = Σ_z p(z|x) p(y|x,z) over the distinct answers
    (fast: only over the passages that produced y)."""
    k = doc_lp.shape[0]
    hyps = [greedy_under(next_lp, z, max_new, eos) for z in range(k)]
    distinct: list[list[int]] = []
    for h in hyps:
        if h not in distinct:
            distinct.append(h)
    best, best_score, best_lp = None, float("-inf"), None
    for y in distinct:
        lp = torch.stack([token_lps(next_lp, z, y) for z in range(k)])  # [K, T]
        total = doc_lp + lp.sum(1)
        if fast:
            total = torch.where(torch.tensor([hyps[z] == y for z in range(k)]), total,
                                torch.full_like(total, float("-inf")))
        score = float(torch.logsumexp(total, 0))
        if score > best_score:
            best, best_score, best_lp = y, score, lp
    assert best is not None and best_lp is not None
    cum = doc_lp[:, None] + best_lp.cumsum(1)  # [K, T]
    if fast:  # a passage counts for the prefixes it produced
        for z in range(k):
            for t in range(len(best)):
                if hyps[z][:t + 1] != best[:t + 1]:
                    cum[z, t] = float("-inf")
    posts = torch.softmax(cum, dim=0).T.tolist()
    return NaiveAnswer(best, posts, best_score)


def visible(gen: Any, naive: NaiveAnswer) -> tuple[list[int], list[list[float]]]:
    """The tokens a user sees (special tokens dropped) and their posteriors."""
    ids, posts = [], []
    for t, p in zip(naive.tokens, naive.posteriors, strict=True):
        if not gen.is_special(t):
            ids.append(t)
            posts.append(p)
    return ids, posts


def newline_ids_by_decoding(tokenizer: Any) -> set[int]:
    """Every token whose decoded text contains a newline (the whole vocabulary decoded)."""
    return {i for i in range(len(tokenizer)) if "\n" in tokenizer.decode([i])}
