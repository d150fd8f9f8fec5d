"""Generators behind one interface: BART-style seq2seq models and decoder-only causal LMs.

A generator turns (question, K passages) into a :class:`PassageContext`: the K generator
inputs, encoded once (seq2seq: encoder outputs and cross-attention keys/values; causal LM:
the prompt's key/value cache), plus the scores of the first answer token under every passage.
Decoding then runs :class:`DecoderRows` — any number of rows, each tied to one passage, with
its own self-attention cache — one token per step. Rescoring a hypothesis under a passage
(RAG-Sequence thorough decoding) reuses the context: nothing is encoded twice.

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
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ragdesk.core.engine.decoding import GenerationSettings
from ragdesk.core.engine.prefix_tree import PrefixTree
from ragdesk.core.engine.prompts import (
    chat_messages,
    plain_prompt,
    together_chat_messages,
    together_plain_prompt,
)
from ragdesk.core.errors import BadInputError, MissingModelError
from ragdesk.core.options import DEFAULT_STYLE, check_precision, check_question, check_style

if TYPE_CHECKING:
    import torch

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


def _special_wrapping(tokenizer: Any) -> tuple[list[int], list[int]]:
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




@dataclass(frozen=True)
class PassageText:
    title: str
    text: str


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

    @abstractmethod
    def rows(self, passage_of_row: torch.Tensor, max_steps: int = 64) -> DecoderRows:
        """Decoder rows after the first step; row r is conditioned on passage_of_row[r].
        ``max_steps``: how many tokens will be fed at most (caches are sized for it)."""

    @abstractmethod
    def score(self, passage: int, hyps: torch.Tensor) -> torch.Tensor:
        """Teacher-forced log-probs [N, T] of ``hyps`` [N, T] (tokens after the start) under
        one passage, in one decoder pass that reuses the encoded passage."""


class Generator(ABC):
    """A model that writes the answer, its tokenizer and its generation settings."""

    kind: str

    def __init__(self, model: Any, tokenizer: Any, name: str) -> None:
        if tokenizer is None:
            raise MissingModelError(f"The generator {name!r} has no tokenizer.")
        self.model = model
        self.tokenizer = tokenizer
        self.name = name
        model.eval()
        self.device = next(model.parameters()).device
        self.settings = self._settings()
        self.special_ids = frozenset(int(i) for i in (tokenizer.all_special_ids or []))
        # tokens that end an answer like EOS, and like EOS are scored but never shown
        self.stop_ids: frozenset[int] = frozenset()

    @abstractmethod
    def _settings(self) -> GenerationSettings: ...

    @abstractmethod
    def prepare(self, question: str, passages: Sequence[PassageText],
                style: str = DEFAULT_STYLE) -> PassageContext:
        """Build and encode the K generator inputs; ``style`` (see :data:`STYLES`) is the
        answer style the prompt asks for, where the generator takes instructions."""

    def prepare_together(self, question: str, passages: Sequence[PassageText],
                         style: str = DEFAULT_STYLE) -> PassageContext:
        """One generator input that holds all the passages (a context with one row)."""
        raise BadInputError(
            f"The generator {self.name!r} reads one passage at a time: it cannot read the "
            "passages together.",
            hint="Use RAG-Token or RAG-Sequence with it (--mode token or sequence); reading "
                 "together needs a decoder-only generator such as the reader pack's.")

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

    def __init__(self, model: Any, tokenizer: Any, name: str, *,
                 max_combined_length: int = MAX_COMBINED_LENGTH,
                 title_sep: str = TITLE_SEP, doc_sep: str = DOC_SEP,
                 lean_decoder: bool | None = None, packed_weights: bool | None = None) -> None:
        super().__init__(model, tokenizer, name)
        from ragdesk.core.engine import bart_decoder

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
                style: str = DEFAULT_STYLE) -> PassageContext:
        # BART reads the fixed input format its RAG checkpoint was trained on: no style.
        check_question(question)
        ids = [self.input_ids(question, p) for p in passages]
        if self.lean_decoder is not None:
            return LeanBartContext(self, ids)
        return Seq2SeqContext(self, ids)

    def pad_batch(self, ids: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        import torch

        length = max(len(x) for x in ids)
        pad = self.settings.pad_token_id
        input_ids = torch.full((len(ids), length), pad, dtype=torch.long)
        mask = torch.zeros((len(ids), length), dtype=torch.long)
        for i, x in enumerate(ids):
            input_ids[i, :len(x)] = torch.tensor(x, dtype=torch.long)
            mask[i, :len(x)] = 1
        return input_ids, mask


def _cache_from_layers(layers: list[tuple[torch.Tensor, torch.Tensor]]) -> Any:
    from transformers import DynamicCache

    return DynamicCache(layers)


def _cache_layers(cache: Any) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [(layer.keys, layer.values) for layer in cache.layers]


class Seq2SeqContext(PassageContext):
    def __init__(self, gen: Seq2SeqGenerator, ids: list[list[int]]) -> None:
        import torch
        from transformers import EncoderDecoderCache
        from transformers.modeling_outputs import BaseModelOutput

        self.gen = gen
        self.input_ids = ids
        self.n_docs = len(ids)
        model = gen.model
        input_ids, mask = gen.pad_batch(ids)
        dev = gen.device
        input_ids, mask = input_ids.to(dev), mask.to(dev)
        self.attention_mask = mask
        with torch.inference_mode():
            enc = model.get_encoder()(input_ids=input_ids, attention_mask=mask, return_dict=True)
            self.encoder_hidden = enc.last_hidden_state
            start = torch.full((self.n_docs, 1), gen.settings.start_token_id, dtype=torch.long,
                               device=dev)
            out = model(encoder_outputs=BaseModelOutput(last_hidden_state=self.encoder_hidden),
                        attention_mask=mask, decoder_input_ids=start, use_cache=True,
                        return_dict=True)
        cache = out.cache if hasattr(out, "cache") else out.past_key_values
        if not isinstance(cache, EncoderDecoderCache):
            raise MissingModelError(f"The generator {gen.name!r} does not return an "
                                    "encoder-decoder cache; it cannot be used for RAG.")
        self.self_kv = _cache_layers(cache.self_attention_cache)
        self.cross_kv = _cache_layers(cache.cross_attention_cache)
        self.first_logits = out.logits[:, -1].to(device="cpu", dtype=torch.float32)

    def _cache(self, rows: torch.Tensor, self_kv: bool) -> Any:
        import torch
        from transformers import DynamicCache, EncoderDecoderCache

        same = rows.numel() == self.n_docs and bool((rows == torch.arange(self.n_docs)).all())
        rows = rows.to(self.gen.device)

        def pick(t: torch.Tensor) -> torch.Tensor:
            return t if same else t.index_select(0, rows)

        cross = _cache_from_layers([(pick(k), pick(v)) for k, v in self.cross_kv])
        own = (_cache_from_layers([(pick(k), pick(v)) for k, v in self.self_kv]) if self_kv
               else DynamicCache())
        return EncoderDecoderCache(own, cross)

    def rows(self, passage_of_row: torch.Tensor, max_steps: int = 64) -> Seq2SeqRows:
        return Seq2SeqRows(self, passage_of_row)

    def score(self, passage: int, hyps: torch.Tensor) -> torch.Tensor:
        import torch
        from transformers.modeling_outputs import BaseModelOutput

        n, t = hyps.shape
        rows = torch.full((n,), passage, dtype=torch.long)
        first = torch.log_softmax(self.first_logits[passage], dim=-1)
        out_lp = torch.empty((n, t), dtype=torch.float32)
        out_lp[:, 0] = first[hyps[:, 0]]
        if t > 1:
            cache = self._cache(rows, self_kv=True)
            hyps_dev = hyps.to(self.gen.device)
            with torch.inference_mode():
                out = self.gen.model(
                    encoder_outputs=BaseModelOutput(
                        last_hidden_state=self.encoder_hidden[passage:passage + 1].expand(
                            n, -1, -1)),
                    attention_mask=self.attention_mask[passage:passage + 1].expand(n, -1),
                    decoder_input_ids=hyps_dev[:, :-1], cache=cache, use_cache=True,
                    return_dict=True)
                lp = torch.log_softmax(out.logits.to(torch.float32), dim=-1)
                out_lp[:, 1:] = lp.gather(-1, hyps_dev[:, 1:, None])[..., 0].cpu()
        return out_lp


class Seq2SeqRows(DecoderRows):
    def __init__(self, ctx: Seq2SeqContext, passage_of_row: torch.Tensor) -> None:
        self.ctx = ctx
        self.passage_of_row = passage_of_row
        self.cache = ctx._cache(passage_of_row, self_kv=True)
        self._enc_rows()

    def _enc_rows(self) -> None:
        rows = self.passage_of_row.to(self.ctx.gen.device)
        self.encoder_hidden = self.ctx.encoder_hidden.index_select(0, rows)
        self.mask = self.ctx.attention_mask.index_select(0, rows)

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        import torch
        from transformers.modeling_outputs import BaseModelOutput

        with torch.inference_mode():
            out = self.ctx.gen.model(
                encoder_outputs=BaseModelOutput(last_hidden_state=self.encoder_hidden),
                attention_mask=self.mask, decoder_input_ids=tokens.to(self.mask.device)[:, None],
                cache=self.cache, use_cache=True, return_dict=True)
        logits: torch.Tensor = out.logits[:, -1].to(device="cpu", dtype=torch.float32)
        return logits

    def reorder(self, order: torch.Tensor) -> None:
        import torch

        new_passages = self.passage_of_row.index_select(0, order)
        dev_order = order.to(self.mask.device)
        self.cache.self_attention_cache.reorder_cache(dev_order)
        if not torch.equal(new_passages, self.passage_of_row):
            # rows moved between passages: their cross-attention follows them
            self.cache.cross_attention_cache.reorder_cache(dev_order)
            self.passage_of_row = new_passages
            self._enc_rows()


class LeanBartContext(PassageContext):
    """The K passages encoded once, decoded with :mod:`ragdesk.core.engine.bart_decoder`."""

    def __init__(self, gen: Seq2SeqGenerator, ids: list[list[int]]) -> None:
        import torch

        from ragdesk.core.engine.bart_decoder import DecoderState

        assert gen.lean_decoder is not None
        self.gen = gen
        self.decoder = gen.lean_decoder
        self.input_ids = ids
        self.n_docs = len(ids)
        input_ids, mask = gen.pad_batch(ids)
        dev = gen.device
        input_ids, mask = input_ids.to(dev), mask.to(dev)
        with torch.inference_mode():
            enc = gen.model.get_encoder()(input_ids=input_ids, attention_mask=mask,
                                          return_dict=True).last_hidden_state
            cross = self.decoder.cross_kv(enc)
            cross_mask = None if bool(mask.all()) else mask.bool()[:, None, None, :]
            self.base = DecoderState(cross, cross_mask, torch.arange(self.n_docs), capacity=1)
            start = torch.full((self.n_docs, 1), gen.settings.start_token_id, dtype=torch.long,
                               device=dev)
            logits = self.decoder.forward(start, self.base, packed=False)
        self.first_logits = logits[:, -1].to(device="cpu", dtype=torch.float32)

    def rows(self, passage_of_row: torch.Tensor, max_steps: int = 64) -> LeanBartRows:
        return LeanBartRows(self, self.base.expand(passage_of_row, 1 + max_steps))

    def score(self, passage: int, hyps: torch.Tensor) -> torch.Tensor:
        import torch

        n, t = hyps.shape
        first = torch.log_softmax(self.first_logits[passage], dim=-1)
        out_lp = torch.empty((n, t), dtype=torch.float32)
        out_lp[:, 0] = first[hyps[:, 0]]
        if t > 1:
            state = self.base.expand(torch.full((n,), passage, dtype=torch.long), t)
            hyps_dev = hyps.to(self.gen.device)
            with torch.inference_mode():
                logits = self.decoder.forward(hyps_dev[:, :-1], state)
                lp = torch.log_softmax(logits.to(torch.float32), dim=-1)
                out_lp[:, 1:] = lp.gather(-1, hyps_dev[:, 1:, None])[..., 0].cpu()
        return out_lp


    def score_tree(self, passage: int, tree: PrefixTree) -> torch.Tensor:
        """log p(node token | its prefix, passage) for every node of ``tree`` [nodes], from
        one decoder pass over the tree's inner nodes."""
        import torch

        def inner_lp(inner: list[int]) -> torch.Tensor:
            dev = self.gen.device
            n = len(inner)
            state = self.base.expand(torch.tensor([passage]), 1 + n)
            mask = torch.ones((n, 1 + n), dtype=torch.bool)  # column 0: the start token
            mask[:, 1:] = tree.ancestry(inner)
            inner_t = torch.tensor(inner, dtype=torch.long)
            tokens = torch.tensor(tree.tokens, dtype=torch.long)[inner_t]
            positions = 1 + torch.tensor(tree.depth, dtype=torch.long)[inner_t]
            with torch.inference_mode():
                logits = self.decoder.forward(
                    tokens[None].to(dev), state, positions=positions.to(dev),
                    self_mask=mask.to(dev))[0]
                return torch.log_softmax(logits.to(torch.float32), dim=-1).cpu()

        return tree.node_log_probs(torch.log_softmax(self.first_logits[passage], dim=-1),
                                   inner_lp)


class LeanBartRows(DecoderRows):
    def __init__(self, ctx: LeanBartContext, state: Any) -> None:
        self.ctx = ctx
        self.state = state
        self.passage_of_row = state.passage_of_row

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        import torch

        with torch.inference_mode():
            logits = self.ctx.decoder.forward(tokens.to(self.ctx.gen.device)[:, None],
                                              self.state)
        out: torch.Tensor = logits[:, -1].to(device="cpu", dtype=torch.float32)
        return out

    def reorder(self, order: torch.Tensor) -> None:
        self.state.reorder(order)


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

    def __init__(self, model: Any, tokenizer: Any, name: str, *,
                 max_passage_tokens: int = MAX_COMBINED_LENGTH,
                 use_chat_template: bool | None = None, stop_at_newline: bool = True,
                 no_repeat_ngram_size: int = DEFAULT_NO_REPEAT_NGRAM,
                 precision: str = "float32", lean_decoder: bool | None = None) -> None:
        super().__init__(model, tokenizer, name)
        from ragdesk.core.engine import causal_decoder, qwen2_decoder

        # Gemma 3 and Qwen2 run through ragdesk's lean decoders (packed prompts, preallocated
        # cache, bfloat16 as the fast path), other models through transformers' forward.
        check_precision(precision)
        cls: type[causal_decoder.GemmaDecoder] | None = (
            causal_decoder.GemmaDecoder if causal_decoder.supports(model)
            else qwen2_decoder.Qwen2Decoder if qwen2_decoder.supports(model) else None)
        use = cls is not None and lean_decoder is not False
        self.lean_decoder = cls(model, precision) if use and cls is not None else None
        self.precision = self.lean_decoder.precision if self.lean_decoder else "float32"
        if no_repeat_ngram_size > 0 and self.settings.no_repeat_ngram_size == 0:
            # Small causal LMs fall into loops ("the artist, the artist, ..."); a factoid
            # answer never needs the same three tokens twice.
            self.settings = replace(self.settings, no_repeat_ngram_size=no_repeat_ngram_size)
        if stop_at_newline:
            self.stop_ids = newline_token_ids(tokenizer) - self.special_ids
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

    def prompt_text(self, question: str, passage: PassageText, style: str = DEFAULT_STYLE
                    ) -> str:
        """The prompt for one passage (see :mod:`.prompts`): the style's worked examples
        first, so that the K prompts of one question share their opening tokens."""
        question = normalize_question(question)
        check_style(style)
        if self.use_chat_template:
            msgs = chat_messages(question, passage.title, passage.text, style)
            return str(self.tokenizer.apply_chat_template(
                msgs, tokenize=False, add_generation_prompt=True))
        return plain_prompt(question, passage.title, passage.text, style)

    def input_ids(self, question: str, passage: PassageText, style: str = DEFAULT_STYLE
                  ) -> list[int]:
        tok = self.tokenizer
        text_ids = tok(passage.text, add_special_tokens=False)["input_ids"]
        if len(text_ids) > self.max_passage_tokens:
            passage = PassageText(passage.title,
                                  tok.decode(text_ids[:self.max_passage_tokens]))
        add_special = not self.use_chat_template
        ids: list[int] = tok(self.prompt_text(question, passage, style),
                             add_special_tokens=add_special)["input_ids"]
        if self.max_positions is not None and len(ids) >= self.max_positions:
            raise BadInputError(
                f"The prompt is {len(ids)} tokens long; the generator {self.name!r} reads at "
                f"most {self.max_positions}.", hint="Ask a shorter question.")
        return ids

    def prepare(self, question: str, passages: Sequence[PassageText],
                style: str = DEFAULT_STYLE) -> PassageContext:
        check_question(question)
        # recased from all K passages at once, so that every prompt reads the same question
        question = normalize_question(question, passages)
        ids = [self.input_ids(question, p, style) for p in passages]
        if self.lean_decoder is not None:
            from ragdesk.core.engine.causal_decoder import LeanCausalContext

            return LeanCausalContext(self, self.lean_decoder, ids)
        return CausalContext(self, ids)


    def together_ids(self, question: str, passages: Sequence[PassageText],
                     style: str = DEFAULT_STYLE) -> list[int]:
        """The one prompt with every passage (each cut to ``max_passage_tokens``)."""
        tok = self.tokenizer
        question = normalize_question(question)
        check_style(style)
        cut = []
        for p in passages:
            ids = tok(p.text, add_special_tokens=False)["input_ids"]
            text = tok.decode(ids[:self.max_passage_tokens]) if len(ids) > \
                self.max_passage_tokens else p.text
            cut.append((p.title, text))
        if self.use_chat_template:
            prompt = str(tok.apply_chat_template(together_chat_messages(question, cut, style),
                                                 tokenize=False, add_generation_prompt=True))
        else:
            prompt = together_plain_prompt(question, cut, style)
        out: list[int] = tok(prompt, add_special_tokens=not self.use_chat_template)["input_ids"]
        if self.max_positions is not None and len(out) >= self.max_positions:
            raise BadInputError(
                f"The prompt with all {len(passages)} passages is {len(out)} tokens long; the "
                f"generator {self.name!r} reads at most {self.max_positions}.",
                hint="Ask with fewer passages (--docs), or read them one at a time.")
        return out

    def prepare_together(self, question: str, passages: Sequence[PassageText],
                         style: str = DEFAULT_STYLE) -> PassageContext:
        check_question(question)
        question = normalize_question(question, passages)
        ids = [self.together_ids(question, passages, style)]
        if self.lean_decoder is not None:
            from ragdesk.core.engine.causal_decoder import LeanCausalContext

            return LeanCausalContext(self, self.lean_decoder, ids)
        return CausalContext(self, ids)


# How a newline shows in the vocabulary: itself (SentencePiece), as byte 0x0A in the
# GPT-2 byte-to-unicode map, or as a SentencePiece byte-fallback piece.
_NEWLINE_MARKS = ("\n", "\u010a", "<0x0A>")


def newline_token_ids(tokenizer: Any) -> frozenset[int]:
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


def _select_cache(cache: Any, rows: torch.Tensor) -> Any:
    """A copy of a dynamic cache holding the given batch rows (the original is untouched)."""
    new = copy.copy(cache)
    new.layers = []
    for layer in cache.layers:
        lay = copy.copy(layer)
        if getattr(layer, "is_initialized", True) and getattr(layer, "keys", None) is not None:
            lay.keys = layer.keys.index_select(0, rows)
            lay.values = layer.values.index_select(0, rows)
        new.layers.append(lay)
    return new


class CausalContext(PassageContext):
    def __init__(self, gen: CausalLMGenerator, ids: list[list[int]]) -> None:
        import torch

        self.gen = gen
        self.input_ids = ids
        self.n_docs = len(ids)
        length = max(len(x) for x in ids)
        pad = gen.settings.pad_token_id
        input_ids = torch.full((len(ids), length), pad, dtype=torch.long)
        mask = torch.zeros((len(ids), length), dtype=torch.long)
        for i, x in enumerate(ids):  # left padding: every prompt ends at the same column
            input_ids[i, length - len(x):] = torch.tensor(x, dtype=torch.long)
            mask[i, length - len(x):] = 1
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        dev = gen.device
        input_ids, mask, positions = input_ids.to(dev), mask.to(dev), positions.to(dev)
        self.mask = mask
        self.next_position = positions[:, -1] + 1
        kwargs: dict[str, Any] = {"logits_to_keep": 1} if gen._logits_to_keep else {}
        with torch.inference_mode():
            out = gen.model(input_ids=input_ids, attention_mask=mask, position_ids=positions,
                            use_cache=True, return_dict=True, **kwargs)
        self.cache = out.cache if hasattr(out, "cache") else out.past_key_values
        self.first_logits = out.logits[:, -1].to(device="cpu", dtype=torch.float32)

    def rows(self, passage_of_row: torch.Tensor, max_steps: int = 64) -> CausalRows:
        return CausalRows(self, passage_of_row)

    def score(self, passage: int, hyps: torch.Tensor) -> torch.Tensor:
        import torch

        n, t = hyps.shape
        first = torch.log_softmax(self.first_logits[passage], dim=-1)
        out_lp = torch.empty((n, t), dtype=torch.float32)
        out_lp[:, 0] = first[hyps[:, 0]]
        if t > 1:
            dev = self.gen.device
            rows = torch.full((n,), passage, dtype=torch.long, device=dev)
            hyps_dev = hyps.to(dev)
            cache = _select_cache(self.cache, rows)
            mask = torch.cat([self.mask[rows],
                              torch.ones((n, t - 1), dtype=torch.long, device=dev)], 1)
            pos = self.next_position[rows][:, None] + torch.arange(t - 1, device=dev)[None, :]
            with torch.inference_mode():
                out = self.gen.model(input_ids=hyps_dev[:, :-1], attention_mask=mask,
                                     position_ids=pos, cache=cache, use_cache=True,
                                     return_dict=True)
                lp = torch.log_softmax(out.logits.to(torch.float32), dim=-1)
                out_lp[:, 1:] = lp.gather(-1, hyps_dev[:, 1:, None])[..., 0].cpu()
        return out_lp


class CausalRows(DecoderRows):
    def __init__(self, ctx: CausalContext, passage_of_row: torch.Tensor) -> None:
        self.ctx = ctx
        self.passage_of_row = passage_of_row
        rows = passage_of_row.to(ctx.gen.device)
        self.cache = _select_cache(ctx.cache, rows)
        self.mask = ctx.mask.index_select(0, rows)
        self.position = ctx.next_position.index_select(0, rows)

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        import torch

        n = tokens.shape[0]
        dev = self.mask.device
        self.mask = torch.cat([self.mask, torch.ones((n, 1), dtype=torch.long, device=dev)],
                              dim=1)
        with torch.inference_mode():
            out = self.ctx.gen.model(input_ids=tokens.to(dev)[:, None], attention_mask=self.mask,
                                     position_ids=self.position[:, None], cache=self.cache,
                                     use_cache=True, return_dict=True)
        self.position = self.position + 1
        self.cache = out.cache if hasattr(out, "cache") else out.past_key_values
        logits: torch.Tensor = out.logits[:, -1].to(device="cpu", dtype=torch.float32)
        return logits

    def reorder(self, order: torch.Tensor) -> None:
        dev_order = order.to(self.mask.device)
        self.cache.reorder_cache(dev_order)
        self.mask = self.mask.index_select(0, dev_order)
        self.position = self.position.index_select(0, dev_order)
        self.passage_of_row = self.passage_of_row.index_select(0, order)
