"""Where an answer's confidence model comes from.

In order: the model fitted for this snapshot and generator (``ragdesk index calibrate
--confidence``, stored in the snapshot's ``confidence.json``), else a model ragdesk ships for
the generator and the snapshot's encoder (the starter pack's, fitted on NQ-open dev questions
the evaluation never reports on; see scripts/fit_confidence.py), else none: the answer then
has no confidence and never abstains.
"""

from __future__ import annotations

import json
import logging
import os
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from ragdesk.core.atomic import write_json_atomic
from ragdesk.core.confidence.model import ConfidenceModel

log = logging.getLogger(__name__)

CONFIDENCE_FILE = "confidence.json"


def generator_key(name: str) -> str:
    """A generator's name that survives moving the data directory: a file's name for a
    file (the starter's GGUF), the hub id otherwise."""
    if name.endswith(".gguf") or os.path.isabs(name):
        return Path(name).name
    return name


def _read(path: Path) -> dict[str, Any] | None:
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError) as exc:  # nested past the stack: not a bug
        log.warning("Ignoring %s (%s).", path, exc)
        return None
    return d if isinstance(d, dict) else None


def read_snapshot_models(folder: Path) -> dict[str, ConfidenceModel]:
    """The models fitted for one snapshot, by generator key (a damaged file: none, loudly)."""
    d = _read(folder / CONFIDENCE_FILE) or {}
    out: dict[str, ConfidenceModel] = {}
    for key, raw in (d.get("models") or {}).items():
        try:
            out[str(key)] = ConfidenceModel.from_json(raw)
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("Ignoring the confidence model for %s in %s (%s).", key, folder, exc)
    return out


def write_snapshot_model(folder: Path, generator: str, model: ConfidenceModel) -> None:
    models = read_snapshot_models(folder)
    models[generator_key(generator)] = model
    write_json_atomic(folder / CONFIDENCE_FILE,
                      {"models": {k: m.to_json() for k, m in sorted(models.items())}})


@lru_cache(maxsize=1)
def shipped_models() -> tuple[tuple[str, str, ConfidenceModel], ...]:
    """(generator key, encoder id, model) for each model in ragdesk/resources/confidence."""
    out = []
    root = resources.files("ragdesk") / "resources" / "confidence"
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".json"):
            continue
        d = json.loads(entry.read_text(encoding="utf-8"))
        out.append((str(d["generator"]), str(d["encoder"]),
                    ConfidenceModel.from_json(d["model"])))
    return tuple(out)


def reads_memory(generator: str) -> bool:
    """Whether a model ragdesk ships for ``generator`` judges its answers from memory: that
    reader's answers are worth reading from memory too, and a model fitted for it has a
    memory part to fit."""
    key = generator_key(generator)
    return any(gen == key and model.memory is not None for gen, _, model in shipped_models())


def confidence_model(folder: Path | None, generator: str, encoder_id: str | None,
                     mode: str | None = None) -> tuple[ConfidenceModel | None, str]:
    """The model for answers of ``generator`` over the snapshot in ``folder``, read in
    ``mode`` (any mode when None), and where it came from ("fitted for this snapshot",
    "shipped for ...", "none"). A model fitted on another mode's answers is passed over."""
    key = generator_key(generator)
    if folder is not None:
        own = read_snapshot_models(folder).get(key)
        if own is not None and (mode is None or own.fits(mode)):
            return own, "fitted for this snapshot"
    for gen, enc, model in shipped_models():
        if gen == key and enc == encoder_id and (mode is None or model.fits(mode)):
            return model, f"shipped for {gen} with {enc}"
    return None, "none"
