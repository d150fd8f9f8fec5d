"""Tuning the retriever on a file of questions: the job behind the app's "Tune the
retriever…" dialog and ``ragdesk tune``.

One JSONL of ``{"question": ..., "answer": [...]}`` lines is split once, by a fixed shuffle,
into training questions and a held-out share; the question encoder alone is trained with the
passages objective (``TrainConfig.objective``: it learns to rank the retrieved passages that
hold a gold answer first; the reader is never loaded) by
:func:`~ragdesk.core.training.run.train_pack`, and the tuned pack is registered beside its
base pack.

A job's folder (under the data folder's models) is named by what went in: the file's
contents, the base pack, the snapshot, the choices and the objective. Running the same job
again therefore resumes it from its newest checkpoint, after a Cancel (which writes one) or a
crash.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ragdesk.core.atomic import write_bytes_atomic, write_json_atomic
from ragdesk.core.errors import BadInputError
from ragdesk.core.models import get_pack, load_question_encoder
from ragdesk.core.models.packs import PackSpec
from ragdesk.core.progress import (
    CancelToken,
    Progress,
    ProgressUpdate,
    TrainingUpdate,
)
from ragdesk.core.safe_json import load_file_bounded
from ragdesk.core.snapshots import open_snapshot
from ragdesk.core.training import checkpoint as ck
from ragdesk.core.training.config import TrainConfig, TrainEvent, TrainState
from ragdesk.core.training.data import Example, read_examples
from ragdesk.core.training.evaluate import answerable
from ragdesk.core.training.run import BEST_DIR, train_pack
from ragdesk.core.units import percent, plural

if TYPE_CHECKING:
    from ragdesk.core.catalog import Catalog
    from ragdesk.core.paths import DataDir

TUNED_DIR = "tuned"  # under the data folder's models: one folder per job
RUN_DIR = "run"  # train_pack's output folder within a job's
JOB_FILE = "job.json"
SPLIT_SEED = 0
# Checkpoints besides the one at each epoch's end and the one a Cancel writes, so that a
# crash loses at most this many steps (a question encoder's checkpoint is hundreds of MB).
CHECKPOINT_EVERY = 100
LOSS_WINDOW = 20  # steps the reported loss is averaged over
TRAINING = "Training the question encoder"
# The objective a job trains with. It is part of the job's name (job_folder), so that the
# folder of a job that trained another way (through the reader, with the RAG objective) is
# never resumed by one of this objective, whatever its choices.
OBJECTIVE = "passages"


@dataclass(frozen=True)
class TuneChoices:
    """What the user chooses; everything else is the recipe docs/finetuning.md measured."""

    # The defaults are the passages objective's recipe (epochs, lr and batch), chosen on
    # training lines only and then measured on held-out questions in docs/finetuning.md,
    # "The retriever's own objective".
    epochs: int = 6
    lr: float = 2e-5
    held_out: float = 0.2  # the share of the questions kept out of training, to measure on
    n_docs: int = 5  # passages read per question: the accuracy shown is held-out top-K
    batch_size: int = 16

    def check(self) -> TuneChoices:
        recipe = TuneChoices()
        if not 1 <= self.epochs <= 100:
            raise BadInputError(f"The number of epochs must be from 1 to 100, not {self.epochs}.",
                                hint=f"Leave --epochs out for the recipe's {recipe.epochs}.",
                                gui_hint=f"The recipe's is {recipe.epochs}.")
        if not self.lr > 0 or self.lr > 1e-2:
            raise BadInputError(f"The learning rate must be above 0 and at most 0.01, not "
                                f"{self.lr:g}.",
                                hint=f"Leave --lr out for the recipe's {recipe.lr:g}.",
                                gui_hint=f"The recipe's is {recipe.lr:g}.")
        if not 0.05 <= self.held_out <= 0.5:
            as_share = (f"Give it as a fraction, such as --held-out {recipe.held_out:g} for "
                        f"{percent(recipe.held_out)} of the questions" if self.held_out > 1
                        else f"Keep {percent(0.05)} to {percent(0.5)} of the questions")
            raise BadInputError(
                f"The held-out share must be from 5% to 50%, not {percent(self.held_out, 1)}.",
                hint=f"{as_share} out of training, to measure the tuned retriever on.",
                gui_hint="Keep some questions out of training to measure the tuned retriever "
                         "on.")
        return self

    def config(self) -> TrainConfig:
        # No exact-match answering (eval_em_limit 0): the held-out measure is retrieval
        # only, so nothing reads the generator and train_pack does not load it.
        return TrainConfig(
            objective=OBJECTIVE, n_docs=self.n_docs, epochs=self.epochs, lr=self.lr,
            batch_size=self.batch_size, generator_layers=0, eval_em_limit=0,
            checkpoint_every=CHECKPOINT_EVERY, eval_ks=(1, self.n_docs, 20)).check()


def split(examples: Sequence[Example], share: float) -> tuple[list[Example], list[Example]]:
    """(training, held out): a fixed shuffle, so the same file splits the same way on every
    run and every resume; at least one question on each side."""
    n = len(examples)
    if n < 2:
        raise BadInputError(
            f"The file holds {n} question; at least 2 are needed, one to train on and one to "
            "measure on.", hint="Add more questions to the file.")
    held = min(n - 1, max(1, round(n * share)))
    order = list(range(n))
    random.Random(SPLIT_SEED).shuffle(order)
    out = set(order[:held])
    return ([e for i, e in enumerate(examples) if i not in out],
            [e for i, e in enumerate(examples) if i in out])


@dataclass(frozen=True)
class QuestionCheck:
    """A questions file read and measured against a snapshot, before anything trains."""

    path: Path
    questions: int
    answerable: int  # a gold answer in the top ``depth`` passages the base pack retrieves
    depth: int  # the depth training selects its questions at (TrainConfig.depth)
    snapshot: str


def check_questions(data: DataDir, catalog: Catalog, path: str | os.PathLike[str], *,
                    pack: str, snapshot: str | None = None,
                    choices: TuneChoices | None = None) -> QuestionCheck:
    """Read ``path`` and count its questions that the base pack's retriever can learn from
    (the rule training applies, at its depth): loads the question encoder, not the reader."""
    choices = (choices or TuneChoices()).check()
    depth = choices.config().depth
    examples = read_examples(path)
    split(examples, choices.held_out)  # refuses a file too small to split
    spec = get_pack(catalog, pack, data)
    index = open_snapshot(data, catalog, snapshot)
    try:
        encoder = load_question_encoder(spec.question_encoder)
        check = getattr(index, "check_query_encoder", None)
        if check is not None:
            check(encoder.info)
        kept = answerable(encoder, index, examples, depth)
        return QuestionCheck(Path(path), len(examples), len(kept),
                             min(depth, int(index.size)), index.name)
    finally:
        index.close()


@dataclass(frozen=True)
class TuneJob:
    questions: Path
    pack: str  # the base pack
    snapshot: str | None = None  # None: the active one
    choices: TuneChoices = TuneChoices()


@dataclass(frozen=True)
class TuneResult:
    pack: str  # the tuned pack, registered
    base_pack: str
    snapshot: str
    k: int
    top_k_before: float | None  # held-out top-K of the base pack's retriever
    top_k_after: float | None  # of the registered pack's
    steps: int
    trained_on: int
    held_out: int
    folder: Path

    @property
    def gained(self) -> bool:
        """Whether the held-out measure saw the tuned retriever find more answers than the
        base one; where it did not (no gain, or nothing measured), the tuned pack is no
        better as far as anything shows."""
        return (self.top_k_before is not None and self.top_k_after is not None
                and self.top_k_after > self.top_k_before)

    def no_gain_note(self) -> str | None:
        """What every front end says beside a run that shows no gain; None after a gain."""
        if self.gained:
            return None
        held = plural(self.held_out, "held-out question")
        if not self.top_k_before and not self.top_k_after:
            return (f"Of the {held}, none had an answer among the top {self.k} passages, "
                    "before or after: this run measured nothing, so the tuned pack is not "
                    "known to be better. More questions whose answers the snapshot holds "
                    "give a measure.")
        return (f"The tuned retriever found no more answers among the top {self.k} passages "
                f"of the {held} than {self.base_pack} did: keep using {self.base_pack}.")


def job_folder(data: DataDir, catalog: Catalog, job: TuneJob) -> Path:
    """The job's folder, named by its inputs (see the module docstring)."""
    snapshot = job.snapshot or catalog.active_snapshot() or ""
    try:
        digest = hashlib.sha256(Path(job.questions).read_bytes()).hexdigest()
    except OSError as exc:
        raise BadInputError(f"cannot be read: {exc.strerror or exc}.", path=job.questions,
                            hint="Check the path of the questions file.") from exc
    key = json.dumps([digest, job.pack, snapshot, asdict(job.choices), OBJECTIVE],
                     sort_keys=True)
    return data.models_dir / TUNED_DIR / (
        f"{job.pack}-{hashlib.sha256(key.encode()).hexdigest()[:12]}")


def resumable_step(data: DataDir, catalog: Catalog, job: TuneJob) -> int | None:
    """The step the job would resume from (None: it would start afresh, or it is done)."""
    latest = ck.latest_checkpoint(job_folder(data, catalog, job) / RUN_DIR)
    if latest is None:
        return None
    saved = ck.read_state(latest)
    state = TrainState.from_json(saved["state"])
    if state.epoch >= int(saved["config"]["epochs"]) or state.stopped is not None:
        return None  # finished: running it again only registers its pack again
    return state.step


def run_tune(data: DataDir, catalog: Catalog, job: TuneJob, *,
             progress: Callable[[TrainingUpdate], None] | None = None,
             cancel: CancelToken | None = None) -> TuneResult:
    """Run (or resume) ``job`` and register the tuned pack; Cancelled after a Cancel, with a
    checkpoint written when a step had been taken."""
    choices = job.choices.check()
    examples = read_examples(job.questions)
    train, held = split(examples, choices.held_out)
    base = get_pack(catalog, job.pack, data)
    folder = job_folder(data, catalog, job)
    train_file, held_file = _write_split(folder, train, held)
    name = _pack_name(catalog, folder, base)
    config = choices.config()
    feed = _Feed(progress, config)
    feed.stage("Loading the models")
    result = train_pack(
        data, catalog, train_file, snapshot=job.snapshot, pack=job.pack, out=folder / RUN_DIR,
        config=config, eval_path=held_file, name=name, progress=feed.inner,
        cancel=cancel, watch=feed.watch)
    st = result.state
    assert result.pack is not None  # registration is on
    models = get_pack(catalog, result.pack, data)
    return TuneResult(
        pack=result.pack, base_pack=base.name, snapshot=_snapshot_of(result.final_dir),
        k=choices.n_docs, top_k_before=feed.before, top_k_after=_after(st, models, choices),
        steps=st.step, trained_on=len(st.selected or []), held_out=len(held), folder=folder)


def _snapshot_of(final: Path) -> str:
    return str(json.loads((final / "training.json").read_text(encoding="utf-8"))["snapshot"])


def _after(state: TrainState, models: PackSpec, choices: TuneChoices) -> float | None:
    """Held-out top-K of the models the pack holds: the best ones after a collapse, else
    the last evaluation's."""
    if Path(models.question_encoder).parent.name == BEST_DIR and state.best is not None:
        return float(state.best["top_k"])
    evals = [e for e in state.evaluations if str(choices.n_docs) in e.get("top_k", {})]
    return float(evals[-1]["top_k"][str(choices.n_docs)]) if evals else None


def _write_split(folder: Path, train: Sequence[Example],
                 held: Sequence[Example]) -> tuple[Path, Path]:
    """The two halves as files, for train_pack (the same bytes on every run)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for fname, rows in (("train.jsonl", train), ("held-out.jsonl", held)):
        path = folder / fname
        text = "".join(json.dumps({"question": e.question, "answer": list(e.answers)}) + "\n"
                       for e in rows)
        write_bytes_atomic(path, text.encode("utf-8"))
        out.append(path)
    return out[0], out[1]


def _pack_name(catalog: Catalog, folder: Path, base: PackSpec) -> str:
    """The name this job registers: kept in the job's file, so a resumed job replaces its own
    pack; otherwise ``<base>-tuned``, numbered past the names other jobs hold."""
    job_file = folder / JOB_FILE
    saved = _saved_name(job_file)
    if saved is not None:
        return saved
    taken = {rec.name for rec in catalog.list_model_packs()}
    name, n = f"{base.name}-tuned", 1
    while name in taken:
        n += 1
        name = f"{base.name}-tuned-{n}"
    write_json_atomic(job_file, {"name": name, "base_pack": base.name, "objective": OBJECTIVE})
    return name


def _saved_name(job_file: Path) -> str | None:
    """The pack name a job's file keeps; None when there is no file, or one this job cannot
    read (cut short, or written by another version): the job then takes a new name."""
    try:
        saved = load_file_bounded(job_file)
    except BadInputError:
        return None
    name = saved.get("name") if isinstance(saved, dict) else None
    return name if isinstance(name, str) and name else None


class _Feed:
    """Turns the run's progress and events into :class:`TrainingUpdate`s: while it trains,
    one per optimizer step (the loop's own per-question updates are dropped); otherwise the
    stage's own work (loading, evaluating), with the steps so far."""

    def __init__(self, out: Callable[[TrainingUpdate], None] | None,
                 config: TrainConfig) -> None:
        self.out = out
        self.config = config
        self.k = config.n_docs
        self.label = ""
        self.training: Progress | None = None
        self.in_training = False
        self.step = 0
        self.total_steps = 0
        self.losses: list[float] = []
        self.before: float | None = None
        self.latest: float | None = None

    def stage(self, label: str) -> None:
        self.label = label
        self.in_training = False
        self._emit(ProgressUpdate(0, None, label, None, None))

    def inner(self, u: ProgressUpdate) -> None:
        if not self.in_training:
            self._emit(u)

    def watch(self, e: TrainEvent) -> None:
        st = e.state
        self.step, self.losses = st.step, st.losses[-LOSS_WINDOW:]
        if st.selected is not None:
            self.total_steps = self.config.total_steps(len(st.selected))
        self._accuracy(st)  # a resumed run's evaluations are known from its first event
        if e.kind == "selecting":
            self.stage("Choosing the answerable questions")
        elif e.kind == "evaluating":
            self.stage(f"Measuring the held-out questions ({e.label})")
        elif e.kind == "evaluated":  # the new accuracy, without waiting for the next step
            self._emit(ProgressUpdate(0, None, self.label, None, None))
        elif e.kind in ("training", "step"):
            # one count of steps for the whole run, across the evaluations between epochs
            if self.training is None:
                self.training = Progress(self.total_steps, TRAINING, None, start_done=st.step)
            self.label, self.in_training = TRAINING, True
            self.training.set(st.step)
            self._emit(self.training.snapshot())

    def _accuracy(self, st: TrainState) -> None:
        k = str(self.k)
        evals = [e for e in st.evaluations if k in e.get("top_k", {})]
        if evals:
            self.before = float(evals[0]["top_k"][k])
            self.latest = float(evals[-1]["top_k"][k])

    def _emit(self, u: ProgressUpdate) -> None:
        if self.out is None:
            return
        loss = sum(self.losses) / len(self.losses) if self.losses else None
        self.out(TrainingUpdate(
            u.done, u.total, self.label, u.rate, u.eta_s, u.unit, stage=self.label,
            step=self.step, total_steps=self.total_steps, loss=loss, k=self.k,
            top_k_before=self.before, top_k=self.latest))
