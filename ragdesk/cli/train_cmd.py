"""`ragdesk train ...`: fine-tune a model pack with RAG's end-to-end recipe."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ragdesk.cli.common import print_json
from ragdesk.core.errors import Cancelled
from ragdesk.core.options import PRECISIONS, TRAIN_OBJECTIVES
from ragdesk.core.progress import CancelToken

if TYPE_CHECKING:
    from types import FrameType

    from ragdesk.core.app import AppContext

    # what signal.signal gives back and takes: a function, SIG_DFL/SIG_IGN, or None
    SignalHandler = Callable[[int, FrameType | None], object] | int | signal.Handlers | None

EPILOG = """\
The question encoder and the generator are trained jointly from (question, answer) pairs; the
passage encoder and the snapshot's index stay fixed. p(z|x) is recomputed from the snapshot's
stored passage vectors, so the answer's likelihood trains the retriever too.

Files are NQ-open JSONL: one {"question": "...", "answer": ["...", ...]} per line; training
uses the first answer. To train on some lines of a file, cut them out first, e.g.
`sed -n '1001,3610p' all.jsonl > train.jsonl`.

By default only questions with a gold answer (the has-answer test of `ragdesk eval`) among
the top --answer-depth passages (default: --docs) that the starting question encoder
retrieves are trained on: the loss reads only retrieved passages, so the others teach
nothing. The log says how many were skipped; --all-questions keeps them.

With --generator-layers 0 the generator is frozen and read through the engine's inference
path (for the starter pack: its lean Gemma decoder), and only the question encoder trains.

After every epoch (and every --eval-every steps, retrieval only) the --eval questions are
evaluated (top-k retrieval accuracy, exact match) and the retrieval-collapse guard compares
the entropy of p(z|x) at the snapshot's temperature and the number of distinct top-1
passages with the first evaluation (see docs/finetuning.md). The models with the best
top-K accuracy on them are kept in OUT/best; if the guard sees a collapse, the registered
pack uses those.

Checkpoints go to OUT/checkpoint-<step> after every epoch (and on Ctrl-C); running the same
command again resumes from the newest one. The result is saved in OUT/final and registered
as a custom model pack.

examples:
  ragdesk train train.jsonl --snapshot vital-articles --pack starter --out runs/ft1 \\
      --eval dev.jsonl --epochs 1 --docs 5 --generator-layers 2 --limit 300
  ragdesk train train.jsonl --pack starter --out runs/retriever --generator-layers 0 \\
      --eval dev.jsonl --em-limit 0 --name starter-tuned
  ragdesk ask --pack starter-ft "who wrote hamlet"
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("train", help="fine-tune a model pack on question/answer pairs",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("train", type=Path, metavar="TRAIN.jsonl", help="training questions")
    p.add_argument("--snapshot", metavar="NAME",
                   help="snapshot to retrieve from (default: the active one)")
    p.add_argument("--pack", required=True, metavar="PACK", help="model pack to start from")
    p.add_argument("--out", required=True, type=Path, metavar="DIR",
                   help="folder for checkpoints and the trained models")
    p.add_argument("--name", metavar="PACK_NAME",
                   help="name of the pack to register (default: PACK-ft)")
    p.add_argument("--no-register", action="store_true",
                   help="do not register the result as a model pack")
    _add_objective_options(p)
    p.add_argument("--mode", choices=["token", "sequence"], default="token",
                   help="RAG-Token or RAG-Sequence loss (default token)")
    p.add_argument("--docs", type=int, default=5, metavar="K",
                   help="passages retrieved per question (default 5)")
    p.add_argument("--epochs", type=int, default=1, metavar="N", help="default 1")
    p.add_argument("--lr", type=float, default=3e-5, help="AdamW learning rate (default 3e-5)")
    p.add_argument("--question-encoder-lr", type=float, metavar="LR",
                   help="learning rate of the question encoder (default: --lr)")
    p.add_argument("--batch-size", type=int, default=8, metavar="N",
                   help="questions per optimizer step (default 8)")
    p.add_argument("--weight-decay", type=float, default=0.01, help="default 0.01")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--generator-layers", type=int, metavar="N",
                   help="train only the generator's last N decoder blocks (0: freeze the "
                   "generator; default: train all of it)")
    p.add_argument("--freeze-question-encoder", action="store_true",
                   help="train the generator only")
    p.add_argument("--limit", type=int, metavar="N", help="use the first N training questions")
    _add_retriever_options(p)
    p.add_argument("--eval", type=Path, metavar="DEV.jsonl", dest="eval_path",
                   help="questions evaluated before training and after every epoch")
    p.add_argument("--eval-limit", type=int, metavar="N",
                   help="use the first N evaluation questions")
    p.add_argument("--em-limit", type=int, metavar="N",
                   help="answer only the first N evaluation questions for exact match "
                   "(retrieval metrics use all of them)")
    p.add_argument("--no-eval-before", action="store_true",
                   help="skip the evaluation before training")
    p.add_argument("--eval-every", type=int, default=0, metavar="STEPS",
                   help="also evaluate retrieval on the --eval questions every STEPS "
                   "optimizer steps (default: only after each epoch)")
    p.add_argument("--checkpoint-every", type=int, default=0, metavar="STEPS",
                   help="also checkpoint every STEPS optimizer steps (default: each epoch)")
    p.add_argument("--keep-checkpoints", type=int, default=1, metavar="N",
                   help="checkpoints kept in OUT, newest first (default 1)")
    p.add_argument("--on-collapse", choices=["warn", "stop", "freeze-retriever"],
                   default="warn",
                   help="what the retrieval-collapse guard does (default warn)")
    p.add_argument("--device", metavar="DEVICE",
                   help="torch device (default: cuda when available, else cpu)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_train)


def _add_objective_options(p: argparse.ArgumentParser) -> None:
    """What the run optimizes."""
    p.add_argument("--objective", choices=TRAIN_OBJECTIVES, default="rag",
                   help="rag: the answer's RAG likelihood through the generator (default); "
                   "passages: the question encoder alone, taught to rank the passages that "
                   "hold a gold answer first (the generator stays frozen)")
    p.add_argument("--passage-temperature", type=float, default=0.05, metavar="T",
                   help="with --objective passages: the softmax temperature of its scores "
                   "(default 0.05)")


def _add_retriever_options(p: argparse.ArgumentParser) -> None:
    """Which questions train, and how a frozen generator reads."""
    p.add_argument("--all-questions", action="store_true",
                   help="also train on questions without a gold answer in the passages "
                   "retrieved for them (default: skip them)")
    p.add_argument("--answer-depth", type=int, metavar="N",
                   help="a question is trained on when a gold answer is in its top N "
                   "retrieved passages (default: --docs; with --objective passages: 100, "
                   "the passages each step ranks)")
    p.add_argument("--differentiable-reader", action="store_true",
                   help="with --generator-layers 0, score answers with the generator's "
                   "differentiable forward instead of the engine's (in float32 the same "
                   "loss; slower)")
    p.add_argument("--precision", choices=PRECISIONS,
                   help="generator precision, as for `ragdesk ask` (default: bfloat16 where "
                   "the CPU has it natively, else float32)")


RESUME_HINT = ("Run the same command again to go on from the last checkpoint (a run stopped "
               "before its first step starts over).")


@contextlib.contextmanager
def checkpoint_on_ctrl_c() -> Iterator[CancelToken]:
    """A cancel token for a training job, set by the first Ctrl-C (finish the step, write a
    checkpoint, stop; a second Ctrl-C stops at once). The job's stop then says how to go on."""
    token = CancelToken()

    def handler(signum: int, _frame: FrameType | None) -> None:
        if token.cancelled:
            raise KeyboardInterrupt
        token.cancel()
        print("\nragdesk: stopping after this step and writing a checkpoint "
              "(Ctrl-C again to quit at once)", file=sys.stderr, flush=True)

    previous: SignalHandler = None
    with contextlib.suppress(ValueError):  # not the main thread (tests driving main())
        previous = signal.signal(signal.SIGINT, handler)
    try:
        yield token
    except Cancelled as exc:
        raise Cancelled(exc.message, RESUME_HINT) from exc
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def cmd_train(args: argparse.Namespace, ctx: AppContext) -> int:
    from ragdesk.core.progress import terminal_printer
    from ragdesk.core.training import TrainConfig, train_pack

    passages = args.objective == "passages"
    config = TrainConfig(
        objective=args.objective, passage_temperature=args.passage_temperature,
        mode=args.mode, n_docs=args.docs, epochs=args.epochs, lr=args.lr,
        question_encoder_lr=args.question_encoder_lr, batch_size=args.batch_size,
        weight_decay=args.weight_decay, seed=args.seed,
        train_question_encoder=not args.freeze_question_encoder,
        # the passages objective never reads the generator
        generator_layers=0 if passages and args.generator_layers is None
        else args.generator_layers, checkpoint_every=args.checkpoint_every,
        keep_checkpoints=args.keep_checkpoints, eval_every=args.eval_every,
        skip_unanswerable=not args.all_questions, answer_depth=args.answer_depth,
        inference_reader=not args.differentiable_reader,
        eval_em_limit=args.em_limit, evaluate_before=not args.no_eval_before,
        on_collapse=args.on_collapse)

    def report(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    with checkpoint_on_ctrl_c() as cancel:
        result = train_pack(
            ctx.data, ctx.catalog, args.train, snapshot=args.snapshot, pack=args.pack,
            out=args.out, config=config, eval_path=args.eval_path, name=args.name,
            register=not args.no_register, train_limit=args.limit,
            eval_limit=args.eval_limit, device=args.device, precision=args.precision,
            progress=terminal_printer(sys.stderr), cancel=cancel, report=report)
    st = result.state
    if args.json:
        print_json({"out": str(result.out_dir), "final": str(result.final_dir),
                    "pack": result.pack, "steps": st.step, "epochs": st.epoch,
                    "stopped": st.stopped, "evaluations": st.evaluations,
                    "resumed_from": str(result.resumed_from) if result.resumed_from else None})
        return 0
    print(f"Trained {st.step} steps; models in {result.final_dir}")
    if st.stopped:
        print(f"Stopped early: {st.stopped}")
    if result.pack:
        print(f"Registered the model pack {result.pack!r}: "
              f"ragdesk ask --pack {result.pack} \"...\"")
    return 0
