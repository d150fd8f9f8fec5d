"""RAG-Token decoding: ``p(y|x) = Π_i Σ_z p(z|x) p(y_i | x, z, y_<i)``.

Every step runs the decoder once over ``beams × K`` rows (each with its own KV cache, the
passages encoded once), marginalizes the next-token distribution over the K passages and
feeds the chosen token to all K rows of its beam. Greedy and beam search pick the same tokens
as ``RagTokenForGeneration.generate``; the per-passage joint scores of each chosen token ride
along through the beams and give its sources ``p(z | x, y_i, y_<i)``.

Streaming: greedy emits each token as it is chosen; beam search emits the prefix that all
sequences still able to win share, so tokens appear as soon as no beam can change them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ragdesk.core.engine.attribution import TokenCallback, TokenEmitter, token_posteriors
from ragdesk.core.engine.contracts import PassageContext, PassageText
from ragdesk.core.engine.decoding import BeamSearch, GreedySearch, Hypothesis, common_prefix
from ragdesk.core.engine.generators import Generator
from ragdesk.core.engine.grounding import SpanConstraint, end_at_a_whole_span, span_processors
from ragdesk.core.engine.request import AnswerRequest, keyword_request, passages_of
from ragdesk.core.options import DEFAULT_OPTIONS, Style
from ragdesk.core.progress import CancelToken
from ragdesk.core.retrieval.scores import doc_log_probs, retrieved_docs
from ragdesk.core.types import Answer, Hit

if TYPE_CHECKING:
    import torch


class Marginal:
    """Per-step marginalization over the K passage rows of each beam."""

    def __init__(self, doc_lp: torch.Tensor) -> None:
        self.doc_lp = doc_lp
        self.k = int(doc_lp.shape[0])
        self.joint: torch.Tensor | None = None  # [beams, K, V]

    def __call__(self, logits: torch.Tensor) -> torch.Tensor:
        """logits [beams*K, V] -> marginal log-probs [beams, V] (transformers' marginalize)."""
        import torch

        seq_lp = torch.log_softmax(logits, dim=-1).view(-1, self.k, logits.shape[-1])
        self.joint = seq_lp + self.doc_lp[None, :, None]
        return torch.logsumexp(self.joint, dim=1)

    def extras(self, rows: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """The K joint scores of the chosen (beam, token) pairs: [B, C, K]."""
        assert self.joint is not None
        picked = self.joint[rows.reshape(-1), :, tokens.reshape(-1)]  # [B*C, K]
        return picked.view(*rows.shape, self.k)


def rag_token_generate(
    generator: Generator,
    question: str,
    docs: Sequence[Hit],
    *,
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
    """Answer ``question`` from the retrieved ``docs`` (rank order, exact scores).

    ``temperature``: τ of p(z|x) (see :mod:`ragdesk.core.posterior`); ``grounded``: the answer
    is a span of the passages (see :mod:`.grounding`). The engine calls :func:`rag_token`
    with its checked request."""
    req = keyword_request(generator, question, "token", num_beams=num_beams,
                          max_new_tokens=max_new_tokens, min_new_tokens=min_new_tokens,
                          style=style, grounded=grounded, temperature=temperature,
                          snapshot=snapshot)
    return rag_token(generator, req, docs, on_token=on_token, cancel=cancel)


def rag_token(generator: Generator, req: AnswerRequest, docs: Sequence[Hit], *,
              on_token: TokenCallback | None = None,
              cancel: CancelToken | None = None) -> Answer:
    """RAG-Token's answer to the checked request from ``docs`` (rank order, exact scores)."""
    return search_answer(generator, req, docs, cancel, mode="token", read=generator.prepare,
                         marginal=Marginal,
                         emitter=lambda _doc_lp: TokenEmitter(generator, on_token))


def search_answer(generator: Generator, req: AnswerRequest, docs: Sequence[Hit],
                  cancel: CancelToken | None, *, mode: str,
                  read: Callable[[str, list[PassageText], Style], PassageContext],
                  marginal: Callable[[torch.Tensor], Marginal],
                  emitter: Callable[[torch.Tensor], TokenEmitter]) -> Answer:
    """Greedy or beam search over marginal next-token distributions (RAG-Token's, and
    reading together's over one row): ``read`` encodes the passages, ``marginal`` and
    ``emitter`` are made from log p(z|x)."""
    import torch

    passages = passages_of(docs)
    t0 = time.perf_counter()
    doc_lp = doc_log_probs(docs, req.temperature)
    ctx = read(req.question, passages, req.style)
    constraint = span_processors(generator, passages, req.grounded, req.question)
    t_enc = time.perf_counter()
    search = _Search(ctx, generator, req, marginal(doc_lp), constraint, emitter(doc_lp),
                     cancel)
    with torch.inference_mode():
        best, cancelled = search.greedy() if req.num_beams == 1 else search.beam()
    t_dec = time.perf_counter()
    out = search.emitter
    if not cancelled:
        out.emit(best.tokens, token_posteriors(best.extras))
        end_at_a_whole_span(out, constraint)
    return Answer(
        question=req.question, text=out.text(), token_ids=list(out.ids),
        tokens=list(out.tokens), docs=retrieved_docs(docs, doc_lp, req.snapshot),
        logprob=_logprob(best, generator.settings.pad_token_id), mode=mode, decoding=None,
        snapshot=req.snapshot, temperature=req.temperature, style=req.style,
        grounded=req.grounded, timings={"encode_s": t_enc - t0, "decode_s": t_dec - t_enc},
        cancelled=cancelled)


class _Search:
    """One RAG-Token decoding: greedy or beam search over the marginal next-token
    distribution, K decoder rows (one per passage) per hypothesis."""

    def __init__(self, ctx: PassageContext, generator: Generator, opts: AnswerRequest,
                 marg: Marginal, constraint: Sequence[SpanConstraint], emitter: TokenEmitter,
                 cancel: CancelToken | None) -> None:
        self.ctx, self.opts, self.marg = ctx, opts, marg
        self.settings = generator.settings
        self.constraint = constraint
        self.emitter = emitter
        self.cancel = cancel
        self.k = marg.k

    def _stop_requested(self) -> bool:
        return self.cancel is not None and self.cancel.cancelled

    def greedy(self) -> tuple[Hypothesis, bool]:
        import torch

        k, marg, opts = self.k, self.marg, self.opts
        greedy = GreedySearch(1, self.settings, max_new_tokens=opts.max_new_tokens,
                              min_new_tokens=opts.min_new_tokens, extras_dim=k,
                              extra_processors=self.constraint)
        logits = self.ctx.first_logits
        rows = None
        while True:
            token = greedy.step(marg(logits), marg.extras)
            hyp = greedy.hypotheses()[0]
            self.emitter.emit(hyp.tokens, token_posteriors(hyp.extras))
            if greedy.done:
                return greedy.hypotheses()[0], False
            if self._stop_requested():
                return greedy.hypotheses()[0], True
            if rows is None:
                rows = self.ctx.rows(torch.arange(k), opts.max_new_tokens)
            logits = rows.step(token.repeat_interleave(k))

    def beam(self) -> tuple[Hypothesis, bool]:
        import torch

        k, marg, opts, nb = self.k, self.marg, self.opts, self.opts.num_beams
        beam = BeamSearch(1, nb, self.settings, max_new_tokens=opts.max_new_tokens,
                          min_new_tokens=opts.min_new_tokens, extras_dim=k,
                          extra_processors=self.constraint)
        logits = self.ctx.first_logits
        beam_rows = None
        while True:
            m = marg(logits)
            if m.shape[0] == 1:  # first step: every beam starts from the same rows
                m = m.expand(nb, -1)
                assert marg.joint is not None
                marg.joint = marg.joint.expand(nb, -1, -1)
            order = beam.step(torch.log_softmax(m, dim=-1), marg.extras)
            _stream_decided(beam, self.emitter)
            if beam.done:
                return beam.finished(0, 1)[0], False
            if self._stop_requested():
                return beam.running(0)[0], True
            if beam_rows is None:
                beam_rows = self.ctx.rows(torch.arange(k).repeat(nb), opts.max_new_tokens)
            row_order = (order[:, None] * k + torch.arange(k)[None, :]).reshape(-1)
            beam_rows.reorder(row_order)
            last = beam.running_sequences[0, :, beam.cur_len - 1]
            logits = beam_rows.step(last.repeat_interleave(k))


def _stream_decided(beam: BeamSearch, emitter: TokenEmitter) -> None:
    """Emit the tokens no remaining beam can change."""
    if beam.done:
        return  # the final hypothesis is emitted by the caller
    prefix = common_prefix(beam.contenders(0))
    if len(prefix) > emitter.consumed:
        lead = beam.running(0)[0]
        emitter.emit(prefix, token_posteriors(lead.extras[:len(prefix)]))


def _logprob(hyp: Hypothesis, pad_token_id: int) -> float:
    """``Σ_i log Σ_z p(z|x) p(y_i|x,z,y_<i)``; padding-token targets do not count, as in
    transformers' ``RagTokenForGeneration.get_nll``."""
    import torch

    if not hyp.tokens:
        return 0.0
    per_token = torch.logsumexp(hyp.extras, dim=-1)
    keep = torch.tensor([t != pad_token_id for t in hyp.tokens])
    return float(per_token[keep].sum())
