"""A lean Qwen2 decoder (the reader pack's Qwen2.5-Coder 1.5B Instruct): the same arithmetic
as ``Qwen2ForCausalLM`` on the machinery of the lean Gemma decoder.

Everything that makes the lean decoders fast is shared (:mod:`.causal_decoder`): the K prompts
packed with no padding, their common opening (instructions and worked examples) run once and
kept for the next question, one preallocated KV cache per layer, the output layer run only on
the rows that need logits, and ``precision="bfloat16"`` (bfloat16 copies of the linear layers,
float32 norms, rotary embeddings, attention and residual stream) where the CPU multiplies it
natively. What differs is the layer: RMSNorm as ``w * x / rms(x)`` (Gemma: ``1 + w``), q/k/v
projections with biases and no q/k norms, one norm before the SwiGLU MLP (``silu(gate) * up``)
and none after either block, queries scaled by ``head_dim ** -0.5``, unscaled embeddings, no
logit soft-capping; the output layer is the model's own (untied in the reader's GGUF).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ragdesk.core.engine.causal_decoder import LeanCausalDecoder, architecture_of
from ragdesk.core.engine.lean_parts import Projections, WeightCopies

if TYPE_CHECKING:
    import torch


ARCHITECTURE = "Qwen2ForCausalLM"


def supports_config(cfg: object) -> bool:
    """Whether this decoder computes what ``Qwen2ForCausalLM`` computes for ``cfg``."""
    return (getattr(cfg, "model_type", None) == "qwen2"
            and not getattr(cfg, "use_sliding_window", False)
            and getattr(cfg, "hidden_act", None) == "silu"
            and all(t == "full_attention" for t in (getattr(cfg, "layer_types", None)
                                                    or ["full_attention"])))


def supports(model: object) -> bool:
    return (architecture_of(model) == ARCHITECTURE
            and supports_config(getattr(model, "config", None)))


class _Norm:
    """Qwen2's RMSNorm, ``w * (x / rms(x))``, in float32."""

    __slots__ = ("eps", "weight")

    def __init__(self, norm: Any) -> None:
        self.weight: torch.Tensor = norm.weight.detach().float()
        self.eps = float(norm.variance_epsilon)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        import torch

        # Qwen2RMSNorm's operations in its order, so that float32 matches it exactly
        out: torch.Tensor = self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True)
                                                         + self.eps))
        return out


class _QwenLayer(Projections):
    __slots__ = ("ln_in", "ln_post_attn")

    def __init__(self, layer: Any, precision: str, sliding: bool,
                 copies: WeightCopies) -> None:
        super().__init__(layer, precision, sliding, copies)
        self.ln_in = _Norm(layer.input_layernorm)
        self.ln_post_attn = _Norm(layer.post_attention_layernorm)

    def heads_qkv(self, h: torch.Tensor, heads: int, kv_heads: int, d: int
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        r, t = h.shape[0], h.shape[1]
        q, k, v = self.project(self.ln_in(h), heads * d, kv_heads * d)
        return (q.reshape(r, t, heads, d).transpose(1, 2),
                k.reshape(r, t, kv_heads, d).transpose(1, 2),
                v.reshape(r, t, kv_heads, d).transpose(1, 2))

    def finish(self, h: torch.Tensor, att: torch.Tensor) -> torch.Tensor:
        import torch.nn.functional as F

        h = h + self.o(att)
        gate, up = self.gate_and_up(self.ln_post_attn(h))
        return h + self.down(F.silu(gate) * up)


class Qwen2Decoder(LeanCausalDecoder):
    """The weights of one ``Qwen2ForCausalLM``, read in place (float32) or repacked."""

    # int8 inputs to the output layer cost the reader pack right answers where the starter's
    # Gemma lost none; its one-row steps read the int8 weight with bfloat16 inputs
    int8_head_inputs = False

    def _scaling(self, cfg: Any) -> float:
        return float(self.head_dim ** -0.5)

    def _make_layer(self, layer: Any, precision: str, sliding: bool,
                    copies: WeightCopies) -> _QwenLayer:
        return _QwenLayer(layer, precision, sliding, copies)

    def _make_norm(self, norm: Any) -> _Norm:
        return _Norm(norm)

    def _rope(self, positions: torch.Tensor, like: torch.Tensor
              ) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        cos_sin = self.rotary(like, positions)
        return {t: cos_sin for t in set(self.layer_types)}

    def _embed(self, tokens: torch.Tensor) -> torch.Tensor:
        import torch.nn.functional as F

        return F.embedding(tokens, self.embed)
