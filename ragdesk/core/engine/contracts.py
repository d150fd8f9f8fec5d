"""What a decoder backend is: the contracts between the decoding loops and the backends.

A generator (:mod:`.generators`: prompting and tokenizing) turns (question, K passages) into
K token-id inputs and hands them to one backend, which encodes them once into a
:class:`PassageContext`: the first answer token's logits under every passage, and
:class:`DecoderRows` (any number of rows, each tied to one passage, with its own cache) that
RAG-Token, RAG-Sequence and reading together step one token at a time. Rescoring a
hypothesis under a passage reuses the context: nothing is encoded twice.

Backends, one module each: :mod:`.hf_seq2seq` and :mod:`.hf_causal` (transformers' own
forward, any model), :mod:`.bart_decoder` (lean BART), :mod:`.gemma_decoder` and
:mod:`.qwen2_decoder` (lean decoder-only models on :mod:`.causal_decoder`'s machinery). A
backend reads of its generator only what :class:`GeneratorModel` names, so no backend
imports the generators.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch

    from ragdesk.core.engine.decoding import GenerationSettings


@dataclass(frozen=True)
class PassageText:
    title: str
    text: str


class GeneratorModel(Protocol):
    """The part of a generator that its backend reads: the model, where it runs, its
    generation settings and its name (for messages)."""

    @property
    def model(self) -> Any: ...

    @property
    def device(self) -> torch.device: ...

    @property
    def settings(self) -> GenerationSettings: ...

    @property
    def name(self) -> str: ...


class DecoderRows(ABC):
    """Running decoder rows, each conditioned on one passage, with their caches."""

    passage_of_row: torch.Tensor

    @abstractmethod
    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        """Feed one token per row; returns float32 next-token logits [rows, V]."""

    @abstractmethod
    def reorder(self, order: torch.Tensor) -> None:
        """Row i continues previous row ``order[i]`` (beam search)."""


class PassageContext(ABC):
    """One question with its K passages, encoded once."""

    n_docs: int
    first_logits: torch.Tensor  # float32 [K, V]: logits of the first answer token
    input_ids: list[list[int]]  # the generator inputs (seq2seq) or prompts (causal LM)
    gen: GeneratorModel

    @abstractmethod
    def rows(self, passage_of_row: torch.Tensor, max_steps: int = 64) -> DecoderRows:
        """Decoder rows after the first step; row r is conditioned on passage_of_row[r].
        ``max_steps``: how many tokens will be fed at most (caches are sized for it)."""

    @abstractmethod
    def next_logits(self, passage: int, tokens: torch.Tensor) -> torch.Tensor:
        """Logits [N, T, V] of the token after each of ``tokens`` [N, T] (answer tokens
        after the first, on the generator's device), every row under ``passage``."""

    def score(self, passage: int, hyps: torch.Tensor) -> torch.Tensor:
        """Teacher-forced log-probs [N, T] of ``hyps`` [N, T] (tokens after the start) under
        one passage, in one decoder pass that reuses the encoded passage."""
        import torch

        n, t = hyps.shape
        first = torch.log_softmax(self.first_logits[passage], dim=-1)
        out_lp = torch.empty((n, t), dtype=torch.float32)
        out_lp[:, 0] = first[hyps[:, 0]]
        if t > 1:
            hyps_dev = hyps.to(self.gen.device)
            with torch.inference_mode():
                logits = self.next_logits(passage, hyps_dev[:, :-1])
                lp = torch.log_softmax(logits.to(torch.float32), dim=-1)
                out_lp[:, 1:] = lp.gather(-1, hyps_dev[:, 1:, None])[..., 0].cpu()
        return out_lp


__all__ = ["DecoderRows", "GeneratorModel", "PassageContext", "PassageText"]
