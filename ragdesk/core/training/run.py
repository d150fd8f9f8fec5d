"""``ragdesk train``: fine-tune a model pack against a snapshot, resumably, and register the
result as a custom pack that ``ask`` and the GUI can use at once.

Output folder layout::

    OUT/checkpoint-<step>/   the newest checkpoint (see :mod:`.checkpoint`)
    OUT/final/question_encoder/, OUT/final/generator/, OUT/final/training.json

A second run with the same ``OUT`` resumes from the newest checkpoint; its options must be the
ones the checkpoint was made with (``epochs`` may grow).
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragdesk.core.atomic import fsync_dir, write_json_atomic
from ragdesk.core.errors import AlreadyExistsError, BadInputError
from ragdesk.core.models import PackSpec, get_pack, load_generator, load_question_encoder
from ragdesk.core.models.packs import check_pack_name, register_pack
from ragdesk.core.progress import CancelToken, ProgressCallback
from ragdesk.core.snapshots import SnapshotIndex, open_snapshot
from ragdesk.core.training import checkpoint as ck
from ragdesk.core.training.data import read_examples
from ragdesk.core.training.trainer import RagTrainer, Reporter, TrainConfig, TrainState

if TYPE_CHECKING:
    from ragdesk.core.catalog import Catalog
    from ragdesk.core.paths import DataDir

log = logging.getLogger(__name__)

FINAL_DIR = "final"
# Without an evaluation file the guard still watches retrieval on this many training questions.
GUARD_SAMPLE = 200


@dataclass(frozen=True)
class TrainResult:
    out_dir: Path
    final_dir: Path
    pack: str | None  # the registered pack, None when registration was turned off
    state: TrainState
    resumed_from: Path | None

    @property
    def evaluations(self) -> list[dict[str, Any]]:
        return self.state.evaluations


def _check_resume(saved: dict[str, Any], config: TrainConfig, ident: dict[str, Any],
                  checkpoint: Path) -> None:
    saved_cfg = saved.get("config", {})
    diffs = [k for k in TrainConfig.RESUME_KEYS if saved_cfg.get(k) != getattr(config, k)]
    diffs += [k for k, v in ident.items() if saved.get(k) != v]
    if diffs:
        raise BadInputError(
            f"The checkpoint {checkpoint} was made with other settings ({', '.join(diffs)}).",
            hint="Resume with the same options, or pass another --out folder to start afresh.")


def train_pack(
    data: DataDir,
    catalog: Catalog,
    train_path: str | os.PathLike[str],
    *,
    snapshot: str | None,
    pack: str,
    out: str | os.PathLike[str],
    config: TrainConfig | None = None,
    eval_path: str | os.PathLike[str] | None = None,
    name: str | None = None,
    register: bool = True,
    train_limit: int | None = None,
    eval_limit: int | None = None,
    device: str | None = None,
    progress: ProgressCallback | None = None,
    cancel: CancelToken | None = None,
    report: Reporter | None = None,
) -> TrainResult:
    """Fine-tune ``pack`` on ``train_path`` against ``snapshot`` (None: the active one)."""
    config = (config or TrainConfig()).check()
    out_dir = Path(out).expanduser().resolve()
    examples = read_examples(train_path, limit=train_limit)
    dev = None if eval_path is None else read_examples(eval_path, limit=eval_limit)
    spec = get_pack(catalog, pack, data)
    pack_name = name or f"{pack}-ft"
    if register:
        _check_target_name(catalog, pack_name, out_dir, check_pack_name)
    index = open_snapshot(data, catalog, snapshot)
    try:
        _check_n_docs(config, index)
        ident = {"pack": spec.name, "snapshot": index.name,
                 "train_file": str(Path(train_path).resolve()), "n_train": len(examples)}
        start = _start_point(out_dir, config, ident, spec, report)
        encoder = load_question_encoder(start.question_encoder)
        generator = load_generator(start.generator, progress=progress, cancel=cancel)
        trainer = RagTrainer(encoder, generator, index, config, device=device,
                             state=start.state)
        if start.checkpoint is not None:
            ck.load_optimizer_state(trainer.optimizer, start.checkpoint / ck.OPTIMIZER_FILE,
                                    start.saved["optimizer_param_groups"])
        # Without a dev set: retrieval statistics only, on a sample, for the guard.
        eval_set = dev if dev is not None else examples[:GUARD_SAMPLE]
        trainer.run(examples, eval_set, generate_eval=dev is not None,
                    save=_saver(out_dir, config, ident), report=report, progress=progress,
                    cancel=cancel)
        final = _write_final(out_dir, trainer, ident, config)
        registered = None
        if register:
            registered = _register_result(
                catalog, pack_name, final, spec, trainer, config,
                f"{spec.name} fine-tuned on {Path(train_path).name} ({len(examples)} "
                f"questions) against the snapshot {index.name!r}.",
                {"base_pack": spec.name, "snapshot": index.name, "trained_in": str(out_dir),
                 "mode": config.mode})
            if report is not None:
                report(f"registered the model pack {registered!r}")
        return TrainResult(out_dir, final, registered, trainer.state, start.checkpoint)
    finally:
        index.close()


def _check_n_docs(config: TrainConfig, index: SnapshotIndex) -> None:
    if config.n_docs > int(index.size):  # before minutes of model loading
        raise BadInputError(
            f"Asked for {config.n_docs} passages per question, but the snapshot "
            f"{index.name!r} holds only {index.size}.",
            hint=f"Use --docs {index.size} or fewer.")


@dataclass
class _Start:
    """Where a run starts: the base pack's models, or the latest checkpoint's."""

    question_encoder: str
    generator: str
    state: TrainState
    checkpoint: Path | None = None
    saved: dict[str, Any] = field(default_factory=dict)


def _start_point(out_dir: Path, config: TrainConfig, ident: dict[str, Any], spec: PackSpec,
                 report: Reporter | None) -> _Start:
    ck.clean_staging(out_dir)
    latest = ck.latest_checkpoint(out_dir)
    if latest is None:
        if out_dir.exists() and (out_dir / FINAL_DIR).exists():
            raise AlreadyExistsError(f"{out_dir} already holds a finished training run.",
                                     hint="Pass another --out folder.")
        return _Start(spec.question_encoder, spec.generator, TrainState())
    saved = ck.read_state(latest)
    _check_resume(saved, config, ident, latest)
    state = TrainState.from_json(saved["state"])
    if report is not None:
        report(f"resuming from {latest} (step {state.step}, epoch {state.epoch + 1})")
    return _Start(str(latest / ck.QUESTION_ENCODER_DIR), str(latest / ck.GENERATOR_DIR),
                  state, latest, saved)


def _saver(out_dir: Path, config: TrainConfig, ident: dict[str, Any]
           ) -> Callable[[RagTrainer], None]:
    def save(t: RagTrainer) -> None:
        path = ck.write_checkpoint(
            out_dir, t.state.step, t.encoder, t.generator, t.optimizer,
            {"version": 1, "config": config.to_json(), **ident, "state": t.state.to_json()},
            keep=config.keep_checkpoints)
        log.info("checkpoint written: %s", path)

    return save


def _register_result(catalog: Catalog, name: str, final: Path, base: PackSpec,
                     trainer: RagTrainer, config: TrainConfig, description: str,
                     details: dict[str, Any]) -> str:
    info = trainer.encoder.info
    return register_pack(catalog, PackSpec(
        name=name, kind="custom", question_encoder=str(final / ck.QUESTION_ENCODER_DIR),
        passage_encoder=base.passage_encoder, generator=str(final / ck.GENERATOR_DIR),
        generator_kind=trainer.generator.kind, description=description,
        encoder_family=info.family, encoder_dim=info.dim, default_mode=config.mode,
        details=details), replace=True).name


def _check_target_name(catalog: Catalog, name: str, out_dir: Path, check: Any) -> None:
    """Fail before hours of training, not after, when the pack name is taken by another run."""
    check(name)
    for rec in catalog.list_model_packs():
        if rec.name == name and rec.details.get("trained_in") != str(out_dir):
            raise AlreadyExistsError(
                f"A model pack named {name!r} already exists.",
                hint="Pick another name with --name, or remove it with "
                     f"`ragdesk models remove {name}`.")


def _write_final(out_dir: Path, trainer: RagTrainer, ident: dict[str, Any],
                 config: TrainConfig) -> Path:
    final = out_dir / FINAL_DIR
    staging = out_dir / f".staging-{FINAL_DIR}-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    ck.save_models(staging, trainer.encoder, trainer.generator)
    write_json_atomic(staging / "training.json", {"config": config.to_json(), **ident,
                                                  "state": trainer.state.to_json()})
    if final.exists():
        shutil.rmtree(final)
    os.replace(staging, final)
    fsync_dir(out_dir)
    return final
