"""The answer read once more after its passage: the reader's state for the confidence model's
probe, and how likely the plain model finds the answer there.

The answer's tokens are read again (teacher-forced) after the prompt they were quoted from:
the row of the passage the answer is attributed to, or the one prompt that holds every
passage when they were read together. Kept: the residual stream after the generator's middle
layer, averaged over the answer's tokens (middle layers are where linear probes find most of
what a model "knows" about a statement's truth, see :mod:`ragdesk.core.confidence.probe`),
and the answer's log-probability under the model with no decoding constraint. Grounded
decoding lets only tokens that continue a span of the passages through and renormalizes over
them, so an answer the reader finds unlikely can read as likely there; read plainly, it does
not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ragdesk.core.engine.contracts import PassageText
from ragdesk.core.engine.generators import CausalLMGenerator, Generator
from ragdesk.core.options import style_or_default
from ragdesk.core.types import ReadingState


def middle_layer(n_layers: int) -> int:
    return n_layers // 2


@dataclass(frozen=True)
class AnswerReading:
    state: ReadingState
    logprob: float  # log p(answer | the prompt), summed over its tokens


def read_again(generator: Generator, question: str, passages: Sequence[PassageText],
               source: int | None, text: str, mode: str, style: str | None,
               layer: int | None = None) -> AnswerReading | None:
    """``text`` read after the prompt of ``passages[source]`` (mode "together": after the
    prompt of all of them), as :meth:`CausalLMGenerator.prompts` builds them for answering;
    its state after ``layer`` (default: the middle one). None where there is nothing to read
    (no text, no source) or no lean decoder to read it."""
    if not text.strip() or not isinstance(generator, CausalLMGenerator):
        return None
    decoder = generator.lean_decoder
    if decoder is None:
        return None
    depth = middle_layer(len(decoder.layers)) if layer is None else layer
    if not 0 <= depth < len(decoder.layers):
        return None
    answer = generator.tokenizer(generator.inert.text(text),
                                 add_special_tokens=False)["input_ids"]
    if not answer:
        return None
    import torch

    chosen = style_or_default(style)
    if mode == "together":
        prompt = generator.prompts(question, passages, chosen, together=True)[0]
    elif source is not None and 0 <= source < len(passages):
        prompt = generator.prompts(question, passages, chosen)[source]
    else:
        return None
    with torch.inference_mode():
        h, lp = decoder.read_answer(prompt, answer, depth, generator.device)
        values = h.float().mean(dim=0).cpu().tolist()
        logprob = float(lp.sum())
    return AnswerReading(ReadingState(depth, values), logprob)
