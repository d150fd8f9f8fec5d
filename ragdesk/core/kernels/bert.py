"""The fused BERT kernel: a plain BERT forward in bfloat16 for bulk passage encoding."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Protocol

from ragdesk.core.cpu import cpu_has_native_bf16
from ragdesk.core.kernels.pooling import pool_tokens

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

# transformers' BERT and ragdesk's lean copy of it (encoders.lean_bert), known by name so that
# the kernels import neither
_BERTS = ("BertModel", "LeanBertModel")


class PooledEncoder(Protocol):
    """What the kernel reads of an encoder's description (``encoders.EncoderInfo``)."""

    @property
    def pooling(self) -> str: ...

    @property
    def normalize(self) -> bool: ...


class _Linear:
    """One linear layer with its weight packed once for oneDNN (``torch.ops.mkldnn``, the
    ops inductor's CPU freezing uses), or plain ``F.linear`` where oneDNN is missing.

    Packing matters: ``F.linear`` re-lays the weight out and copies the bias on every call,
    which for MiniLM's small matrices costs a fifth of the matmul itself.
    """

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, dtype: torch.dtype,
                 packed: bool) -> None:
        import torch

        self.weight = weight.detach().to(dtype).contiguous()
        self.bias = None if bias is None else bias.detach().to(dtype).contiguous()
        self.packed: torch.Tensor | None = None
        if packed:
            self.packed = torch.ops.mkldnn._reorder_linear_weight(self.weight, 64)

    def __call__(self, x: torch.Tensor, act: str = "none") -> torch.Tensor:
        import torch

        if self.packed is not None:
            out: torch.Tensor = torch.ops.mkldnn._linear_pointwise(
                x, self.packed, self.bias, act, [], "none" if act == "gelu" else "")
            return out
        y = torch.nn.functional.linear(x, self.weight, self.bias)
        return torch.nn.functional.gelu(y) if act == "gelu" else y

    def add(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        """``linear(x) + residual`` (fused into the matmul's epilogue where packed)."""
        import torch

        if self.packed is not None:
            out: torch.Tensor = torch.ops.mkldnn._linear_pointwise.binary(
                x, residual, self.packed, self.bias, "add")
            return out
        return torch.nn.functional.linear(x, self.weight, self.bias) + residual


class FusedBertKernel:
    """A plain BERT encoder forward (sentence-transformers BERTs, DPR) for bulk encoding.

    The same computation as ``BertModel`` with absolute positions and exact GELU — one fused
    QKV matmul per layer, prepacked weights with the bias, GELU and residual add fused into
    the matmul, PyTorch's SDPA for attention — in bfloat16 where the CPU has native bf16
    (pooling and normalization in float32), else in float32. On the 2-core Zen 4 this runs
    all-MiniLM-L6-v2 about 3x faster than the transformers forward in float32, with passage
    vectors at cosine 0.9999 to it (bench/first_run_bench.py). Built only for models on the
    CPU; anything else (other architectures, relative positions, GPUs) keeps the exact path.
    """

    def __init__(self, bert: Any, pooling: str, normalize: bool, proj: Any,
                 dtype: torch.dtype, packed: bool) -> None:
        import torch

        cfg = bert.config
        self.heads = int(cfg.num_attention_heads)
        self.eps = float(cfg.layer_norm_eps)
        self.pooling = pooling
        self.normalize = normalize
        self.dtype = dtype
        self.label = "bfloat16" if dtype == torch.bfloat16 else "float32-fused"
        emb = bert.embeddings

        def cv(t: torch.Tensor) -> torch.Tensor:
            return t.detach().to(dtype).contiguous()

        self.word = cv(emb.word_embeddings.weight)
        self.pos = cv(emb.position_embeddings.weight)
        self.types = cv(emb.token_type_embeddings.weight)
        self.emb_ln = (cv(emb.LayerNorm.weight), cv(emb.LayerNorm.bias))
        self.layers: list[tuple[_Linear, _Linear, tuple[torch.Tensor, torch.Tensor], _Linear,
                                _Linear, tuple[torch.Tensor, torch.Tensor]]] = []
        for layer in bert.encoder.layer:
            att = layer.attention
            sa = att.self
            qkv = _Linear(torch.cat([sa.query.weight, sa.key.weight, sa.value.weight]),
                          torch.cat([sa.query.bias, sa.key.bias, sa.value.bias]), dtype, packed)
            self.layers.append((
                qkv, _Linear(att.output.dense.weight, att.output.dense.bias, dtype, packed),
                (cv(att.output.LayerNorm.weight), cv(att.output.LayerNorm.bias)),
                _Linear(layer.intermediate.dense.weight, layer.intermediate.dense.bias, dtype,
                        packed),
                _Linear(layer.output.dense.weight, layer.output.dense.bias, dtype, packed),
                (cv(layer.output.LayerNorm.weight), cv(layer.output.LayerNorm.bias)),
            ))
        self.proj = None if proj is None else _Linear(proj.weight, proj.bias, torch.float32,
                                                      False)

    @classmethod
    def build(cls, model: Any, info: PooledEncoder, dtype: torch.dtype | None = None
              ) -> FusedBertKernel | None:
        """The kernel for ``model``, or None when it is not a BERT this kernel reproduces."""
        import torch

        proj: Any = None
        bert: Any
        # A DPR encoder is known by its own structure (its BERT inside a context or question
        # encoder, then a projection), so that the kernel needs no encoder family.
        inner = getattr(model, "ctx_encoder", None) or getattr(model, "question_encoder", None)
        if inner is not None:
            bert = getattr(inner, "bert_model", None)
            proj = getattr(inner, "encode_proj", None)
            pooling = "cls"
        else:
            bert, pooling = model, info.pooling
        cfg = getattr(bert, "config", None)
        if cfg is None or type(bert).__name__ not in _BERTS or pooling not in ("mean", "cls"):
            return None
        if (getattr(cfg, "model_type", "") not in ("bert", "dpr") or cfg.hidden_act != "gelu"
                or getattr(cfg, "position_embedding_type", "absolute") != "absolute"
                or getattr(cfg, "is_decoder", False)):
            return None
        try:
            if any(p.device.type != "cpu" for p in bert.parameters()):
                return None
        except StopIteration:
            return None
        if dtype is None:
            dtype = torch.bfloat16 if cpu_has_native_bf16() else torch.float32
        packed = torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn,
                                                                   "_linear_pointwise")
        try:
            kernel = cls(bert, pooling, info.normalize, proj, dtype, packed)
        except (AttributeError, RuntimeError) as exc:
            log.info("fused encoder kernel unavailable (%s); using the transformers forward", exc)
            return None
        return kernel

    def __call__(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        """Pooled (and normalized) float32 vectors [batch, dim] of right-padded inputs."""
        import torch
        import torch.nn.functional as F

        ids = inputs["input_ids"]
        mask = inputs["attention_mask"]
        b, t = ids.shape
        types = inputs.get("token_type_ids")
        x = self.word[ids] + self.pos[:t].unsqueeze(0)
        x = x + (self.types[types] if types is not None else self.types[0])
        c = x.shape[-1]
        h, d = self.heads, c // self.heads
        x = F.layer_norm(x, (c,), *self.emb_ln, self.eps).reshape(b * t, c)
        keep = mask.bool()[:, None, None, :]
        for qkv, out, ln1, inter, down, ln2 in self.layers:
            q, k, v = qkv(x).view(b, t, 3, h, d).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
            a = a.transpose(1, 2).reshape(b * t, c)
            x = F.layer_norm(out.add(a, x), (c,), *ln1, self.eps)
            x = F.layer_norm(down.add(inter(x, "gelu"), x), (c,), *ln2, self.eps)
        pooled = pool_tokens(x.view(b, t, c).float(), mask, self.pooling)
        if self.proj is not None:
            pooled = self.proj(pooled)
        if self.normalize:
            pooled = torch.nn.functional.normalize(pooled, p=2, dim=-1)
        return pooled
