"""The fine-tuning loop: RAG's end-to-end recipe (Lewis et al. 2020, section 2.4).

For every training question the current question encoder retrieves the top K passages from
the snapshot's index (no gradient through the search itself), ``p(z|x)`` is recomputed as
``softmax(q(x)·d(z))`` from the snapshot's *stored* passage vectors so that the loss reaches
the question encoder, and the generator scores the answer under every passage. The passage
encoder and the index never change. AdamW updates the question encoder and the generator.

Per-step randomness (dropout) is seeded from the step number, so a run resumed from a
checkpoint takes the same steps as one that was never interrupted.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ragdesk.core.engine.generators import PassageText
from ragdesk.core.errors import BadInputError, CorruptSnapshotError
from ragdesk.core.options import PER_PASSAGE_MODES
from ragdesk.core.posterior import temperature_of
from ragdesk.core.progress import CancelToken, Progress, ProgressCallback
from ragdesk.core.training.evaluate import EvalResult, evaluate
from ragdesk.core.training.forward import answer_ids, answer_logprobs, question_vectors
from ragdesk.core.training.guard import ACTIONS, CollapseThresholds, check_collapse
from ragdesk.core.training.loss import rag_nll

if TYPE_CHECKING:
    import torch

    from ragdesk.core.encoders import TextEncoder
    from ragdesk.core.engine.generators import Generator
    from ragdesk.core.training.data import Example

log = logging.getLogger(__name__)

Reporter = Callable[[str], None]


@dataclass(frozen=True)
class TrainConfig:
    mode: str = "token"  # "token" (RAG-Token) or "sequence" (RAG-Sequence)
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
    checkpoint_every: int = 0  # optimizer steps; 0: only at the end of each epoch
    keep_checkpoints: int = 1
    eval_ks: tuple[int, ...] = (1, 5, 20)
    eval_em_limit: int | None = None  # questions answered for EM (None: all, 0: none)
    evaluate_before: bool = True
    on_collapse: str = "warn"  # "warn", "stop" or "freeze-retriever"
    collapse: CollapseThresholds = field(default_factory=CollapseThresholds)

    # Options that shape the optimizer state or the data order: a resumed run must keep them.
    RESUME_KEYS: ClassVar[tuple[str, ...]] = (
        "mode", "n_docs", "lr", "question_encoder_lr", "batch_size", "weight_decay", "seed",
        "train_question_encoder", "generator_layers", "max_answer_tokens")

    def check(self) -> TrainConfig:
        if self.mode not in PER_PASSAGE_MODES:
            raise BadInputError(f"Unknown mode {self.mode!r}.", hint="Use 'token' or 'sequence'.")
        for name in ("n_docs", "epochs", "batch_size", "max_answer_tokens", "keep_checkpoints"):
            if int(getattr(self, name)) < 1:
                raise BadInputError(f"{name.replace('_', ' ')} must be at least 1, "
                                    f"not {getattr(self, name)!r}.")
        for lr in (self.lr, self.question_encoder_lr):
            if lr is not None and not lr > 0:
                raise BadInputError(f"The learning rate must be positive, not {lr!r}.")
        if self.on_collapse not in ACTIONS:
            raise BadInputError(f"Unknown collapse action {self.on_collapse!r}.",
                                hint=f"Use one of: {', '.join(ACTIONS)}.")
        if self.generator_layers is not None and self.generator_layers < 0:
            raise BadInputError("The number of trainable generator layers cannot be negative.")
        if not self.train_question_encoder and self.generator_layers == 0:
            raise BadInputError("Nothing to train: the question encoder and the generator are "
                                "both frozen.")
        return self

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["eval_ks"] = list(self.eval_ks)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TrainConfig:
        known = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in known}
        if "eval_ks" in kw:
            kw["eval_ks"] = tuple(kw["eval_ks"])
        if "collapse" in kw:
            kw["collapse"] = CollapseThresholds(**kw["collapse"])
        return cls(**kw)


def pick_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def decoder_blocks(model: Any) -> list[Any]:
    """The generator's stack of decoder blocks (BART: decoder.layers, Gemma: layers, GPT-2:
    h): the longest ModuleList of blocks, preferring one inside a decoder."""
    import torch

    found: list[tuple[bool, int, str, Any]] = []
    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.ModuleList) and len(mod) > 0 and (
                name.rsplit(".", 1)[-1] in ("layers", "h", "layer", "block", "blocks")):
            found.append(("decoder" in name, len(mod), name, mod))
    if not found:
        raise BadInputError(
            f"Cannot find the decoder blocks of {type(model).__name__} to train only some of "
            "them.", hint="Train the whole generator (leave out --generator-layers).")
    found.sort(key=lambda t: (t[0], t[1]))
    return list(found[-1][3])


def set_trainable(encoder: TextEncoder, gen: Generator, config: TrainConfig,
                  retriever_frozen: bool) -> None:
    encoder.model.requires_grad_(config.train_question_encoder and not retriever_frozen)
    layers = config.generator_layers
    if layers is None:
        gen.model.requires_grad_(True)
        return
    gen.model.requires_grad_(False)
    if layers > 0:
        for block in decoder_blocks(gen.model)[-layers:]:
            block.requires_grad_(True)


@dataclass
class TrainState:
    """Everything a resumed run needs besides the weights and the optimizer moments."""

    epoch: int = 0  # 0-based epoch in progress
    position: int = 0  # examples of this epoch already trained on
    step: int = 0  # optimizer steps taken
    examples_seen: int = 0
    retriever_frozen: bool = False
    stopped: str | None = None
    losses: list[float] = field(default_factory=list)  # mean loss of every step
    evaluations: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TrainState:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


def epoch_order(n: int, seed: int, epoch: int) -> list[int]:
    order = list(range(n))
    random.Random(seed * 1_000_003 + epoch).shuffle(order)
    return order


class RagTrainer:
    """Trains one question encoder and one generator against one snapshot index."""

    def __init__(self, encoder: TextEncoder, generator: Generator, index: Any,
                 config: TrainConfig, *, device: str | None = None,
                 state: TrainState | None = None) -> None:
        import torch

        self.config = config.check()
        self.encoder = encoder
        self.generator = generator
        self.index = index
        self.state = state or TrainState()
        self.device = device or pick_device()
        if config.n_docs > int(index.size):
            raise BadInputError(
                f"Asked for {config.n_docs} passages per question, but the snapshot holds "
                f"only {index.size}.", hint=f"Use --docs {index.size} or fewer.")
        check = getattr(index, "check_query_encoder", None)
        if check is not None:
            check(encoder.info)
        self._embeddings = index.embeddings()
        encoder.model.to(self.device)
        generator.model.to(self.device)
        set_trainable(encoder, generator, config, self.state.retriever_frozen)
        # One group per model, always both, so that the optimizer state lines up with the
        # parameters whatever is frozen at the time.
        self.q_params = list(encoder.model.parameters())
        self.g_params = [p for p in generator.model.parameters() if p.requires_grad] \
            if config.generator_layers is not None else list(generator.model.parameters())
        groups: list[dict[str, Any]] = [
            {"params": self.q_params, "lr": config.question_encoder_lr or config.lr},
            {"params": self.g_params}]
        self.optimizer = torch.optim.AdamW(groups, lr=config.lr,
                                           weight_decay=config.weight_decay)
        self._checked_scores = False

    # ---- one question ------------------------------------------------------------------

    def passage_vectors(self, ids: Sequence[int]) -> torch.Tensor:
        import torch

        rows = np.asarray(self._embeddings[np.asarray(ids, dtype=np.int64)], dtype=np.float32)
        return torch.from_numpy(rows).to(self.device)

    def example_loss(self, ex: Example) -> torch.Tensor:
        """The RAG negative marginal log-likelihood of one (question, answer) pair."""
        import torch

        retriever_trains = self.config.train_question_encoder and not self.state.retriever_frozen
        with torch.set_grad_enabled(retriever_trains):
            q = question_vectors(self.encoder, [ex.question])  # [1, d]
        hits = self.index.search(q.detach().cpu().numpy().astype(np.float32),
                                 self.config.n_docs)[0]
        d = self.passage_vectors([h.id for h in hits])  # [K, d], frozen
        scores = q @ d.T  # [1, K]: d(z)·q(x), differentiable in q
        if not self._checked_scores:
            self._check_scores(scores, hits)
        target = answer_ids(self.generator, ex.target, self.config.max_answer_tokens)
        passages = [PassageText(h.title, h.text) for h in hits]
        lp = answer_logprobs(self.generator, ex.question, passages, target)[None]  # [1, K, T]
        mask = torch.ones((1, lp.shape[-1]), device=lp.device)
        return rag_nll(self.config.mode, scores, lp, mask, temperature_of(self.index))[0]

    def _check_scores(self, scores: torch.Tensor, hits: Sequence[Any]) -> None:
        """The stored vectors must give the scores the index gave, or p(z|x) would be wrong."""
        ours = scores.detach().float().cpu().numpy()[0]
        theirs = np.array([h.score for h in hits], dtype=np.float32)
        tol = 1e-2 * max(1.0, float(np.abs(theirs).max()))
        if not np.allclose(ours, theirs, atol=tol):
            raise CorruptSnapshotError(
                f"The snapshot {getattr(self.index, 'name', '')!r} returns scores that its "
                f"stored passage vectors do not reproduce ({ours[:3]} vs {theirs[:3]}).")
        self._checked_scores = True

    # ---- the loop --------------------------------------------------------------------

    def train_step(self, batch: Sequence[Example]) -> float:
        import torch

        self.encoder.model.train()
        self.generator.model.train()
        torch.manual_seed(self.config.seed * 1_000_003 + self.state.step)
        self.optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for ex in batch:
            loss = self.example_loss(ex) / len(batch)
            loss.backward()
            total += float(loss.detach())
        params = [p for p in (*self.q_params, *self.g_params) if p.grad is not None]
        if self.config.max_grad_norm > 0 and params:
            torch.nn.utils.clip_grad_norm_(params, self.config.max_grad_norm)
        self.optimizer.step()
        self.state.step += 1
        self.state.examples_seen += len(batch)
        self.state.losses.append(total)
        return total

    def evaluate(self, examples: Sequence[Example], *, generate: bool = True,
                 progress: ProgressCallback | None = None,
                 cancel: CancelToken | None = None) -> EvalResult:
        cfg = self.config
        gen = self.generator if generate else None
        on_cpu = self.device == "cpu"
        if gen is not None and not on_cpu:  # the engine's decoders run on the CPU
            gen.model.to("cpu")
        try:
            return evaluate(self.encoder, gen, self.index, examples, n_docs=cfg.n_docs,
                            mode=cfg.mode, ks=cfg.eval_ks, em_limit=cfg.eval_em_limit,
                            max_new_tokens=cfg.max_answer_tokens, progress=progress,
                            cancel=cancel)
        finally:
            if gen is not None and not on_cpu:
                gen.model.to(self.device)

    def record_evaluation(self, result: EvalResult, label: str,
                          report: Reporter | None = None) -> bool:
        """Store an evaluation, run the collapse guard against the first one; True to stop."""
        entry: dict[str, Any] = {"label": label, "epoch": self.state.epoch,
                                 "step": self.state.step, **result.to_json(), "collapse": []}
        stop = False
        if self.state.evaluations:
            base = EvalResult.from_json(self.state.evaluations[0]).retrieval
            verdict = check_collapse(base, result.retrieval, self.config.collapse)
            entry["collapse"] = list(verdict.reasons)
            if verdict.collapsed:
                msg = f"retrieval collapse suspected after {label}: {verdict.describe()}"
                log.warning(msg)
                action = self.config.on_collapse
                if action == "stop":
                    stop = True
                    self.state.stopped = msg
                    msg += "; stopping"
                elif action == "freeze-retriever" and not self.state.retriever_frozen:
                    self.state.retriever_frozen = True
                    self.encoder.model.requires_grad_(False)
                    msg += "; the question encoder is frozen from now on"
                if report is not None:
                    report("warning: " + msg)
        self.state.evaluations.append(entry)
        if report is not None:
            report(f"evaluation ({label}): {result.describe()}")
        return stop

    def run(self, examples: Sequence[Example], eval_examples: Sequence[Example] | None, *,
            generate_eval: bool = True,
            save: Callable[[RagTrainer], None] | None = None,
            report: Reporter | None = None, progress: ProgressCallback | None = None,
            cancel: CancelToken | None = None) -> TrainState:
        """Train from ``self.state`` to the last epoch; ``save`` writes a checkpoint."""
        cfg, st = self.config, self.state
        if not examples:
            raise BadInputError("There are no training questions.")
        n = len(examples)
        if eval_examples and cfg.evaluate_before and not st.evaluations:
            self.record_evaluation(self.evaluate(eval_examples, generate=generate_eval,
                                                 progress=progress, cancel=cancel),
                                   "before training", report)
        prog = Progress(cfg.epochs * n, "training", progress,
                        start_done=min(st.epoch * n + st.position, cfg.epochs * n))
        recent: list[float] = []
        while st.epoch < cfg.epochs and st.stopped is None:
            order = epoch_order(n, cfg.seed, st.epoch)
            while st.position < n:
                if cancel is not None and cancel.cancelled:
                    if save is not None:
                        save(self)
                    cancel.raise_if_cancelled()
                batch = [examples[i] for i in order[st.position:st.position + cfg.batch_size]]
                loss = self.train_step(batch)
                st.position += len(batch)
                recent = [*recent[-19:], loss]
                prog.update(len(batch), f"epoch {st.epoch + 1}/{cfg.epochs}  loss "
                            f"{sum(recent) / len(recent):.4f}")
                if save is not None and cfg.checkpoint_every and (
                        st.step % cfg.checkpoint_every == 0) and st.position < n:
                    save(self)
            label = f"epoch {st.epoch + 1}"
            epoch_losses = st.losses[-((n + cfg.batch_size - 1) // cfg.batch_size):]
            if report is not None and epoch_losses:
                report(f"{label}: mean training loss {sum(epoch_losses) / len(epoch_losses):.4f}")
            stop = False
            if eval_examples:
                stop = self.record_evaluation(
                    self.evaluate(eval_examples, generate=generate_eval, progress=progress,
                                  cancel=cancel),
                    label, report)
            st.epoch += 1
            st.position = 0
            if save is not None:
                save(self)
            if stop:
                break
        return st
