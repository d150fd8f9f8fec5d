"""Finding an encoder's folder (a local folder or the Hugging Face cache, never a download)
and telling its family from the files in it."""

from __future__ import annotations

import os
from pathlib import Path

from ragdesk.core.encoders.identity import DPR_FAMILY, ST_FAMILY
from ragdesk.core.errors import BadInputError, MissingModelError
from ragdesk.core.safe_json import load_file_bounded


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


def read_json(path: Path) -> dict[str, object]:
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
    cfg = read_json(cfg_path)
    if cfg.get("model_type") == "dpr":
        return DPR_FAMILY
    if cfg.get("model_type") in ("bert", "roberta", "mpnet", "xlm-roberta", "distilbert"):
        return ST_FAMILY
    raise MissingModelError(
        f"{folder} holds a {cfg.get('model_type')!r} model, not a DPR or sentence-transformers "
        "encoder."
    )
