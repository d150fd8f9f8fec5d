"""The RAG engine: generators, RAG-Token and RAG-Sequence decoding with per-token sources,
and the :class:`Engine` that ties them to a snapshot's retrieval. Engines are built by
:mod:`ragdesk.core.session`.

Importing this package loads no ML library; building a generator or answering does.
"""

from __future__ import annotations

from ragdesk.core.engine.api import Engine, SnapshotSource
from ragdesk.core.engine.generators import CausalLMGenerator, Generator, Seq2SeqGenerator
from ragdesk.core.engine.rag_sequence import rag_sequence_generate
from ragdesk.core.engine.rag_token import rag_token_generate

__all__ = [
    "CausalLMGenerator",
    "Engine",
    "Generator",
    "Seq2SeqGenerator",
    "SnapshotSource",
    "rag_sequence_generate",
    "rag_token_generate",
]
