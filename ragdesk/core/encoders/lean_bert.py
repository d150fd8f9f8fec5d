"""A plain BERT forward for question encoding that needs no transformers modeling import.

``transformers``' ``BertModel`` comes with ``modeling_utils``, whose imports (torch's
distributed tensors, dynamo, scipy) cost a one-shot ``ragdesk ask`` about 3 s before its
first question; a question takes a few milliseconds. :class:`LeanBertModel` and the DPR
wrappers hold the same modules under the same names as ``BertModel`` / ``DPRQuestionEncoder``
/ ``DPRContextEncoder``, so that a strict ``load_state_dict`` validates the checkpoint
against them and the fused kernel (:class:`ragdesk.core.kernels.FusedBertKernel`) reads them
as it reads the transformers models. They compute what ``BertModel`` computes in float32
(absolute positions, exact GELU, SDPA with the padding mask) and nothing else: anything
:func:`load_lean_encoder_model` does not reproduce stays with transformers.

This module imports torch when imported; :func:`ragdesk.core.encoders.load_encoder` imports
it only when it is about to use it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ragdesk.core.encoders.identity import DPR_FAMILY, ST_FAMILY
from ragdesk.core.errors import MissingModelError
from ragdesk.core.lean_config import read_config

log = logging.getLogger(__name__)

WEIGHTS = "model.safetensors"

# Buffers older transformers saved with the weights (position_ids, token_type_ids) and the
# pooler that DPR checkpoints carry but DPR never runs: from_pretrained drops them too.
_DROPPED_SUFFIXES = ("embeddings.position_ids", "embeddings.token_type_ids")
_DPR_UNUSED = ".bert_model.pooler."

QUESTION_ROOT = "question_encoder"
CONTEXT_ROOT = "ctx_encoder"


@dataclass
class LeanBertOutput:
    """The two fields of transformers' BERT and DPR outputs that the encoders read."""

    last_hidden_state: torch.Tensor
    pooler_output: torch.Tensor | None


# Modules that skip their random initialisation: the weights are assigned from the file, and
# initialising even on the meta device goes through torch._refs, which imports torch._dynamo
# (the import this module exists to avoid).
class _Linear(nn.Linear):
    def reset_parameters(self) -> None:
        pass


class _Embedding(nn.Embedding):
    def reset_parameters(self) -> None:
        pass


class _LayerNorm(nn.LayerNorm):
    def reset_parameters(self) -> None:
        pass


class _Embeddings(nn.Module):
    def __init__(self, cfg: Any) -> None:
        super().__init__()
        hidden = int(cfg.hidden_size)
        self.word_embeddings = _Embedding(int(cfg.vocab_size), hidden,
                                            padding_idx=cfg.pad_token_id)
        self.position_embeddings = _Embedding(int(cfg.max_position_embeddings), hidden)
        self.token_type_embeddings = _Embedding(int(cfg.type_vocab_size), hidden)
        self.LayerNorm = _LayerNorm(hidden, eps=float(cfg.layer_norm_eps))

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None
                ) -> torch.Tensor:
        t = input_ids.shape[1]
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        positions = torch.arange(t, device=input_ids.device).unsqueeze(0)
        # BertEmbeddings' order of additions (word + type, then + position): float sums
        # are not associative, and the parity tests compare to 1e-5
        x = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        x = x + self.position_embeddings(positions)
        out: torch.Tensor = self.LayerNorm(x)
        return out


class _SelfAttention(nn.Module):
    def __init__(self, cfg: Any) -> None:
        super().__init__()
        hidden = int(cfg.hidden_size)
        self.heads = int(cfg.num_attention_heads)
        self.head_size = hidden // self.heads
        self.query = _Linear(hidden, hidden)
        self.key = _Linear(hidden, hidden)
        self.value = _Linear(hidden, hidden)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        b, t, _ = x.shape
        q, k, v = (lin(x).view(b, t, self.heads, self.head_size).transpose(1, 2)
                   for lin in (self.query, self.key, self.value))
        a = nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=0.0, scale=self.head_size ** -0.5)
        return a.transpose(1, 2).contiguous().reshape(b, t, -1)


class _DenseNorm(nn.Module):
    """``LayerNorm(dense(x) + residual)``: BertSelfOutput and BertOutput."""

    def __init__(self, cfg: Any, width: int) -> None:
        super().__init__()
        hidden = int(cfg.hidden_size)
        self.dense = _Linear(width, hidden)
        self.LayerNorm = _LayerNorm(hidden, eps=float(cfg.layer_norm_eps))

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.LayerNorm(self.dense(x) + residual)
        return out


class _Attention(nn.Module):
    def __init__(self, cfg: Any) -> None:
        super().__init__()
        self.self = _SelfAttention(cfg)
        self.output = _DenseNorm(cfg, int(cfg.hidden_size))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        out: torch.Tensor = self.output(self.self(x, mask), x)
        return out


class _Intermediate(nn.Module):
    def __init__(self, cfg: Any) -> None:
        super().__init__()
        self.dense = _Linear(int(cfg.hidden_size), int(cfg.intermediate_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.gelu(self.dense(x))


class _Layer(nn.Module):
    def __init__(self, cfg: Any) -> None:
        super().__init__()
        self.attention = _Attention(cfg)
        self.intermediate = _Intermediate(cfg)
        self.output = _DenseNorm(cfg, int(cfg.intermediate_size))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        a = self.attention(x, mask)
        out: torch.Tensor = self.output(self.intermediate(a), a)
        return out


class _Encoder(nn.Module):
    def __init__(self, cfg: Any) -> None:
        super().__init__()
        self.layer = nn.ModuleList(_Layer(cfg) for _ in range(int(cfg.num_hidden_layers)))


class _Pooler(nn.Module):
    def __init__(self, cfg: Any) -> None:
        super().__init__()
        self.dense = _Linear(int(cfg.hidden_size), int(cfg.hidden_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(x[:, 0]))


def padding_mask(attention_mask: torch.Tensor | None, t: int) -> torch.Tensor | None:
    """SDPA's boolean mask [batch, 1, t, t] (True: attend), or None where nothing is padded:
    what transformers' ``create_bidirectional_mask`` hands SDPA, so that the same SDPA
    kernel runs (with no mask it may take another one)."""
    if attention_mask is None:
        return None
    keep = attention_mask.bool()
    if bool(keep.all()):
        return None
    return keep[:, None, None, :].expand(keep.shape[0], 1, t, t)


class LeanBertModel(nn.Module):
    """``BertModel``'s modules, parameter names and float32 forward, in eval mode only.
    Its weights start uninitialised: :func:`load_lean_encoder_model` assigns them."""

    def __init__(self, config: Any, pooler: bool = True) -> None:
        super().__init__()
        self.config = config
        self.embeddings = _Embeddings(config)
        self.encoder = _Encoder(config)
        self.pooler = _Pooler(config) if pooler else None

    def get_input_embeddings(self) -> nn.Embedding:
        return self.embeddings.word_embeddings

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None) -> LeanBertOutput:
        x = self.embeddings(input_ids, token_type_ids)
        mask = padding_mask(attention_mask, int(input_ids.shape[1]))
        for layer in self.encoder.layer:
            x = layer(x, mask)
        pooled = self.pooler(x) if self.pooler is not None else None
        return LeanBertOutput(last_hidden_state=x, pooler_output=pooled)


class _DPREncoder(nn.Module):
    """DPREncoder: a BERT without pooler, then an optional projection of the first token."""

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.bert_model = LeanBertModel(config, pooler=False)
        self.projection_dim = int(getattr(config, "projection_dim", 0) or 0)
        self.encode_proj = (_Linear(int(config.hidden_size), self.projection_dim)
                            if self.projection_dim > 0 else None)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None) -> LeanBertOutput:
        out = self.bert_model(input_ids, attention_mask, token_type_ids)
        pooled = out.last_hidden_state[:, 0, :]
        if self.encode_proj is not None:
            pooled = self.encode_proj(pooled)
        return LeanBertOutput(last_hidden_state=out.last_hidden_state, pooler_output=pooled)


class LeanDPREncoder(nn.Module):
    """DPRQuestionEncoder (``root="question_encoder"``) or DPRContextEncoder
    (``root="ctx_encoder"``): the attribute name is what tells the two apart, to the
    checkpoint's keys and to the fused kernel alike."""

    def __init__(self, config: Any, root: str) -> None:
        super().__init__()
        if root not in (QUESTION_ROOT, CONTEXT_ROOT):
            raise ValueError(f"a DPR encoder is {QUESTION_ROOT} or {CONTEXT_ROOT}, not {root!r}")
        self.config = config
        self.root = root
        self.add_module(root, _DPREncoder(config))

    def inner(self) -> _DPREncoder:
        inner: _DPREncoder = getattr(self, self.root)
        return inner

    def get_input_embeddings(self) -> nn.Embedding:
        return self.inner().bert_model.get_input_embeddings()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None) -> LeanBertOutput:
        out: LeanBertOutput = self.inner()(input_ids, attention_mask, token_type_ids)
        return out


# ------------------------------------------------------------------ loading -----------


def reproduces(cfg: Any, family: str) -> bool:
    """Whether the lean forward computes exactly what transformers does for this config."""
    model_type = getattr(cfg, "model_type", "")
    if (family, model_type) not in ((ST_FAMILY, "bert"), (DPR_FAMILY, "dpr")):
        return False
    heads = int(getattr(cfg, "num_attention_heads", 0) or 0)
    return (getattr(cfg, "hidden_act", None) == "gelu"
            and getattr(cfg, "position_embedding_type", "absolute") == "absolute"
            and not getattr(cfg, "is_decoder", False)
            and not getattr(cfg, "add_cross_attention", False)
            and not getattr(cfg, "chunk_size_feed_forward", 0)
            and heads > 0 and int(cfg.hidden_size) % heads == 0)


def _module_keys(file_keys: list[str], family: str, root: str) -> dict[str, str] | None:
    """The module's name for each checkpoint key (buffers and unused poolers dropped), or
    None when some key is outside the expected prefix: a layout transformers renames, which
    stays with transformers."""
    kept = [k for k in file_keys if not k.endswith(_DROPPED_SUFFIXES)]
    if family == DPR_FAMILY:
        kept = [k for k in kept if _DPR_UNUSED not in k]
        prefix = root + "."
    else:
        # a BERT saved under a head (BertForMaskedLM, ...) or as the head's base model:
        # from_pretrained strips base_model_prefix "bert."
        prefix = "bert." if any(k.startswith("bert.embeddings.") for k in kept) else ""
    if family == DPR_FAMILY or not prefix:
        mapping = {k: k for k in kept if k.startswith(prefix)}
    else:
        mapping = {k[len(prefix):]: k for k in kept if k.startswith(prefix)}
    return mapping if len(mapping) == len(kept) else None


def _dpr_root(cfg: Any) -> str:
    # load_encoder's own rule: the architecture names the question encoder, anything else
    # is a context encoder
    arch = (getattr(cfg, "architectures", None) or [""])[0]
    return QUESTION_ROOT if "Question" in arch else CONTEXT_ROOT


def _build(cfg: Any, family: str, root: str, names: set[str]) -> nn.Module:
    """The empty model on the meta device: nothing is initialised, the weights come later."""
    with torch.device("meta"):
        if family == DPR_FAMILY:
            return LeanDPREncoder(cfg, root)
        return LeanBertModel(cfg, pooler="pooler.dense.weight" in names)


def _damaged(folder: Path, detail: str) -> MissingModelError:
    return MissingModelError(
        f"The encoder {folder} could not be loaded: {detail}.",
        "Check that the folder is complete (config, tokenizer, model.safetensors); download "
        "or copy it again if it was cut short.")


def _read_tensors(path: Path, mapping: dict[str, str]) -> dict[str, torch.Tensor]:
    from safetensors import safe_open

    tensors: dict[str, torch.Tensor] = {}
    with safe_open(str(path), "pt") as f:
        for name, key in mapping.items():
            t = f.get_tensor(key)
            tensors[name] = t.float() if t.is_floating_point() and t.dtype != torch.float32 else t
    return tensors


def _file_keys(path: Path) -> list[str]:
    from safetensors import safe_open

    try:
        with safe_open(str(path), "pt") as f:
            return list(f.keys())
    except Exception as exc:  # safetensors' own error type, a header it cannot parse
        raise _damaged(path.parent, f"{path.name} cannot be read ({exc})") from exc


def load_lean_encoder_model(folder: Path, family: str) -> nn.Module | None:
    """The lean model of an encoder folder, in eval mode with frozen float32 weights, or
    None where it would not compute what transformers computes (the caller then loads the
    transformers model). A checkpoint that lacks weights or has the wrong shapes raises
    :class:`MissingModelError`: it is damaged, and transformers would fill it at random."""
    weights = folder / WEIGHTS
    if not weights.is_file():  # sharded or pickle-only folders stay with transformers
        return None
    cfg = read_config(folder)  # without importing transformers where it can (not for DPR)
    if not reproduces(cfg, family):
        return None
    root = _dpr_root(cfg) if family == DPR_FAMILY else ""
    mapping = _module_keys(_file_keys(weights), family, root)
    if mapping is None:
        log.info("%s: a weights layout the lean encoder does not read", folder)
        return None
    model = _build(cfg, family, root, set(mapping))
    expected = set(model.state_dict())
    if set(mapping) - expected:  # a head or a renamed layout: transformers' business
        log.info("%s holds weights the lean encoder has no place for", folder)
        return None
    missing = sorted(expected - set(mapping))
    if missing:
        raise _damaged(folder, f"{len(missing)} weights are missing ({', '.join(missing[:3])})")
    try:
        model.load_state_dict(_read_tensors(weights, mapping), strict=True, assign=True)
    except (RuntimeError, ValueError) as exc:  # a weight of the wrong shape
        raise _damaged(folder, str(exc).splitlines()[0]) from exc
    model.requires_grad_(False)
    return model.eval()
