"""The encoder at run time: :class:`TextEncoder` (tokenizing, length-sorted batches, the
transformers forward or the fused kernel) and :func:`load_encoder`."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ragdesk.core.devices import select_device, to_device
from ragdesk.core.encoders.folders import detect_family, read_json, resolve_model_path
from ragdesk.core.encoders.identity import DPR_FAMILY, ST_FAMILY, EncoderInfo, stable_id
from ragdesk.core.encoders.precision import (
    EXACT,
    FLOAT32,
    _exact_by_env,
    check_encoder_precision,
)
from ragdesk.core.encoders.st_layout import SentenceHead, read_st_layout
from ragdesk.core.errors import MissingModelError
from ragdesk.core.kernels import FusedBertKernel, pool_tokens
from ragdesk.core.lean_tokenizer import read_lean_tokenizer
from ragdesk.core.progress import CancelToken, Progress, ProgressCallback
from ragdesk.core.safe_json import as_int

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)


class TextEncoder:
    """Encodes texts into vectors, in length-sorted batches under ``torch.inference_mode``.

    ``precision`` says how the vectors are computed: ``"float32"`` is the model's own
    transformers forward (what the equality tests use); :meth:`at_precision` and
    :meth:`fast` return twins that run the fused kernel (see :class:`FusedBertKernel`).

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
        self._exact: TextEncoder | None = None  # a kernel twin's exact original
        self._twins: dict[str, TextEncoder] = {}  # at_precision's, by precision

    @property
    def precision(self) -> str:
        return self.kernel.label if self.kernel is not None else EXACT

    def fast(self) -> TextEncoder:
        """A twin for bulk passage encoding with the fused kernel (bfloat16 where the CPU has
        it natively, else float32), or ``self`` where the model is not a plain BERT on the
        CPU (or ``RAGDESK_ENCODE_PRECISION=float32``)."""
        if self.kernel is not None or _exact_by_env():
            return self
        return self._kernel_twin(None) or self

    def at_precision(self, precision: str) -> TextEncoder:
        """This encoder computing in ``precision``: ``"float32"``, the model's own forward;
        ``"bfloat16"``, the fused kernel in bfloat16. Where the kernel does not reproduce
        the model (not a plain BERT, Dense layers, not on the CPU) it stays the exact
        forward, with a warning: :attr:`precision` says what runs.

        Twins share the model and tokenizer and are made once per precision; ``self`` keeps
        its own forward, so a question encoder that is also a passage encoder is never
        changed behind its back.
        """
        import torch

        check_encoder_precision(precision)
        exact = self._exact or self
        if precision == FLOAT32 or (self.kernel is not None and self.precision == precision):
            return exact if precision == FLOAT32 else self
        twin = exact._twins.get(precision)
        if twin is None:
            twin = exact._kernel_twin(torch.bfloat16)
            if twin is None:
                log.warning("%s cannot run in %s here: the fused kernel needs a plain BERT "
                            "on a CPU with AVX-512 (BW, VL, DQ) or AVX-NE-CONVERT; it computes "
                            "in float32", self.info.id, precision)
                twin = exact
            exact._twins[precision] = twin
        return twin

    def _kernel_twin(self, dtype: torch.dtype | None) -> TextEncoder | None:
        if self.head.dense:  # the kernel stops at pooling
            return None
        kernel = FusedBertKernel.build(self.model, self.info, dtype)
        if kernel is None:
            return None
        # the model stays where it is (the kernel is built for the CPU only), whatever
        # $RAGDESK_DEVICE says now
        twin = TextEncoder(self.model, self.tokenizer, self.info, self.max_length,
                           device="cpu")
        twin.kernel = kernel
        twin.head, twin.role, twin._exact = self.head, self.role, self
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
    """One passage's input (see :func:`passage_inputs`)."""
    return passage_inputs(encoder, [(title, text)])[0]


def passage_inputs(encoder: TextEncoder, passages: Iterable[tuple[str, str]]
                   ) -> list[str] | list[tuple[str, str]]:
    """What the encoder reads of each (title, text): DPR encodes a sentence pair,
    sentence-transformers one string; all pairs or all strings, as ``TextEncoder.encode`` and
    ``tokenize`` take them."""
    if encoder.info.family == DPR_FAMILY:
        return [(title, text) for title, text in passages]
    return [f"{title}. {text}" if title else text for title, text in passages]


def _transformers_model(folder: Path, family: str) -> Any:
    if family == DPR_FAMILY:
        from transformers import AutoConfig, DPRContextEncoder, DPRQuestionEncoder

        cfg = AutoConfig.from_pretrained(str(folder), trust_remote_code=False)
        arch = (getattr(cfg, "architectures", None) or [""])[0]
        cls: Any = DPRQuestionEncoder if "Question" in arch else DPRContextEncoder
        return cls.from_pretrained(str(folder), use_safetensors=True, trust_remote_code=False)
    from transformers import AutoModel

    return AutoModel.from_pretrained(str(folder), use_safetensors=True, trust_remote_code=False)


def _load_model(folder: Path, family: str, device: str | None, answering: bool
                ) -> tuple[Any, bool]:
    """(model, whether it is lean): the lean BERT where answering on the CPU and it
    reproduces the folder's model (no transformers modeling import: seconds of a one-shot
    ask), else the transformers model."""
    if answering and select_device(device) == "cpu":
        from ragdesk.core.encoders.lean_bert import load_lean_encoder_model

        lean = load_lean_encoder_model(folder, family)
        if lean is not None:
            return lean, True
    return _transformers_model(folder, family), False


def _tokenizer(folder: Path, lean: bool) -> Any:
    """The lean model's companion is the tokenizer read without transformers where
    :mod:`ragdesk.core.lean_tokenizer` reproduces transformers' (it only tokenizes questions
    to answer them); every other tokenizer is transformers'."""
    if lean:
        tokenizer = read_lean_tokenizer(folder)
        if tokenizer is not None:
            return tokenizer
    from transformers import AutoTokenizer

    # False, never the default None: with None, a folder whose config has an auto_map
    # makes transformers ask on stdin whether to run its .py files (tests/test_remote_code.py).
    return AutoTokenizer.from_pretrained(str(folder), trust_remote_code=False)


def load_encoder(model: str | os.PathLike[str], role: str = "passage",
                 max_length: int | None = None, device: str | None = None, *,
                 answering: bool = False) -> TextEncoder:
    """Load a passage (``role="passage"``) or question (``role="question"``) encoder.

    DPR folders hold a context or question encoder (``DPRContextEncoder`` /
    ``DPRQuestionEncoder``); a folder with a ``question_encoder`` subfolder (a RAG
    checkpoint saved with ``save_pretrained``) is handled by the model registry. ``device``:
    see :class:`TextEncoder` (default ``$RAGDESK_DEVICE``). ``answering``: the caller
    encodes questions to answer them, never trains or saves the model, so a plain BERT on
    the CPU may be :mod:`ragdesk.core.encoders.lean_bert`'s (the same vectors, without
    importing transformers' modeling code).
    """
    if role not in ("passage", "question"):
        raise ValueError(f"role must be 'passage' or 'question', not {role!r}")
    folder, model_id, revision = resolve_model_path(model)
    family = detect_family(folder)
    try:
        mdl, lean = _load_model(folder, family, device, answering)
        tokenizer = _tokenizer(folder, lean)
        if family == DPR_FAMILY:
            cfg = mdl.config
            arch = (getattr(cfg, "architectures", None) or [""])[0]
            if role == "question" and "Context" in arch:
                log.warning("%s is a DPR context encoder used for questions", model_id)
            pooling, normalize, head = "cls-pooler", False, SentenceHead()
            dim = int(getattr(cfg, "projection_dim", 0) or cfg.hidden_size)
        else:
            layout = read_st_layout(folder)
            pooling, normalize, head = layout.pooling, layout.normalize, layout.head
            dim = layout.dim or int(mdl.config.hidden_size)
    except MissingModelError:
        raise
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
        # transformers reads a damaged folder's JSON plainly: a value of the wrong type, or a
        # file nested thousands deep, ends in these rather than in an error of its own
        raise MissingModelError(f"The encoder {model_id!r} could not be loaded: "
                                f"{type(exc).__name__}: {str(exc)[:200]}") from exc
    mdl.eval()
    limit = max_length or min(512, int(getattr(tokenizer, "model_max_length", 512) or 512))
    st_cfg = folder / "sentence_bert_config.json"
    if max_length is None and family == ST_FAMILY and st_cfg.exists():
        limit = as_int(read_json(st_cfg).get("max_seq_length", limit))
    model_id, revision = stable_id(folder, model_id, revision)
    info = EncoderInfo(id=model_id, revision=revision, family=family, pooling=pooling,
                       normalize=normalize, dim=dim)
    encoder = TextEncoder(mdl, tokenizer, info, max_length=limit, device=device)
    encoder.head, encoder.role = head, role
    return encoder
