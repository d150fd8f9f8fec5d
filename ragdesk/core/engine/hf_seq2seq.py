"""The transformers seq2seq backend: any encoder-decoder LM through transformers' own
forward and its ``EncoderDecoderCache`` (the lean BART backend, :mod:`.bart_decoder`, is the
fast path for BART itself).

The K generator inputs are right-padded into one batch and encoded once; decoder rows select
their passage's encoder outputs and cross-attention keys/values, and follow them when beam
search moves a row to another passage.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ragdesk.core.engine.contracts import DecoderRows, GeneratorModel, PassageContext
from ragdesk.core.errors import MissingModelError

if TYPE_CHECKING:
    import torch


def right_padded(ids: list[list[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The inputs as one batch padded on the right, and its attention mask."""
    import torch

    length = max(len(x) for x in ids)
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
    def __init__(self, gen: GeneratorModel, ids: list[list[int]]) -> None:
        import torch
        from transformers import EncoderDecoderCache
        from transformers.modeling_outputs import BaseModelOutput

        self.gen = gen
        self.input_ids = ids
        self.n_docs = len(ids)
        model = gen.model
        input_ids, mask = right_padded(ids, gen.settings.pad_token_id)
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

    def next_logits(self, passage: int, tokens: torch.Tensor) -> torch.Tensor:
        import torch
        from transformers.modeling_outputs import BaseModelOutput

        n = tokens.shape[0]
        cache = self._cache(torch.full((n,), passage, dtype=torch.long), self_kv=True)
        out = self.gen.model(
            encoder_outputs=BaseModelOutput(
                last_hidden_state=self.encoder_hidden[passage:passage + 1].expand(n, -1, -1)),
            attention_mask=self.attention_mask[passage:passage + 1].expand(n, -1),
            decoder_input_ids=tokens, cache=cache, use_cache=True, return_dict=True)
        logits: torch.Tensor = out.logits
        return logits


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
