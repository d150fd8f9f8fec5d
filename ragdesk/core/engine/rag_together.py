"""Reading the passages together: all K in one prompt, one decoder row, as chat apps do.

The paper's RAG-Token and RAG-Sequence read each passage in a row of its own and marginalize
over p(z|x); that is what gives them exact per-token attributions. An instruction-tuned
reader can instead compare the passages itself (measured on the reader pack, see
docs/benchmarks.md). Then no decoder quantity says which passage a token came from, so each
token's ``posterior`` is the retrieval prior p(z|x), and the shown source comes from the span
the answer is quoted from: the engine's judging (:func:`ragdesk.core.confidence.
assign_sources`) cites the passage that holds the answer (the likeliest one when several
do), or, for an answer no one passage holds, each token's holder.

Greedy and beam search are RAG-Token's own search (:mod:`.rag_token`) on a single row;
grounded decoding constrains the answer to a span of any of the K passages, as for the other
modes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ragdesk.core.engine.attribution import TokenCallback, TokenEmitter
from ragdesk.core.engine.generators import Generator
from ragdesk.core.engine.rag_token import Marginal, search_answer
from ragdesk.core.engine.request import AnswerRequest, keyword_request
from ragdesk.core.options import DEFAULT_OPTIONS
from ragdesk.core.progress import CancelToken
from ragdesk.core.types import Answer, Hit

if TYPE_CHECKING:
    import torch

MODE = "together"


class _PriorEmitter(TokenEmitter):
    """Tokens carry p(z|x) over the K passages (the one row's posterior is trivially 1)."""

    def __init__(self, generator: Generator, on_token: TokenCallback | None,
                 prior: torch.Tensor) -> None:
        super().__init__(generator, on_token)
        self.prior = prior

    def emit(self, token_ids: Sequence[int], posteriors: torch.Tensor) -> None:
        super().emit(token_ids, self.prior[None, :].expand(len(token_ids), -1))


def read_together_generate(
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
    """Answer ``question`` from ``docs`` (rank order, exact scores) read in one prompt.

    ``logprob`` is ``log p(y | x, all passages)``; ``temperature`` only shapes the prior the
    tokens carry (and so which holder is cited). The engine calls :func:`read_together`
    with its checked request."""
    req = keyword_request(generator, question, MODE, num_beams=num_beams,
                          max_new_tokens=max_new_tokens, min_new_tokens=min_new_tokens,
                          style=style, grounded=grounded, temperature=temperature,
                          snapshot=snapshot)
    return read_together(generator, req, docs, on_token=on_token, cancel=cancel)


def read_together(generator: Generator, req: AnswerRequest, docs: Sequence[Hit], *,
                  on_token: TokenCallback | None = None,
                  cancel: CancelToken | None = None) -> Answer:
    """The answer to the checked request from ``docs`` read in one prompt."""
    import torch

    return search_answer(
        generator, req, docs, cancel, mode=MODE, read=generator.prepare_together,
        marginal=lambda _doc_lp: Marginal(torch.zeros(1)),
        emitter=lambda doc_lp: _PriorEmitter(generator, on_token, torch.exp(doc_lp).float()))
