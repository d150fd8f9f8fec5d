"""The reader's answer from memory: the question alone, no passage in the prompt.

A snapshot holds a few thousand articles; an instruction-tuned reader has read far more in
training, and where the passages retrieved do not hold the answer it often knows it anyway
(measured on the reader pack, see docs/benchmarks.md). The engine reads this answer beside the
passages' one and keeps the one its confidence model finds likelier right; an answer kept from
memory cites no passage unless a passage retrieved holds its words (see
:func:`memory_sources`), and every front end says that it comes from the reader's training,
not from the snapshot.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ragdesk.core.confidence.features import holders
from ragdesk.core.confidence.sources import assign_sources
from ragdesk.core.engine.rag_together import _PriorEmitter
from ragdesk.core.engine.rag_token import Marginal, search_answer
from ragdesk.core.engine.request import AnswerRequest
from ragdesk.core.progress import CancelToken
from ragdesk.core.types import Answer, Hit

if TYPE_CHECKING:
    from ragdesk.core.engine.generators import Generator


def memory_answer(generator: Generator, req: AnswerRequest, docs: Sequence[Hit], *,
                  cancel: CancelToken | None = None) -> Answer:
    """Greedy (or the request's beams) answer to ``req`` with no passage in the prompt;
    ``docs`` are the passages retrieved, kept as the answer's closest passages and used to
    recase the question. Never grounded: no passage constrains it."""
    import torch

    free = dataclasses.replace(req, grounded=False)
    ans = search_answer(
        generator, free, docs, cancel, mode=req.mode,
        read=lambda question, passages, style: generator.prepare_memory(
            question, passages, style),
        marginal=lambda _doc_lp: Marginal(torch.zeros(1)),
        emitter=lambda doc_lp: _PriorEmitter(generator, None, torch.exp(doc_lp).float()))
    ans.from_memory = True
    memory_sources(ans)
    return ans


def memory_sources(ans: Answer) -> None:
    """A passage that holds the whole answer is its source; otherwise no token has one (a
    token's share of the retrieval prior is not a source of words read from no passage)."""
    if ans.text.strip() and ans.docs and any(holders(ans.text, ans.docs)):
        assign_sources(ans)
        return
    ans.tokens = [dataclasses.replace(t, posterior=[], quoted_from=None) for t in ans.tokens]
