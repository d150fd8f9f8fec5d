"""What a training run is told (:class:`TrainConfig`) and what it has done so far
(:class:`TrainState`): plain values, saved with every checkpoint so that a resumed run
takes the same steps as one never interrupted."""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar

from ragdesk.core.errors import BadInputError
from ragdesk.core.options import PER_PASSAGE_MODES, TRAIN_OBJECTIVES
from ragdesk.core.training.guard import ACTIONS, CollapseThresholds

# How deep "passages" looks for passages that hold the answer (and the others it contrasts
# them with) when --answer-depth is not given.
PASSAGES_DEPTH = 100


# the counts a training run needs at least one of: (what a person calls it, the CLI's option
# where it has one)
_COUNTS: dict[str, tuple[str, str | None]] = {
    "n_docs": ("number of passages per question", "--docs"),
    "epochs": ("number of epochs", "--epochs"),
    "batch_size": ("batch size", "--batch-size"),
    "max_answer_tokens": ("answer length in tokens", None),
    "keep_checkpoints": ("number of checkpoints kept", "--keep-checkpoints")}


@dataclass(frozen=True)
class TrainConfig:
    mode: str = "token"  # "token" (RAG-Token) or "sequence" (RAG-Sequence)
    # One of TRAIN_OBJECTIVES. "rag": the RAG marginal likelihood of the gold answer, through
    # the generator (Lewis et al. 2020); "passages": the question encoder alone, taught to
    # score the retrieved passages that hold a gold answer (the has-answer test) above the
    # others (distant supervision, as DPR's training on NQ): far more questions can teach
    # it, and the generator plays no part.
    objective: str = "rag"
    # "passages": the temperature of its softmax over d(z)·q(x) (cosine scores of the
    # sentence-transformers encoders lie in [-1, 1])
    passage_temperature: float = 0.05
    n_docs: int = 5
    epochs: int = 1
    lr: float = 3e-5
    question_encoder_lr: float | None = None  # None: the same as lr
    batch_size: int = 8
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    seed: int = 0
    train_question_encoder: bool = True
    # None: every generator parameter; 0: generator frozen; N: only its last N decoder blocks
    generator_layers: int | None = None
    max_answer_tokens: int = 32
    # a frozen generator scores answers with the engine's inference path (False: with the
    # model's differentiable forward, as when it trains; the same loss, slower)
    inference_reader: bool = True
    # train only on questions with a gold answer among the top answer_depth passages (None:
    # n_docs) that the starting question encoder retrieves
    skip_unanswerable: bool = True
    answer_depth: int | None = None
    checkpoint_every: int = 0  # optimizer steps; 0: only at the end of each epoch
    eval_every: int = 0  # optimizer steps between retrieval-only evaluations within an epoch
    keep_checkpoints: int = 1
    eval_ks: tuple[int, ...] = (1, 5, 20)
    eval_em_limit: int | None = None  # questions answered for EM (None: all, 0: none)
    evaluate_before: bool = True
    on_collapse: str = "warn"  # "warn", "stop" or "freeze-retriever"
    collapse: CollapseThresholds = field(default_factory=CollapseThresholds)

    # Options that shape the optimizer state or the data order: a resumed run must keep them.
    RESUME_KEYS: ClassVar[tuple[str, ...]] = (
        "mode", "n_docs", "lr", "question_encoder_lr", "batch_size", "weight_decay", "seed",
        "train_question_encoder", "generator_layers", "max_answer_tokens",
        "skip_unanswerable", "answer_depth", "objective", "passage_temperature")

    def check(self) -> TrainConfig:
        if self.mode not in PER_PASSAGE_MODES:
            raise BadInputError(f"Unknown mode {self.mode!r}.", hint="Use 'token' or 'sequence'.")
        self._check_objective()
        if self.answer_depth is not None and self.answer_depth < 1:
            raise BadInputError(f"The answer depth must be at least 1, not {self.answer_depth}.")
        if self.eval_every < 0 or self.checkpoint_every < 0:
            raise BadInputError("Step intervals cannot be negative.")
        for name, (what, option) in _COUNTS.items():
            if int(getattr(self, name)) < 1:
                raise BadInputError(f"The {what} must be at least 1, not {getattr(self, name)!r}.",
                                    hint=f"Give {option} 1 or more." if option else None,
                                    gui_hint="Choose 1 or more.")
        for lr, option in ((self.lr, "--lr"), (self.question_encoder_lr,
                                                "--question-encoder-lr")):
            if lr is not None and not lr > 0:
                raise BadInputError(
                    f"The learning rate must be positive, not {lr!r}.",
                    hint=f"Give {option} a small positive value, such as "
                         f"{TrainConfig.lr:g} (the default).",
                    gui_hint=f"A small positive value, such as {TrainConfig.lr:g}.")
        if self.on_collapse not in ACTIONS:
            raise BadInputError(f"Unknown collapse action {self.on_collapse!r}.",
                                hint=f"Use one of: {', '.join(ACTIONS)}.")
        if self.generator_layers is not None and self.generator_layers < 0:
            raise BadInputError("The number of trainable generator layers cannot be negative.")
        if not self.train_question_encoder and self.generator_layers == 0:
            raise BadInputError("Nothing to train: the question encoder and the generator are "
                                "both frozen.")
        return self

    def _check_objective(self) -> None:
        if self.objective not in TRAIN_OBJECTIVES:
            raise BadInputError(f"Unknown training objective {self.objective!r}.",
                                hint=f"Use one of: {', '.join(TRAIN_OBJECTIVES)}.")
        if self.objective == "passages":
            if not self.generator_frozen or not self.train_question_encoder:
                raise BadInputError(
                    "The passages objective trains the question encoder alone.",
                    hint="Keep the question encoder trainable and use --generator-layers 0.")
            if not self.passage_temperature > 0:
                raise BadInputError("The passage temperature must be positive, not "
                                    f"{self.passage_temperature!r}.")

    def to_json(self) -> dict[str, object]:
        d = asdict(self)
        d["eval_ks"] = list(self.eval_ks)
        return d

    @property
    def generator_frozen(self) -> bool:
        return self.generator_layers == 0

    def total_steps(self, n_questions: int) -> int:
        """Optimizer steps over ``n_questions`` for every epoch (the last batch of an epoch
        may be short)."""
        return self.epochs * -(-n_questions // self.batch_size)

    @property
    def depth(self) -> int:
        """How deep a gold answer may be retrieved for a question to be trained on (and,
        for the passages objective, how many passages each step contrasts)."""
        return self.answer_depth or (PASSAGES_DEPTH if self.objective == "passages"
                                     else self.n_docs)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TrainConfig:
        known = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in known}
        if "eval_ks" in kw:
            kw["eval_ks"] = tuple(kw["eval_ks"])
        if "collapse" in kw:
            kw["collapse"] = CollapseThresholds(**kw["collapse"])
        return cls(**kw)


@dataclass
class TrainState:
    """Everything a resumed run needs besides the weights and the optimizer moments."""

    epoch: int = 0  # 0-based epoch in progress
    position: int = 0  # examples of this epoch already trained on
    step: int = 0  # optimizer steps taken
    examples_seen: int = 0
    retriever_frozen: bool = False
    stopped: str | None = None
    # indices (into the training file's questions) trained on; None: not chosen yet
    selected: list[int] | None = None
    best: dict[str, Any] | None = None  # the held-out evaluation the best models had
    losses: list[float] = field(default_factory=list)  # mean loss of every step
    evaluations: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TrainState:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


def epoch_order(n: int, seed: int, epoch: int) -> list[int]:
    order = list(range(n))
    random.Random(seed * 1_000_003 + epoch).shuffle(order)
    return order


@dataclass(frozen=True)
class TrainEvent:
    """What a run is doing, for a front end that shows more than a progress line."""

    kind: str  # one of EVENTS
    label: str  # the evaluation's ("before training", "epoch 1", "step 40"), else ""
    state: TrainState


EVENTS = ("selecting", "evaluating", "evaluated", "training", "step")

