"""``ragdesk models import``: register local models as a custom pack, after checking them.

How one PATH maps to the pack's parts (options fill in or override the rest):

=============================================  =========================================
PATH holds                                     it becomes
=============================================  =========================================
a RAG checkpoint (``model_type: rag``)         question encoder and generator
a DPR question encoder                         question encoder
a DPR context encoder                          passage encoder
a sentence-transformers / BERT-like encoder    question encoder and passage encoder
a seq2seq LM (BART, T5, ...) or a causal LM    generator
a ``.gguf`` file                               generator (decoder-only)
=============================================  =========================================

A pack needs a question encoder and a generator. The passage encoder is only needed to build
snapshots for the pack and may be left out for DPR packs (their snapshots name their own
passage encoder). Every part is validated by loading it exactly as ``ask`` will and running it
once on a short input; nothing is registered unless all parts pass. With ``copy=True`` the
local parts are copied under ``<data dir>/models/<name>/`` first (and deleted again by
``models remove``); otherwise they are used where they are.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragdesk.core.errors import (
    AlreadyExistsError,
    BadInputError,
    DiskFullError,
    EncoderMismatchError,
    MissingModelError,
    RagdeskError,
    is_disk_full,
)
from ragdesk.core.models.packs import (
    KIND_CUSTOM,
    PackSpec,
    check_pack_name,
    register_pack,
)
from ragdesk.core.models.refs import (
    KIND_CAUSAL,
    KIND_DPR_CONTEXT,
    KIND_DPR_QUESTION,
    KIND_GGUF,
    KIND_RAG,
    KIND_SEQ2SEQ,
    KIND_ST,
    ModelInfo,
    inspect_model,
    resolve_ref,
)
from ragdesk.core.progress import CancelToken, Progress, ProgressCallback

if TYPE_CHECKING:
    from ragdesk.core.catalog import Catalog
    from ragdesk.core.encoders import TextEncoder
    from ragdesk.core.paths import DataDir

log = logging.getLogger(__name__)

PROBE_QUESTION = "who wrote the play hamlet?"
PROBE_PASSAGE = ("Hamlet", "Hamlet is a tragedy written by William Shakespeare.")


def roles_of(info: ModelInfo) -> list[str]:
    """Which pack parts a model of this kind provides."""
    return {
        KIND_RAG: ["question_encoder", "generator"],
        KIND_DPR_QUESTION: ["question_encoder"],
        KIND_DPR_CONTEXT: ["passage_encoder"],
        KIND_ST: ["question_encoder", "passage_encoder"],
        KIND_SEQ2SEQ: ["generator"],
        KIND_CAUSAL: ["generator"],
        KIND_GGUF: ["generator"],
    }[info.kind]


def _check_vectors(vectors: Any, dim: int, what: str) -> None:
    import numpy as np

    if vectors.shape[-1] != dim or not np.isfinite(vectors).all():
        raise MissingModelError(f"The {what} produced unusable vectors (shape {vectors.shape}, "
                                "non-finite values or a wrong size).")


def _check_complete_encoder(ref: str, info: ModelInfo) -> None:
    """Load the encoder's weights once more, asking transformers which ones were missing:
    a model with missing tensors would otherwise load with random ones and only warn."""
    if info.kind == KIND_RAG:
        return  # the RAG loader checks this itself
    from transformers import AutoModel, DPRContextEncoder, DPRQuestionEncoder

    cls: Any = {KIND_DPR_QUESTION: DPRQuestionEncoder,
                KIND_DPR_CONTEXT: DPRContextEncoder}.get(info.kind, AutoModel)
    resolved = resolve_ref(ref)
    try:
        _, loading = cls.from_pretrained(str(resolved.path), use_safetensors=True,
                                         trust_remote_code=False, output_loading_info=True)
    except Exception as exc:
        raise MissingModelError(f"The encoder {ref!r} could not be loaded: {exc}") from exc
    missing = sorted(str(k) for k in (loading.get("missing_keys") or []))
    missing += sorted(str(k) for k in (loading.get("mismatched_keys") or []))
    if missing:
        raise MissingModelError(
            f"The encoder {ref!r} is incomplete or damaged: {len(missing)} weights are missing "
            f"or have the wrong shape ({', '.join(missing[:3])}...).",
            "Download or copy the model again.")


def validate_question_encoder(ref: str) -> TextEncoder:
    from ragdesk.core.models.loading import load_question_encoder

    info = inspect_model(resolve_ref(ref))
    encoder = load_question_encoder(ref)
    _check_complete_encoder(ref, info)
    _check_vectors(encoder.encode([PROBE_QUESTION]), encoder.dim, f"question encoder {ref!r}")
    return encoder


def validate_passage_encoder(ref: str) -> TextEncoder:
    from ragdesk.core.encoders import passage_input
    from ragdesk.core.models.loading import load_passage_encoder

    info = inspect_model(resolve_ref(ref))
    encoder = load_passage_encoder(ref)
    _check_complete_encoder(ref, info)
    vectors = encoder.encode([passage_input(encoder, *PROBE_PASSAGE)])  # type: ignore[arg-type]
    _check_vectors(vectors, encoder.dim, f"passage encoder {ref!r}")
    return encoder


def validate_generator(ref: str, progress: ProgressCallback | None = None,
                       cancel: CancelToken | None = None) -> str:
    """Load the generator and run one forward pass; returns its kind (seq2seq / causal)."""
    import torch

    from ragdesk.core.models.loading import load_generator_parts

    parts = load_generator_parts(ref, progress=progress, cancel=cancel)
    model, tok = parts.model, parts.tokenizer
    text = f"{PROBE_PASSAGE[0]} / {PROBE_PASSAGE[1]} // {PROBE_QUESTION}"
    ids = tok(text, return_tensors="pt")["input_ids"]
    vocab = int(model.get_output_embeddings().weight.shape[0])
    if ids.numel() == 0 or int(ids.max()) >= vocab:
        raise MissingModelError(
            f"The generator {ref!r} has a tokenizer that does not fit its model (token ids up "
            f"to {int(ids.max()) if ids.numel() else 'none'}, model vocabulary {vocab}).")
    try:
        with torch.inference_mode():
            if parts.kind == "seq2seq":
                start = getattr(model.config, "decoder_start_token_id", None)
                start = int(start if start is not None else (tok.eos_token_id or 0))
                logits = model(input_ids=ids,
                               decoder_input_ids=torch.tensor([[start]])).logits
            else:
                logits = model(input_ids=ids).logits
    except Exception as exc:
        raise MissingModelError(f"The generator {ref!r} fails on a test input: {exc}") from exc
    if not bool(torch.isfinite(logits).all()):
        raise MissingModelError(f"The generator {ref!r} produces non-finite scores.")
    return parts.kind


def _copy_into(src: Path, dest: Path) -> None:
    """Copy a folder or file to ``dest`` through a staging name, so no half copy is left."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        target = staging / src.name
        if src.is_dir():
            shutil.copytree(src, target, symlinks=False)
        else:
            shutil.copy2(src, target)
        os.replace(target, dest)
    except OSError as exc:
        if is_disk_full(exc):
            raise DiskFullError(f"The disk filled up while copying {src} to {dest}.") from exc
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def import_pack(
    data: DataDir,
    catalog: Catalog,
    path: str | os.PathLike[str] | None,
    name: str,
    *,
    question_encoder: str | None = None,
    passage_encoder: str | None = None,
    generator: str | None = None,
    copy: bool = False,
    replace: bool = False,
    progress: ProgressCallback | None = None,
    cancel: CancelToken | None = None,
) -> PackSpec:
    """Validate and register a custom pack (see the module doc for how PATH maps to parts)."""
    check_pack_name(name)
    if not replace and any(r.name == name for r in catalog.list_model_packs()):
        raise AlreadyExistsError(f"A model pack named {name!r} already exists.",
                                 "Pick another name, or pass --replace.")
    parts: dict[str, str] = {}
    source_info: ModelInfo | None = None
    if path is not None:
        src = Path(path).expanduser()
        if not src.exists():
            raise MissingModelError(f"{src} does not exist.")
        source_info = inspect_model(resolve_ref(src))
        for role in roles_of(source_info):
            parts[role] = str(src.resolve())
    for role, ref in (("question_encoder", question_encoder),
                      ("passage_encoder", passage_encoder), ("generator", generator)):
        if ref:
            p = Path(ref).expanduser()
            parts[role] = str(p.resolve()) if p.exists() else ref
    if "question_encoder" not in parts or "generator" not in parts:
        missing = [r.replace("_", " ") for r in ("question_encoder", "generator")
                   if r not in parts]
        what = f"{path} holds a {source_info.kind} model; " if source_info else ""
        raise BadInputError(
            f"{what}a model pack also needs a {' and a '.join(missing)}.",
            hint="Name the missing parts with --question-encoder REF / --generator REF "
                 "(a folder, a .gguf file or a hub id in the HF cache), or import a RAG "
                 "checkpoint, which holds both.")

    steps = 3 + (1 if copy else 0)
    prog = Progress(steps, f"checking the parts of {name}", progress)
    prog.set(0, "checking the question encoder")
    q_enc = validate_question_encoder(parts["question_encoder"])
    q_info = q_enc.info
    del q_enc
    if cancel is not None:
        cancel.raise_if_cancelled()
    prog.set(1, "checking the passage encoder")
    if parts.get("passage_encoder"):
        p_info = validate_passage_encoder(parts["passage_encoder"]).info
        if (p_info.family, p_info.dim) != (q_info.family, q_info.dim):
            raise EncoderMismatchError(
                f"The passage encoder {parts['passage_encoder']} ({p_info.family}, "
                f"{p_info.dim}-d) and the question encoder {parts['question_encoder']} "
                f"({q_info.family}, {q_info.dim}-d) do not share a vector space.",
                "Give encoders of the same family and size (e.g. the DPR question and context "
                "encoders trained together).")
    elif q_info.family != "dpr":
        parts["passage_encoder"] = parts["question_encoder"]
    if cancel is not None:
        cancel.raise_if_cancelled()
    prog.set(2, "checking the generator")
    generator_kind = validate_generator(parts["generator"], cancel=cancel)

    copied: list[str] = []
    if copy:
        prog.set(3, "copying the models into the data directory")
        dest_root = data.models_dir / name
        if dest_root.exists():
            if not replace:
                raise AlreadyExistsError(f"{dest_root} already exists.",
                                         "Remove it, or pass --replace.")
            shutil.rmtree(dest_root)
        copies: dict[str, str] = {}
        for role, ref in list(parts.items()):
            src = Path(ref)
            if not src.exists():
                continue  # hub ids stay in the HF cache
            if ref not in copies:
                dest = dest_root / src.name
                if str(dest) in copies.values():
                    dest = dest_root / f"{role}-{src.name}"
                _copy_into(src, dest)
                copies[ref] = str(dest)
                copied.append(str(dest))
            parts[role] = copies[ref]
        copied = [str(dest_root)]

    details: dict[str, Any] = {
        "source": str(Path(path).expanduser().resolve()) if path is not None else None,
        "copied": copied,
        "question_encoder_info": q_info.to_json(),
    }
    spec = PackSpec(
        name=name, kind=KIND_CUSTOM, question_encoder=parts["question_encoder"],
        passage_encoder=parts.get("passage_encoder"), generator=parts["generator"],
        generator_kind=generator_kind,
        description=f"Imported from {path}" if path is not None else "Imported",
        encoder_family=q_info.family, encoder_dim=int(q_info.dim), details=details)
    try:
        spec = register_pack(catalog, spec, replace=replace)
    except RagdeskError:
        for c in copied:
            shutil.rmtree(c, ignore_errors=True)
        raise
    prog.set(steps, f"registered {name}")
    log.info("registered model pack %s: %s", name, spec.to_json())
    return spec

