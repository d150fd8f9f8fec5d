"""Decoder-only LMs for answering, built from ``config.json`` and a memory-mapped
``model.safetensors`` without transformers' modeling modules.

A one-shot ``ragdesk ask`` paid about 3 s (idle 2-core machine) to import transformers'
modeling code for its generator and question encoder: ``modeling_utils`` pulls in
``torch.distributed.tensor``, ``torch._dynamo`` and ``scipy.optimize``, none of which the lean
decoders (:mod:`ragdesk.core.engine.gemma_decoder`, :mod:`~ragdesk.core.engine.qwen2_decoder`)
use: they read the weights and compute the layers themselves. So for answering, the model is a
plain ``torch.nn.Module`` tree with transformers' module and parameter names (the file's keys
are checked against it with ``load_state_dict(strict=True)``), its weights the file's mapped
tensors, its rotary embedding computed as transformers computes it, its configuration and
generation settings read as transformers reads them (:mod:`ragdesk.core.lean_config`, without
importing transformers, whose package import alone is most of a second). It has no
forward of its own: training and transformers' generic forward load the transformers model
(:func:`ragdesk.core.models.mapped_weights.load_mapped_causal_lm`).
tests/core/models/test_lean_causal_lm.py holds the lean decoders over it equal to the lean
decoders over transformers' model, and to transformers' forward.

It imports torch: the loaders import it when they build a model, not before.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from ragdesk.core.engine import gemma_decoder, qwen2_decoder
from ragdesk.core.errors import MissingModelError
from ragdesk.core.lean_config import read_config
from ragdesk.core.lean_generation_config import read_generation_config
from ragdesk.core.models.mapped_weights import WEIGHTS_FILE, mapped_tensors

# model_type -> the lean decoder module that reads the tree (its transformers class, and the
# configurations it reproduces)
_DECODERS = {"gemma3_text": gemma_decoder, "qwen2": qwen2_decoder}
# rotary embeddings computed once from the configuration (the dynamic kinds change with the
# sequence length, which transformers does in a decorator this module does not reproduce)
_STATIC_ROPE = frozenset({"default", "linear", "yarn", "llama3"})


def _rope_types(config: Any) -> dict[str | None, str]:
    """The rotary kind per layer type (None: one for every layer), as the config gives them."""
    params = getattr(config, "rope_parameters", None) or {}
    if config.model_type == "gemma3_text":
        # a layer type without parameters has no rotary embedding in transformers: not here
        return {t: str(params[t].get("rope_type", "default")) if params.get(t) else "none"
                for t in set(config.layer_types)}
    return {None: str(params.get("rope_type", "default"))}


def reproduces(config: Any) -> bool:
    """Whether the lean tree and decoder reproduce this configuration's model exactly."""
    decoder = _DECODERS.get(str(getattr(config, "model_type", None)))
    return (decoder is not None and decoder.supports_config(config)
            and set(_rope_types(config).values()) <= _STATIC_ROPE)


class _Rotary:
    """cos/sin of the rotary embedding per layer type, with transformers' operations (its
    ``Gemma3RotaryEmbedding`` / ``Qwen2RotaryEmbedding``: same inverse frequencies, same
    float32 product, so that float32 results are equal)."""

    def __init__(self, config: Any) -> None:
        dim = int(getattr(config, "head_dim", None)
                  or config.hidden_size // config.num_attention_heads)
        self.inv_freq: dict[str | None, torch.Tensor] = {}
        self.scaling: dict[str | None, float] = {}
        for layer_type, kind in _rope_types(config).items():
            if kind == "default":
                params = (config.rope_parameters[layer_type] if layer_type is not None
                          else config.rope_parameters)
                base = params["rope_theta"]
                inv = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float) / dim))
                scale = 1.0
            else:  # the scaled kinds: transformers' own arithmetic (and its import)
                from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

                extra = {} if layer_type is None else {"layer_type": layer_type}
                inv, scale = ROPE_INIT_FUNCTIONS[kind](config, None, **extra)
            self.inv_freq[layer_type], self.scaling[layer_type] = inv, float(scale)

    def __call__(self, x: torch.Tensor, position_ids: torch.Tensor,
                 layer_type: str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        key = layer_type if layer_type in self.inv_freq else None
        inv_freq, scale = self.inv_freq[key], self.scaling[key]
        freqs = position_ids[..., None].float() * inv_freq.to(device=x.device,
                                                              dtype=torch.float)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos() * scale, emb.sin() * scale
        return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)


def _weights(*shape: int, bias: int | None = None) -> nn.Module:
    """A module holding ``weight`` (and ``bias``, else None) of these shapes on the meta
    device: shapes only, which the file's tensors replace. Not ``nn.Linear``: its
    initialisation runs even on the meta device, through torch's reference ops, which import
    ``torch._dynamo`` (the second the lean tree is there to save)."""
    module = nn.Module()
    module.weight = nn.Parameter(torch.empty(*shape, device="meta"), requires_grad=False)
    module.register_parameter("bias", None if bias is None else nn.Parameter(
        torch.empty(bias, device="meta"), requires_grad=False))
    return module


def _linear(n_in: int, n_out: int, bias: bool) -> nn.Module:
    return _weights(n_out, n_in, bias=n_out if bias else None)


def _norm(dim: int, eps: float) -> nn.Module:
    """A norm's weight and epsilon under both names the lean decoders read."""
    norm = _weights(dim)
    for name in ("eps", "variance_epsilon"):  # plain attributes (Module types only tensors)
        setattr(norm, name, eps)
    return norm


def _layer(config: Any, gemma: bool) -> nn.Module:
    hidden, d = int(config.hidden_size), int(getattr(config, "head_dim", None)
                                             or config.hidden_size // config.num_attention_heads)
    heads, kv = int(config.num_attention_heads), int(config.num_key_value_heads)
    eps = float(config.rms_norm_eps)
    qkv_bias = bool(getattr(config, "attention_bias", False)) if gemma else True
    att = nn.Module()
    att.q_proj = _linear(hidden, heads * d, qkv_bias)
    att.k_proj = _linear(hidden, kv * d, qkv_bias)
    att.v_proj = _linear(hidden, kv * d, qkv_bias)
    att.o_proj = _linear(heads * d, hidden, qkv_bias and gemma)
    mlp = nn.Module()
    inter = int(config.intermediate_size)
    mlp.gate_proj = _linear(hidden, inter, False)
    mlp.up_proj = _linear(hidden, inter, False)
    mlp.down_proj = _linear(inter, hidden, False)
    layer = nn.Module()
    layer.self_attn, layer.mlp = att, mlp
    layer.input_layernorm = _norm(hidden, eps)
    layer.post_attention_layernorm = _norm(hidden, eps)
    if gemma:
        att.q_norm, att.k_norm = _norm(d, eps), _norm(d, eps)
        layer.pre_feedforward_layernorm = _norm(hidden, eps)
        layer.post_feedforward_layernorm = _norm(hidden, eps)
    return layer


class LeanCausalLM(nn.Module):
    """The module tree of a ``Gemma3ForCausalLM`` / ``Qwen2ForCausalLM`` (its names, its
    weights) for the lean decoders; ``lean_architecture`` names the class it stands for."""

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.config = config
        self.lean_architecture = _DECODERS[config.model_type].ARCHITECTURE
        self.generation_config: Any = None
        gemma = config.model_type == "gemma3_text"
        inner = nn.Module()
        inner.embed_tokens = _weights(int(config.vocab_size), int(config.hidden_size))
        inner.layers = nn.ModuleList([_layer(config, gemma)
                                      for _ in range(int(config.num_hidden_layers))])
        inner.norm = _norm(int(config.hidden_size), float(config.rms_norm_eps))
        self.model: Any = inner
        self.lm_head = _linear(int(config.hidden_size), int(config.vocab_size), False)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise MissingModelError(
            "This generator was loaded for answering through ragdesk's lean decoder; its "
            "transformers forward is not loaded.",
            "Load the generator with load_generator(..., answering=False) to run it through "
            "transformers (training, or the generic forward).")

    def get_input_embeddings(self) -> Any:
        return self.model.embed_tokens

    def get_output_embeddings(self) -> Any:
        return self.lm_head


def _tie(state: dict[str, torch.Tensor], config: Any) -> None:
    """A tied output layer is saved once, under either name (safetensors keeps one copy)."""
    if not getattr(config, "tie_word_embeddings", False):
        return
    emb, head = "model.embed_tokens.weight", "lm_head.weight"
    if emb in state and head not in state:
        state[head] = state[emb]
    elif head in state and emb not in state:
        state[emb] = state[head]


def load_lean_causal_lm(folder: Path) -> LeanCausalLM | None:
    """The lean tree of the causal LM in ``folder`` (config.json, one model.safetensors,
    optionally generation_config.json), or None where the lean decoders do not reproduce
    its model (the caller then loads transformers' model)."""
    weights = folder / WEIGHTS_FILE
    if not weights.is_file():
        return None
    config = read_config(folder)
    if not reproduces(config):
        return None
    model = LeanCausalLM(config)
    state = mapped_tensors(weights)
    _tie(state, config)
    try:
        model.load_state_dict(state, strict=True, assign=True)
    except RuntimeError as exc:  # missing, unexpected or misshapen weights
        raise MissingModelError(
            f"{weights} does not hold the weights of its config's model: "
            f"{str(exc).splitlines()[0]}") from exc
    if getattr(config, "tie_word_embeddings", False):
        model.lm_head.weight = model.model.embed_tokens.weight
    model.model.rotary_emb = _Rotary(config)
    model.generation_config = read_generation_config(folder, config)
    model.requires_grad_(False)
    return model.eval()
