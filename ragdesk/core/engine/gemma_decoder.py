"""The lean Gemma 3 backend (the starter pack's generator): the same arithmetic as
``Gemma3ForCausalLM`` on the lean decoder-only machinery of :mod:`.causal_decoder` (packed
prompts, their shared opening run once, a preallocated KV cache, reduced precisions).

What is Gemma's own: RMSNorm as ``x / rms(x) * (1 + w)``, q/k norms, a norm before and after
both the attention and the MLP (``gelu_tanh(gate) * up``), queries scaled by
``query_pre_attn_scalar ** -0.5``, embeddings scaled by ``sqrt(hidden_size)``, sliding-window
layers with their own rotary embedding, and optional logit soft-capping.

Only ``Gemma3ForCausalLM`` (``model_type == "gemma3_text"``) takes this path; other causal LMs
go through transformers' forward (:mod:`.hf_causal`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ragdesk.core.engine.causal_decoder import LeanCausalDecoder, architecture_of
from ragdesk.core.engine.lean_parts import Projections, WeightCopies

if TYPE_CHECKING:
    import torch


ARCHITECTURE = "Gemma3ForCausalLM"


def supports_config(cfg: object) -> bool:
    """Whether this decoder computes what ``Gemma3ForCausalLM`` computes for ``cfg``."""
    return (getattr(cfg, "model_type", None) == "gemma3_text"
            and getattr(cfg, "attn_logit_softcapping", None) is None
            and not getattr(cfg, "use_bidirectional_attention", False)
            and getattr(cfg, "hidden_activation", None) == "gelu_pytorch_tanh")


def supports(model: object) -> bool:
    return (architecture_of(model) == ARCHITECTURE
            and supports_config(getattr(model, "config", None)))


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


class _Layer(Projections):
    __slots__ = ("k_norm", "ln_in", "ln_post_attn", "ln_post_ffn", "ln_pre_ffn", "q_norm")

    def __init__(self, layer: Any, precision: str, sliding: bool,
                 copies: WeightCopies) -> None:
        super().__init__(layer, precision, sliding, copies)
        att = layer.self_attn
        self.q_norm, self.k_norm = _Norm(att.q_norm), _Norm(att.k_norm)
        self.ln_in = _Norm(layer.input_layernorm)
        self.ln_post_attn = _Norm(layer.post_attention_layernorm)
        self.ln_pre_ffn = _Norm(layer.pre_feedforward_layernorm)
        self.ln_post_ffn = _Norm(layer.post_feedforward_layernorm)

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
        import torch.nn.functional as F

        h = h + self.ln_post_attn(self.o(att))
        gate, up = self.gate_and_up(self.ln_pre_ffn(h))
        return h + self.ln_post_ffn(self.down(F.gelu(gate, approximate="tanh") * up))


class GemmaDecoder(LeanCausalDecoder):
    """The weights of one ``Gemma3ForCausalLM``, read in place (float32) or repacked (int8)."""

    def _scaling(self, cfg: Any) -> float:
        return float(float(cfg.query_pre_attn_scalar) ** -0.5)

    def _make_layer(self, layer: Any, precision: str, sliding: bool,
                    copies: WeightCopies) -> _Layer:
        return _Layer(layer, precision, sliding, copies)

    def _make_norm(self, norm: Any) -> _Norm:
        return _Norm(norm)

    def _copy_weights(self) -> None:
        import torch

        super()._copy_weights()
        emb_scale = getattr(self._model.model.embed_tokens, "embed_scale", None)
        # Gemma3TextScaledWordEmbedding multiplies by its scale cast to the weight's dtype
        self.embed_scale = (emb_scale.to(self.embed.dtype) if torch.is_tensor(emb_scale)
                            else torch.tensor(float(self._model.config.hidden_size) ** 0.5,
                                              dtype=self.embed.dtype))

    def _rope(self, positions: torch.Tensor, like: torch.Tensor
              ) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """cos/sin [R, T, D] per layer type, from the model's own rotary module."""
        return {t: self.rotary(like, positions, t) for t in set(self.layer_types)}

    def _embed(self, tokens: torch.Tensor) -> torch.Tensor:
        import torch.nn.functional as F

        return F.embedding(tokens, self.embed) * self.embed_scale
