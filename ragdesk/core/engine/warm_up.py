"""A made-up question answered once after the models load, so that the user's first question
is not slower than the ones after it.

A process's first answer pays for what later answers find ready: the keys and values of the
prompt opening every question shares (instructions and worked examples, which the lean decoder
keeps: see ``LeanCausalDecoder._reuse_opening``), the opening of the prompt read without
passages (the reader's answer from memory), the kernels' first calls and the weight copies
read from disk at first touch. A front end that loads the models before anyone asks (the GUI's
preload, the server) answers this question first, from short made-up passages, through the
same path as a real answer, and drops the answer.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ragdesk.core.options import DEFAULT_OPTIONS, AnswerOptions
from ragdesk.core.types import Hit

if TYPE_CHECKING:
    from ragdesk.core.progress import CancelToken

log = logging.getLogger(__name__)


class Answerer(Protocol):
    """What the warm-up asks of the engine (``ragdesk.core.engine.api.Engine``)."""

    def snapshot_index(self) -> Any: ...

    def retrieve(self, question: str, n_docs: int, snapshot: Any, retriever: str) -> Any: ...

    def ask_from_docs(self, question: str, docs: Sequence[Hit], options: AnswerOptions, *,
                      snapshot_name: str | None = None,
                      cancel: CancelToken | None = None) -> Any: ...


WARM_UP_QUESTION = "when was the lighthouse on the island built"


def made_up_passages(k: int) -> list[Hit]:
    """``k`` short passages, each holding an answer of the question's kind (a year), so that
    grounded decoding finds a span in them as it would in real ones."""
    return [Hit(i, f"Lighthouse {i + 1}",
                f"The lighthouse on island {i + 1} was built in {1850 + 7 * i} of local stone.",
                1.0 - 0.01 * i) for i in range(max(1, k))]


def warm_up(engine: Answerer, options: AnswerOptions = DEFAULT_OPTIONS, *,
            cancel: CancelToken | None = None) -> float:
    """Retrieve for and answer :data:`WARM_UP_QUESTION` as ``options`` say (mode and style
    decide the prompts' opening); returns the seconds spent. Best effort: a step that fails is
    logged and left for the first real question to pay for, and to report."""
    t0 = time.perf_counter()
    snapshot: str | None = None
    try:
        index = engine.snapshot_index()
        snapshot = index.name
        engine.retrieve(WARM_UP_QUESTION, options.n_docs, index, options.retriever)
    except Exception as exc:  # no snapshot yet, or one still being indexed
        log.info("warm-up: no retrieval (%s)", exc)
    try:
        engine.ask_from_docs(WARM_UP_QUESTION, made_up_passages(options.n_docs), options,
                             snapshot_name=snapshot, cancel=cancel)
    except Exception:
        log.warning("warm-up: the made-up question was not answered", exc_info=True)
    spent = time.perf_counter() - t0
    log.info("warm-up: %.2f s", spent)
    return spent
