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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragdesk.core.atomic import fsync_dir, write_json_atomic
from ragdesk.core.errors import AlreadyExistsError, BadInputError
from ragdesk.core.models import PackSpec, get_pack, load_generator, load_question_encoder
from ragdesk.core.models.packs import check_pack_name, register_pack
from ragdesk.core.progress import CancelToken, ProgressCallback
from ragdesk.core.snapshots import open_snapshot
from ragdesk.core.training import checkpoint as ck
from ragdesk.core.training.data import Example, read_examples
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
    dev: list[Example] | None = None
    if eval_path is not None:
        dev = read_examples(eval_path, limit=eval_limit)
    spec = get_pack(catalog, pack, data)
    pack_name = name or f"{pack}-ft"
    if register:
        _check_target_name(catalog, pack_name, out_dir, check_pack_name)
    index = open_snapshot(data, catalog, snapshot)
    try:
        if config.n_docs > int(index.size):  # before minutes of model loading
            raise BadInputError(
                f"Asked for {config.n_docs} passages per question, but the snapshot "
                f"{index.name!r} holds only {index.size}.",
                hint=f"Use --docs {index.size} or fewer.")
        ident = {"pack": spec.name, "snapshot": index.name,
                 "train_file": str(Path(train_path).resolve()), "n_train": len(examples)}
        ck.clean_staging(out_dir)
        latest = ck.latest_checkpoint(out_dir)
        state = TrainState()
        if latest is not None:
            saved = ck.read_state(latest)
            _check_resume(saved, config, ident, latest)
            state = TrainState.from_json(saved["state"])
            qref: str = str(latest / ck.QUESTION_ENCODER_DIR)
            gref: str = str(latest / ck.GENERATOR_DIR)
            if report is not None:
                report(f"resuming from {latest} (step {state.step}, epoch {state.epoch + 1})")
        else:
            if out_dir.exists() and (out_dir / FINAL_DIR).exists():
                raise AlreadyExistsError(
                    f"{out_dir} already holds a finished training run.",
                    hint="Pass another --out folder.")
            qref, gref = spec.question_encoder, spec.generator
        encoder = load_question_encoder(qref)
        generator = load_generator(gref, progress=progress, cancel=cancel)
        trainer = RagTrainer(encoder, generator, index, config, device=device, state=state)
        if latest is not None:
            ck.load_optimizer_state(trainer.optimizer, latest / ck.OPTIMIZER_FILE,
                                    saved["optimizer_param_groups"])

        def save(t: RagTrainer) -> None:
            path = ck.write_checkpoint(
                out_dir, t.state.step, t.encoder, t.generator, t.optimizer,
                {"version": 1, "config": config.to_json(), **ident,
                 "state": t.state.to_json()},
                keep=config.keep_checkpoints)
            log.info("checkpoint written: %s", path)

        eval_set = dev
        generate = dev is not None
        if eval_set is None:
            eval_set = examples[:GUARD_SAMPLE]  # retrieval statistics only, for the guard
        trainer.run(examples, eval_set, generate_eval=generate, save=save, report=report,
                    progress=progress, cancel=cancel)
        final = _write_final(out_dir, trainer, ident, config)
        registered = None
        if register:
            registered = register_pack(catalog, PackSpec(
                name=pack_name, kind="custom",
                question_encoder=str(final / ck.QUESTION_ENCODER_DIR),
                passage_encoder=spec.passage_encoder,
                generator=str(final / ck.GENERATOR_DIR),
                generator_kind=generator.kind,
                description=f"{spec.name} fine-tuned on {Path(train_path).name} "
                            f"({len(examples)} questions) against the snapshot {index.name!r}.",
                encoder_family=encoder.info.family, encoder_dim=encoder.info.dim,
                default_mode=config.mode,
                details={"base_pack": spec.name, "snapshot": index.name,
                         "trained_in": str(out_dir), "mode": config.mode}),
                replace=True).name
            if report is not None:
                report(f"registered the model pack {registered!r}")
        return TrainResult(out_dir, final, registered, trainer.state, latest)
    finally:
        index.close()


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
