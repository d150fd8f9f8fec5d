"""A lean Qwen2 decoder (the reader pack's Qwen2.5-Coder 1.5B Instruct): the same arithmetic
as ``Qwen2ForCausalLM`` on the machinery of the lean Gemma decoder.

Everything that makes the Gemma decoder fast is shared (:mod:`.causal_decoder`): the K prompts
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

from ragdesk.core.engine.causal_decoder import GemmaDecoder, _Linear

if TYPE_CHECKING:
    import torch


def supports(model: Any) -> bool:
    cfg = getattr(model, "config", None)
    return (type(model).__name__ == "Qwen2ForCausalLM"
            and getattr(cfg, "model_type", None) == "qwen2"
            and not getattr(cfg, "use_sliding_window", False)
            and getattr(cfg, "hidden_act", None) == "silu"
            and all(t == "full_attention" for t in (getattr(cfg, "layer_types", None)
                                                    or ["full_attention"])))


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


class _QwenLayer:
    __slots__ = ("down", "gate_up", "ln_in", "ln_post_attn", "o", "qkv", "sliding")

    def __init__(self, layer: Any, precision: str, sliding: bool) -> None:
        att, mlp = layer.self_attn, layer.mlp
        if precision != "float32":  # new weight copies anyway: one product for q|k|v
            self.qkv = [_Linear([att.q_proj.weight, att.k_proj.weight, att.v_proj.weight],
                                [att.q_proj.bias, att.k_proj.bias, att.v_proj.bias],
                                precision)]
            self.gate_up = [_Linear([mlp.gate_proj.weight, mlp.up_proj.weight], None,
                                    precision)]
        else:
            self.qkv = [_Linear([p.weight], [p.bias], precision)
                        for p in (att.q_proj, att.k_proj, att.v_proj)]
            self.gate_up = [_Linear([p.weight], None, precision)
                            for p in (mlp.gate_proj, mlp.up_proj)]
        self.o = _Linear([att.o_proj.weight], [att.o_proj.bias], precision)
        self.down = _Linear([mlp.down_proj.weight], None, precision)
        self.ln_in = _Norm(layer.input_layernorm)
        self.ln_post_attn = _Norm(layer.post_attention_layernorm)
        self.sliding = sliding

    def heads_qkv(self, h: torch.Tensor, heads: int, kv_heads: int, d: int
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        r, t = h.shape[0], h.shape[1]
        a = self.ln_in(h)
        if len(self.qkv) == 1:
            qkv = self.qkv[0](a)
            q_dim, kv_dim = heads * d, kv_heads * d
            q, k, v = (qkv[..., :q_dim], qkv[..., q_dim:q_dim + kv_dim],
                       qkv[..., q_dim + kv_dim:])
        else:
            q, k, v = self.qkv[0](a), self.qkv[1](a), self.qkv[2](a)
        return (q.reshape(r, t, heads, d).transpose(1, 2),
                k.reshape(r, t, kv_heads, d).transpose(1, 2),
                v.reshape(r, t, kv_heads, d).transpose(1, 2))

    def finish(self, h: torch.Tensor, att: torch.Tensor) -> torch.Tensor:
        import torch.nn.functional as F

        h = h + self.o(att)
        a = self.ln_post_attn(h)
        if len(self.gate_up) == 1:
            gu = self.gate_up[0](a)
            half = gu.shape[-1] // 2
            gate, up = gu[..., :half], gu[..., half:]
        else:
            gate, up = self.gate_up[0](a), self.gate_up[1](a)
        return h + self.down(F.silu(gate) * up)


class Qwen2Decoder(GemmaDecoder):
    """The weights of one ``Qwen2ForCausalLM``, read in place (float32) or repacked."""

    def _scaling(self, cfg: Any) -> float:
        return float(self.head_dim ** -0.5)

    def _make_layer(self, layer: Any, precision: str, sliding: bool) -> Any:
        return _QwenLayer(layer, precision, sliding)

    def _make_norm(self, norm: Any) -> Any:
        return _Norm(norm)

    def _rope(self, positions: torch.Tensor, like: torch.Tensor
              ) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        cos_sin = self.rotary(like, positions)
        return {t: cos_sin for t in set(self.layer_types)}

    def _embed(self, tokens: torch.Tensor) -> torch.Tensor:
        import torch.nn.functional as F

        return F.embedding(tokens, self.embed)
