"""The RAG side of the lean decoder-only machinery: the K prompts of one question run once
through a :class:`.causal_decoder.LeanCausalDecoder` (:class:`LeanCausalContext`), and the rows
that decode from them step by step (:class:`LeanCausalRows`), as the decoding loops ask them
through the contracts' :class:`.contracts.PassageContext` and :class:`.contracts.DecoderRows`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragdesk.core.engine.contracts import DecoderRows, GeneratorModel, PassageContext

if TYPE_CHECKING:
    import torch

    from ragdesk.core.engine.causal_decoder import LeanCausalDecoder
    from ragdesk.core.engine.lean_parts import KVState
    from ragdesk.core.engine.prefix_tree import PrefixTree


class LeanCausalContext(PassageContext):
    """The K prompts run once through a :class:`LeanCausalDecoder` (packed, shared prefix
    once)."""

    def __init__(self, gen: GeneratorModel, decoder: LeanCausalDecoder,
                 ids: list[list[int]]) -> None:
        import torch

        self.gen = gen
        self.decoder = decoder
        self.input_ids = ids
        self.n_docs = len(ids)
        with torch.inference_mode():
            self.base, hidden, self.shared_prefix = decoder.prefill(ids, gen.device)
            self.first_logits = decoder.logits(hidden).to(device="cpu", dtype=torch.float32)

    def rows(self, passage_of_row: torch.Tensor, max_steps: int = 64) -> LeanCausalRows:
        return LeanCausalRows(self, self.base.expand(passage_of_row, max_steps))

    def next_logits(self, passage: int, tokens: torch.Tensor) -> torch.Tensor:
        import torch

        n, t = tokens.shape
        state = self.base.expand(torch.full((n,), passage, dtype=torch.long), t)
        return self.decoder.logits(self.decoder.forward(tokens, state))

    def score_tree(self, passage: int, tree: PrefixTree) -> torch.Tensor:
        """log p(node token | its prefix, passage) for every node of ``tree`` [nodes], from
        one decoder pass over the tree's inner nodes (positions = prompt length + depth)."""
        import torch

        def inner_lp(inner: list[int]) -> torch.Tensor:
            dev = self.gen.device
            state = self.base.expand(torch.tensor([passage]), len(inner))
            inner_t = torch.tensor(inner, dtype=torch.long)
            tokens = torch.tensor(tree.tokens, dtype=torch.long)[inner_t]
            depth = torch.tensor(tree.depth, dtype=torch.long)[inner_t]
            positions = (state.next_position[0].cpu() + depth)[None]
            with torch.inference_mode():
                h = self.decoder.forward(tokens[None].to(dev), state,
                                         positions=positions.to(dev),
                                         tree_mask=tree.ancestry(inner).to(dev))[0]
                return torch.log_softmax(self.decoder.logits(h), dim=-1).cpu()

        return tree.node_log_probs(torch.log_softmax(self.first_logits[passage], dim=-1),
                                   inner_lp)


class LeanCausalRows(DecoderRows):
    def __init__(self, ctx: LeanCausalContext, state: KVState) -> None:
        self.ctx = ctx
        self.state = state
        self.passage_of_row = state.passage_of_row

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        import torch

        dec = self.ctx.decoder
        with torch.inference_mode():
            h = dec.forward(tokens.to(self.ctx.gen.device)[:, None], self.state)
            out: torch.Tensor = dec.logits(h[:, -1]).to(device="cpu", dtype=torch.float32)
        return out

    def reorder(self, order: torch.Tensor) -> None:
        self.state.reorder(order)
        self.passage_of_row = self.state.passage_of_row
