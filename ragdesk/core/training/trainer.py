"""The fine-tuning loop: RAG's end-to-end recipe (Lewis et al. 2020, section 2.4).

For every training question the current question encoder retrieves the top K passages from
the snapshot's index (no gradient through the search itself), ``p(z|x)`` is recomputed as
``softmax(q(x)·d(z))`` from the snapshot's *stored* passage vectors so that the loss reaches
the question encoder, and the generator scores the answer under every passage. The passage
encoder and the index never change. AdamW updates the question encoder and the generator.

With the generator frozen (``generator_layers=0``) the answer is scored by the engine's
inference path (:func:`~ragdesk.core.training.forward.reader_logprobs`): the gradient reaches
the question encoder only through log p(z|x), so p(y|x,z) needs no graph, and the engine's
decoders compute it faster than the model's own forward.

By default a run trains only on the questions it can learn from: those with a gold answer
(the has-answer test of :mod:`ragdesk.core.matching`) among the top ``answer_depth`` passages
the starting question encoder retrieves. The choice is made once and kept in the state, so
a resumed run trains on the same questions.

Per-step randomness (dropout) is seeded from the step number, so a run resumed from a
checkpoint takes the same steps as one that was never interrupted.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ragdesk.core.engine.generators import PassageText
from ragdesk.core.errors import BadInputError, CorruptSnapshotError
from ragdesk.core.matching import AnswerMatcher, passage_string
from ragdesk.core.posterior import temperature_of
from ragdesk.core.progress import CancelToken, Progress, ProgressCallback
from ragdesk.core.training.config import TrainConfig, TrainEvent, TrainState, epoch_order
from ragdesk.core.training.evaluate import EvalResult, answerable, evaluate
from ragdesk.core.training.forward import (
    answer_ids,
    answer_logprobs,
    question_vectors,
    reader_logprobs,
)
from ragdesk.core.training.guard import check_collapse
from ragdesk.core.training.loss import passages_nll, rag_nll

if TYPE_CHECKING:
    import torch

    from ragdesk.core.encoders import TextEncoder
    from ragdesk.core.engine.generators import Generator
    from ragdesk.core.projection import VectorSnapshot
    from ragdesk.core.training.data import Example
    from ragdesk.core.types import Hit

log = logging.getLogger(__name__)

Reporter = Callable[[str], None]
Watcher = Callable[[TrainEvent], None]


def pick_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def decoder_blocks(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The generator's stack of decoder blocks (BART: decoder.layers, Gemma: layers, GPT-2:
    h): the longest ModuleList of blocks, preferring one inside a decoder."""
    import torch

    found: list[tuple[bool, int, str, torch.nn.ModuleList]] = []
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


def set_trainable(encoder: TextEncoder, gen: Generator | None, config: TrainConfig,
                  retriever_frozen: bool) -> None:
    encoder.model.requires_grad_(config.train_question_encoder and not retriever_frozen)
    if gen is None:
        return
    layers = config.generator_layers
    if layers is None:
        gen.model.requires_grad_(True)
        return
    gen.model.requires_grad_(False)
    if layers > 0:
        for block in decoder_blocks(gen.model)[-layers:]:
            block.requires_grad_(True)


def _generator_params(gen: Generator | None, config: TrainConfig) -> list[torch.nn.Parameter]:
    """The generator's parameters the optimizer holds: its trainable ones when only some
    layers train, all of them otherwise, none without a generator."""
    if gen is None:
        return []
    if config.generator_layers is not None:
        return [p for p in gen.model.parameters() if p.requires_grad]
    return list(gen.model.parameters())


class RagTrainer:
    """Trains one question encoder and one generator against one snapshot index.

    ``generator`` may be None where nothing reads it: the passages objective, evaluated
    without answering (no exact match)."""

    def __init__(self, encoder: TextEncoder, generator: Generator | None,
                 index: VectorSnapshot, config: TrainConfig, *, device: str | None = None,
                 state: TrainState | None = None) -> None:
        import torch

        self.config = config.check()
        if generator is None and config.objective != "passages":
            raise ValueError("The RAG objective reads the generator: pass one.")
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
        # A frozen generator read through the engine stays where the engine built its
        # decoder (the lean decoders keep their own copies of the weights).
        self._reader_path = config.generator_frozen and config.inference_reader
        self.generator_device = str(generator.device) if (
            self._reader_path and generator is not None) else self.device
        encoder.model.to(self.device)
        if generator is not None:
            generator.model.to(self.generator_device)
        set_trainable(encoder, generator, config, self.state.retriever_frozen)
        # One group per model, always both, so that the optimizer state lines up with the
        # parameters whatever is frozen at the time (the passages objective's generator
        # group is empty whether or not the generator was loaded).
        self.q_params = list(encoder.model.parameters())
        self.g_params = _generator_params(generator, config)
        groups: list[dict[str, object]] = [
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
        """The loss of one (question, answer) pair: the RAG negative marginal
        log-likelihood, or for the passages objective the retriever's own."""
        import torch

        retriever_trains = self.config.train_question_encoder and not self.state.retriever_frozen
        with torch.set_grad_enabled(retriever_trains):
            q = question_vectors(self.encoder, [ex.question])  # [1, d]
        passages_objective = self.config.objective == "passages"
        k = min(self.config.depth, int(self.index.size)) if passages_objective \
            else self.config.n_docs
        hits = self.index.search(q.detach().cpu().numpy().astype(np.float32), k)[0]
        d = self.passage_vectors([h.id for h in hits])  # [K, d], frozen
        scores = q @ d.T  # [1, K]: d(z)·q(x), differentiable in q
        if not self._checked_scores:
            self._check_scores(scores, hits)
        if passages_objective:
            matcher = AnswerMatcher(ex.answers)  # once: it is compiled from the answers
            holds = [matcher.matches(passage_string(h.title, h.text)) for h in hits]
            return passages_nll(scores[0], holds, self.config.passage_temperature)
        assert self.generator is not None  # checked in __init__: the RAG objective reads it
        target = answer_ids(self.generator, ex.target, self.config.max_answer_tokens)
        passages = [PassageText(h.title, h.text) for h in hits]
        if self._reader_path:
            lp = reader_logprobs(self.generator, ex.question, passages, target).to(
                scores.device)[None]  # [1, K, T]
        else:
            lp = answer_logprobs(self.generator, ex.question, passages, target)[None]
        mask = torch.ones((1, lp.shape[-1]), device=lp.device)
        return rag_nll(self.config.mode, scores, lp, mask, temperature_of(self.index))[0]

    def _check_scores(self, scores: torch.Tensor, hits: Sequence[Hit]) -> None:
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
        # a frozen generator's dropout would only add noise to p(y|x,z)
        if self.generator is not None:
            self.generator.model.train(not self.config.generator_frozen)
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
        on_cpu = self.generator_device == "cpu"
        if gen is not None and not on_cpu:  # the engine's decoders run on the CPU
            gen.model.to("cpu")
        try:
            # top-K (the passages read) always: the best models are chosen by it
            return evaluate(self.encoder, gen, self.index, examples, n_docs=cfg.n_docs,
                            mode=cfg.mode, ks=sorted({*cfg.eval_ks, cfg.n_docs}),
                            em_limit=cfg.eval_em_limit,
                            max_new_tokens=cfg.max_answer_tokens, progress=progress,
                            cancel=cancel)
        finally:
            if gen is not None and not on_cpu:
                gen.model.to(self.generator_device)

    def select_questions(self, examples: Sequence[Example],
                         report: Reporter | None = None) -> list[int]:
        """The indices of the questions to train on (see the module docstring)."""
        cfg = self.config
        if not cfg.skip_unanswerable:
            if report is not None:
                report(f"training on all {len(examples)} questions (--all-questions)")
            return list(range(len(examples)))
        depth = min(cfg.depth, int(self.index.size))
        kept = answerable(self.encoder, self.index, examples, depth)
        if report is not None:
            report(f"training on {len(kept)} of {len(examples)} questions: the other "
                   f"{len(examples) - len(kept)} have no gold answer in the top {depth} "
                   "passages the question encoder retrieves before training (the has-answer "
                   "test of `ragdesk eval`), so no passage it reads can teach it; "
                   "--all-questions keeps them")
        return kept

    def record_evaluation(self, result: EvalResult, label: str,
                          report: Reporter | None = None, held_out: bool = True) -> bool:
        """Store an evaluation, run the collapse guard against the first one; True to stop.
        ``held_out``: it measured questions kept out of training, not training ones (a run
        without an evaluation set watches a sample of its own for the guard)."""
        # "epoch": the one it is in or ends (as its label counts them, from 1); 0 before any
        # step (the state's own counter is that of the epochs finished)
        epoch = self.state.epoch + 1 if self.state.step else 0
        questions = "held-out" if held_out else "training"
        entry: dict[str, object] = {"label": label, "epoch": epoch, "step": self.state.step,
                                    "questions": questions, **result.to_json(), "collapse": []}
        stop = False
        if report is not None:
            report(f"evaluation ({label}, {questions} questions): {result.describe()}")
            report(self._guard_line(label, result))
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
        return stop

    def _guard_line(self, label: str, result: EvalResult) -> str:
        """The guard's figures now, beside the first evaluation's (its baseline)."""
        r = result.retrieval
        line = (f"guard ({label}): p(z|x) at tau {r.temperature:g} over the top {r.n_docs}: "
                f"mean entropy {r.mean_entropy:.4f} nats (uniform: "
                f"{math.log(max(r.n_docs, 1)):.4f}), distinct top-1 {r.distinct_top1} of "
                f"{r.n_questions}")
        if self.state.evaluations:
            first = self.state.evaluations[0]
            b = EvalResult.from_json(first).retrieval
            line += (f"; at {first['label']}: entropy {b.mean_entropy:.4f}, distinct top-1 "
                     f"{b.distinct_top1}")
        return line

    def _evaluation(self, examples: Sequence[Example], label: str, generate: bool,
                    hooks: RunHooks) -> bool:
        """Evaluate, run the guard, remember the best models; True to stop."""
        hooks.tell("evaluating", label, self.state)
        result = self.evaluate(examples, generate=generate, progress=hooks.progress,
                               cancel=hooks.cancel)
        stop = self.record_evaluation(result, label, hooks.report, hooks.held_out)
        if hooks.held_out:
            self._track_best(result, label, hooks.save_best, hooks.report)
        hooks.tell("evaluated", label, self.state)
        return stop

    def _track_best(self, result: EvalResult, label: str,
                    save_best: Callable[[RagTrainer], object] | None,
                    report: Reporter | None) -> None:
        """Keep the models of the evaluation with the best held-out top-K accuracy (K: the
        passages read); the first of equals wins, so the untuned models stay best until
        training beats them."""
        k = self.config.n_docs
        acc = result.top_k.get(str(k))
        st = self.state
        if acc is None or (st.best is not None and acc <= float(st.best["top_k"])):
            return
        st.best = {"label": label, "step": st.step, "k": k, "top_k": acc}
        if st.step > 0 and save_best is not None:
            save_best(self)
            if report is not None:
                report(f"best held-out top-{k} so far ({acc * 100:.1f}%, {label}): "
                       "models kept")

    def run(self, examples: Sequence[Example], eval_examples: Sequence[Example] | None, *,
            generate_eval: bool = True, held_out: bool = False,
            save: Callable[[RagTrainer], object] | None = None,
            save_best: Callable[[RagTrainer], object] | None = None,
            report: Reporter | None = None, progress: ProgressCallback | None = None,
            cancel: CancelToken | None = None, watch: Watcher | None = None) -> TrainState:
        """Train from ``self.state`` to the last epoch; ``save`` writes a checkpoint.

        ``held_out``: ``eval_examples`` are not training questions, so their retrieval
        accuracy chooses the best models, which ``save_best`` writes. ``watch`` hears of
        each stage and step."""
        cfg, st = self.config, self.state
        if not examples:
            raise BadInputError("There are no training questions.")
        hooks = RunHooks(held_out, save, save_best, report, progress, cancel, watch)
        if st.selected is None:
            hooks.tell("selecting", "", st)
            st.selected = self.select_questions(examples, report)
        chosen = [examples[i] for i in st.selected]
        if not chosen:
            raise BadInputError(
                f"None of the {len(examples)} training questions has a gold answer in the "
                f"top {cfg.depth} passages retrieved for it; there is nothing to learn from.",
                hint="Pass --all-questions to train on them anyway, or a larger "
                     "--answer-depth.",
                gui_hint="Use questions whose answers the snapshot's passages hold, or a "
                         "snapshot that holds them.")
        if eval_examples and cfg.evaluate_before and not st.evaluations:
            self._evaluation(eval_examples, "before training", generate_eval, hooks)
        n = len(chosen)
        prog = Progress(cfg.epochs * n, "training", progress,
                        start_done=min(st.epoch * n + st.position, cfg.epochs * n))
        hooks.tell("training", "", st)
        while st.epoch < cfg.epochs and st.stopped is None:
            self._train_epoch(chosen, eval_examples, hooks, prog)
            if st.stopped is not None:  # the guard stopped the run within the epoch
                if save is not None:
                    save(self)
                break
            label = f"epoch {st.epoch + 1}"
            epoch_losses = st.losses[-((n + cfg.batch_size - 1) // cfg.batch_size):]
            if report is not None and epoch_losses:
                report(f"{label}: mean training loss {sum(epoch_losses) / len(epoch_losses):.4f}")
            stop = bool(eval_examples) and self._evaluation(
                eval_examples or [], label, generate_eval, hooks)
            st.epoch += 1
            st.position = 0
            if save is not None:
                save(self)
            if stop:
                break
        return st

    def _train_epoch(self, chosen: Sequence[Example], eval_examples: Sequence[Example] | None,
                     hooks: RunHooks, prog: Progress) -> None:
        """The rest of the current epoch, from ``state.position``; returns early when the
        guard stops the run at an evaluation within the epoch."""
        cfg, st, n = self.config, self.state, len(chosen)
        order = epoch_order(n, cfg.seed, st.epoch)
        recent: list[float] = []
        while st.position < n:
            if hooks.cancel is not None and hooks.cancel.cancelled:
                if hooks.save is not None:
                    hooks.save(self)
                hooks.cancel.raise_if_cancelled()
            batch = [chosen[i] for i in order[st.position:st.position + cfg.batch_size]]
            loss = self.train_step(batch)
            st.position += len(batch)
            hooks.tell("step", "", st)
            recent = [*recent[-19:], loss]
            prog.update(len(batch), f"epoch {st.epoch + 1}/{cfg.epochs}  loss "
                        f"{sum(recent) / len(recent):.4f}")
            within = st.position < n
            if eval_examples and cfg.eval_every and st.step % cfg.eval_every == 0 and (
                    within) and self._evaluation(eval_examples, f"step {st.step}", False, hooks):
                return
            if hooks.save is not None and cfg.checkpoint_every and (
                    st.step % cfg.checkpoint_every == 0) and within:
                hooks.save(self)


@dataclass(frozen=True)
class RunHooks:
    """What :meth:`RagTrainer.run` calls back, passed along to its parts."""

    held_out: bool
    save: Callable[[RagTrainer], object] | None
    save_best: Callable[[RagTrainer], object] | None
    report: Reporter | None
    progress: ProgressCallback | None
    cancel: CancelToken | None
    watch: Watcher | None = None

    def tell(self, kind: str, label: str, state: TrainState) -> None:
        if self.watch is not None:
            self.watch(TrainEvent(kind, label, state))
