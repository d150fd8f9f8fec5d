"""Asking: each question is an op on the engine lane that streams into its answer card.

The op's function (on the engine thread) streams typed items: :class:`Phase` values saying
what it is doing (waiting for the starter setup, loading models, generating) and the
answer's tokens the moment the engine decides them. The callbacks (GUI thread) move the card
along its :class:`~ragdesk.ui.card_state.CardState` and re-emit the outcome as signals for
the window, the compare dialog and tests.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

from PySide6.QtCore import QObject, Signal

from ragdesk.core.options import AnswerOptions
from ragdesk.core.progress import ProgressUpdate
from ragdesk.core.types import Answer, AnswerToken, Hit
from ragdesk.core.units import plural
from ragdesk.ui.backend import Backend
from ragdesk.ui.chat.card import AnswerCard
from ragdesk.ui.ops import FailureHandler, Lane, Op, OpContext, OpRunner
from ragdesk.ui.reports import ErrorReport

log = logging.getLogger(__name__)


class Phase(Enum):
    WAITING_FOR_SETUP = "waiting for the starter setup"
    SETUP_ANSWERABLE = "the starter setup can answer"
    LOADING_MODELS = "loading models"
    MODELS_LOADED = "models loaded"
    GENERATING = "retrieving and generating"


@dataclass(frozen=True)
class QuestionJob:
    """One question for the engine lane: the options go down whole (the engine checks them
    once, as for every front end); the GUI adds the pack and snapshot it was asked against."""

    question: str
    params: AnswerOptions
    pack: str
    snapshot: str | None
    docs: tuple[Hit, ...] | None = None  # answer from these passages instead of retrieving


@dataclass
class _Ask:
    op: Op[Answer]
    card: AnswerCard
    in_chat: bool
    sent: float
    forgotten: bool = False  # its card is going away: nothing more is shown in it
    # what it waits for, as the status line names it: an earlier question in flight when it
    # was sent, the starter setup, else the models loading
    waits_for: str = "the models to load"
    answering: float | None = None  # when the engine started on it (the models loaded)


def answer_on_engine_thread(backend: Backend, req: QuestionJob, ctx: OpContext) -> Answer:
    """The engine lane's work for one question (runs on the engine thread)."""
    if backend.setup.pending:
        # Asked while the starter pack is being set up: the card shows the setup's progress
        # until it can answer (BM25 + generator), then this runs.
        ctx.stream(Phase.WAITING_FOR_SETUP)
        backend.wait_for_setup(ctx.cancel)
        ctx.stream(Phase.SETUP_ANSWERABLE)
    if not backend.engine_loaded(req.pack):
        ctx.stream(Phase.LOADING_MODELS)
        backend.engine(req.pack)
        ctx.stream(Phase.MODELS_LOADED)
    ctx.cancel.raise_if_cancelled()
    ctx.stream(Phase.GENERATING)
    if req.docs is not None:
        return backend.answer_from_docs(req.question, req.docs, req.params, pack=req.pack,
                                        snapshot=req.snapshot, on_token=ctx.stream,
                                        cancel=ctx.cancel)
    return backend.answer(req.question, req.params, pack=req.pack, snapshot=req.snapshot,
                          on_token=ctx.stream, cancel=ctx.cancel)


# A shorter wait is the lane handing over, not worth a word.
WAIT_WORTH_SAYING_S = 0.5


def finished_text(answer: Answer, took: float, waited: float, waited_for: str) -> str:
    """The status line for an answer ``took`` seconds after it was sent, of which it
    ``waited`` for ``waited_for`` before the engine started on it. Said apart, so that the
    time shown is the answer's own."""
    where = f" from {answer.snapshot}" if answer.snapshot else ""
    state = "Stopped" if answer.cancelled else "Answered"
    if waited < WAIT_WORTH_SAYING_S:
        return f"{state} in {took:.1f} s{where}."
    return (f"{state} in {took - waited:.1f} s{where}, after waiting {waited:.1f} s for "
            f"{waited_for}.")


class Conversation(QObject):
    """The questions in flight and their cards (the chat's and the compare dialog's)."""

    cardCreated = Signal(object)  # AnswerCard: wire its clicks
    tokenStreamed = Signal(int, object)  # request id, AnswerToken
    tokenShown = Signal(object, object)  # AnswerCard, AnswerToken: appended to the card
    answerFinished = Signal(int, object)  # request id, Answer
    answerFailed = Signal(int, object)  # request id, ErrorReport
    chatAnswered = Signal(object)  # AnswerCard of the conversation (not compare) finished
    busyChanged = Signal(bool)  # questions are in flight (not counting a model preload)
    activity = Signal(str)

    def __init__(self, backend: Backend, ops: OpRunner, pack: Callable[[], str],
                 report: FailureHandler, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.backend = backend
        self.ops = ops
        self.report = report
        self._pack = pack
        self._asks: dict[int, _Ask] = {}
        self._preloaded: str | None = None
        self._setup_update: ProgressUpdate | None = None

    # ---- asking ---------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        return bool(self._asks)

    def pending(self) -> list[Op[Answer]]:
        return [a.op for a in self._asks.values()]

    def ask(self, question: str, params: AnswerOptions, *, snapshot: str | None,
            in_chat: bool = True, docs: Sequence[Hit] | None = None) -> AnswerCard:
        """Send ``question`` to the engine lane; returns the card its answer streams into."""
        req = QuestionJob(question, params, self._pack(), snapshot,
                         None if docs is None else tuple(docs))
        op = Op(lambda ctx: answer_on_engine_thread(self.backend, req, ctx), lane=Lane.ENGINE,
                title="Answering")
        # Passages chosen elsewhere: the card's K is how many were chosen, not the setting.
        shown = params if docs is None else params.replace(n_docs=max(1, len(docs)))
        card = AnswerCard(op.id, question, shown, snapshot, chosen_passages=docs is not None)
        ask = _Ask(op, card, in_chat, time.monotonic())
        if self._asks:
            ask.waits_for = "an earlier question"
        op.started(lambda: self._started(ask)).stream(lambda item: self._streamed(ask, item))
        op.success(lambda answer: self._finished(ask, answer))
        op.failure(lambda report: self._failed(ask, report))
        self._asks[op.id] = ask
        if len(self._asks) == 1:
            self.busyChanged.emit(True)
        self.cardCreated.emit(card)
        op.run(self.ops)
        return card

    def cancel(self, card: AnswerCard | None = None) -> None:
        """Stop ``card``'s answer (all answers if None)."""
        for ask in self._asks.values():
            if card is None or ask.card is card:
                ask.op.cancel()

    def forget(self, card: AnswerCard) -> None:
        """Stop streaming into ``card`` (it is going away); cancels its answer if running."""
        ask = self._asks.get(card.request_id)
        if ask is not None:
            ask.op.cancel()
            ask.forgotten = True

    def preload(self, pack: str, params: AnswerOptions) -> None:
        """Load the models before the first question and answer a made-up one with
        ``params`` (the engine's warm-up), so that the first question is answered at once."""
        if self._preloaded == pack:
            return
        self._preloaded = pack

        def load(ctx: OpContext) -> bool:
            if self.backend.engine_loaded(pack):
                return False
            ctx.stream(Phase.LOADING_MODELS)
            self.backend.engine(pack).warm_up(params, cancel=ctx.cancel)
            return True

        def failed(report: ErrorReport) -> None:
            # Not worth a dialog: the first question reports the same problem properly.
            if not report.cancelled:
                log.info("preloading the %s models failed: %s", pack, report.message)
                self.activity.emit(f"The {pack} models could not be loaded yet.")

        Op(load, lane=Lane.ENGINE, title=f"Loading {pack}").stream(
            lambda _p: self.activity.emit(f"Loading the {pack} models…")).success(
            lambda loaded: self.activity.emit(f"The {pack} pack is loaded.") if loaded else None
        ).failure(failed).run(self.ops)

    # ---- the starter setup's queue ----------------------------------------------------------

    def queue_text(self) -> str:
        u = self._setup_update
        where = f" — {u.describe()}" if u is not None else ""
        return (f"Waiting for the starter pack{where}. This question runs as soon as the "
                "passages are searchable and the generator is ready.")

    def show_setup_progress(self, update: ProgressUpdate) -> None:
        """Questions asked before the starter pack can answer wait in line; their cards show
        how far the setup is (and they start by themselves when it can answer)."""
        if not self.backend.setup.pending:
            return
        self._setup_update = update
        text = self.queue_text()
        for ask in self._asks.values():
            if ask.card.state.active and not ask.card.tokens:
                ask.card.set_queued(text)

    # ---- delivery (GUI thread) ----------------------------------------------------------------

    def _started(self, ask: _Ask) -> None:
        if ask.forgotten:
            return
        if self.backend.setup.pending:
            ask.card.set_queued(self.queue_text())  # started again once it can answer
        else:
            ask.card.set_running()

    def _streamed(self, ask: _Ask, item: object) -> None:
        if ask.forgotten:
            return
        if isinstance(item, AnswerToken):
            self.on_token(ask.card, item)
            self.tokenStreamed.emit(ask.op.id, item)
        elif item is Phase.WAITING_FOR_SETUP:
            ask.waits_for = "the starter setup"
            self.activity.emit("Waiting for the starter pack…")
        elif item is Phase.SETUP_ANSWERABLE:
            self._started(ask)
        elif item is Phase.LOADING_MODELS:
            self.activity.emit(f"Loading the {self._pack()} models…")
        elif item is Phase.MODELS_LOADED:
            self.activity.emit(f"The {self._pack()} pack is loaded.")
        elif item is Phase.GENERATING:
            ask.answering = time.monotonic()
            self.activity.emit("Retrieving and generating…")

    def on_token(self, card: AnswerCard, tok: AnswerToken) -> None:
        card.append_token(tok)
        self.tokenShown.emit(card, tok)
        self.activity.emit(f"Generating…  {plural(len(card.tokens), 'token')}")

    def _done(self, ask: _Ask) -> None:
        if self._asks.pop(ask.op.id, None) is not None and not self._asks:
            self.busyChanged.emit(False)

    def _finished(self, ask: _Ask, answer: Answer) -> None:
        self._done(ask)
        if not ask.forgotten:
            ask.card.finish(answer)
            took = time.monotonic() - ask.sent
            waited = 0.0 if ask.answering is None else ask.answering - ask.sent
            self.activity.emit(finished_text(answer, took, waited, ask.waits_for))
            log.info("answer finished: request %d, %d tokens, snapshot %s, %.2f s",
                     ask.op.id, len(answer.tokens), answer.snapshot, took)
        self.answerFinished.emit(ask.op.id, answer)
        if ask.in_chat and not ask.forgotten:
            self.chatAnswered.emit(ask.card)

    def _failed(self, ask: _Ask, report: ErrorReport) -> None:
        self._done(ask)
        if not ask.forgotten:
            ask.card.fail(report.message, cancelled=report.cancelled)
        if report.cancelled:
            self.activity.emit("Stopped.")
            log.info("answer cancelled: request %d", ask.op.id)
        else:
            self.activity.emit("The question could not be answered.")
            self.report(report, "ragdesk")  # the op has this handler, so no other dialog
        self.answerFailed.emit(ask.op.id, report)
