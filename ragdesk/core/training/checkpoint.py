"""Checkpoints in standard formats, written whole or not at all.

A checkpoint is a folder ``checkpoint-<step>`` in the output folder::

    question_encoder/        save_pretrained (safetensors) + tokenizer (+ pooling files for
                             sentence-transformers encoders)
    generator/               save_pretrained (safetensors) + tokenizer; absent when the
                             generator is frozen (the base pack's is the same)
    optimizer.safetensors    AdamW moments and step counts, tensors only (no pickles)
    trainer_state.json       counters, options, evaluations, optimizer hyper-parameters

It is written under a hidden staging name and renamed into place when complete, so any
``checkpoint-*`` folder is a whole one and a kill at any moment leaves the previous one intact.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragdesk.core.atomic import fsync_dir, write_json_atomic
from ragdesk.core.errors import CorruptSnapshotError, DiskFullError, is_disk_full

if TYPE_CHECKING:
    import torch

    from ragdesk.core.encoders import TextEncoder
    from ragdesk.core.engine.generators import Generator

QUESTION_ENCODER_DIR = "question_encoder"
GENERATOR_DIR = "generator"
OPTIMIZER_FILE = "optimizer.safetensors"
STATE_FILE = "trainer_state.json"
PREFIX = "checkpoint-"


def save_question_encoder(encoder: TextEncoder, folder: Path) -> None:
    """A folder that ``load_encoder`` / ``load_question_encoder`` read back as the same
    encoder: the weights, the tokenizer and, for sentence-transformers models, the pooling and
    normalization that the plain HF config does not record."""
    folder.mkdir(parents=True, exist_ok=True)
    encoder.model.save_pretrained(str(folder), safe_serialization=True)
    encoder.tokenizer.save_pretrained(str(folder))
    info = encoder.info
    if info.family != "sentence-transformers":
        return
    modules: list[dict[str, object]] = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling",
         "type": "sentence_transformers.models.Pooling"},
    ]
    (folder / "1_Pooling").mkdir(exist_ok=True)
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({
        "word_embedding_dimension": int(encoder.model.config.hidden_size),
        "pooling_mode": info.pooling,  # sentence-transformers 5+; the booleans for older ones
        "pooling_mode_cls_token": info.pooling == "cls",
        "pooling_mode_mean_tokens": info.pooling == "mean",
        "pooling_mode_max_tokens": info.pooling == "max",
        "pooling_mode_lasttoken": info.pooling == "lasttoken",
    }, indent=2))
    modules += encoder.head.save(folder, len(modules))
    if info.normalize:
        idx = len(modules)
        modules.append({"idx": idx, "name": str(idx), "path": f"{idx}_Normalize",
                        "type": "sentence_transformers.models.Normalize"})
        (folder / f"{idx}_Normalize").mkdir(exist_ok=True)
    (folder / "modules.json").write_text(json.dumps(modules, indent=2))
    prompts = encoder.head.prompts
    (folder / "config_sentence_transformers.json").write_text(json.dumps(
        {"prompts": {"query": prompts.query, "document": prompts.passage},
         "default_prompt_name": None}, indent=2))
    (folder / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": encoder.max_length, "do_lower_case": False}, indent=2))


def save_generator(gen: Generator, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    gen.model.save_pretrained(str(folder), safe_serialization=True)
    gen.tokenizer.save_pretrained(str(folder))


def save_models(folder: Path, encoder: TextEncoder, gen: Generator | None,
                with_generator: bool = True) -> None:
    """``gen`` may be None when ``with_generator`` is off (a run that never loaded it)."""
    save_question_encoder(encoder, folder / QUESTION_ENCODER_DIR)
    if with_generator:
        if gen is None:
            raise ValueError("with_generator needs the generator")
        save_generator(gen, folder / GENERATOR_DIR)


def optimizer_tensors(optimizer: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor],
                                                               list[dict[str, object]]]:
    """The optimizer's per-parameter state as flat tensors, and its (JSON-able) groups."""
    import torch

    sd = optimizer.state_dict()
    tensors: dict[str, torch.Tensor] = {}
    for pid, st in sd["state"].items():
        for name, value in st.items():
            t = value if torch.is_tensor(value) else torch.tensor(value)
            tensors[f"{pid}.{name}"] = t.detach().cpu().contiguous()
    return tensors, json.loads(json.dumps(sd["param_groups"]))


def load_optimizer_state(optimizer: torch.optim.Optimizer, path: Path,
                         param_groups: list[dict[str, object]]) -> None:
    from safetensors.torch import load_file

    state: dict[int, dict[str, object]] = {}
    for key, tensor in load_file(str(path)).items():
        pid, name = key.split(".", 1)
        state.setdefault(int(pid), {})[name] = tensor
    # JSON turned tuples such as AdamW's betas into lists; give them back their type.
    groups = [{k: (tuple(v) if isinstance(v, list) and k != "params" else v)
               for k, v in g.items()} for g in param_groups]
    optimizer.load_state_dict({"state": state, "param_groups": groups})


def list_checkpoints(out_dir: Path) -> list[tuple[int, Path]]:
    """Complete checkpoints, oldest first (staging folders start with a dot)."""
    found: list[tuple[int, Path]] = []
    if not out_dir.is_dir():
        return found
    for p in out_dir.iterdir():
        if p.is_dir() and p.name.startswith(PREFIX) and p.name[len(PREFIX):].isdigit():
            found.append((int(p.name[len(PREFIX):]), p))
    return sorted(found)


def latest_checkpoint(out_dir: Path) -> Path | None:
    cks = list_checkpoints(out_dir)
    return cks[-1][1] if cks else None


def read_state(checkpoint: Path) -> dict[str, Any]:
    try:
        data = json.loads((checkpoint / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CorruptSnapshotError(
            f"The checkpoint {checkpoint} cannot be read ({exc}).",
            hint="Delete that checkpoint folder to resume from the one before, or start "
                 "again with another --out folder.") from exc
    if not isinstance(data, dict):
        raise CorruptSnapshotError(f"{checkpoint / STATE_FILE} does not hold a JSON object.")
    return data


def write_checkpoint(out_dir: Path, step: int, encoder: TextEncoder, gen: Generator | None,
                     optimizer: torch.optim.Optimizer, state: dict[str, object],
                     keep: int = 1, with_generator: bool = True) -> Path:
    """Write ``checkpoint-<step>`` atomically, then drop all but the newest ``keep``."""
    from safetensors.torch import save_file

    out_dir.mkdir(parents=True, exist_ok=True)
    final = out_dir / f"{PREFIX}{step}"
    staging = out_dir / f".staging-{PREFIX}{step}-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        save_models(staging, encoder, gen, with_generator)
        tensors, groups = optimizer_tensors(optimizer)
        save_file(tensors, str(staging / OPTIMIZER_FILE))
        write_json_atomic(staging / STATE_FILE, {**state, "optimizer_param_groups": groups})
        if final.exists():
            shutil.rmtree(final)
        os.replace(staging, final)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        if is_disk_full(exc):
            raise DiskFullError(f"The disk is full while writing the checkpoint {final}.") from exc
        raise
    fsync_dir(out_dir)
    for _, old in list_checkpoints(out_dir)[:-max(1, keep)]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def clean_staging(out_dir: Path) -> None:
    """Remove half-written checkpoints a killed run left behind."""
    if out_dir.is_dir():
        for p in out_dir.iterdir():
            if p.name.startswith(".staging-") and p.is_dir():
                shutil.rmtree(p, ignore_errors=True)
