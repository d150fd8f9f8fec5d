"""RAG-Sequence decoding: ``p(y|x) = Σ_z p(z|x) Π_i p(y_i | x, z, y_<i)``.

Beam search (or greedy) runs under every passage at once, one batch item per passage, the
passages encoded once. Then:

* ``thorough``: the union of the hypotheses is scored under every passage, one
  teacher-forced decoder pass per passage that reuses the encoder outputs (transformers'
  ``RagSequenceForGeneration.generate`` re-encodes every passage once per hypothesis);
* ``fast``: no extra pass; ``p(y|x,z) ≈ 0`` for a hypothesis passage z did not produce, and
  ``p(y|x,z)`` of the ones it did produce comes from the search itself.

Scores follow ``RagSequenceForGeneration.get_nll``: targets equal to the padding token do
not count, and a leading BOS is not scored when every hypothesis starts with it. One
deliberate difference: transformers adds ``log p(z|x)`` at the second target position and
so drops it for a one-token hypothesis (an immediate EOS); ragdesk always adds it.

Streaming: thorough decoding emits the answer when it is chosen. Fast greedy decoding emits a
token as soon as every hypothesis that can still win shares it (a running hypothesis can only
lose probability, so one whose bound falls below the best finished answer is out); fast beam
search emits at the end.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ragdesk.core.engine.attribution import TokenCallback, TokenEmitter, running_posteriors
from ragdesk.core.engine.contracts import PassageContext
from ragdesk.core.engine.decoding import BeamSearch, GreedySearch, Hypothesis, common_prefix
from ragdesk.core.engine.generators import Generator
from ragdesk.core.engine.grounding import SpanConstraint, end_at_a_whole_span, span_processors
from ragdesk.core.engine.prefix_tree import PrefixTree
from ragdesk.core.engine.request import AnswerRequest, keyword_request, passages_of
from ragdesk.core.options import DEFAULT_OPTIONS
from ragdesk.core.progress import CancelToken
from ragdesk.core.retrieval.scores import doc_log_probs, retrieved_docs
from ragdesk.core.types import Answer, Hit

if TYPE_CHECKING:
    import torch


@dataclass
class Candidate:
    tokens: list[int]
    # raw log p(y_t | x, z, y_<t) [T] per passage that produced it (fast decoding)
    produced_by: dict[int, torch.Tensor]


def _scored(tokens: Sequence[int], pad: int, skip_first: bool) -> torch.Tensor:
    import torch

    mask = torch.tensor([t != pad for t in tokens], dtype=torch.bool)
    if skip_first and len(tokens) > 0:
        mask[0] = False
    return mask


def _is_bos(tokens: Sequence[int], bos: int | None) -> bool:
    return bos is not None and len(tokens) > 0 and tokens[0] == bos


class _StepLogProbs:
    """The current step's log-probs [rows, V]; a search's extras are the chosen tokens'."""

    def __init__(self) -> None:
        self.now: torch.Tensor | None = None

    def __call__(self, rows: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        assert self.now is not None
        return self.now[rows.reshape(-1), tokens.reshape(-1)].view(*rows.shape, 1)


def _search(ctx: PassageContext, generator: Generator, opts: AnswerRequest,
            cancel: CancelToken | None, on_step: object = None,
            constraint: Sequence[SpanConstraint] = ()
            ) -> tuple[list[list[Hypothesis]], bool, GreedySearch | BeamSearch]:
    """Per-passage search in one batch; returns each passage's hypotheses (best first)."""
    if opts.num_beams == 1:
        return _greedy(ctx, generator, opts, cancel, on_step, constraint)
    return _beam(ctx, generator, opts, cancel, constraint)


def _greedy(ctx: PassageContext, generator: Generator, opts: AnswerRequest,
            cancel: CancelToken | None, on_step: object,
            constraint: Sequence[SpanConstraint]
            ) -> tuple[list[list[Hypothesis]], bool, GreedySearch]:
    import torch

    k, lp = ctx.n_docs, _StepLogProbs()
    greedy = GreedySearch(k, generator.settings, max_new_tokens=opts.max_new_tokens,
                          min_new_tokens=opts.min_new_tokens, extras_dim=1,
                          extra_processors=constraint)
    logits = ctx.first_logits
    rows = None
    cancelled = False
    while True:
        lp.now = torch.log_softmax(logits, dim=-1)
        tokens = greedy.step(logits, lp)
        if callable(on_step):
            on_step(greedy)
        if greedy.done:
            break
        if cancel is not None and cancel.cancelled:
            cancelled = True
            break
        if rows is None:
            rows = ctx.rows(torch.arange(k), opts.max_new_tokens)
        logits = rows.step(tokens)
    return [[h] for h in greedy.hypotheses()], cancelled, greedy


def _beam(ctx: PassageContext, generator: Generator, opts: AnswerRequest,
          cancel: CancelToken | None, constraint: Sequence[SpanConstraint]
          ) -> tuple[list[list[Hypothesis]], bool, BeamSearch]:
    import torch

    k, nb, lp = ctx.n_docs, opts.num_beams, _StepLogProbs()
    beam = BeamSearch(k, nb, generator.settings, max_new_tokens=opts.max_new_tokens,
                      min_new_tokens=opts.min_new_tokens, extras_dim=1,
                      extra_processors=constraint)
    logits = ctx.first_logits.repeat_interleave(nb, dim=0)
    beam_rows = None
    while True:
        lp.now = torch.log_softmax(logits, dim=-1)
        order = beam.step(lp.now, lp)
        if beam.done:
            break
        if cancel is not None and cancel.cancelled:
            return [beam.running(z) for z in range(k)], True, beam
        if beam_rows is None:
            beam_rows = ctx.rows(torch.arange(k).repeat_interleave(nb), opts.max_new_tokens)
        beam_rows.reorder(order)
        last = beam.running_sequences[:, :, beam.cur_len - 1].reshape(-1)
        logits = beam_rows.step(last)
    return [beam.finished(z) for z in range(k)], False, beam


def _union(per_passage: list[list[Hypothesis]]) -> list[Candidate]:
    """Distinct hypotheses in the order transformers deduplicates them (passage, then rank)."""
    seen: dict[tuple[int, ...], Candidate] = {}
    for z, hyps in enumerate(per_passage):
        for h in hyps:
            key = tuple(h.tokens)
            cand = seen.get(key)
            if cand is None:
                cand = seen[key] = Candidate(list(h.tokens), {})
            cand.produced_by.setdefault(z, h.extras[:, 0])
    return list(seen.values())


class _GreedyStreamer:
    """Fast greedy: emit the prefix shared by every hypothesis that can still win."""

    def __init__(self, generator: Generator, doc_lp: torch.Tensor,
                 emitter: TokenEmitter) -> None:
        self.generator = generator
        self.doc_lp = doc_lp
        self.emitter = emitter

    def __call__(self, greedy: GreedySearch) -> None:
        import torch

        if greedy.done:
            return
        pad = self.generator.settings.pad_token_id
        hyps = greedy.hypotheses()
        running = [bool(u) for u in greedy.unfinished.tolist()]
        finished: dict[tuple[int, ...], list[float]] = {}
        groups: dict[tuple[int, ...], list[float]] = {}
        for z, h in enumerate(hyps):
            lp = h.extras[:, 0]
            with_first = float(lp[_scored(h.tokens, pad, False)].sum())
            without_first = float(lp[_scored(h.tokens, pad, True)].sum())
            if running[z]:  # upper bound: it can only lose probability from here
                groups.setdefault(tuple(h.tokens), []).append(
                    float(self.doc_lp[z]) + max(with_first, without_first))
            else:  # lower bound of its final score
                finished.setdefault(tuple(h.tokens), []).append(
                    float(self.doc_lp[z]) + min(with_first, without_first))

        def lse(xs: list[float]) -> float:
            return float(torch.logsumexp(torch.tensor(xs), dim=0))

        contenders: list[list[int]] = []
        best = max((lse(v) for v in finished.values()), default=float("-inf"))
        for toks, v in finished.items():
            if lse(v) >= best:
                contenders.append(list(toks))
        for toks, v in groups.items():
            if lse(v) >= best:
                contenders.append(list(toks))
        prefix = common_prefix(contenders)
        if len(prefix) > self.emitter.consumed:
            self.emitter.emit(prefix, _fast_prefix_posteriors(
                prefix, [[h] for h in hyps], self.doc_lp, pad,
                self.generator.settings.bos_token_id))


def _fast_prefix_posteriors(tokens: list[int], per_passage: list[list[Hypothesis]],
                            doc_lp: torch.Tensor, pad: int, bos: int | None) -> torch.Tensor:
    """Running posterior over the passages that produced each prefix of ``tokens``."""
    import torch

    t, k = len(tokens), len(per_passage)
    token_lp = torch.full((t, k), float("-inf"))
    for z, hyps in enumerate(per_passage):
        best_len = 0
        for h in hyps:
            n = 0
            while n < min(t, len(h.tokens)) and h.tokens[n] == tokens[n]:
                n += 1
            if n > best_len:
                best_len = n
                token_lp[:n, z] = h.extras[:n, 0]
    scored = _scored(tokens, pad, _is_bos(tokens, bos))
    # a passage that produced the prefix up to i but not token i+1 is out from i+1 on
    cum_out = torch.isinf(token_lp).cumsum(dim=0) > 0
    lp = torch.where(cum_out, torch.full_like(token_lp, float("-inf")),
                     torch.where(scored[:, None], token_lp, torch.zeros_like(token_lp)))
    cum = doc_lp[None, :] + lp.cumsum(dim=0)
    return torch.softmax(cum, dim=-1)


def rag_sequence_generate(
    generator: Generator,
    question: str,
    docs: Sequence[Hit],
    *,
    decoding: str = DEFAULT_OPTIONS.decoding,
    num_beams: int = DEFAULT_OPTIONS.num_beams,
    max_new_tokens: int = DEFAULT_OPTIONS.max_new_tokens,
    min_new_tokens: int = DEFAULT_OPTIONS.min_new_tokens,
    on_token: TokenCallback | None = None,
    cancel: CancelToken | None = None,
    snapshot: str | None = None,
    style: str = DEFAULT_OPTIONS.style,
    grounded: bool = False,
    temperature: float = 1.0,
) -> Answer:
    """Answer ``question`` from the retrieved ``docs`` (rank order, exact scores); options as
    in :func:`ragdesk.core.engine.rag_token.rag_token_generate`. The engine calls
    :func:`rag_sequence` with its checked request."""
    req = keyword_request(generator, question, "sequence", decoding=decoding,
                          num_beams=num_beams, max_new_tokens=max_new_tokens,
                          min_new_tokens=min_new_tokens, style=style, grounded=grounded,
                          temperature=temperature, snapshot=snapshot)
    return rag_sequence(generator, req, docs, on_token=on_token, cancel=cancel)


def rag_sequence(generator: Generator, req: AnswerRequest, docs: Sequence[Hit], *,
                 on_token: TokenCallback | None = None,
                 cancel: CancelToken | None = None) -> Answer:
    """RAG-Sequence's answer to the checked request from ``docs`` (rank order, exact
    scores)."""
    import torch

    passages = passages_of(docs)
    t0 = time.perf_counter()
    doc_lp = doc_log_probs(docs, req.temperature)
    ctx = generator.prepare(req.question, passages, req.style)
    constraint = span_processors(generator, passages, req.grounded, req.question)
    t_enc = time.perf_counter()
    emitter = TokenEmitter(generator, on_token)
    pad = generator.settings.pad_token_id
    bos = generator.settings.bos_token_id
    decoding = req.decoding
    streamer = (_GreedyStreamer(generator, doc_lp, emitter)
                if decoding == "fast" and req.num_beams == 1 else None)

    with torch.inference_mode():
        per_passage, cancelled, _ = _search(ctx, generator, req, cancel, streamer,
                                            constraint)
        t_dec = time.perf_counter()
        cands = _union(per_passage)
        rescore = decoding == "thorough" and not cancelled
        scores, token_lp, stopped = _score(ctx, cands, doc_lp, rescore, pad, bos, cancel)
        cancelled = cancelled or stopped
        best_i = int(torch.topk(scores, 1)[1][0])
    t_score = time.perf_counter()
    best = cands[best_i]
    emitter.emit(best.tokens, _posteriors(best, best_i, token_lp, per_passage, doc_lp, pad, bos))
    if not cancelled:
        end_at_a_whole_span(emitter, constraint)
    timings = {"encode_s": t_enc - t0, "decode_s": t_dec - t_enc,
               **({"rescore_s": t_score - t_dec} if token_lp is not None else {})}
    return Answer(
        question=req.question, text=emitter.text(), token_ids=list(emitter.ids),
        tokens=list(emitter.tokens), docs=retrieved_docs(docs, doc_lp, req.snapshot),
        logprob=float(scores[best_i]), mode="sequence", decoding=decoding,
        snapshot=req.snapshot, timings=timings, cancelled=cancelled,
        temperature=req.temperature, style=req.style, grounded=req.grounded)


def _posteriors(best: Candidate, best_i: int, token_lp: torch.Tensor | None,
                per_passage: list[list[Hypothesis]], doc_lp: torch.Tensor, pad: int,
                bos: int | None) -> torch.Tensor:
    """The running p(z | x, y_<=i) of the chosen answer: from the rescored token log-probs
    (thorough), else from what each passage's own search scored (fast)."""
    if token_lp is None:
        return _fast_prefix_posteriors(best.tokens, per_passage, doc_lp, pad, bos)
    lp = token_lp[:, best_i, :len(best.tokens)].T  # [T, K]
    return running_posteriors(doc_lp, lp, _scored(best.tokens, pad, _is_bos(best.tokens, bos)))


def _score(ctx: PassageContext, cands: list[Candidate], doc_lp: torch.Tensor,
           rescore: bool, pad: int, bos: int | None, cancel: CancelToken | None
           ) -> tuple[torch.Tensor, torch.Tensor | None, bool]:
    """log p(y|x) of every candidate: thorough (``rescore``: every candidate under every
    passage) or fast. Returns (scores [N], the rescored token log-probs or None, stopped)."""
    skip_first = all(_is_bos(c.tokens, bos) for c in cands)
    token_lp, stopped = _rescore(ctx, cands, pad, cancel) if rescore else (None, False)
    if token_lp is not None:
        return _thorough_scores(cands, token_lp, doc_lp, pad, skip_first), token_lp, stopped
    return _fast_scores(cands, doc_lp, pad, skip_first), None, stopped


def _rescore(ctx: PassageContext, cands: list[Candidate], pad: int,
             cancel: CancelToken | None) -> tuple[torch.Tensor | None, bool]:
    """log p(y_t | x, z, y_<t) [K, N, T] for every candidate under every passage: one
    teacher-forced decoder pass per passage, reusing its encoder outputs (the lean BART
    decoder feeds the candidates as one prefix tree, other generators as a padded batch)."""
    import torch

    n = len(cands)
    t = max(len(c.tokens) for c in cands)
    out = torch.empty((ctx.n_docs, n, t), dtype=torch.float32)
    score_tree = getattr(ctx, "score_tree", None)
    if score_tree is not None:
        tree = PrefixTree.build([c.tokens for c in cands])
        for z in range(ctx.n_docs):
            if cancel is not None and cancel.cancelled:
                return None, True
            out[z] = tree.per_hypothesis(score_tree(z, tree), t, 0.0)
        return out, False
    hyps = torch.full((n, t), pad, dtype=torch.long)
    for i, c in enumerate(cands):
        hyps[i, :len(c.tokens)] = torch.tensor(c.tokens, dtype=torch.long)
    for z in range(ctx.n_docs):
        if cancel is not None and cancel.cancelled:
            return None, True
        out[z] = ctx.score(z, hyps)
    return out, False


def _thorough_scores(cands: list[Candidate], token_lp: torch.Tensor, doc_lp: torch.Tensor,
                     pad: int, skip_first: bool) -> torch.Tensor:
    import torch

    n, t = token_lp.shape[1], token_lp.shape[2]
    mask = torch.zeros((n, t), dtype=torch.bool)
    for i, c in enumerate(cands):
        mask[i, :len(c.tokens)] = _scored(c.tokens, pad, skip_first)
    ll = torch.where(mask[None], token_lp, torch.zeros_like(token_lp)).sum(dim=2)  # [K, N]
    return torch.logsumexp(ll + doc_lp[:, None], dim=0)


def _fast_scores(cands: list[Candidate], doc_lp: torch.Tensor, pad: int,
                 skip_first: bool) -> torch.Tensor:
    import torch

    scores = torch.empty(len(cands))
    for i, c in enumerate(cands):
        mask = _scored(c.tokens, pad, skip_first)
        parts = torch.stack([doc_lp[z] + lp[mask].sum() for z, lp in c.produced_by.items()])
        scores[i] = torch.logsumexp(parts, dim=0)
    return scores
