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

from ragdesk.core.errors import MissingModelError
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


class TextEncoder:
    """Encodes texts into vectors, in length-sorted batches under ``torch.inference_mode``."""

    def __init__(self, model: Any, tokenizer: Any, info: EncoderInfo, max_length: int) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.info = info
        self.max_length = max_length

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

        tokenizer = AutoTokenizer.from_pretrained(str(folder))
        if family == DPR_FAMILY:
            from transformers import DPRContextEncoder, DPRQuestionEncoder

            cfg = AutoConfig.from_pretrained(str(folder))
            arch = (getattr(cfg, "architectures", None) or [""])[0]
            cls: Any = DPRQuestionEncoder if "Question" in arch else DPRContextEncoder
            if role == "question" and "Context" in arch:
                log.warning("%s is a DPR context encoder used for questions", model_id)
            mdl = cls.from_pretrained(str(folder), use_safetensors=True)
            pooling, normalize = "cls-pooler", False
            dim = int(getattr(cfg, "projection_dim", 0) or cfg.hidden_size)
        else:
            mdl = AutoModel.from_pretrained(str(folder), use_safetensors=True)
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
    info = EncoderInfo(id=model_id, revision=revision, family=family, pooling=pooling,
                       normalize=normalize, dim=dim)
    return TextEncoder(mdl, tokenizer, info, max_length=limit)
