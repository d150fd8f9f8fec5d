"""`ragdesk tune QUESTIONS.jsonl`: the app's "Tune the retriever…" job from the command line
(the same entry, ragdesk.core.training.tune, the same job folder: either can resume the
other's)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ragdesk.cli.common import print_json
from ragdesk.cli.train_cmd import checkpoint_on_ctrl_c
from ragdesk.core.pack_choice import chosen_pack
from ragdesk.core.units import percent, plural, share_or_dash

if TYPE_CHECKING:
    from collections.abc import Callable

    from ragdesk.core.app import AppContext
    from ragdesk.core.progress import TrainingUpdate

# The numbers are TuneChoices' defaults and PASSAGES_DEPTH, written out because importing
# the training package here would slow every command's start (tests/test_cli_tune.py
# checks that they agree).
EPILOG = """\
The question encoder of PACK alone learns to rank the passages that hold a gold answer
first (`ragdesk train --objective passages`), on the questions with a gold answer in the
top 100 passages it retrieves (the others cannot teach it). The reader is not read, nor
loaded, so every pack can be tuned, the 1.5 GB reader pack too, in minutes. A share of the
file is held out and its top-5 retrieval measured before and after. The defaults are the
recipe measured in docs/finetuning.md (6 epochs, lr 2e-5, batch 16). The tuned pack is
registered as PACK-tuned (numbered when taken) and is used with `ragdesk ask --pack NAME`.

Ctrl-C writes a checkpoint after the current step; the same command resumes from it. For
every option of the recipe (the objective, an evaluation file, the collapse guard), see
`ragdesk train`.

examples:
  ragdesk tune my-questions.jsonl --pack starter
  ragdesk ask --pack starter-tuned "who wrote hamlet"
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("tune", help="tune the retriever on question/answer pairs, without "
                       "the reader (as the app does)", epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("questions", type=Path, metavar="QUESTIONS.jsonl",
                   help='one {"question": "...", "answer": ["..."]} per line')
    p.add_argument("--pack", metavar="PACK", help="pack to tune (default: the one in use)")
    p.add_argument("--snapshot", metavar="NAME", help="snapshot (default: the active one)")
    p.add_argument("--epochs", type=int, metavar="N",
                   help="passes over the questions (default: the recipe's, below)")
    p.add_argument("--lr", type=float, help="learning rate (default: the recipe's, below)")
    p.add_argument("--held-out", type=float, metavar="SHARE",
                   help="share of the questions measured on, not trained on (0.05-0.5, "
                   "default 0.2)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_tune)


def _printer() -> Callable[[TrainingUpdate], None]:
    from ragdesk.core.progress import terminal_printer

    emit = terminal_printer(sys.stderr)

    def show(u: TrainingUpdate) -> None:
        extra = [f"step {u.step}/{u.total_steps}"] if u.total_steps else []
        if u.loss is not None:
            extra.append(f"loss {u.loss:.4f}")
        if u.top_k is not None:
            extra.append(f"held-out top-{u.k} {percent(u.top_k, 1)}")
        emit(dataclasses.replace(u, message="  ".join([u.message, *extra])))

    return show


def cmd_tune(args: argparse.Namespace, ctx: AppContext) -> int:
    from ragdesk.core.training.tune import TuneChoices, TuneJob, run_tune

    given = {k: v for k, v in (("epochs", args.epochs), ("lr", args.lr),
                               ("held_out", args.held_out)) if v is not None}
    choices = dataclasses.replace(TuneChoices(), **given)
    pack = args.pack or chosen_pack(ctx.settings)
    with checkpoint_on_ctrl_c() as cancel:
        r = run_tune(ctx.data, ctx.catalog, TuneJob(args.questions, pack, args.snapshot, choices),
                     progress=_printer(), cancel=cancel)
    note = r.no_gain_note()
    if args.json:
        print_json({**dataclasses.asdict(r), "folder": str(r.folder), "gained": r.gained,
                    "note": note})
        return 0

    print(f"Tuned {r.base_pack} in {plural(r.steps, 'step')} on "
          f"{plural(r.trained_on, 'question')}; held-out top-{r.k} "
          f"({plural(r.held_out, 'question')}): {share_or_dash(r.top_k_before)} -> "
          f"{share_or_dash(r.top_k_after)}")
    if note:
        print(f"warning: {note}", file=sys.stderr)
    print(f"Registered the model pack {r.pack!r}: ragdesk ask --pack {r.pack} \"...\"")
    return 0
