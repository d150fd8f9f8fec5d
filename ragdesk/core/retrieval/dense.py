"""Dense retrieval, as DPR and the RAG paper do it: encode the question, exact inner-product
search in the snapshot's index."""

from __future__ import annotations

from ragdesk.core.retrieval.request import RetrievalRequest, encode_question
from ragdesk.core.types import Hit


def dense_retrieve(req: RetrievalRequest) -> list[Hit]:
    q = encode_question(req)
    return req.snapshot.search(q, req.n_docs)[0]
