"""Load a pack's parts from references: question encoders and generators.

A reference is a hub id in the HF cache, a local HF folder, a RAG checkpoint folder (its
question encoder or its generator is taken out of it) or a ``.gguf`` file. Weights are read
from safetensors or GGUF only, never from pickles, and never with ``trust_remote_code``.
Models load in float32 on the CPU unless a device is asked for (``device=`` or the
``RAGDESK_DEVICE`` environment variable: ``cpu``, ``cuda``, ``cuda:1``, ``mps`` or ``auto``).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragdesk.core.devices import select_device, to_device
from ragdesk.core.encoders import TextEncoder, load_encoder
from ragdesk.core.errors import MissingModelError, RagdeskError
from ragdesk.core.models import first_use
from ragdesk.core.models.fast_tokenizers import load_tokenizer
from ragdesk.core.models.gguf_files import cache_dir_for, cache_is_valid, load_gguf_causal_lm
from ragdesk.core.models.newline_cache import converted_newline_ids
from ragdesk.core.models.rag_checkpoint import GENERATOR, QUESTION_ENCODER, load_rag_part
from ragdesk.core.models.refs import (
    KIND_CAUSAL,
    KIND_DPR_CONTEXT,
    KIND_DPR_QUESTION,
    KIND_RAG,
    KIND_SEQ2SEQ,
    KIND_ST,
    ResolvedRef,
    inspect_model,
    resolve_ref,
    safetensors_files,
)
from ragdesk.core.models.weight_copies import keep_copies, read_copies, weights_stamp
from ragdesk.core.progress import CancelToken, ProgressCallback

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    import torch
    from transformers import PreTrainedTokenizerBase

    from ragdesk.core.engine.generators import CausalLMGenerator, Seq2SeqGenerator

log = logging.getLogger(__name__)

def _wrap_load_error(what: str, ref: ResolvedRef, exc: BaseException) -> MissingModelError:
    return MissingModelError(
        f"The {what} {ref.id!r} could not be loaded ({type(exc).__name__}: {exc}).",
        "Check that the folder is complete (config, tokenizer, model.safetensors); download or "
        "copy it again if it was cut short.")


def check_tokenizer(tokenizer: Any, model: Any, what: str, ref: ResolvedRef) -> None:
    """Refuse a tokenizer that cannot be the model's: transformers builds a tokenizer of just
    the special tokens when its files are missing, which then encodes every text as nothing."""
    emb = model.get_input_embeddings()
    vocab = int(emb.weight.shape[0]) if emb is not None else 0
    size = len(tokenizer)
    if vocab and size < vocab // 2:
        raise MissingModelError(
            f"The {what} {ref.id!r} has a tokenizer of {size} tokens for a model of {vocab}: "
            "its tokenizer files are missing or damaged.",
            "Copy the complete model folder (tokenizer.json, vocab/merges files, "
            "tokenizer_config.json) again.")


# ------------------------------------------------------------------ encoders ----------


def load_question_encoder(ref: str | os.PathLike[str], *,
                          max_length: int | None = None,
                          answering: bool = False) -> TextEncoder:
    """The question encoder of a reference: a DPR question encoder, a sentence-transformers
    model, or the question encoder inside a RAG checkpoint. ``answering``: see
    :func:`ragdesk.core.encoders.load_encoder` (a RAG checkpoint's encoder is unaffected)."""
    resolved = resolve_ref(ref)
    if resolved.is_gguf:
        raise MissingModelError(f"{resolved.path} is a GGUF generator, not a question encoder.")
    info = inspect_model(resolved)
    if info.kind == KIND_RAG:
        model, tokenizer = load_rag_part(resolved.path, QUESTION_ENCODER)
        check_tokenizer(tokenizer, model, "question encoder", resolved)
        from ragdesk.core.encoders import DPR_FAMILY, EncoderInfo

        limit = max_length or min(512, int(getattr(tokenizer, "model_max_length", 512) or 512))
        enc_info = EncoderInfo(id=resolved.id, revision=resolved.revision, family=DPR_FAMILY,
                               pooling="cls-pooler", normalize=False,
                               dim=int(info.encoder_dim or 768))
        return TextEncoder(model, tokenizer, enc_info, max_length=limit)
    if info.kind == KIND_DPR_CONTEXT:
        raise MissingModelError(
            f"{resolved.id!r} is a DPR context (passage) encoder; questions need the matching "
            "DPR question encoder.")
    if info.kind not in (KIND_DPR_QUESTION, KIND_ST):
        raise MissingModelError(
            f"{resolved.id!r} holds a {info.kind} model ({info.model_type}), not a question "
            "encoder.")
    return _load_plain_encoder(resolved, "question", max_length, answering=answering)


def load_passage_encoder(ref: str | os.PathLike[str], *,
                         max_length: int | None = None) -> TextEncoder:
    """The passage encoder of a reference: a DPR context encoder or a sentence-transformers
    model (which encodes questions and passages alike)."""
    resolved = resolve_ref(ref)
    if resolved.is_gguf:
        raise MissingModelError(f"{resolved.path} is a GGUF generator, not a passage encoder.")
    info = inspect_model(resolved)
    if info.kind not in (KIND_DPR_CONTEXT, KIND_ST):
        raise MissingModelError(
            f"{resolved.id!r} holds a {info.kind} model, not a passage encoder (a DPR context "
            "encoder or a sentence-transformers model).")
    return _load_plain_encoder(resolved, "passage", max_length)


def _load_plain_encoder(resolved: ResolvedRef, role: str, max_length: int | None, *,
                        answering: bool = False) -> TextEncoder:
    safetensors_files(resolved.path)  # refuses pickle-only folders with a clear message
    try:
        encoder = load_encoder(resolved.path, role=role, max_length=max_length,
                               answering=answering)
    except RagdeskError:
        raise
    except Exception as exc:
        raise _wrap_load_error(f"{role} encoder", resolved, exc) from exc
    check_tokenizer(encoder.tokenizer, encoder.model, f"{role} encoder", resolved)
    # Record the hub id (not a cache or package path) so that snapshot manifests stay portable.
    from ragdesk.core.starter_encoder import encoder_label

    model_id, revision = encoder_label(resolved.path) or (resolved.id, resolved.revision)
    encoder.info = dataclasses.replace(encoder.info, id=model_id, revision=revision)
    return encoder


# ------------------------------------------------------------------ generators --------


@dataclass
class GeneratorParts:
    """A loaded generator before it is wrapped in the engine's generator class."""

    model: Any
    tokenizer: PreTrainedTokenizerBase
    kind: str  # "seq2seq" or "causal"
    name: str
    source: ResolvedRef


def _check_loading_info(info: Mapping[str, Iterable[object]], resolved: ResolvedRef) -> None:
    problems = sorted(str(k) for k in (info.get("missing_keys") or [])) + sorted(
        str(k) for k in (info.get("mismatched_keys") or []))
    if problems:
        raise MissingModelError(
            f"The model {resolved.id!r} is incomplete or damaged: {len(problems)} weights are "
            f"missing or have the wrong shape ({', '.join(problems[:3])}...).",
            "Download or copy the model again.")


def load_generator_parts(
    ref: str | os.PathLike[str],
    *,
    dtype: torch.dtype | None = None,
    device: str | None = None,
    progress: ProgressCallback | None = None,
    cancel: CancelToken | None = None,
    answering: bool = False,
) -> GeneratorParts:
    """(model, tokenizer, kind) of a generator reference; ``answering``: see
    :func:`load_generator`."""
    import torch

    dtype = dtype or torch.float32
    from ragdesk.core.models import reader

    first_use.prepare(Path(ref), progress)
    if reader.is_reader_gguf(Path(ref)) and not reader.is_assembled(Path(ref)):
        raise MissingModelError(
            f"The {reader.READER} pack is not set up ({reader.describe()}).",
            "Run `ragdesk models setup-reader`, or add it from the app's models dialog.")
    resolved = resolve_ref(ref)
    target = select_device(device)
    if resolved.is_gguf:
        model, tokenizer = load_gguf_causal_lm(resolved.path, dtype=dtype, progress=progress,
                                               cancel=cancel, answering=answering)
        return GeneratorParts(to_device(model, target), tokenizer, "causal", resolved.id,
                              resolved)
    info = inspect_model(resolved)
    if info.kind == KIND_RAG:
        model, tokenizer = load_rag_part(resolved.path, GENERATOR, dtype=dtype)
        check_tokenizer(tokenizer, model, "generator", resolved)
        return GeneratorParts(to_device(model, target), tokenizer, "seq2seq", resolved.id,
                              resolved)
    if info.kind not in (KIND_SEQ2SEQ, KIND_CAUSAL):
        raise MissingModelError(
            f"{resolved.id!r} holds a {info.kind} model ({info.model_type}), not a generator.")
    safetensors_files(resolved.path)
    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM

    cls: Any = AutoModelForSeq2SeqLM if info.kind == KIND_SEQ2SEQ else AutoModelForCausalLM
    try:
        tokenizer = load_tokenizer(resolved.path)
        model, loading_info = cls.from_pretrained(
            str(resolved.path), use_safetensors=True, trust_remote_code=False, dtype=dtype,
            output_loading_info=True)
    except RagdeskError:
        raise
    except Exception as exc:
        raise _wrap_load_error("generator", resolved, exc) from exc
    _check_loading_info(loading_info, resolved)
    check_tokenizer(tokenizer, model, "generator", resolved)
    return GeneratorParts(to_device(model.eval(), target), tokenizer, info.kind, resolved.id,
                          resolved)


def _converted_weights_stamp(ref: str | os.PathLike[str]
                             ) -> tuple[Path, dict[str, str]] | None:
    """(folder, :func:`weights_stamp`) of a GGUF reference's converted folder, where it has
    a valid one; None otherwise (a folder converted now is not read as a lean tree)."""
    path = Path(ref)
    if path.suffix.lower() != ".gguf" or not cache_is_valid(path):
        return None
    folder = cache_dir_for(path)
    try:
        return folder, weights_stamp(folder)
    except OSError:
        return None


def _copies_of(parts: GeneratorParts, before: tuple[Path, dict[str, str]] | None
               ) -> tuple[Path, dict[str, str]] | None:
    """(folder, stamp) under which the lean decoder's weight copies of ``parts`` are stored:
    only for the lean tree of ragdesk's converted folder (it holds the folder's weights as
    they are: it is never trained) on the CPU, and only where the weights read are the
    version the stamp taken before reading them names."""
    model = parts.model
    if before is None or not parts.source.is_gguf \
            or getattr(model, "lean_architecture", None) is None \
            or any(p.device.type != "cpu" for p in model.parameters()):
        return None
    folder, stamp = before
    try:
        same = (cache_dir_for(parts.source.path).resolve() == folder.resolve()
                and weights_stamp(folder) == stamp)
    except OSError:
        return None
    return (folder, stamp) if same else None


def load_generator(
    ref: str | os.PathLike[str],
    *,
    dtype: torch.dtype | None = None,
    device: str | None = None,
    progress: ProgressCallback | None = None,
    cancel: CancelToken | None = None,
    precision: str | None = None,
    answering: bool = False,
) -> Seq2SeqGenerator | CausalLMGenerator:
    """The engine's generator for a reference (BART-style seq2seq or a causal LM).

    ``precision`` (causal LMs that take ragdesk's lean decoder, i.e. Gemma 3): "float32"
    (exact), "bfloat16" (the fast path, the default where the CPU has native bf16: bfloat16
    weights for the linear layers and the output layer) or "int8" (int8 weights, dynamically
    quantized activations); other generators always run in float32.

    ``answering``: the generator only answers (no training, no transformers forward), so a
    GGUF's converted model that the lean decoders reproduce is read as a lean tree without
    transformers' modeling modules (:mod:`.lean_causal_lm`), which a one-shot ``ask`` would
    spend seconds importing."""
    from ragdesk.core.engine.causal_decoder import default_precision
    from ragdesk.core.options import check_precision

    precision = check_precision(precision or default_precision())  # before any weight is read
    before = _converted_weights_stamp(ref)
    parts = load_generator_parts(ref, dtype=dtype, device=device, progress=progress,
                                 cancel=cancel, answering=answering)
    from ragdesk.core.engine.generators import CausalLMGenerator, Seq2SeqGenerator

    if parts.kind == "seq2seq":
        return Seq2SeqGenerator(parts.model, parts.tokenizer, parts.name)
    newline_ids = None
    if parts.source.is_gguf and cache_is_valid(parts.source.path):  # ragdesk's own folder
        newline_ids = converted_newline_ids(cache_dir_for(parts.source.path), parts.tokenizer)
    # the copies kept on disk are read into the CPU's memory: a model on a GPU makes its own
    on_cpu = all(p.device.type == "cpu" for p in parts.model.parameters())
    copies = _copies_of(parts, before) if on_cpu else None
    generator = CausalLMGenerator(
        parts.model, parts.tokenizer, parts.name, precision=precision,
        newline_ids=newline_ids,
        stored_copies=read_copies(*copies) if copies is not None else None)
    decoder = generator.lean_decoder
    if copies is not None and decoder is not None and decoder.copies.missed:
        keep_copies(copies[0], decoder.copies.made, copies[1])
    return generator
