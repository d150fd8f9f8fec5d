"""The RAG engine: the retrieval distribution, generators, RAG-Token and RAG-Sequence
decoding with per-token sources, and the :class:`Engine` that ties them to a snapshot.

Importing this package loads no ML library; building a generator or answering does.
"""

from __future__ import annotations

from ragdesk.core.engine.api import Engine, engine_from_context, load_engine
from ragdesk.core.engine.generators import CausalLMGenerator, Generator, Seq2SeqGenerator
from ragdesk.core.engine.rag_sequence import rag_sequence_generate
from ragdesk.core.engine.rag_token import rag_token_generate
from ragdesk.core.engine.retrieval import RetrievalRequest, dense_retrieve, register_retriever

__all__ = [
    "CausalLMGenerator",
    "Engine",
    "Generator",
    "RetrievalRequest",
    "Seq2SeqGenerator",
    "dense_retrieve",
    "engine_from_context",
    "load_engine",
    "rag_sequence_generate",
    "rag_token_generate",
    "register_retriever",
]
