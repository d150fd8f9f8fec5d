"""A lean Gemma 3 decoder for RAG: the same arithmetic as ``Gemma3ForCausalLM``, without its
per-call bookkeeping, with the K prompts packed and the KV cache preallocated.

Why (measured on the starter pack's Gemma 3 270M, 2 threads, K = 5, 16 new tokens; see
``bench/causal_bench.py``): transformers' forward over K left-padded prompts spends most of an
answer in the prefill (every padded position runs through every layer) and, per step, in its
262k-word output layer (``F.linear`` with 5 rows runs MKL's sgemm, about 3x the time of one
row) and in cache copies and per-layer bookkeeping. Here:

* the K prompts are packed one after the other (no padding); their common token prefix (the
  instructions in front of the passage, when the prompt starts with them) runs once and every
  row attends to that one copy's keys and values;
* the cache is one preallocated tensor per layer; a step writes one column, nothing is copied
  (rows of different prompt lengths leave a masked gap, positions stay exact);
* the output layer runs only on the rows that need logits, through the fastest kernel for few
  rows;
* ``precision="bfloat16"`` (the fast path) keeps bfloat16 copies of the linear layers and the
  output layer (oneDNN's kernels: with AVX512-BF16, e.g. AMD Zen 4, a prefill matrix product
  runs about 5x faster than in float32, and a decoding step reads half the bytes); norms,
  rotary embeddings, attention, the residual stream and the softmax stay float32. Measured on
  the starter pack, its next-token choice equals float32's on about 99 % of (passage, step)
  pairs along float32's own path. On CPUs without bfloat16 instructions it can be slower than
  float32.
* ``precision="int8"``: int8 weights (per output channel) with dynamically quantized
  activations (fbgemm / oneDNN, VNNI on x86): faster still, but its choices differ from
  float32's on about 8-12 % of those pairs (one scale for all the activations of a call).
  Both reduced precisions are tested for agreement, the float32 path for equality.

Only ``Gemma3ForCausalLM`` (``model_type == "gemma3_text"``) takes this path; other causal LMs
go through transformers' forward (:class:`ragdesk.core.engine.generators.CausalContext`).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ragdesk.core.engine.generators import DecoderRows, PassageContext
from ragdesk.core.engine.prefix_tree import PrefixTree
from ragdesk.core.options import check_precision

if TYPE_CHECKING:
    import torch

    from ragdesk.core.engine.generators import CausalLMGenerator

log = logging.getLogger(__name__)

FAST_PRECISION = "bfloat16"


def default_precision() -> str:
    """bfloat16 where the CPU multiplies it natively: about 3x faster answers with the same
    exact match on the starter pack (docs/benchmarks.md); float32 elsewhere, where bf16 is
    emulated and slower."""
    from ragdesk.core.cpu import cpu_has_native_bf16

    return FAST_PRECISION if cpu_has_native_bf16() else "float32"


def supports(model: Any) -> bool:
    cfg = getattr(model, "config", None)
    return (type(model).__name__ == "Gemma3ForCausalLM"
            and getattr(cfg, "model_type", None) == "gemma3_text"
            and getattr(cfg, "attn_logit_softcapping", None) is None
            and not getattr(cfg, "use_bidirectional_attention", False)
            and getattr(cfg, "hidden_activation", None) == "gelu_pytorch_tanh")


def int8_available() -> bool:
    """Whether this torch build has the dynamic int8 linear kernels (fbgemm / oneDNN)."""
    import torch

    try:
        return bool(hasattr(torch.ops.quantized, "linear_dynamic")
                    and set(torch.backends.quantized.supported_engines) & {"x86", "fbgemm"})
    except (AttributeError, RuntimeError):
        return False


# Weights larger than this run the few rows of a decoding step as (W @ x.T).T: MKL's sgemm
# with 2-20 rows costs about 3x one row on the output layer (262k x 640), the transposed
# product streams W once (measured: 5 rows 55 ms vs 157 ms). On the small per-layer matrices
# both cost the same, so they keep F.linear.
_MM_TRICK_MIN_ELEMENTS = 8 * 1024 * 1024


class _Linear:
    """``x @ W.T (+ b)`` in float32, or with int8 weights and dynamically quantized inputs."""

    __slots__ = ("bias", "out_features", "packed", "transposed", "weight")

    def __init__(self, weights: Sequence[Any], biases: Sequence[Any] | None,
                 precision: str) -> None:
        import torch

        if len(weights) == 1:
            weight = weights[0].detach()
            bias = None if biases is None or biases[0] is None else biases[0].detach()
        else:  # fused (q|k|v, gate|up): one call instead of several; int8 only (new memory)
            weight = torch.cat([w.detach() for w in weights], dim=0)
            bias = (None if biases is None or any(b is None for b in biases)
                    else torch.cat([b.detach() for b in biases]))
        self.out_features = int(weight.shape[0])
        self.transposed = weight.numel() >= _MM_TRICK_MIN_ELEMENTS
        self.packed: Any = None
        self.weight: torch.Tensor | None = weight
        self.bias: torch.Tensor | None = bias
        if precision == "int8":
            self.packed = _int8_prepack(weight, bias)
            self.weight, self.bias = None, None
        elif precision == "bfloat16":
            self.weight = weight.to(torch.bfloat16)
            self.bias = None if bias is None else bias.to(torch.bfloat16)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        import torch
        import torch.nn.functional as F

        lead = x.shape[:-1]
        flat = x.reshape(-1, x.shape[-1])
        y: torch.Tensor
        if self.weight is None:
            y = torch.ops.quantized.linear_dynamic(flat, self.packed, reduce_range=False)
        elif self.weight.dtype != flat.dtype:  # bfloat16 weights, float32 everywhere else
            y = F.linear(flat.to(self.weight.dtype), self.weight, self.bias).float()
        elif self.transposed and 1 < flat.shape[0] <= 32:
            y = torch.mm(self.weight, flat.t()).t()
            if self.bias is not None:
                y = y + self.bias
        else:
            y = F.linear(flat, self.weight, self.bias)
        return y.reshape(*lead, self.out_features)


def _int8_prepack(weight: torch.Tensor, bias: torch.Tensor | None) -> Any:
    """Symmetric int8 per output channel, packed for ``quantized.linear_dynamic``."""
    import torch

    w = weight.float().contiguous()
    scales = (w.abs().amax(dim=1) / 127.0).clamp(min=1e-12).double()
    zeros = torch.zeros(w.shape[0], dtype=torch.long)
    engine = torch.backends.quantized.engine
    # oneDNN packs about 2x faster than fbgemm (the x86 default: 262k x 640 output layer 1.3-1.6
    # s vs 2.6-3.3 s, measured on 2 loaded cores) and its products are as fast and equal to
    # 1e-6; packing is part of every start-up
    pack_with = "onednn" if "onednn" in torch.backends.quantized.supported_engines else engine
    with warnings.catch_warnings():  # quantized tensor creation is flagged as deprecated
        warnings.simplefilter("ignore")
        qw = torch.quantize_per_channel(w, scales, zeros, 0, torch.qint8)
        try:
            torch.backends.quantized.engine = pack_with
            return torch.ops.quantized.linear_prepack(
                qw, None if bias is None else bias.float().contiguous())
        finally:
            torch.backends.quantized.engine = engine


class _Norm:
    """Gemma's RMSNorm: ``x / rms(x) * (1 + w)``, computed in float32."""

    __slots__ = ("eps", "scale")

    def __init__(self, norm: Any) -> None:
        self.scale: torch.Tensor = 1.0 + norm.weight.detach().float()
        self.eps = float(norm.eps)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        import torch

        # the same operations as Gemma3RMSNorm, so that float32 results match it exactly
        out: torch.Tensor = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return out * self.scale


class _Layer:
    __slots__ = ("down", "gate_up", "k_norm", "ln_in", "ln_post_attn", "ln_post_ffn",
                 "ln_pre_ffn", "o", "q_norm", "qkv", "sliding")

    def __init__(self, layer: Any, precision: str, sliding: bool) -> None:
        att, mlp = layer.self_attn, layer.mlp
        fuse = precision != "float32"  # new weight copies anyway: fuse them
        if fuse:
            self.qkv: list[_Linear] = [_Linear(
                [att.q_proj.weight, att.k_proj.weight, att.v_proj.weight],
                [att.q_proj.bias, att.k_proj.bias, att.v_proj.bias], precision)]
            self.gate_up: list[_Linear] = [_Linear([mlp.gate_proj.weight, mlp.up_proj.weight],
                                                   None, precision)]
        else:
            self.qkv = [_Linear([p.weight], [p.bias], precision)
                        for p in (att.q_proj, att.k_proj, att.v_proj)]
            self.gate_up = [_Linear([p.weight], None, precision)
                            for p in (mlp.gate_proj, mlp.up_proj)]
        self.o = _Linear([att.o_proj.weight], [att.o_proj.bias], precision)
        self.down = _Linear([mlp.down_proj.weight], None, precision)
        self.q_norm, self.k_norm = _Norm(att.q_norm), _Norm(att.k_norm)
        self.ln_in = _Norm(layer.input_layernorm)
        self.ln_post_attn = _Norm(layer.post_attention_layernorm)
        self.ln_pre_ffn = _Norm(layer.pre_feedforward_layernorm)
        self.ln_post_ffn = _Norm(layer.post_feedforward_layernorm)
        self.sliding = sliding

    def heads_qkv(self, h: torch.Tensor, heads: int, kv_heads: int, d: int
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The normed input's queries, keys and values, heads on dim 1 ([R, H, T, D]),
        before the rotary embedding."""
        r, t = h.shape[0], h.shape[1]
        q, k, v = self.project(self.ln_in(h), heads * d, kv_heads * d)
        q = self.q_norm(q.reshape(r, t, heads, d).transpose(1, 2))
        k = self.k_norm(k.reshape(r, t, kv_heads, d).transpose(1, 2))
        return q, k, v.reshape(r, t, kv_heads, d).transpose(1, 2)

    def finish(self, h: torch.Tensor, att: torch.Tensor) -> torch.Tensor:
        """The residual stream after this layer, from the attention output [R, T, H*D]."""
        h = h + self.ln_post_attn(self.o(att))
        return h + self.ln_post_ffn(self.mlp(self.ln_pre_ffn(h)))

    def project(self, h: torch.Tensor, q_dim: int, kv_dim: int
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if len(self.qkv) == 1:
            qkv = self.qkv[0](h)
            return (qkv[..., :q_dim], qkv[..., q_dim:q_dim + kv_dim],
                    qkv[..., q_dim + kv_dim:])
        return self.qkv[0](h), self.qkv[1](h), self.qkv[2](h)

    def mlp(self, h: torch.Tensor) -> torch.Tensor:
        import torch.nn.functional as F

        if len(self.gate_up) == 1:
            gu = self.gate_up[0](h)
            half = gu.shape[-1] // 2
            gate, up = gu[..., :half], gu[..., half:]
        else:
            gate, up = self.gate_up[0](h), self.gate_up[1](h)
        return self.down(F.gelu(gate, approximate="tanh") * up)


class KVState:
    """Preallocated keys/values of R rows for every layer, and the position of every column.

    Column c of row r holds the token at position ``pos[r, c]`` (-1: empty). Rows whose
    prompts are shorter than the longest leave a gap of empty columns before the generated
    tokens, which all rows write at the same column.
    """

    def __init__(self, k: list[torch.Tensor], v: list[torch.Tensor], pos: torch.Tensor,
                 length: int, next_position: torch.Tensor, passage_of_row: torch.Tensor) -> None:
        self.k = k
        self.v = v
        self.pos = pos  # [R, capacity] long
        self.length = length  # columns in use
        self.next_position = next_position  # [R] long: position of each row's next token
        self.passage_of_row = passage_of_row

    @property
    def capacity(self) -> int:
        return int(self.pos.shape[1])

    def expand(self, passage_of_row: torch.Tensor, extra: int) -> KVState:
        """A new state whose row r copies row ``passage_of_row[r]`` of this one (the one row
        per passage state after the prefill), with room for ``extra`` more columns."""
        import torch

        n = self.length
        idx = passage_of_row.to(self.pos.device)
        cap = n + max(0, extra)
        ks, vs = [], []
        for k, v in zip(self.k, self.v, strict=True):
            shape = (idx.numel(), k.shape[1], cap, k.shape[3])
            kc, vc = k.new_empty(shape), v.new_empty(shape)
            kc[:, :, :n] = k[:, :, :n].index_select(0, idx)
            vc[:, :, :n] = v[:, :, :n].index_select(0, idx)
            ks.append(kc)
            vs.append(vc)
        pos = torch.full((idx.numel(), cap), -1, dtype=torch.long, device=self.pos.device)
        pos[:, :n] = self.pos[:, :n].index_select(0, idx)
        return KVState(ks, vs, pos, n, self.next_position.index_select(0, idx),
                       passage_of_row.clone())

    def reorder(self, order: torch.Tensor) -> None:
        """Row i continues previous row order[i] (beam search): one gather per layer."""
        idx = order.to(self.pos.device)
        n = self.length
        for i in range(len(self.k)):
            self.k[i][:, :, :n] = self.k[i][:, :, :n].index_select(0, idx)
            self.v[i][:, :, :n] = self.v[i][:, :, :n].index_select(0, idx)
        self.pos = self.pos.index_select(0, idx)
        self.next_position = self.next_position.index_select(0, idx)
        self.passage_of_row = self.passage_of_row.index_select(0, order)

    def grow(self, t: int) -> None:
        """Make room for ``t`` more columns (rare: only past the planned capacity)."""
        import torch

        need = self.length + t - self.capacity
        if need <= 0:
            return
        need = max(need, 16)
        for i in range(len(self.k)):
            k, v = self.k[i], self.v[i]
            self.k[i] = torch.cat([k, k.new_empty(*k.shape[:2], need, k.shape[3])], dim=2)
            self.v[i] = torch.cat([v, v.new_empty(*v.shape[:2], need, v.shape[3])], dim=2)
        self.pos = torch.cat([self.pos, self.pos.new_full((self.pos.shape[0], need), -1)], 1)


class GemmaDecoder:
    """The weights of one ``Gemma3ForCausalLM``, read in place (float32) or repacked (int8)."""

    def __init__(self, model: Any, precision: str = "float32") -> None:
        check_precision(precision)
        cfg = model.config
        inner = model.model
        if precision == "int8" and (inner.embed_tokens.weight.device.type != "cpu"
                                    or not int8_available()):
            # the int8 kernels are fbgemm's / oneDNN's, for the CPU only
            log.warning("int8 generator weights need the CPU kernels of torch's quantized "
                        "ops; running in float32")
            precision = "float32"
        self.precision = precision
        self.heads = int(cfg.num_attention_heads)
        self.kv_heads = int(cfg.num_key_value_heads)
        self.head_dim = int(getattr(cfg, "head_dim", None)
                            or cfg.hidden_size // cfg.num_attention_heads)
        self.groups = self.heads // self.kv_heads
        self.scaling = self._scaling(cfg)
        self.window = int(getattr(cfg, "sliding_window", None) or 0)
        self.layer_types = list(getattr(cfg, "layer_types", None)
                                or ["full_attention"] * cfg.num_hidden_layers)
        self.rotary = inner.rotary_emb
        self.softcap = getattr(cfg, "final_logit_softcapping", None)
        self.vocab_size = int(model.lm_head.weight.shape[0])
        self._model = model
        self._params = list(model.parameters())
        # the last prompts' common opening under the weights taken: (tokens, [(k, v) per layer])
        self._opening: tuple[tuple[int, ...],
                             list[tuple[torch.Tensor, torch.Tensor]]] | None = None
        self._take_weights()

    def _scaling(self, cfg: Any) -> float:
        return float(float(cfg.query_pre_attn_scalar) ** -0.5)

    def _make_layer(self, layer: Any, precision: str, sliding: bool) -> Any:
        """The lean copy of one decoder layer: ``heads_qkv`` and ``finish`` are what the
        decoder calls (see :class:`_Layer`)."""
        return _Layer(layer, precision, sliding)

    def _make_norm(self, norm: Any) -> Any:
        return _Norm(norm)

    def _take_weights(self) -> None:
        """Read (float32) or copy (norm scales; bfloat16 and int8 weights) the model's
        weights, and remember their version: fine-tuning changes them in place, and a copy
        taken before would keep answering with the old ones."""
        import torch

        model, precision = self._model, self.precision
        cfg, inner = model.config, model.model
        self.embed = inner.embed_tokens.weight.detach()
        emb_scale = getattr(inner.embed_tokens, "embed_scale", None)
        # Gemma3TextScaledWordEmbedding multiplies by its scale cast to the weight's dtype
        self.embed_scale = (emb_scale.to(self.embed.dtype) if torch.is_tensor(emb_scale)
                            else torch.tensor(float(cfg.hidden_size) ** 0.5,
                                              dtype=self.embed.dtype))
        self.layers = [self._make_layer(layer, precision,
                                        self.layer_types[i] == "sliding_attention")
                       for i, layer in enumerate(inner.layers[:cfg.num_hidden_layers])]
        self.norm = self._make_norm(inner.norm)
        self.lm_head = _Linear([model.lm_head.weight], [model.lm_head.bias], precision)
        self.dtype = self.embed.dtype
        self._taken = self._weights_version()
        self._opening = None  # computed with the weights before

    def _follow_weights(self) -> None:
        if self._weights_version() != self._taken:
            log.info("the generator's weights changed in place: taking them again")
            self._take_weights()

    # -- pieces ----------------------------------------------------------------------

    def _rope(self, positions: torch.Tensor, like: torch.Tensor
              ) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """cos/sin [R, T, D] per layer type, from the model's own rotary module."""
        return {t: self.rotary(like, positions, t) for t in set(self.layer_types)}

    def _masks(self, q_pos: torch.Tensor, k_pos: torch.Tensor,
               extra: torch.Tensor | None = None) -> dict[bool, torch.Tensor]:
        """Boolean attention masks [R, 1, T, C] (True: attend) for full and sliding layers.

        Causality comes from positions (a key is seen when its position is not after the
        query's), except where ``extra`` [R or 1, T, C] says more (a prefix tree)."""
        qp = q_pos[:, :, None]
        kp = k_pos[:, None, :]
        full = (kp >= 0) & (kp <= qp)
        if extra is not None:
            full = full & extra
        out = {False: full[:, None]}
        if self.window and "sliding_attention" in self.layer_types:
            out[True] = (full & (kp > qp - self.window))[:, None]
        else:
            out[True] = out[False]
        return out

    def _attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                mask: torch.Tensor) -> torch.Tensor:
        """q [R, H, T, D] against k/v [R, Hkv, C, D] with mask [R, 1, T, C]."""
        import torch.nn.functional as F

        r, h, t, d = q.shape
        if t == 1 and self.groups > 1:
            # one query per row: the heads that share a key head attend as one block of
            # queries, with no copies of the keys
            qg = q.view(r, self.kv_heads, self.groups, d)
            out = F.scaled_dot_product_attention(qg, k, v, attn_mask=mask,
                                                 scale=self.scaling)
            return out.view(r, h, 1, d)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=self.scaling,
                                              enable_gqa=self.groups > 1)

    def _embed(self, tokens: torch.Tensor) -> torch.Tensor:
        import torch.nn.functional as F

        return F.embedding(tokens, self.embed) * self.embed_scale

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        """Final norm and output layer of hidden states [..., d] -> float32 [..., V]."""
        import torch

        out = self.lm_head(self.norm(h)).float()
        if self.softcap is not None:
            out = torch.tanh(out / self.softcap) * self.softcap
        return out

    # -- decoding ---------------------------------------------------------------------

    def forward(self, tokens: torch.Tensor, state: KVState,
                positions: torch.Tensor | None = None,
                tree_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Feed ``tokens`` [R, T] after what ``state`` holds; returns hidden states [R, T, d]
        (before the final norm). ``positions`` [R, T] default to consecutive positions after
        each row's last; ``tree_mask`` [T, T] (True: attend) replaces causality among the new
        tokens (a prefix tree fed as one sequence)."""
        import torch

        r, t = tokens.shape
        if positions is None:
            positions = state.next_position[:, None] + torch.arange(t, device=tokens.device)
        state.grow(t)
        start, end = state.length, state.length + t
        state.pos[:, start:end] = positions
        extra = None
        if tree_mask is not None:
            extra = torch.ones((1, t, end), dtype=torch.bool, device=tokens.device)
            extra[0, :, start:] = tree_mask
        masks = self._masks(positions, state.pos[:, :end], extra)
        h = self._embed(tokens)
        rope = self._rope(positions, h)
        q_dim, d = self.heads * self.head_dim, self.head_dim
        for i, layer in enumerate(self.layers):
            q, k, v = layer.heads_qkv(h, self.heads, self.kv_heads, d)
            cos, sin = rope[self.layer_types[i]]
            q, k = _apply_rope(q, k, cos, sin)
            state.k[i][:, :, start:end] = k
            state.v[i][:, :, start:end] = v
            att = self._attend(q, state.k[i][:, :, :end], state.v[i][:, :, :end],
                               masks[layer.sliding])
            h = layer.finish(h, att.transpose(1, 2).reshape(r, t, q_dim))
        state.length = end
        state.next_position = positions[:, -1] + 1
        return h

    def prefill(self, prompts: Sequence[Sequence[int]], device: Any = None,
                extra: int = 0) -> tuple[KVState, torch.Tensor, int]:
        """Run the K prompts; returns the one-row-per-prompt state (room for ``extra`` more
        columns), the hidden state of every prompt's last token [K, d], and the length of the
        prefix they share (run once).

        The prompts' common prefix (all but at least one token of the shortest) runs as one
        row; the rest of every prompt is packed into one sequence for the linear layers, and
        attends, prompt by prompt, to the shared prefix and its own earlier tokens.
        """
        import torch

        self._follow_weights()
        k_rows = len(prompts)
        lens = [len(p) for p in prompts]
        if k_rows == 0 or min(lens) == 0:
            raise ValueError("every prompt needs at least one token")
        # One prompt (all passages read together) is its own opening: the next question's
        # reuses whatever start they share, the worked examples at least.
        shared = _common_prefix_len(prompts) if k_rows > 1 else lens[0]
        shared = min(shared, min(lens) - 1)
        tails = [list(p[shared:]) for p in prompts]
        tail_lens = [len(x) for x in tails]
        width = shared + max(tail_lens)
        cap = width + max(0, extra)
        n_layers = len(self.layers)
        shape = (k_rows, self.kv_heads, cap, self.head_dim)
        # zeros, not empty: the gap of a shorter prompt is masked, but SDPA multiplies its
        # values by a zero weight, and garbage NaNs there would survive that
        ks = [torch.zeros(shape, dtype=self.dtype, device=device) for _ in range(n_layers)]
        vs = [torch.zeros(shape, dtype=self.dtype, device=device) for _ in range(n_layers)]
        pos = torch.full((k_rows, cap), -1, dtype=torch.long, device=device)
        if shared:
            head = KVState([x[:1] for x in ks], [x[:1] for x in vs], pos[:1].clone(), 0,
                           torch.zeros(1, dtype=torch.long, device=device),
                           torch.zeros(1, dtype=torch.long))
            opening = tuple(int(t) for t in prompts[0][:shared])
            reused = self._reuse_opening(opening, head, device)
            if reused < shared:
                self.forward(torch.tensor([list(opening[reused:])], device=device), head)
            self._remember_opening(opening, head)
            for i in range(n_layers):  # every row reads the one computed copy
                ks[i][:, :, :shared] = ks[i][:1, :, :shared]
                vs[i][:, :, :shared] = vs[i][:1, :, :shared]
            pos[:, :shared] = torch.arange(shared, device=device)
        for z, n in enumerate(tail_lens):
            pos[z, shared:shared + n] = torch.arange(shared, shared + n, device=device)
        state = KVState(ks, vs, pos, width,
                        torch.tensor(lens, dtype=torch.long, device=device),
                        torch.arange(k_rows))
        hidden = self._packed_tails(tails, shared, state)
        return state, hidden, shared

    def _reuse_opening(self, opening: tuple[int, ...], head: KVState, device: Any) -> int:
        """Fill ``head`` with the keys and values of the longest start of ``opening`` that the
        last question's prompts also began with; returns its length.

        Every question's K prompts open with the same instructions and worked examples (a few
        hundred tokens, see :mod:`.prompts`): their keys and values depend only on those tokens
        and their positions, so they are computed once per decoder, not once per question.
        """
        import torch

        cached = self._opening
        if cached is None or cached[1][0][0].device != torch.device(device or "cpu"):
            return 0
        tokens, kv = cached
        n = _common_prefix_len([tokens, opening])
        n = min(n, len(opening) - 1)  # the opening's last token runs anyway (cheap)
        if n <= 0:
            return 0
        for i, (k, v) in enumerate(kv):
            head.k[i][:, :, :n] = k[:, :, :n]
            head.v[i][:, :, :n] = v[:, :, :n]
        head.pos[:, :n] = torch.arange(n, device=head.pos.device)
        head.length = n
        head.next_position = torch.full_like(head.next_position, n)
        return n

    def forget_opening(self) -> None:
        self._opening = None

    def _remember_opening(self, opening: tuple[int, ...], head: KVState) -> None:
        n = len(opening)
        kv = [(k[:, :, :n].clone(), v[:, :, :n].clone()) for k, v in zip(head.k, head.v,
                                                                            strict=True)]
        self._opening = (opening, kv)

    def _weights_version(self) -> tuple[int, ...]:
        # torch counts in-place changes per tensor (an optimizer's step is one): every
        # parameter, since a step may leave the ones a sample would watch unchanged (frozen)
        return tuple(t._version for t in self._params)

    def _packed_tails(self, tails: list[list[int]], shared: int,
                      state: KVState) -> torch.Tensor:
        """The prompts after the shared prefix as one packed sequence; returns the hidden
        state of each prompt's last token [K, d]."""
        import torch

        dev = state.pos.device
        flat = torch.tensor([t for tail in tails for t in tail], dtype=torch.long, device=dev)
        n_tok = int(flat.numel())
        bounds: list[tuple[int, int]] = []
        at = 0
        for tail in tails:
            bounds.append((at, at + len(tail)))
            at += len(tail)
        positions = torch.cat([torch.arange(shared, shared + len(t), device=dev)
                               for t in tails])
        masks = []
        for z, (a, b) in enumerate(bounds):
            q_pos = positions[a:b][None]
            masks.append(self._masks(q_pos, state.pos[z:z + 1, :shared + b - a]))
        h = self._embed(flat)[None]  # [1, N, d]
        rope = self._rope(positions[None], h)
        q_dim, d = self.heads * self.head_dim, self.head_dim
        for i, layer in enumerate(self.layers):
            q, k, v = layer.heads_qkv(h, self.heads, self.kv_heads, d)
            cos, sin = rope[self.layer_types[i]]
            q, k = _apply_rope(q, k, cos, sin)
            outs = []
            for z, (a, b) in enumerate(bounds):
                end = shared + b - a
                state.k[i][z, :, shared:end] = k[0, :, a:b]
                state.v[i][z, :, shared:end] = v[0, :, a:b]
                outs.append(self._attend(q[:, :, a:b], state.k[i][z:z + 1, :, :end],
                                         state.v[i][z:z + 1, :, :end],
                                         masks[z][layer.sliding]))
            att = torch.cat(outs, dim=2)  # [1, H, N, D]
            h = layer.finish(h, att.transpose(1, 2).reshape(1, n_tok, q_dim))
        last = torch.tensor([b - 1 for _, b in bounds], device=dev)
        return h[0].index_select(0, last)


def _apply_rope(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """transformers' ``apply_rotary_pos_emb`` (cos/sin [R, T, D], heads on dim 1)."""
    import torch

    cos, sin = cos[:, None], sin[:, None]

    def rot(x: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

    return q * cos + rot(q) * sin, k * cos + rot(k) * sin


def _common_prefix_len(prompts: Sequence[Sequence[int]]) -> int:
    first = prompts[0]
    n = min(len(p) for p in prompts)
    for i in range(n):
        tok = first[i]
        if any(p[i] != tok for p in prompts[1:]):
            return i
    return n


# ------------------------------------------------------------ RAG contexts and rows -----


class LeanCausalContext(PassageContext):
    """The K prompts run once through :class:`GemmaDecoder` (packed, shared prefix once)."""

    def __init__(self, gen: CausalLMGenerator, decoder: GemmaDecoder,
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

    def score(self, passage: int, hyps: torch.Tensor) -> torch.Tensor:
        import torch

        n, t = hyps.shape
        first = torch.log_softmax(self.first_logits[passage], dim=-1)
        out_lp = torch.empty((n, t), dtype=torch.float32)
        out_lp[:, 0] = first[hyps[:, 0]]
        if t > 1:
            state = self.base.expand(torch.full((n,), passage, dtype=torch.long), t - 1)
            hyps_dev = hyps.to(self.gen.device)
            with torch.inference_mode():
                h = self.decoder.forward(hyps_dev[:, :-1], state)
                lp = torch.log_softmax(self.decoder.logits(h), dim=-1)
                out_lp[:, 1:] = lp.gather(-1, hyps_dev[:, 1:, None])[..., 0].cpu()
        return out_lp

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
