"""Greedy and beam search over rows of next-token scores, step by step.

Both searches are driven from outside: the caller computes the next-token scores of every
running row (one generator row, or K passage rows marginalized into one), hands them to
``step`` and applies the returned cache order. That is what lets RAG-Token marginalize inside
each step and RAG-Sequence run one beam search per passage in a single batch.

The arithmetic follows transformers' ``GenerationMixin._sample`` and ``_beam_search``
(transformers 5, Apache-2.0) operation by operation: the same top-k over ``num_beams *
vocab`` candidates, the same -1e9 masking, length penalty and early-stopping heuristic, so
that ragdesk picks exactly the tokens that ``RagTokenForGeneration.generate`` and
``RagSequenceForGeneration.generate`` pick. Each kept token also carries a small vector of
"extras" (the raw log-probability of the token, or its K joint scores for the per-token
sources), gathered through the beams like the tokens themselves, so that attribution needs no
second pass.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ragdesk.core.engine.score_processors import (
    ForcedFirst,
    ForcedLast,
    MinLength,
    NoRepeatNGram,
    ProcessorList,
    RepetitionPenalty,
    ScoreProcessor,
)

if TYPE_CHECKING:
    import torch

# Given flat row indices [B, C] (into the rows that produced the scores) and the tokens
# chosen [B, C], returns the extras to store for those tokens: [B, C, E].
ExtrasFn = Callable[["torch.Tensor", "torch.Tensor"], "torch.Tensor"]


@dataclass(frozen=True)
class GenerationSettings:
    """Token ids and search options, read from the generator's generation config."""

    start_token_id: int  # first token of every hypothesis (BART: decoder_start_token_id)
    eos_token_ids: tuple[int, ...]
    pad_token_id: int
    bos_token_id: int | None = None
    forced_bos_token_id: int | None = None
    forced_eos_token_ids: tuple[int, ...] = ()
    no_repeat_ngram_size: int = 0
    repetition_penalty: float = 1.0
    min_length: int = 0
    length_penalty: float = 1.0
    early_stopping: bool | str = False

    @classmethod
    def from_generation_config(cls, gc: Any, *, start_token_id: int | None,
                               fallback_pad: int | None = None) -> GenerationSettings:
        def ids(value: Any) -> tuple[int, ...]:
            if value is None:
                return ()
            if isinstance(value, (list, tuple)):
                return tuple(int(v) for v in value)
            return (int(value),)

        eos = ids(getattr(gc, "eos_token_id", None))
        pad = getattr(gc, "pad_token_id", None)
        if pad is None:
            pad = fallback_pad if fallback_pad is not None else (eos[0] if eos else 0)
        bos = getattr(gc, "bos_token_id", None)
        start = start_token_id
        if start is None:
            start = bos if bos is not None else (eos[0] if eos else int(pad))
        return cls(
            start_token_id=int(start),
            eos_token_ids=eos,
            pad_token_id=int(pad),
            bos_token_id=None if bos is None else int(bos),
            forced_bos_token_id=getattr(gc, "forced_bos_token_id", None),
            forced_eos_token_ids=ids(getattr(gc, "forced_eos_token_id", None)),
            no_repeat_ngram_size=int(getattr(gc, "no_repeat_ngram_size", 0) or 0),
            repetition_penalty=float(getattr(gc, "repetition_penalty", 1.0) or 1.0),
            min_length=int(getattr(gc, "min_length", 0) or 0),
            length_penalty=float(getattr(gc, "length_penalty", 1.0)
                                 if getattr(gc, "length_penalty", None) is not None else 1.0),
            early_stopping=getattr(gc, "early_stopping", False) or False,
        )


def build_processors(settings: GenerationSettings, *, max_length: int, min_new_tokens: int,
                     prompt_length: int = 1) -> ProcessorList:
    """The logits processors ``generate`` would build from these settings, in its order.

    ``max_length`` counts the start token, as transformers does for encoder-decoders.
    """
    eos = list(settings.eos_token_ids)
    procs = ProcessorList()
    if settings.repetition_penalty != 1.0:
        procs.append(RepetitionPenalty(settings.repetition_penalty))
    if settings.no_repeat_ngram_size > 0:
        procs.append(NoRepeatNGram(settings.no_repeat_ngram_size))
    if eos and settings.min_length > 0:
        procs.append(MinLength(settings.min_length, eos))
    if eos and min_new_tokens > 0:
        procs.append(MinLength(min_new_tokens, eos, skip=prompt_length))
    if settings.forced_bos_token_id is not None:
        procs.append(ForcedFirst(int(settings.forced_bos_token_id)))
    if settings.forced_eos_token_ids:
        procs.append(ForcedLast(max_length, list(settings.forced_eos_token_ids)))
    return procs


def _gather_beams(tensor: torch.Tensor, beam_indices: torch.Tensor) -> torch.Tensor:
    import torch

    while beam_indices.dim() < tensor.dim():
        beam_indices = beam_indices.unsqueeze(-1)
    return torch.take_along_dim(tensor, beam_indices, dim=1)


@dataclass
class Hypothesis:
    """One finished (or, after a cancel, unfinished) sequence of one batch item."""

    tokens: list[int]  # generated tokens, without the start token, up to and including EOS
    extras: torch.Tensor  # [len(tokens), E]
    score: float  # the search's own score (length-penalized sum of processed log-probs)


class GreedySearch:
    """``_sample`` without sampling: argmax of the processed scores, rows finish on EOS."""

    def __init__(self, rows: int, settings: GenerationSettings, *, max_new_tokens: int,
                 min_new_tokens: int, extras_dim: int,
                 extra_processors: Sequence[ScoreProcessor] = ()) -> None:
        import torch

        self.settings = settings
        self.max_length = 1 + max_new_tokens
        self.processors = build_processors(settings, max_length=self.max_length,
                                           min_new_tokens=min_new_tokens)
        self.processors.extend(extra_processors)
        self.input_ids = torch.full((rows, 1), settings.start_token_id, dtype=torch.long)
        self.extras = torch.zeros((rows, 0, extras_dim))
        self.unfinished = torch.ones(rows, dtype=torch.long)
        self.lengths = torch.zeros(rows, dtype=torch.long)  # generated tokens incl. EOS
        self._eos = torch.tensor(settings.eos_token_ids or (-1,), dtype=torch.long)
        self.done = False

    @property
    def cur_len(self) -> int:
        return int(self.input_ids.shape[1])

    def step(self, scores: torch.Tensor, extras_fn: ExtrasFn) -> torch.Tensor:
        """Choose the next token of every row from float32 ``scores`` [rows, V]; returns them."""
        import torch

        processed = self.processors(self.input_ids, scores)
        next_tokens = torch.argmax(processed, dim=-1)
        was_running = self.unfinished.clone()
        if self.settings.eos_token_ids:
            pad = self.settings.pad_token_id
            next_tokens = next_tokens * self.unfinished + pad * (1 - self.unfinished)
        rows = torch.arange(next_tokens.shape[0])
        extra = extras_fn(rows[None, :], next_tokens[None, :])[0]
        self.extras = torch.cat([self.extras, extra[:, None, :]], dim=1)
        self.input_ids = torch.cat([self.input_ids, next_tokens[:, None]], dim=-1)
        self.lengths += was_running
        hit = torch.isin(next_tokens, self._eos) | (self.cur_len >= self.max_length)
        self.unfinished = self.unfinished & ~hit
        self.done = bool(self.unfinished.max() == 0)
        return next_tokens

    def hypotheses(self) -> list[Hypothesis]:
        out = []
        for r in range(self.input_ids.shape[0]):
            n = int(self.lengths[r])
            toks = self.input_ids[r, 1:1 + n].tolist()
            out.append(Hypothesis(tokens=toks, extras=self.extras[r, :n], score=0.0))
        return out

    def padded(self) -> torch.Tensor:
        """All rows as ``generate`` returns them: start token, tokens, pad after EOS."""
        return self.input_ids


class BeamSearch:
    """transformers' vectorized beam search, one call per decoding step.

    Rows are laid out batch-major: row ``b * num_beams + j`` is beam j of batch item b.
    """

    def __init__(self, batch_size: int, num_beams: int, settings: GenerationSettings, *,
                 max_new_tokens: int, min_new_tokens: int, extras_dim: int,
                 extra_processors: Sequence[ScoreProcessor] = ()) -> None:
        import torch

        self.settings = settings
        self.batch_size = batch_size
        self.num_beams = num_beams
        self.prompt_len = 1
        self.max_length = 1 + max_new_tokens
        self.cur_len = 1
        self.length_penalty = settings.length_penalty
        self.early_stopping = settings.early_stopping
        self.processors = build_processors(settings, max_length=self.max_length,
                                           min_new_tokens=min_new_tokens)
        self.processors.extend(extra_processors)
        n_eos = len(settings.eos_token_ids)
        self.beams_to_keep = max(2, 1 + n_eos) * num_beams
        self.top_num_beam_mask = torch.cat(
            (torch.ones(num_beams, dtype=torch.bool),
             torch.zeros(self.beams_to_keep - num_beams, dtype=torch.bool)))
        fill = settings.pad_token_id
        b, nb, ml = batch_size, num_beams, self.max_length
        self.running_sequences = torch.full((b, nb, ml), fill, dtype=torch.int64)
        self.running_sequences[:, :, 0] = settings.start_token_id
        self.sequences = self.running_sequences.clone()
        self.running_extras = torch.zeros((b, nb, ml, extras_dim))
        self.extras = self.running_extras.clone()
        self.running_beam_scores = torch.zeros((b, nb), dtype=torch.float)
        self.running_beam_scores[:, 1:] = -1e9
        self.beam_scores = torch.full((b, nb), -1e9, dtype=torch.float)
        self.is_sent_finished = torch.zeros((b, nb), dtype=torch.bool)
        self.early_stop_unsatisfied = torch.ones((b, 1), dtype=torch.bool)
        self.hits_stopping = torch.zeros((b, nb), dtype=torch.bool)
        self.running_beam_indices = torch.full((b, nb, ml - 1), -1, dtype=torch.int32)
        self.beam_indices = self.running_beam_indices.clone()
        self._eos = torch.tensor(settings.eos_token_ids or (-1,), dtype=torch.long)
        self.done = False

    def running_input_ids(self) -> torch.Tensor:
        """What the processors see: the running sequences so far, flattened."""
        b, nb = self.batch_size, self.num_beams
        return self.running_sequences[:, :, :self.cur_len].reshape(b * nb, self.cur_len)

    def step(self, log_probs: torch.Tensor, extras_fn: ExtrasFn) -> torch.Tensor:
        """Advance one token from normalized log-probs [batch*beams, V].

        Returns the row order [batch*beams] to apply to the decoder caches before the next
        step (row i of the next step continues row order[i] of this one).
        """
        import torch

        b, nb, cur_len = self.batch_size, self.num_beams, self.cur_len
        log_probs = self.processors(self.running_input_ids(), log_probs)
        vocab = log_probs.shape[-1]
        acc = log_probs.view(b, nb, vocab) + self.running_beam_scores[:, :, None]
        acc = acc.reshape(b, nb * vocab)

        topk_log_probs, topk_indices = torch.topk(acc, k=self.beams_to_keep)
        topk_beam = topk_indices // vocab
        topk_running_beam_indices = _gather_beams(self.running_beam_indices, topk_beam)
        topk_running_sequences = _gather_beams(self.running_sequences, topk_beam)
        topk_running_extras = _gather_beams(self.running_extras, topk_beam)
        topk_ids = topk_indices % vocab
        topk_running_sequences[:, :, cur_len] = topk_ids
        batch_offset = torch.arange(b).view(-1, 1) * nb
        flat_rows = topk_beam + batch_offset
        topk_running_beam_indices[:, :, cur_len - self.prompt_len] = flat_rows.to(torch.int32)
        topk_running_extras[:, :, cur_len] = extras_fn(flat_rows, topk_ids)

        hits = torch.isin(topk_ids, self._eos) | (cur_len + 1 >= self.max_length)
        self.hits_stopping = hits

        # the non-finished top num_beams continue
        running_lp = topk_log_probs + hits.to(torch.float32) * -1.0e9
        next_idx = torch.topk(running_lp, k=nb)[1]
        self.running_sequences = _gather_beams(topk_running_sequences, next_idx)
        self.running_beam_scores = _gather_beams(running_lp, next_idx)
        self.running_beam_indices = _gather_beams(topk_running_beam_indices, next_idx)
        self.running_extras = _gather_beams(topk_running_extras, next_idx)

        self._keep_finished(topk_log_probs, hits, topk_running_sequences, topk_running_extras,
                            topk_running_beam_indices)
        order = self.running_beam_indices[..., cur_len - self.prompt_len].reshape(b * nb)
        self.cur_len = cur_len + 1
        self._update_early_stop()
        improvement_possible = bool(torch.any(self.early_stop_unsatisfied))
        exists_open = not (bool(torch.all(self.is_sent_finished)) and self.early_stopping is True)
        valid = not bool(torch.all(self.hits_stopping))
        self.done = not (improvement_possible and exists_open and valid)
        return order.to(torch.long)

    def _keep_finished(self, topk_log_probs: torch.Tensor, hits: torch.Tensor,
                       sequences: torch.Tensor, extras: torch.Tensor,
                       beam_indices: torch.Tensor) -> None:
        """The finished ones among the top num_beams compete for the returned slots."""
        import torch

        just_finished = hits & self.top_num_beam_mask[None, :]
        fin_lp = topk_log_probs / ((self.cur_len + 1 - self.prompt_len) ** self.length_penalty)
        full = torch.all(self.is_sent_finished, dim=-1, keepdim=True) & (
            self.early_stopping is True)
        fin_lp = fin_lp + full.to(torch.float32) * -1.0e9
        fin_lp = fin_lp + (~self.early_stop_unsatisfied).to(torch.float32) * -1.0e9
        fin_lp = fin_lp + (~just_finished) * -1.0e9
        merged_scores = torch.cat((self.beam_scores, fin_lp), dim=1)
        keep = torch.topk(merged_scores, k=self.num_beams)[1]
        self.sequences = _gather_beams(torch.cat((self.sequences, sequences), 1), keep)
        self.extras = _gather_beams(torch.cat((self.extras, extras), 1), keep)
        self.beam_scores = _gather_beams(merged_scores, keep)
        self.beam_indices = _gather_beams(torch.cat((self.beam_indices, beam_indices), 1), keep)
        self.is_sent_finished = _gather_beams(
            torch.cat((self.is_sent_finished, just_finished), 1), keep)

    def _update_early_stop(self) -> None:
        import torch

        if self.early_stopping == "never" and self.length_penalty > 0.0:
            best_len = self.max_length - self.prompt_len
        else:
            best_len = self.cur_len - self.prompt_len
        best_running = self.running_beam_scores[:, :1] / (best_len ** self.length_penalty)
        worst_finished = torch.where(self.is_sent_finished,
                                     torch.min(self.beam_scores, dim=1, keepdim=True)[0], -1.0e9)
        self.early_stop_unsatisfied = self.early_stop_unsatisfied & torch.any(
            best_running > worst_finished, dim=-1, keepdim=True)

    def _lengths(self, beam_indices: torch.Tensor) -> torch.Tensor:
        return (beam_indices + 1).bool().sum(dim=-1)

    def finished(self, item: int, count: int | None = None) -> list[Hypothesis]:
        """The returned hypotheses of one batch item, best first (``num_return_sequences``)."""
        n = self.num_beams if count is None else count
        out = []
        lengths = self._lengths(self.beam_indices[item])
        for j in range(n):
            length = int(lengths[j])
            out.append(Hypothesis(
                tokens=self.sequences[item, j, 1:1 + length].tolist(),
                extras=self.extras[item, j, 1:1 + length],
                score=float(self.beam_scores[item, j])))
        return out

    def running(self, item: int) -> list[Hypothesis]:
        """The running beams of one batch item (what a cancelled search has)."""
        out = []
        n = self.cur_len - 1
        for j in range(self.num_beams):
            out.append(Hypothesis(
                tokens=self.running_sequences[item, j, 1:1 + n].tolist(),
                extras=self.running_extras[item, j, 1:1 + n],
                score=float(self.running_beam_scores[item, j])))
        return out

    def contenders(self, item: int) -> list[list[int]]:
        """Every sequence that can still become the best of this item: the running beams and
        the finished ones kept so far. Their common prefix is decided."""
        seqs = [h.tokens for h in self.running(item)]
        lengths = self._lengths(self.beam_indices[item])
        for j in range(self.num_beams):
            if bool(self.is_sent_finished[item, j]):
                seqs.append(self.sequences[item, j, 1:1 + int(lengths[j])].tolist())
        return seqs


def common_prefix(seqs: list[list[int]]) -> list[int]:
    if not seqs:
        return []
    first = seqs[0]
    n = min(len(s) for s in seqs)
    i = 0
    while i < n and all(s[i] == first[i] for s in seqs):
        i += 1
    return first[:i]
