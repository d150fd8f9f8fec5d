"""The transformers causal backend: any decoder-only LM through transformers' own forward and
its dynamic cache (Gemma 3 and Qwen2 take the lean path, :mod:`.gemma_decoder` and
:mod:`.qwen2_decoder`).

The K prompts are left-padded into one batch, so that every prompt ends at the same column
and the rows step together; positions skip the padding.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from ragdesk.core.engine.contracts import DecoderRows, GeneratorModel, PassageContext

if TYPE_CHECKING:
    import torch


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
    def __init__(self, gen: GeneratorModel, ids: list[list[int]], *,
                 logits_to_keep: bool = False) -> None:
        """``logits_to_keep``: the model's forward takes it (only the last logits are kept)."""
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
        kwargs: dict[str, object] = {"logits_to_keep": 1} if logits_to_keep else {}
        with torch.inference_mode():
            out = gen.model(input_ids=input_ids, attention_mask=mask, position_ids=positions,
                            use_cache=True, return_dict=True, **kwargs)
        self.cache = out.cache if hasattr(out, "cache") else out.past_key_values
        self.first_logits = out.logits[:, -1].to(device="cpu", dtype=torch.float32)

    def rows(self, passage_of_row: torch.Tensor, max_steps: int = 64) -> CausalRows:
        return CausalRows(self, passage_of_row)

    def next_logits(self, passage: int, tokens: torch.Tensor) -> torch.Tensor:
        import torch

        n, t = tokens.shape
        dev = self.gen.device
        rows = torch.full((n,), passage, dtype=torch.long, device=dev)
        cache = _select_cache(self.cache, rows)
        mask = torch.cat([self.mask[rows], torch.ones((n, t), dtype=torch.long, device=dev)], 1)
        pos = self.next_position[rows][:, None] + torch.arange(t, device=dev)[None, :]
        out = self.gen.model(input_ids=tokens, attention_mask=mask, position_ids=pos,
                             cache=cache, use_cache=True, return_dict=True)
        logits: torch.Tensor = out.logits
        return logits


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
