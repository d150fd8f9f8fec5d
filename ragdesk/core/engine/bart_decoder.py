"""A lean BART decoder for RAG: the same arithmetic as ``BartForConditionalGeneration``,
without its per-call bookkeeping, and with the cross-attention shared between rows.

Why: a RAG decoding step runs the decoder over ``beams × K`` rows, one token each. Its cost
is reading the weights; transformers' forward adds a fixed per-layer overhead (cache objects,
mask building, output records) that is a large part of a step on a CPU, and it keeps one copy
of the cross-attention keys/values per row, so beams copy and re-order them every step.
Here the K passages' cross-attention keys/values are computed once and every row attends
to its own passage's copy: the queries of all rows of a passage are grouped into one
attention call. Self-attention caches are preallocated.

Only ``BartForConditionalGeneration`` (``config.model_type == "bart"``: post-layer-norm,
learned positions with offset 2, no final decoder layer norm) takes this path; other
encoder-decoder models go through transformers' own forward (:mod:`.hf_seq2seq`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ragdesk.core.engine.contracts import DecoderRows, GeneratorModel, PassageContext
from ragdesk.core.engine.hf_seq2seq import right_padded

if TYPE_CHECKING:
    import torch

    from ragdesk.core.engine.prefix_tree import PrefixTree


def supports(model: Any) -> bool:
    cfg = getattr(model, "config", None)
    return (type(model).__name__ == "BartForConditionalGeneration"
            and getattr(cfg, "model_type", None) == "bart"
            and not getattr(cfg, "add_final_layer_norm", False)
            and not getattr(cfg, "normalize_before", False)
            and getattr(model.model.decoder, "layer_norm", None) is None)


class _Linear:
    """``nn.Linear`` arithmetic, optionally through a faster kernel for a few rows.

    With the few rows of a decoding step, ``x @ W.T`` (what ``F.linear`` runs) is slow in
    MKL's sgemm: measured on 2 cores with BART-large's matrices, 5 rows cost 2.1x one row.
    The same product computed as ``(W @ x.T).T`` runs another kernel that streams W once: 5
    rows cost 1.1x one row (2 to 20 rows: 1.2x to 1.9x faster than ``F.linear``). The sums
    run in another order, so results differ in the last bits (about 1e-6 relative).
    """

    __slots__ = ("bias", "weight")

    def __init__(self, linear: Any) -> None:
        self.weight = linear.weight
        self.bias = linear.bias

    def __call__(self, x: torch.Tensor, rows: int | None) -> torch.Tensor:
        import torch
        import torch.nn.functional as F

        if rows is None:
            out: torch.Tensor = F.linear(x, self.weight, self.bias)
            return out
        flat = x.reshape(rows, x.shape[-1])
        y = torch.mm(self.weight, flat.t()).t()
        if self.bias is not None:
            y = y + self.bias
        return y.contiguous().view(*x.shape[:-1], y.shape[-1])


class _Layer:
    __slots__ = ("act", "cross_kv", "cross_o", "cross_q", "fc1", "fc2", "ln_cross", "ln_ffn",
                 "ln_self", "self_k", "self_o", "self_q", "self_v")

    def __init__(self, layer: Any) -> None:
        sa, ca = layer.self_attn, layer.encoder_attn
        self.self_q, self.self_k = _Linear(sa.q_proj), _Linear(sa.k_proj)
        self.self_v, self.self_o = _Linear(sa.v_proj), _Linear(sa.out_proj)
        self.cross_q, self.cross_o = _Linear(ca.q_proj), _Linear(ca.out_proj)
        self.cross_kv = (ca.k_proj, ca.v_proj)  # run once per question over many rows
        self.fc1, self.fc2 = _Linear(layer.fc1), _Linear(layer.fc2)
        self.act = layer.activation_fn
        self.ln_self = layer.self_attn_layer_norm
        self.ln_cross = layer.encoder_attn_layer_norm
        self.ln_ffn = layer.final_layer_norm


class BartDecoder:
    """The weights of one ``BartForConditionalGeneration`` decoder, read in place."""

    def __init__(self, model: Any, packed_weights: bool = False) -> None:
        dec = model.model.decoder
        cfg = model.config
        self.heads = int(cfg.decoder_attention_heads)
        self.d_model = int(cfg.d_model)
        self.head_dim = self.d_model // self.heads
        self.scaling = self.head_dim ** -0.5
        self.embed_tokens = dec.embed_tokens
        self.embed_scale = float(getattr(dec.embed_tokens, "embed_scale", 1.0) or 1.0)
        self.embed_positions = dec.embed_positions.weight
        self.position_offset = int(getattr(dec.embed_positions, "offset", 2))
        self.ln_embedding = dec.layernorm_embedding
        self.layers = [_Layer(layer) for layer in dec.layers]
        self.lm_head = _Linear(model.lm_head)
        self.final_logits_bias = model.final_logits_bias
        self.packed_weights = packed_weights

    def _pack_for(self, rows: int) -> int | None:
        """``rows`` when the few-rows kernel of :class:`_Linear` applies, else None."""
        if not self.packed_weights or rows < 2:
            return None  # one row is a matrix-vector product either way
        return rows

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        """[R, T, d] -> [R, H, T, D]"""
        r, t, _ = x.shape
        return x.view(r, t, self.heads, self.head_dim).transpose(1, 2)

    def cross_kv(self, encoder_hidden: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per layer, the cross-attention keys and values of the K passages: [K, H, L, D]."""
        import torch.nn.functional as F

        out = []
        for layer in self.layers:
            k_proj, v_proj = layer.cross_kv
            out.append((self._heads(F.linear(encoder_hidden, k_proj.weight, k_proj.bias)),
                        self._heads(F.linear(encoder_hidden, v_proj.weight, v_proj.bias))))
        return out

    def forward(self, tokens: torch.Tensor, state: DecoderState, packed: bool = True,
                positions: torch.Tensor | None = None,
                self_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Run ``tokens`` [R, T] after what ``state`` holds; returns logits [R, T, V].

        ``packed``: may use the few-rows kernel of :class:`_Linear` (one-token steps).
        ``positions`` [T] and ``self_mask`` [T, past + T] (True: attend) replace the usual
        consecutive positions and causal mask (a prefix tree fed as one sequence).
        """
        import torch
        import torch.nn.functional as F

        r, t = tokens.shape
        past = state.length
        m = self._pack_for(r) if t == 1 and packed else None
        if positions is None:
            positions = torch.arange(past, past + t, device=tokens.device)
        h = F.embedding(tokens, self.embed_tokens.weight,
                        self.embed_tokens.padding_idx) * self.embed_scale
        h = h + self.embed_positions[positions + self.position_offset][None]
        h = self.ln_embedding(h)
        causal = self_mask
        if causal is None and t > 1:  # query i sees the past and new tokens 0..i
            keys = torch.arange(past + t, device=tokens.device)
            causal = keys[None, :] <= (past + torch.arange(t, device=tokens.device))[:, None]
        for i, layer in enumerate(self.layers):
            q = self._heads(layer.self_q(h, m))
            k_all, v_all = state.append(i, self._heads(layer.self_k(h, m)),
                                        self._heads(layer.self_v(h, m)))
            a = F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=causal,
                                               scale=self.scaling)
            a = a.transpose(1, 2).reshape(r, t, self.d_model)
            h = layer.ln_self(h + layer.self_o(a, m))

            q = self._heads(layer.cross_q(h, m))  # [R, H, T, D]
            a = state.cross_attention(i, q, self.scaling).transpose(1, 2)
            h = layer.ln_cross(h + layer.cross_o(a.reshape(r, t, self.d_model), m))

            h = layer.ln_ffn(h + layer.fc2(layer.act(layer.fc1(h, m)), m))
        state.length = past + t
        logits: torch.Tensor = self.lm_head(h, m) + self.final_logits_bias
        return logits


def can_pack_weights(model: Any) -> bool:
    """Whether the few-rows kernel of :class:`_Linear` is measured to pay: float32 on the
    CPU (measured with MKL's sgemm; other back ends keep ``F.linear``)."""
    import torch

    try:
        p = next(model.parameters())
    except StopIteration:
        return False
    return bool(p.device.type == "cpu" and p.dtype == torch.float32)


class DecoderState:
    """Self-attention caches of R rows and the passages' cross-attention keys/values.

    ``passage_of_row`` must be a grid: ``arange(K).repeat(G)`` (row = g*K + z) or
    ``arange(K).repeat_interleave(G)`` (row = z*G + g), or all rows on one passage; the
    queries of the G rows of each passage then attend in one call, with no copy of the keys.
    """

    def __init__(self, cross: list[tuple[torch.Tensor, torch.Tensor]],
                 cross_mask: torch.Tensor | None, passage_of_row: torch.Tensor,
                 capacity: int) -> None:
        import torch

        self.cross = cross
        self.cross_mask = cross_mask  # [K, 1, 1, L] bool (True: attend) or None
        self.passage_of_row = passage_of_row
        self.capacity = capacity
        self.length = 0
        self.self_kv: list[tuple[torch.Tensor, torch.Tensor]] = []
        k = cross[0][0].shape[0]
        r = int(passage_of_row.numel())
        rows = passage_of_row.to("cpu")
        arange = torch.arange(k)
        if r % k == 0 and torch.equal(rows, arange.repeat(r // k)):
            self.layout, self.groups = "minor", r // k
        elif r % k == 0 and torch.equal(rows, arange.repeat_interleave(r // k)):
            self.layout, self.groups = "major", r // k
        elif bool((rows == rows[0]).all()):
            self.layout, self.groups = "single", r
            self.single = int(rows[0])
        else:
            raise ValueError("rows must be laid out as a grid over the passages")

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor]:
        import torch

        t = k.shape[2]
        if layer == len(self.self_kv):
            r, h, _, d = k.shape
            shape = (r, h, max(self.capacity, self.length + t), d)
            self.self_kv.append((torch.empty(shape, dtype=k.dtype, device=k.device),
                                 torch.empty(shape, dtype=v.dtype, device=v.device)))
        kc, vc = self.self_kv[layer]
        if self.length + t > kc.shape[2]:  # grow (rare: only past the planned capacity)
            extra = self.length + t - kc.shape[2]
            kc = torch.cat([kc, kc.new_empty(*kc.shape[:2], extra, kc.shape[3])], dim=2)
            vc = torch.cat([vc, vc.new_empty(*vc.shape[:2], extra, vc.shape[3])], dim=2)
            self.self_kv[layer] = (kc, vc)
        kc[:, :, self.length:self.length + t] = k
        vc[:, :, self.length:self.length + t] = v
        end = self.length + t
        return kc[:, :, :end], vc[:, :, :end]

    def cross_attention(self, layer: int, q: torch.Tensor, scaling: float) -> torch.Tensor:
        """q [R, H, T, D] -> [R, H, T, D], each row attending to its passage."""
        import torch.nn.functional as F

        k, v = self.cross[layer]
        r, h, t, d = q.shape
        mask = self.cross_mask
        if self.layout == "single":
            z = self.single
            qg = q.transpose(0, 1).reshape(1, h, r * t, d)
            out = F.scaled_dot_product_attention(
                qg, k[z:z + 1], v[z:z + 1], attn_mask=None if mask is None else mask[z:z + 1],
                scale=scaling)
            return out.reshape(h, r, t, d).transpose(0, 1)
        n_k, g = k.shape[0], self.groups
        if self.layout == "minor":  # row = g*K + z
            qg = q.view(g, n_k, h, t, d).permute(1, 2, 0, 3, 4)
        else:  # row = z*G + g
            qg = q.view(n_k, g, h, t, d).permute(0, 2, 1, 3, 4)
        qg = qg.reshape(n_k, h, g * t, d)
        out = F.scaled_dot_product_attention(qg, k, v, attn_mask=mask, scale=scaling)
        out = out.view(n_k, h, g, t, d)
        order = (2, 0, 1, 3, 4) if self.layout == "minor" else (0, 2, 1, 3, 4)
        return out.permute(*order).reshape(r, h, t, d)

    def reorder(self, order: torch.Tensor) -> None:
        """Row i continues previous row order[i]; rows must stay on their passages."""
        import torch

        if not torch.equal(self.passage_of_row.index_select(0, order), self.passage_of_row):
            raise ValueError("beam reordering moved a row to another passage")
        dev = order.to(self.self_kv[0][0].device) if self.self_kv else order
        self.self_kv = [(k.index_select(0, dev), v.index_select(0, dev))
                        for k, v in self.self_kv]

    def expand(self, passage_of_row: torch.Tensor, capacity: int) -> DecoderState:
        """A new state whose row r copies the row of this (one row per passage) state that
        belongs to passage ``passage_of_row[r]``."""
        new = DecoderState(self.cross, self.cross_mask, passage_of_row, capacity)
        new.length = self.length
        if self.self_kv:
            import torch

            idx = passage_of_row.to(self.self_kv[0][0].device)
            for k, v in self.self_kv:
                _, h, _, d = k.shape
                shape = (idx.numel(), h, max(capacity, self.length), d)
                kc = torch.empty(shape, dtype=k.dtype, device=k.device)
                vc = torch.empty(shape, dtype=v.dtype, device=v.device)
                kc[:, :, :self.length] = k[:, :, :self.length].index_select(0, idx)
                vc[:, :, :self.length] = v[:, :, :self.length].index_select(0, idx)
                new.self_kv.append((kc, vc))
        return new


# ------------------------------------------------------------ RAG context and rows -----


class LeanBartContext(PassageContext):
    """The K passages encoded once (BART's own encoder), decoded with :class:`BartDecoder`."""

    def __init__(self, gen: GeneratorModel, decoder: BartDecoder, ids: list[list[int]]
                 ) -> None:
        import torch

        self.gen = gen
        self.decoder = decoder
        self.input_ids = ids
        self.n_docs = len(ids)
        input_ids, mask = right_padded(ids, gen.settings.pad_token_id)
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

    def next_logits(self, passage: int, tokens: torch.Tensor) -> torch.Tensor:
        import torch

        n, t = tokens.shape
        state = self.base.expand(torch.full((n,), passage, dtype=torch.long), t + 1)
        return self.decoder.forward(tokens, state)

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
    def __init__(self, ctx: LeanBartContext, state: DecoderState) -> None:
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
