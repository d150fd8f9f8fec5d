"""Generators behind one interface: BART-style seq2seq models and decoder-only causal LMs.

A generator prompts and tokenizes: it turns (question, K passages) into the K generator
inputs and picks the backend that encodes them into a :class:`.contracts.PassageContext`
(the contracts and the backends: :mod:`.contracts`). Seq2seq models run through the lean
BART decoder (:mod:`.bart_decoder`) when they are BART, else through transformers'
(:mod:`.hf_seq2seq`); causal LMs through the lean Gemma 3 or Qwen2 decoder
(:mod:`.gemma_decoder`, :mod:`.qwen2_decoder`) when they are one, else through
transformers' (:mod:`.hf_causal`).

Seq2seq input is exactly what the published ``facebook/rag-*`` checkpoints were trained on
(transformers' ``RagRetriever.postprocess_docs``): ``title / text // question`` with one
leading and one trailing ``"`` removed from the title, double spaces replaced once, at most
300 tokens. Where that would cut the question, the passage is cut instead.
"""

from __future__ import annotations

import copy
import inspect
import re
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ragdesk.core.engine import bart_decoder, gemma_decoder, qwen2_decoder
from ragdesk.core.engine.bart_decoder import LeanBartContext
from ragdesk.core.engine.causal_decoder import LeanCausalDecoder
from ragdesk.core.engine.contracts import PassageContext, PassageText
from ragdesk.core.engine.decoding import GenerationSettings
from ragdesk.core.engine.hf_causal import CausalContext
from ragdesk.core.engine.hf_seq2seq import Seq2SeqContext, right_padded
from ragdesk.core.engine.inert_text import InertText
from ragdesk.core.engine.lean_causal_context import LeanCausalContext
from ragdesk.core.engine.prompts import (
    chat_messages,
    memory_chat_messages,
    memory_plain_prompt,
    plain_prompt,
    together_chat_messages,
    together_plain_prompt,
)
from ragdesk.core.errors import BadInputError, MissingModelError
from ragdesk.core.options import DEFAULT_STYLE, Style, check_precision

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedTokenizerBase

TITLE_SEP = " / "
DOC_SEP = " // "
MAX_COMBINED_LENGTH = 300
# A question that fills the window still gets this many passage tokens (the window grows up
# to the model's position limit to make room) so that retrieval is not silently ignored.
MIN_PASSAGE_TOKENS = 16


def rag_input_text(title: str, text: str, question: str, prefix: str | None = None,
                   title_sep: str = TITLE_SEP, doc_sep: str = DOC_SEP) -> str:
    """transformers' ``RagRetriever.postprocess_docs`` string for one passage."""
    title = title.removeprefix('"').removesuffix('"')
    return ((prefix or "") + title + title_sep + text + doc_sep + question).replace("  ", " ")


def _special_wrapping(tokenizer: PreTrainedTokenizerBase) -> tuple[list[int], list[int]]:
    """The special tokens the tokenizer puts before and after a single text."""
    probe = tokenizer("x", add_special_tokens=False)["input_ids"]
    full = tokenizer("x", add_special_tokens=True)["input_ids"]
    for i in range(len(full) - len(probe) + 1):
        if full[i:i + len(probe)] == probe:
            return list(full[:i]), list(full[i + len(probe):])
    return [], []


def _max_positions(config: Any) -> int | None:
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length"):
        v = getattr(config, name, None)
        if isinstance(v, int) and v > 0:
            return v
    return None


DEFAULT_NO_REPEAT_NGRAM = 3

def normalize_question(question: str, passages: Sequence[PassageText] = ()) -> str:
    """The question as the generator's prompt shows it: whitespace collapsed, each word in
    the casing the passages use most for it (so "mona lisa" reads "Mona Lisa" when the
    passages say so), first letter upper case, ending in a question mark.

    Small generators answer "who painted the mona lisa" differently from "Who painted the
    Mona Lisa?"; retrieval is not affected (the encoders and BM25 are case-insensitive), so
    the passages are the same and the prompt becomes the same too.
    """
    words = question.split()
    if not words:
        return ""
    if question.isupper():  # typed with caps lock: casing carries nothing
        words = [w.lower() for w in words]
    if passages:
        seen: dict[str, Counter[str]] = {}  # word -> weighted counts of its forms
        for p in passages:
            for text in (p.title, p.text):
                for m in _WORD.finditer(text):
                    before = text[:m.start()].rstrip()
                    # a sentence's first word is capitalized whatever it is: it votes little
                    weight = 1000 if before and before[-1] not in ".!?" else 1
                    w = m.group(0)
                    seen.setdefault(w.lower(), Counter())[w] += weight

        def recase(m: re.Match[str]) -> str:
            forms = seen.get(m.group(0).lower())
            return forms.most_common(1)[0][0] if forms else m.group(0)

        words = [_WORD.sub(recase, w) for w in words]
    q = " ".join(words)
    q = q[0].upper() + q[1:]
    if q[-1] not in "?.!":
        q += "?"
    return q


_WORD = re.compile(r"\w+")




class Generator(ABC):
    """A model that writes the answer, its tokenizer and its generation settings."""

    kind: str

    def __init__(self, model: Any, tokenizer: PreTrainedTokenizerBase, name: str) -> None:
        if tokenizer is None:
            raise MissingModelError(f"The generator {name!r} has no tokenizer.")
        self.model = model
        self.tokenizer = tokenizer
        self.name = name
        model.eval()
        self.device = next(model.parameters()).device
        self.settings = self._settings()
        self.special_ids = frozenset(int(i) for i in (tokenizer.all_special_ids or []))
        # passages and questions never become control tokens (see .inert_text)
        self.inert = InertText(tokenizer)
        # tokens that end an answer like EOS, and like EOS are scored but never shown
        self.stop_ids: frozenset[int] = frozenset()

    @abstractmethod
    def _settings(self) -> GenerationSettings: ...

    @abstractmethod
    def prepare(self, question: str, passages: Sequence[PassageText],
                style: Style = DEFAULT_STYLE) -> PassageContext:
        """Build and encode the K generator inputs; ``style`` (see :data:`STYLES`) is the
        answer style the prompt asks for, where the generator takes instructions."""

    def prepare_together(self, question: str, passages: Sequence[PassageText],
                         style: Style = DEFAULT_STYLE) -> PassageContext:
        """One generator input that holds all the passages (a context with one row)."""
        raise BadInputError(
            f"The generator {self.name!r} reads one passage at a time: it cannot read the "
            "passages together.",
            hint="Use RAG-Token or RAG-Sequence with it (--mode token or sequence); reading "
                 "together needs a decoder-only generator such as the reader pack's.")

    def prepare_memory(self, question: str, passages: Sequence[PassageText] = (),
                       style: Style = DEFAULT_STYLE) -> PassageContext:
        """One generator input with the question and no passage (a context with one row);
        ``passages`` only recase the question, as in the prompts that show them."""
        raise BadInputError(
            f"The generator {self.name!r} cannot answer without a passage.",
            hint="Answers from memory need a decoder-only generator such as the reader pack's.")

    def question_tokens(self, question: str) -> int:
        """How many tokens ``question`` takes in this generator's prompts (its special
        strings made inert, as the prompts make them)."""
        ids = self.tokenizer(self.inert.text(question), add_special_tokens=False)["input_ids"]
        return len(ids)

    @property
    def vocab_size(self) -> int:
        return int(self.model.get_output_embeddings().weight.shape[0])

    def decode(self, ids: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=True))

    def is_special(self, token_id: int) -> bool:
        """Whether the token is left out of the answer text: a special token of the
        tokenizer or a stop token."""
        return token_id in self.special_ids or token_id in self.stop_ids


# ---------------------------------------------------------------- seq2seq (BART) -----


class Seq2SeqGenerator(Generator):
    """Any encoder-decoder LM (``BartForConditionalGeneration``, the generator of
    ``facebook/rag-*``) fed with RAG's ``title / text // question`` inputs."""

    kind = "seq2seq"

    def __init__(self, model: Any, tokenizer: PreTrainedTokenizerBase, name: str, *,
                 max_combined_length: int = MAX_COMBINED_LENGTH,
                 title_sep: str = TITLE_SEP, doc_sep: str = DOC_SEP,
                 lean_decoder: bool | None = None, packed_weights: bool | None = None) -> None:
        super().__init__(model, tokenizer, name)
        # BART runs through ragdesk's lean decoder (same arithmetic, less overhead, shared
        # cross-attention); other models, or lean_decoder=False, through transformers' forward.
        # packed_weights (default: float32 on the CPU) computes the few rows of a decoding
        # step as (W @ x.T).T, about twice as fast as F.linear there (see bart_decoder).
        use = bart_decoder.supports(model) if lean_decoder is None else (
            lean_decoder and bart_decoder.supports(model))
        pack = bart_decoder.can_pack_weights(model) if packed_weights is None else (
            packed_weights and bart_decoder.can_pack_weights(model))
        self.lean_decoder = bart_decoder.BartDecoder(model, pack) if use else None
        self.max_combined_length = max_combined_length
        self.title_sep = title_sep
        self.doc_sep = doc_sep
        self.prefix = getattr(model.config, "prefix", None)
        self.max_positions = _max_positions(model.config)
        self._wrap = _special_wrapping(tokenizer)

    def _settings(self) -> GenerationSettings:
        gc = self.model.generation_config
        start = getattr(gc, "decoder_start_token_id", None)
        if start is None:
            start = getattr(self.model.config, "decoder_start_token_id", None)
        return GenerationSettings.from_generation_config(
            gc, start_token_id=start, fallback_pad=self.tokenizer.pad_token_id)

    def input_ids(self, question: str, passage: PassageText) -> list[int]:
        """Token ids of one generator input; the question is never truncated."""
        tok = self.tokenizer
        question, passage = self.inert.text(question), self.inert.passage(passage)
        full = rag_input_text(passage.title, passage.text, question, self.prefix,
                              self.title_sep, self.doc_sep)
        ids: list[int] = tok(full, add_special_tokens=True)["input_ids"]
        if len(ids) <= self.max_combined_length:
            return ids
        head_text = rag_input_text(passage.title, passage.text, "", self.prefix,
                                   self.title_sep, "")
        tail_text = (self.doc_sep + question).replace("  ", " ")
        head = tok(head_text, add_special_tokens=False)["input_ids"]
        tail = tok(tail_text, add_special_tokens=False)["input_ids"]
        before, after = self._wrap
        fixed = len(before) + len(after) + len(tail)
        window = max(self.max_combined_length, fixed + MIN_PASSAGE_TOKENS)
        if self.max_positions is not None:
            window = min(window, self.max_positions)
        if fixed > window:
            raise BadInputError(
                f"The question is {len(tail)} tokens long; the generator {self.name!r} reads "
                f"at most {window} tokens of passage and question.",
                hint="Ask a shorter question.")
        return [*before, *head[:window - fixed], *tail, *after]

    def prepare(self, question: str, passages: Sequence[PassageText],
                style: Style = DEFAULT_STYLE) -> PassageContext:
        # BART reads the fixed input format its RAG checkpoint was trained on: no style.
        ids = [self.input_ids(question, p) for p in passages]
        if self.lean_decoder is not None:
            return LeanBartContext(self, self.lean_decoder, ids)
        return Seq2SeqContext(self, ids)

    def pad_batch(self, ids: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """The inputs as one right-padded batch and its attention mask."""
        return right_padded(ids, self.settings.pad_token_id)


# ---------------------------------------------------------------- causal LM ----------


class CausalLMGenerator(Generator):
    """A decoder-only LM prompted with the passage and then the question.

    With a chat template (instruction-tuned models such as Gemma 3) the prompt is one user
    turn; without one it is plain text ending in ``Answer:``.

    ``stop_at_newline`` (default): the answer is one line. A base LM given a plain prompt
    writes its answer and then goes on with a made-up ``\nQuestion: ...``; so every token
    whose text contains a newline ends the answer as EOS does: it counts in ``log p(y|x)``
    and in the attribution like EOS, and is never part of the answer text.
    """

    kind = "causal"

    def __init__(self, model: Any, tokenizer: PreTrainedTokenizerBase, name: str, *,
                 max_passage_tokens: int = MAX_COMBINED_LENGTH,
                 use_chat_template: bool | None = None, stop_at_newline: bool = True,
                 no_repeat_ngram_size: int = DEFAULT_NO_REPEAT_NGRAM,
                 precision: str = "float32", lean_decoder: bool | None = None,
                 newline_ids: frozenset[int] | None = None,
                 stored_copies: Mapping[str, torch.Tensor] | None = None) -> None:
        """``newline_ids``: :func:`newline_token_ids` of ``tokenizer`` where the caller
        kept them (found here otherwise). ``stored_copies``: the lean decoder's copies of
        these weights from an earlier process (see :class:`LeanCausalDecoder`)."""
        super().__init__(model, tokenizer, name)
        # Gemma 3 and Qwen2 run through ragdesk's lean decoders (packed prompts, preallocated
        # cache, bfloat16 as the fast path), other models through transformers' forward.
        check_precision(precision)
        cls: type[LeanCausalDecoder] | None = (
            gemma_decoder.GemmaDecoder if gemma_decoder.supports(model)
            else qwen2_decoder.Qwen2Decoder if qwen2_decoder.supports(model) else None)
        use = cls is not None and lean_decoder is not False
        self.lean_decoder = (cls(model, precision, stored_copies=stored_copies)
                             if use and cls is not None else None)
        self.precision = self.lean_decoder.precision if self.lean_decoder else "float32"
        if no_repeat_ngram_size > 0 and self.settings.no_repeat_ngram_size == 0:
            # Small causal LMs fall into loops ("the artist, the artist, ..."); a factoid
            # answer never needs the same three tokens twice.
            self.settings = replace(self.settings, no_repeat_ngram_size=no_repeat_ngram_size)
        if stop_at_newline:
            if newline_ids is None:
                newline_ids = newline_token_ids(tokenizer)
            self.stop_ids = newline_ids - self.special_ids
            extra = tuple(sorted(self.stop_ids - set(self.settings.eos_token_ids)))
            # the model's own EOS stays first: training ends answers with eos_token_ids[0]
            self.settings = replace(self.settings,
                                    eos_token_ids=self.settings.eos_token_ids + extra)
        self.max_passage_tokens = max_passage_tokens
        has_template = bool(getattr(tokenizer, "chat_template", None))
        self.use_chat_template = has_template if use_chat_template is None else (
            use_chat_template and has_template)
        self.max_positions = _max_positions(getattr(model.config, "get_text_config",
                                                    lambda: model.config)())
        params = inspect.signature(model.forward).parameters
        self._logits_to_keep = "logits_to_keep" in params

    def _settings(self) -> GenerationSettings:
        gc = self.model.generation_config
        tok = self.tokenizer
        if getattr(gc, "eos_token_id", None) is None and tok.eos_token_id is not None:
            gc = copy.copy(gc)
            gc.eos_token_id = tok.eos_token_id
        pad = tok.pad_token_id
        return GenerationSettings.from_generation_config(gc, start_token_id=None,
                                                         fallback_pad=pad)

    def prompt_text(self, question: str, passage: PassageText, style: Style = DEFAULT_STYLE
                    ) -> str:
        """The prompt for one passage (see :mod:`.prompts`): the style's worked examples
        first, so that the K prompts of one question share their opening tokens."""
        question = normalize_question(self.inert.text(question))
        passage = self.inert.passage(passage)
        if self.use_chat_template:
            msgs = chat_messages(question, passage.title, passage.text, style)
            return str(self.tokenizer.apply_chat_template(
                msgs, tokenize=False, add_generation_prompt=True))
        return plain_prompt(question, passage.title, passage.text, style)

    def input_ids(self, question: str, passage: PassageText, style: Style = DEFAULT_STYLE
                  ) -> list[int]:
        tok = self.tokenizer
        passage = self.inert.passage(passage)  # before the cut, so that it counts as read
        text_ids = tok(passage.text, add_special_tokens=False)["input_ids"]
        if len(text_ids) > self.max_passage_tokens:
            # str(): the stubs' decode also covers batches (a list); one sequence is text
            passage = PassageText(passage.title,
                                  str(tok.decode(text_ids[:self.max_passage_tokens])))
        add_special = not self.use_chat_template
        ids: list[int] = tok(self.prompt_text(question, passage, style),
                             add_special_tokens=add_special)["input_ids"]
        if self.max_positions is not None and len(ids) >= self.max_positions:
            raise BadInputError(
                f"The prompt is {len(ids)} tokens long; the generator {self.name!r} reads at "
                f"most {self.max_positions}.", hint="Ask a shorter question.")
        return ids

    def _context(self, ids: list[list[int]]) -> PassageContext:
        if self.lean_decoder is not None:
            return LeanCausalContext(self, self.lean_decoder, ids)
        return CausalContext(self, ids, logits_to_keep=self._logits_to_keep)

    def prompts(self, question: str, passages: Sequence[PassageText],
                style: Style = DEFAULT_STYLE, together: bool = False) -> list[list[int]]:
        """The inputs :meth:`prepare` reads (one per passage) or, ``together``, the one
        :meth:`prepare_together` reads."""
        # recased from all K passages at once, so that every prompt reads the same question
        question = normalize_question(question, passages)
        if together:
            return [self.together_ids(question, passages, style)]
        return [self.input_ids(question, p, style) for p in passages]

    def prepare(self, question: str, passages: Sequence[PassageText],
                style: Style = DEFAULT_STYLE) -> PassageContext:
        """``question``: checked (:class:`.request.AnswerRequest`)."""
        return self._context(self.prompts(question, passages, style))

    def together_ids(self, question: str, passages: Sequence[PassageText],
                     style: Style = DEFAULT_STYLE) -> list[int]:
        """The one prompt with every passage (each cut to ``max_passage_tokens``)."""
        tok = self.tokenizer
        question = normalize_question(self.inert.text(question))
        cut = []
        for p in map(self.inert.passage, passages):
            ids = tok(p.text, add_special_tokens=False)["input_ids"]
            text = str(tok.decode(ids[:self.max_passage_tokens])) if len(ids) > \
                self.max_passage_tokens else p.text
            cut.append((p.title, text))
        out = self._prompt_ids(lambda: together_chat_messages(question, cut, style),
                               lambda: together_plain_prompt(question, cut, style))
        if self.max_positions is not None and len(out) >= self.max_positions:
            raise BadInputError(
                f"The prompt with all {len(passages)} passages is {len(out)} tokens long; the "
                f"generator {self.name!r} reads at most {self.max_positions}.",
                hint="Ask with fewer passages (--docs), or read them one at a time.")
        return out

    def prepare_together(self, question: str, passages: Sequence[PassageText],
                         style: Style = DEFAULT_STYLE) -> PassageContext:
        return self._context(self.prompts(question, passages, style, together=True))

    def prepare_memory(self, question: str, passages: Sequence[PassageText] = (),
                       style: Style = DEFAULT_STYLE) -> PassageContext:
        question = normalize_question(self.inert.text(question), passages)
        return self._context([self._prompt_ids(lambda: memory_chat_messages(question, style),
                                               lambda: memory_plain_prompt(question, style))])

    def _prompt_ids(self, chat: Callable[[], list[dict[str, str]]],
                    plain: Callable[[], str]) -> list[int]:
        """The ids of the chat conversation under the model's template, or of the plain
        prompt (with the tokenizer's own special tokens) for a model without one."""
        tok = self.tokenizer
        if self.use_chat_template:
            prompt = str(tok.apply_chat_template(chat(), tokenize=False,
                                                 add_generation_prompt=True))
        else:
            prompt = plain()
        ids: list[int] = tok(prompt, add_special_tokens=not self.use_chat_template)["input_ids"]
        return ids


# How a newline shows in the vocabulary: itself (SentencePiece), as byte 0x0A in the
# GPT-2 byte-to-unicode map, or as a SentencePiece byte-fallback piece.
_NEWLINE_MARKS = ("\n", "\u010a", "<0x0A>")


def newline_token_ids(tokenizer: PreTrainedTokenizerBase) -> frozenset[int]:
    """Ids of the tokens whose decoded text contains a newline.

    Decoding a whole vocabulary one token at a time takes seconds for large ones (Gemma:
    262k tokens), so only pieces that show a newline in one of the usual spellings are
    decoded and checked.
    """
    vocab: dict[str, int] = tokenizer.get_vocab()
    cands = sorted({int(i) for piece, i in vocab.items()
                    if any(m in piece for m in _NEWLINE_MARKS)})
    if not cands:
        return frozenset()
    texts = tokenizer.batch_decode([[i] for i in cands], skip_special_tokens=False,
                                   clean_up_tokenization_spaces=False)
    return frozenset(i for i, t in zip(cands, texts, strict=True) if "\n" in t)


__all__ = [
    "CausalLMGenerator",
    "Generator",
    "PassageContext",
    "PassageText",
    "Seq2SeqGenerator",
    "newline_token_ids",
    "normalize_question",
    "rag_input_text",
]
