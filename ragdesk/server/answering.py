"""What runs on the engine thread for one request: retrieval, citations, the answer."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragdesk.core.documents import locate
from ragdesk.core.documents.citations import document_root
from ragdesk.core.options import DEFAULT_OPTIONS, AnswerOptions
from ragdesk.core.progress import CancelToken
from ragdesk.core.session import retrieve_from_ready
from ragdesk.core.types import Hit
from ragdesk.server.shapes import AskRequest, citation

if TYPE_CHECKING:
    from ragdesk.core.engine.api import Engine
    from ragdesk.core.engine.attribution import TokenCallback
    from ragdesk.core.types import Answer, RetrievedDoc


def retrieve_with_citations(engine: Engine, question: str, n_docs: int, snapshot: str | None,
                            retriever: str) -> tuple[list[RetrievedDoc], list[dict[str, object]]]:
    """The passages for ``question`` and their citations (file, page, heading for a folder
    snapshot), in rank order."""
    index = engine.snapshot_index(snapshot)  # taken once: a switch meanwhile does not matter
    docs, _plan = retrieve_from_ready(engine, question, n_docs, index, retriever)
    folder = getattr(index, "folder", None)
    locations = locate(index, [d.id for d in docs])
    root: Path | None = document_root(Path(folder)) if locations and folder else None
    cites = [citation(i, d, locations.get(d.id), root) for i, d in enumerate(docs, 1)]
    return docs, cites


def answer(engine: Engine, req: AskRequest, docs: list[RetrievedDoc],
           on_token: TokenCallback | None = None,
           cancel: CancelToken | None = None) -> Answer:
    hits = [Hit(d.id, d.title, d.text, d.score) for d in docs]
    return engine.ask_from_docs(req.question, hits, answer_options(req),
                                snapshot_name=docs[0].snapshot if docs else None,
                                on_token=on_token, cancel=cancel)


def answer_options(req: AskRequest) -> AnswerOptions:
    """The request's answer options (the engine checks them once, as for every front end);
    what the request leaves out keeps the one set of defaults."""
    given: dict[str, Any] = {
        "mode": req.mode, "decoding": req.decoding, "n_docs": req.n_docs,
        "num_beams": req.num_beams, "max_new_tokens": req.max_new_tokens,
        "min_new_tokens": req.min_new_tokens,
        "retriever": req.retriever, "style": req.style, "grounded": req.grounded,
        "temperature": req.temperature, "abstain": req.abstain}
    return dataclasses.replace(DEFAULT_OPTIONS, **given)


def ask(engine: Engine, req: AskRequest, on_token: TokenCallback | None = None,
        cancel: CancelToken | None = None,
        on_citations: Callable[[list[dict[str, object]]], None] | None = None,
        ) -> tuple[Answer, list[dict[str, object]]]:
    """Retrieve, report the citations (a stream sends them before the first token), answer.

    A request whose client left while it waited in the queue is dropped here, unanswered."""
    if cancel is not None:
        cancel.raise_if_cancelled()
    docs, cites = retrieve_with_citations(engine, req.question, req.n_docs, req.snapshot,
                                          req.retriever)
    if on_citations is not None:
        on_citations(cites)
    return answer(engine, req, docs, on_token, cancel), cites
