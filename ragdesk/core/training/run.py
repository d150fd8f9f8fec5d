"""``ragdesk train``: fine-tune a model pack against a snapshot, resumably, and register the
result as a custom pack that ``ask`` and the GUI can use at once.

Output folder layout::

    OUT/checkpoint-<step>/   the newest checkpoint (see :mod:`.checkpoint`)
    OUT/final/question_encoder/, OUT/final/generator/, OUT/final/training.json
    OUT/best/...             the same, for the evaluation with the best held-out top-K
                             (with an evaluation file, once training has beaten the start)

With the generator frozen, no generator folder is written: the pack uses the base pack's.
The passages objective does not even load it, unless held-out questions are answered for
exact match.

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
from ragdesk.core.training.config import TrainConfig, TrainState
from ragdesk.core.training.data import read_examples
from ragdesk.core.training.trainer import RagTrainer, Reporter, Watcher

if TYPE_CHECKING:
    from ragdesk.core.catalog import Catalog
    from ragdesk.core.engine.generators import Generator
    from ragdesk.core.paths import DataDir

log = logging.getLogger(__name__)

FINAL_DIR = "final"
BEST_DIR = "best"
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


def _check_resume(saved: dict[str, Any], config: TrainConfig, ident: dict[str, object],
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
    precision: str | None = None,
    progress: ProgressCallback | None = None,
    cancel: CancelToken | None = None,
    report: Reporter | None = None, watch: Watcher | None = None,
) -> TrainResult:
    """Fine-tune ``pack`` on ``train_path`` against ``snapshot`` (None: the active one);
    ``precision``: the generator's, as for ``ragdesk ask`` (None: the engine's default)."""
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
        generator = _load_reader(start.generator, config, dev is not None, progress=progress,
                                 cancel=cancel, precision=precision)
        trainer = RagTrainer(encoder, generator, index, config, device=device,
                             state=start.state)
        if start.checkpoint is not None:
            ck.load_optimizer_state(trainer.optimizer, start.checkpoint / ck.OPTIMIZER_FILE,
                                    start.saved["optimizer_param_groups"])
        _report_reader(config, generator, report)
        # Without a dev set: retrieval statistics only, on a sample, for the guard.
        eval_set = dev if dev is not None else examples[:GUARD_SAMPLE]
        trainer.run(examples, eval_set, generate_eval=dev is not None,
                    held_out=dev is not None, save=_saver(out_dir, config, ident),
                    save_best=lambda t: _write_models(out_dir, BEST_DIR, t, ident, config),
                    report=report, progress=progress, cancel=cancel, watch=watch)
        final = _write_models(out_dir, FINAL_DIR, trainer, ident, config)
        registered = None
        if register:
            registered = _register_run(catalog, pack_name, out_dir, final, spec, trainer,
                                       (Path(train_path).name, index.name, dev is not None),
                                       report)
        return TrainResult(out_dir, final, registered, trainer.state, start.checkpoint)
    finally:
        index.close()


def reads_generator(config: TrainConfig, *, answers: bool) -> bool:
    """Whether a run reads the generator, and so loads it (a 1.5 GB reader takes minutes and
    gigabytes): the RAG objective always; the passages objective only to answer evaluation
    questions for exact match (``answers``: there are evaluation questions; an EM limit of 0
    answers none)."""
    return config.objective != "passages" or (answers and config.eval_em_limit != 0)


def _load_reader(path: str, config: TrainConfig, answers: bool, *,
                 progress: ProgressCallback | None, cancel: CancelToken | None,
                 precision: str | None) -> Generator | None:
    """The generator at ``path``, or None for a run that would never read it."""
    if not reads_generator(config, answers=answers):
        return None
    return load_generator(path, progress=progress, cancel=cancel, precision=precision)


def _report_reader(config: TrainConfig, generator: object, report: Reporter | None) -> None:
    if report is not None and config.objective == "passages":
        report(f"objective passages: the question encoder alone learns to rank the passages "
               f"holding a gold answer first among its top {config.depth}; the generator "
               "is not read" + (" (nor loaded)" if generator is None else ""))
    elif report is not None and config.generator_frozen:
        how = ("the engine's inference path" if config.inference_reader
               else "its differentiable forward")
        report(f"generator frozen: p(y|x,z) from {how} "
               f"({getattr(generator, 'precision', 'float32')})")


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


def _start_point(out_dir: Path, config: TrainConfig, ident: dict[str, object], spec: PackSpec,
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
    gen_dir = latest / ck.GENERATOR_DIR  # absent when the generator is frozen
    return _Start(str(latest / ck.QUESTION_ENCODER_DIR),
                  str(gen_dir) if gen_dir.is_dir() else spec.generator, state, latest, saved)


def _saver(out_dir: Path, config: TrainConfig, ident: dict[str, object]
           ) -> Callable[[RagTrainer], None]:
    def save(t: RagTrainer) -> None:
        path = ck.write_checkpoint(
            out_dir, t.state.step, t.encoder, t.generator, t.optimizer,
            {"version": 1, "config": config.to_json(), **ident, "state": t.state.to_json()},
            keep=config.keep_checkpoints, with_generator=not config.generator_frozen)
        log.info("checkpoint written: %s", path)

    return save


def _register_run(catalog: Catalog, name: str, out_dir: Path, final: Path, spec: PackSpec,
                  trainer: RagTrainer, about: tuple[str, str, bool],
                  report: Reporter | None) -> str:
    """``about``: the training file's name, the snapshot's, whether the evaluation was
    held out."""
    config = trainer.config
    train_name, snapshot, held_out = about
    chosen = _models_to_register(out_dir, final, trainer.state, report)
    registered = _register_result(
        catalog, name, chosen, spec, trainer, config,
        _description(spec, train_name, trainer, snapshot, chosen, held_out),
        {"base_pack": spec.name, "snapshot": snapshot, "trained_in": str(out_dir),
         "mode": config.mode, "models": chosen.name,
         "retriever_only": config.generator_frozen})
    if report is not None:
        report(f"registered the model pack {registered!r} ({chosen})")
    return registered


def _models_to_register(out_dir: Path, final: Path, state: TrainState,
                        report: Reporter | None) -> Path:
    """``final``, unless the guard saw a collapse: then the best models by held-out
    retrieval, when training produced better ones than it started with."""
    collapsed = [e["label"] for e in state.evaluations if e.get("collapse")]
    if not collapsed:
        return final
    best = out_dir / BEST_DIR
    if state.best is not None and int(state.best["step"]) > 0 and best.is_dir():
        if report is not None:
            report(f"the guard saw a collapse ({', '.join(collapsed)}): the pack keeps the "
                   f"models of {state.best['label']} (best held-out top-{state.best['k']}, "
                   f"{float(state.best['top_k']) * 100:.1f}%)")
        return best
    if report is not None:
        report(f"warning: the guard saw a collapse ({', '.join(collapsed)}) and no evaluation "
               "after training beat the one before it; the pack holds the last models")
    return final


def _description(spec: PackSpec, train_name: str, trainer: RagTrainer, snapshot: str,
                 models: Path, held_out: bool) -> str:
    st, cfg = trainer.state, trainer.config
    n = len(st.selected) if st.selected is not None else 0
    what = ("retriever tuned" if cfg.generator_frozen else "fine-tuned")
    text = (f"{spec.name} {what} on {train_name} ({n} questions, {st.epoch} epoch"
            f"{'s' if st.epoch != 1 else ''}) against the snapshot {snapshot!r}")
    if cfg.generator_frozen:
        text += f"; generator: {spec.name}'s"
    evals = [e for e in st.evaluations if str(cfg.n_docs) in e.get("top_k", {})]
    if len(evals) > 1:
        k = str(cfg.n_docs)
        used = st.best if models.name == BEST_DIR and st.best else None
        after = float(used["top_k"]) if used else evals[-1]["top_k"][k]
        on = "held-out" if held_out else "training-question"
        before = float(evals[0]["top_k"][k])
        text += f"; {on} top-{k} {before * 100:.1f}% -> {after * 100:.1f}%"
        if after <= before:  # the pack stays listed: its description must not read as a gain
            text += f", no gain over {spec.name}"
    return text + "."


def _register_result(catalog: Catalog, name: str, final: Path, base: PackSpec,
                     trainer: RagTrainer, config: TrainConfig, description: str,
                     details: dict[str, object]) -> str:
    info = trainer.encoder.info
    gen_dir = final / ck.GENERATOR_DIR
    return register_pack(catalog, PackSpec(
        name=name, kind="custom", question_encoder=str(final / ck.QUESTION_ENCODER_DIR),
        passage_encoder=base.passage_encoder,
        generator=str(gen_dir) if gen_dir.is_dir() else base.generator,
        generator_kind=base.generator_kind if trainer.generator is None
        else trainer.generator.kind, description=description,
        encoder_family=info.family, encoder_dim=info.dim,
        # a frozen reader reads as it did in its own pack (the reader pack: together);
        # a trained one in the mode it was trained in
        default_mode=base.default_mode if config.generator_frozen else config.mode,
        details=details), replace=True).name


def _check_target_name(catalog: Catalog, name: str, out_dir: Path,
                       check: Callable[[str], object]) -> None:
    """Fail before hours of training, not after, when the pack name is taken by another run."""
    check(name)
    for rec in catalog.list_model_packs():
        if rec.name == name and rec.details.get("trained_in") != str(out_dir):
            raise AlreadyExistsError(
                f"A model pack named {name!r} already exists.",
                hint="Pick another name with --name, or remove it with "
                     f"`ragdesk models remove {name}`.")


def _write_models(out_dir: Path, name: str, trainer: RagTrainer, ident: dict[str, object],
                  config: TrainConfig) -> Path:
    """``OUT/name`` with the trainer's models, written whole or not at all."""
    final = out_dir / name
    staging = out_dir / f".staging-{name}-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    ck.save_models(staging, trainer.encoder, trainer.generator,
                   with_generator=not config.generator_frozen)
    write_json_atomic(staging / "training.json", {"config": config.to_json(), **ident,
                                                  "state": trainer.state.to_json()})
    if final.exists():
        shutil.rmtree(final)
    os.replace(staging, final)
    fsync_dir(out_dir)
    return final
