"""Model references: a local folder, a ``.gguf`` file, or a hub id found in the HF cache.

A reference is a plain string so that it can live in the catalog and in settings. Hub ids may
carry a revision (``org/name@refs/pr/3``). Resolving a reference never downloads anything:
downloading is ``ragdesk models download``; here a hub id that is not in the cache is a
:class:`MissingModelError` that says how to get it.

:func:`inspect_model` tells what a reference holds by reading its ``config.json`` (no weights),
which is how a pack's parts are checked cheaply and how ``models import`` maps a folder to roles.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragdesk.core.errors import MissingModelError

GGUF_SUFFIX = ".gguf"

# What a model folder or file is, as far as ragdesk cares.
KIND_RAG = "rag"  # RagSequence/RagToken checkpoint: question encoder + BART generator
KIND_DPR_QUESTION = "dpr-question"
KIND_DPR_CONTEXT = "dpr-context"
KIND_ST = "sentence-transformers"
KIND_SEQ2SEQ = "seq2seq"
KIND_CAUSAL = "causal"
KIND_GGUF = "gguf"


ST_MODEL_TYPES = ("bert", "roberta", "mpnet", "xlm-roberta", "distilbert")
WEIGHT_PICKLES = ("pytorch_model.bin", "tf_model.h5", "flax_model.msgpack", "model.ckpt.index")


@dataclass(frozen=True)
class ResolvedRef:
    """Where a reference lives on disk."""

    ref: str
    path: Path  # a folder, or a .gguf file
    id: str  # the hub id, or the local path as given
    revision: str | None  # the HF cache commit, None for local paths
    local: bool

    @property
    def is_gguf(self) -> bool:
        return self.path.is_file() and self.path.suffix.lower() == GGUF_SUFFIX


@dataclass(frozen=True)
class ModelInfo:
    """What a reference holds, read from its config only."""

    kind: str
    model_type: str
    architecture: str | None
    # For encoders: the retrieval family ("dpr" / "sentence-transformers") and vector size.
    encoder_family: str | None = None
    encoder_dim: int | None = None
    generator_kind: str | None = None  # "seq2seq" or "causal"


def split_revision(ref: str) -> tuple[str, str | None]:
    """``org/name@rev`` -> (``org/name``, ``rev``); local paths never carry a revision."""
    if "@" in ref and not Path(ref).expanduser().exists():
        repo, rev = ref.split("@", 1)
        return repo, rev or None
    return ref, None


def looks_like_path(ref: str) -> bool:
    """Whether a reference that does not exist was meant as a path (not ``org/name[@rev]``)."""
    base = ref.split("@", 1)[0]
    return (ref.startswith(("/", ".", "~")) or ref.endswith(GGUF_SUFFIX)
            or base.count("/") > 1 or "\\" in ref or (len(ref) > 1 and ref[1] == ":"))


def hf_cache_dir() -> Path:
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def cached_repo_dir(repo_id: str) -> Path:
    return hf_cache_dir() / ("models--" + repo_id.replace("/", "--"))


def has_safetensors(folder: Path) -> bool:
    return any(folder.glob("*.safetensors")) or any(folder.glob("*.safetensors.index.json"))


def _cached_snapshot(repo_id: str, revision: str | None) -> Path | None:
    """The cached snapshot folder of ``repo_id`` at ``revision``, complete per the hub's tree."""
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(repo_id, revision=revision, local_files_only=True))
    except Exception:
        return None


def _other_cached_revisions(repo_id: str) -> list[str]:
    """Refs other than main in the cache, e.g. ``refs/pr/3`` where the hub's safetensors
    conversion of a pickle-only repo lives (``models download`` fetches it from there)."""
    refs = cached_repo_dir(repo_id) / "refs"
    if not refs.is_dir():
        return []
    found = [str(p.relative_to(refs)).replace(os.sep, "/") for p in refs.rglob("*") if p.is_file()]
    return sorted(r for r in found if r != "main")


def resolve_ref(ref: str | os.PathLike[str]) -> ResolvedRef:
    """Find a reference on disk without downloading anything."""
    text = str(ref)
    p = Path(text).expanduser()
    if p.exists():
        if p.is_file() and p.suffix.lower() != GGUF_SUFFIX:
            raise MissingModelError(
                f"{p} is a file but not a .gguf model; give a model folder or a .gguf file.")
        return ResolvedRef(text, p.resolve(), text, None, True)
    if looks_like_path(text):
        raise MissingModelError(f"The model path {text} does not exist.")
    repo_id, revision = split_revision(text)
    folder = _cached_snapshot(repo_id, revision)
    if folder is not None and (revision is not None or has_safetensors(folder)):
        return ResolvedRef(text, folder, repo_id, folder.name, False)
    if revision is None:
        for rev in _other_cached_revisions(repo_id):
            alt = _cached_snapshot(repo_id, rev)
            if alt is not None and has_safetensors(alt):
                return ResolvedRef(text, alt, repo_id, alt.name, False)
    if folder is not None:
        return ResolvedRef(text, folder, repo_id, folder.name, False)
    raise MissingModelError(
        f"The model {text!r} is neither a local folder nor in the Hugging Face cache.",
        "Download it with `ragdesk models download PACK` (needs the network), or copy the "
        "model folder to this machine and run `ragdesk models import PATH --name NAME`.",
    )


def read_config(folder: Path) -> dict[str, Any]:
    cfg_path = folder / "config.json"
    if not cfg_path.is_file():
        raise MissingModelError(f"{folder} is not a model folder: it has no config.json.")
    try:
        data = json.loads(cfg_path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        why = "it is nested too deeply" if isinstance(exc, RecursionError) else exc
        raise MissingModelError(f"{cfg_path} cannot be read as JSON: {why}") from exc
    if not isinstance(data, dict):
        raise MissingModelError(f"{cfg_path} does not hold a JSON object.")
    return data


def _dpr_dim(cfg: dict[str, Any]) -> int:
    return int(cfg.get("projection_dim") or cfg.get("hidden_size") or 768)


def _gguf_info(path: Path) -> ModelInfo:
    try:
        from gguf import GGUFReader

        reader = GGUFReader(str(path))
        field = reader.fields.get("general.architecture")
        arch = bytes(field.parts[field.data[0]]).decode("utf-8") if field is not None else "?"
    except Exception as exc:
        raise MissingModelError(f"{path} is not a readable GGUF file: {exc}") from exc
    return ModelInfo(KIND_GGUF, arch, None, generator_kind="causal")


def inspect_model(resolved: ResolvedRef) -> ModelInfo:
    """Classify a model from its config (or GGUF header) without loading weights."""
    path = resolved.path
    if resolved.is_gguf:
        return _gguf_info(path)
    is_st_layout = (path / "modules.json").exists() or (path / "sentence_bert_config.json").exists()
    cfg = read_config(path)
    model_type = str(cfg.get("model_type") or "")
    arch = (cfg.get("architectures") or [None])[0]
    if model_type == "rag":
        q = cfg.get("question_encoder") or {}
        g = cfg.get("generator") or {}
        if not q or not g:
            raise MissingModelError(
                f"{path} is a RAG checkpoint without question_encoder/generator configs.")
        return ModelInfo(KIND_RAG, model_type, arch, encoder_family="dpr", encoder_dim=_dpr_dim(q),
                         generator_kind="seq2seq")
    if model_type == "dpr":
        if arch and "Question" in arch:
            return ModelInfo(KIND_DPR_QUESTION, model_type, arch, "dpr", _dpr_dim(cfg))
        if arch and "Context" in arch:
            return ModelInfo(KIND_DPR_CONTEXT, model_type, arch, "dpr", _dpr_dim(cfg))
        raise MissingModelError(
            f"{path} holds a DPR {arch or 'model'}; ragdesk needs a DPRQuestionEncoder or a "
            "DPRContextEncoder.")
    if is_st_layout or model_type in ST_MODEL_TYPES:
        return ModelInfo(KIND_ST, model_type, arch, "sentence-transformers",
                         int(cfg.get("hidden_size") or 0) or None)
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES,
    )

    if model_type in MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES and (
            cfg.get("is_encoder_decoder", True) or "ConditionalGeneration" in str(arch)):
        return ModelInfo(KIND_SEQ2SEQ, model_type, arch, generator_kind="seq2seq")
    if model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return ModelInfo(KIND_CAUSAL, model_type, arch, generator_kind="causal")
    raise MissingModelError(
        f"{path} holds a {model_type or 'model of unknown type'!r} model, which ragdesk cannot "
        "use as a question encoder, passage encoder or generator.")


def files_bytes(path: Path) -> int:
    """Bytes on disk of a file or folder, counting each HF cache blob once."""
    if path.is_file():
        return path.stat().st_size
    seen: set[Path] = set()
    total = 0
    for f in path.rglob("*"):
        try:
            real = f.resolve()
            if real in seen or not real.is_file():
                continue
            seen.add(real)
            total += real.stat().st_size
        except OSError:
            continue
    return total


def safetensors_files(folder: Path) -> list[Path]:
    """The checkpoint's safetensors shards; refuses folders that only hold pickles."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        except (OSError, ValueError, KeyError) as exc:
            raise MissingModelError(f"{index} cannot be read: {exc}") from exc
        files = [folder / name for name in sorted(set(weight_map.values()))]
        missing = [f.name for f in files if not f.is_file()]
        if missing:
            raise MissingModelError(
                f"{folder} is incomplete: the weight shards {', '.join(missing)} are missing.")
        return files
    single = folder / "model.safetensors"
    if single.is_file():
        return [single]
    pickles = [name for name in WEIGHT_PICKLES if (folder / name).exists()]
    if pickles:
        raise MissingModelError(
            f"{folder} holds only {pickles[0]} weights (a pickle), which ragdesk never loads "
            "because unpickling can run code.",
            "Use the safetensors version of the model: `ragdesk models download PACK` fetches "
            "it, or save the model with save_pretrained(..., safe_serialization=True).",
        )
    raise MissingModelError(f"{folder} has no model weights (no model.safetensors).")
