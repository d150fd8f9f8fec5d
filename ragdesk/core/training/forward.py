"""Teacher-forced forward passes: question vectors q(x) (with gradients) and the answer's
token log-probabilities under each retrieved passage.

The generator inputs are built by the engine's own generators (``Seq2SeqGenerator.input_ids``
and ``CausalLMGenerator.input_ids``, the question recased from the passages as
``CausalLMGenerator.prepare`` does), so training sees exactly the text that answering sees.

Two ways to score the answer: :func:`answer_logprobs` runs the model's own differentiable
forward (needed when generator weights train); :func:`reader_logprobs` runs the engine's
inference path (``Generator.prepare`` and ``PassageContext.score``: for Gemma 3 the lean
decoder, each passage's prompt run once, the prompts' shared opening cached), for a frozen
generator, where only the question encoder needs gradients and those flow through p(z|x).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ragdesk.core.errors import BadInputError

if TYPE_CHECKING:
    import torch

    from ragdesk.core.encoders import TextEncoder
    from ragdesk.core.engine.generators import Generator, PassageText

MAX_ANSWER_TOKENS = 32

log = logging.getLogger(__name__)


def question_vectors(encoder: TextEncoder, questions: Sequence[str]) -> torch.Tensor:
    """q(x) for a batch of questions, float32 [B, dim], differentiable.

    The tokens (prompt included) and the pooling are ``TextEncoder``'s own (its encoding runs
    under ``torch.inference_mode`` and so cannot be used for training); a test checks that
    both give the same vectors.
    """
    device = next(encoder.model.parameters()).device
    rows = encoder.tokenize(list(questions), role="question")
    inputs = {k: v.to(device) for k, v in encoder._pad(rows).items()}
    out = encoder.model(**inputs)
    return encoder.pool(out, inputs["attention_mask"]).float()


def _causal_end_token(gen: Any) -> int:
    """The token that ends an answer: what the chat template closes a model turn with when
    it is one of the generator's end-of-sequence tokens, else the first of them."""
    eos = list(gen.settings.eos_token_ids)
    tok = gen.tokenizer
    if gen.use_chat_template:
        try:
            marker = "ZqXw"
            text = str(tok.apply_chat_template(
                [{"role": "user", "content": "q"}, {"role": "assistant", "content": marker}],
                tokenize=False))
            tail = text[text.rindex(marker) + len(marker):]
            ids = tok(tail, add_special_tokens=False)["input_ids"]
            if ids and (not eos or int(ids[0]) in eos):
                return int(ids[0])
        except Exception:  # a template that cannot render a reply: fall back to eos
            log.debug("chat template cannot render a reply", exc_info=True)
    if eos:
        return int(eos[0])
    if tok.eos_token_id is None:
        raise BadInputError(f"The generator {gen.name!r} has no end-of-sequence token; "
                            "it cannot be trained to stop.")
    return int(tok.eos_token_id)


def answer_ids(gen: Generator, answer: str, max_tokens: int = MAX_ANSWER_TOKENS) -> list[int]:
    """The tokens the generator should produce for ``answer`` after its start token.

    Seq2seq: the tokenizer's own special tokens around the answer (BART: ``<s> … </s>``,
    exactly what ``BartForConditionalGeneration`` is fine-tuned on with ``labels=``).
    Causal LM: the answer as it would continue the prompt, then the end-of-turn/eos token.
    """
    tok = gen.tokenizer
    if gen.kind == "seq2seq":
        ids = [int(i) for i in tok(answer, add_special_tokens=True)["input_ids"]]
        if len(ids) > max_tokens:
            ids = ids[:max_tokens - 1] + ids[-1:]
        return ids
    text = answer if getattr(gen, "use_chat_template", False) else " " + answer
    ids = [int(i) for i in tok(text, add_special_tokens=False)["input_ids"]][:max_tokens - 1]
    end = getattr(gen, "_ragdesk_end_token", None)
    if end is None:
        end = _causal_end_token(gen)
        gen._ragdesk_end_token = end  # type: ignore[attr-defined]
    return [*ids, int(end)]


def answer_logprobs(gen: Generator, question: str, passages: Sequence[PassageText],
                    target: Sequence[int]) -> torch.Tensor:
    """log p(y_i | x, z, y_<i) for every passage z and answer token i: float32 [K, T],
    differentiable with respect to the generator's parameters."""
    if gen.kind == "seq2seq":
        return _seq2seq_logprobs(gen, question, passages, target)
    return _causal_logprobs(gen, question, passages, target)


def reader_logprobs(gen: Generator, question: str, passages: Sequence[PassageText],
                    target: Sequence[int]) -> torch.Tensor:
    """The values of :func:`answer_logprobs` from the engine's inference path: float32
    [K, T] on the CPU, without gradients (the generator must be frozen)."""
    import torch

    from ragdesk.core.engine.lean_causal_context import LeanCausalContext

    with torch.inference_mode():
        ctx = gen.prepare(question, passages)
        if isinstance(ctx, LeanCausalContext):
            out = _lean_rows_logprobs(ctx, target)
        else:
            hyps = torch.tensor([list(target)], dtype=torch.long)
            out = torch.stack([ctx.score(z, hyps)[0] for z in range(len(passages))])
    # a normal tensor: inference-mode tensors cannot enter the autograd graph of the loss
    return out.clone()


def _lean_rows_logprobs(ctx: Any, target: Sequence[int]) -> torch.Tensor:
    """The answer under all K prompts of a lean Gemma context in one decoder pass (K rows).

    ``PassageContext.score`` takes one passage per call, and every call of a few tokens
    reads all the weights and the output layer again (memory-bound: 5 calls cost about 5
    passes over 0.4-1 GB for the starter); one K-row pass reads them once.
    """
    import torch

    k, t = ctx.n_docs, len(target)
    tgt = torch.tensor(list(target), dtype=torch.long)
    out = torch.empty((k, t), dtype=torch.float32)
    out[:, 0] = torch.log_softmax(ctx.first_logits, dim=-1)[:, tgt[0]]
    if t > 1:
        dev = ctx.gen.device
        state = ctx.base.expand(torch.arange(k), t - 1)
        h = ctx.decoder.forward(tgt[None, :-1].expand(k, -1).to(dev), state)
        lp = torch.log_softmax(ctx.decoder.logits(h), dim=-1)
        out[:, 1:] = lp.gather(-1, tgt[None, 1:, None].expand(k, -1, 1).to(dev))[..., 0].cpu()
    return out


def _seq2seq_logprobs(gen: Any, question: str, passages: Sequence[PassageText],
                      target: Sequence[int]) -> torch.Tensor:
    import torch

    device = next(gen.model.parameters()).device
    ids = [gen.input_ids(question, p) for p in passages]
    input_ids, mask = gen.pad_batch(ids)
    k = len(ids)
    tgt = torch.tensor(list(target), dtype=torch.long, device=device)
    dec_in = torch.cat([torch.tensor([gen.settings.start_token_id], device=device), tgt[:-1]])
    out = gen.model(input_ids=input_ids.to(device), attention_mask=mask.to(device),
                    decoder_input_ids=dec_in[None, :].expand(k, -1), use_cache=False,
                    return_dict=True)
    lp = torch.log_softmax(out.logits.float(), dim=-1)
    return lp.gather(-1, tgt[None, :, None].expand(k, -1, 1))[..., 0]


def _causal_logprobs(gen: Any, question: str, passages: Sequence[PassageText],
                     target: Sequence[int]) -> torch.Tensor:
    import torch

    device = next(gen.model.parameters()).device
    t = len(target)
    rows = [prompt + list(target[:-1]) for prompt in gen.prompts(question, passages)]
    length = max(len(r) for r in rows)
    pad = gen.settings.pad_token_id
    input_ids = torch.full((len(rows), length), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), length), dtype=torch.long)
    for i, r in enumerate(rows):  # left padding, as the engine does: answers share columns
        input_ids[i, length - len(r):] = torch.tensor(r, dtype=torch.long)
        mask[i, length - len(r):] = 1
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    # Only the last T positions predict answer tokens; asking for just those keeps a large
    # vocabulary (Gemma: 262k) from materializing logits for the whole prompt.
    kwargs: dict[str, object] = {"logits_to_keep": t} if gen._logits_to_keep else {}
    out = gen.model(input_ids=input_ids.to(device), attention_mask=mask.to(device),
                    position_ids=positions.to(device), use_cache=False, return_dict=True,
                    **kwargs)
    logits = out.logits[:, -t:].float()
    lp = torch.log_softmax(logits, dim=-1)
    tgt = torch.tensor(list(target), dtype=torch.long, device=device)
    return lp.gather(-1, tgt[None, :, None].expand(len(rows), -1, 1))[..., 0]
