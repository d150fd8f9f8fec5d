"""Helpers shared by the subcommands."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

# Names and choices only: ragdesk.core.options imports nothing heavy.
from ragdesk.core.options import (
    DECODINGS,
    MODES,
    PRECISION_KEY,
    PRECISIONS,
    RETRIEVERS,
    STYLES,
    AnswerOptions,
)
from ragdesk.core.terminal_text import terminal_safe

if TYPE_CHECKING:
    from ragdesk.core.app import AppContext  # SQLAlchemy: not needed for --version / --help
    from ragdesk.core.encoders import TextEncoder
    from ragdesk.core.models import PackSpec
    from ragdesk.core.snapshots import SnapshotIndex

Handler = Callable[[argparse.Namespace, "AppContext"], int]


def add_json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true",
                        help="print the result as JSON on stdout (errors too: "
                             '{"error": ..., "hint": ..., "exit": N})')


def print_json(obj: object) -> None:
    """The CLI's one JSON printer: indented for a person at a terminal, one line for a
    program reading a pipe (``| head -1`` gets the whole document)."""
    if sys.stdout.isatty():
        json.dump(obj, sys.stdout, indent=2, ensure_ascii=False)
    else:
        json.dump(obj, sys.stdout, ensure_ascii=False, separators=(",", ":"))
    sys.stdout.write("\n")


def print_table(headers: list[str], rows: list[list[str]]) -> None:
    headers = [terminal_safe(h) for h in headers]
    rows = [[terminal_safe(cell) for cell in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    print(fmt.format(*headers))
    for row in rows:
        print(fmt.format(*row))


def add_decoding_options(p: argparse.ArgumentParser) -> None:
    """--mode, --decoding, --docs, --retriever and --max-new-tokens (defaults: the settings,
    else ragdesk.core.options.AnswerOptions')."""
    p.add_argument("--mode", choices=MODES,
                   help="RAG-Token, RAG-Sequence or together (all passages in one prompt, "
                        "decoder-only generators; default: from settings, else the pack's)")
    p.add_argument("--decoding", choices=DECODINGS,
                   help="RAG-Sequence decoding (default: from settings)")
    p.add_argument("--docs", type=int, metavar="K",
                   help="passages per answer (default: from settings)")
    p.add_argument("--retriever", choices=RETRIEVERS,
                   help="dense, sparse (BM25) or hybrid (default: from settings)")
    p.add_argument("--max-new-tokens", type=int, metavar="N",
                   help="longest answer in tokens (default: from settings, else 32)")


def add_answer_options(p: argparse.ArgumentParser) -> None:
    """The answer options `ask` and `eval` share (their defaults come from the settings)."""
    p.add_argument("--style", choices=STYLES,
                   help="short (the answer alone) or sentence, for causal generators "
                        "(default: the setting, else short)")
    p.add_argument("--grounded", action=argparse.BooleanOptionalAction, default=None,
                   help="constrain answers to spans of the passages (default: the setting, "
                        "else on for causal generators such as the starter pack's)")
    p.add_argument("--temperature", type=float, metavar="T",
                   help="retrieval temperature of p(z|x) (default: the snapshot's)")
    p.add_argument("--abstain", action=argparse.BooleanOptionalAction, default=None,
                   help="say \"not found in this snapshot\" when the answer's confidence is "
                        "below the calibrated threshold; the best guess is still given "
                        "(default: the setting, else on)")
    p.add_argument("--precision", choices=PRECISIONS,
                   help="generator arithmetic for Gemma 3 (the starter pack): float32 (exact), "
                        "bfloat16 (the fast path: 3-5x faster on a CPU with bfloat16 "
                        "instructions, answers rarely differ) or int8 (faster still, answers "
                        f"differ more often); default: the setting {PRECISION_KEY!r}, else "
                        "bfloat16 where the CPU has native bf16, else float32")


def answer_options(args: argparse.Namespace, ctx: AppContext) -> AnswerOptions:
    """The settings' answer options with the flags given on the command line over them,
    checked (an unknown value in the settings is refused before any model loads)."""
    flags = {"mode": "mode", "decoding": "decoding", "n_docs": "docs",
             "num_beams": "beams", "max_new_tokens": "max_new_tokens",
             "retriever": "retriever", "style": "style", "grounded": "grounded",
             "precision": "precision", "temperature": "temperature", "abstain": "abstain"}
    given = {field: getattr(args, flag, None) for field, flag in flags.items()}
    return AnswerOptions.from_settings(ctx.settings.as_dict()).replace(**given).check()


def pack_answer_options(opts: AnswerOptions, pack: PackSpec | None,
                        args: argparse.Namespace, ctx: AppContext) -> AnswerOptions:
    """``opts`` in the mode chosen for the pack (``--mode``, or the settings' entry for it),
    else in the pack's own."""
    from ragdesk.core.options import with_pack_mode

    if pack is None:
        return opts
    return with_pack_mode(opts, pack.default_mode, chosen_mode(args, ctx, pack.name))


def chosen_mode(args: argparse.Namespace, ctx: AppContext, pack: str) -> str | None:
    """The reading mode the user chose for ``pack``: ``--mode``, else the one the settings
    keep for it (picked in the window's controls); None: the pack answers in its own."""
    from ragdesk.core.options import PACK_MODES_KEY, pack_mode_choices

    flag = getattr(args, "mode", None)
    if flag is not None:
        return str(flag)
    return pack_mode_choices(ctx.settings.get(PACK_MODES_KEY)).get(pack)


def snapshot_pack_encoder(ctx: AppContext, snapshot_name: str | None, pack_name: str | None
                          ) -> tuple[SnapshotIndex, str, PackSpec, TextEncoder]:
    """(snapshot index, pack name, pack, question encoder), checked to fit each other.

    The pack is the session's choice: the one asked for, else the chosen one, else the
    snapshot's own, else the starter pack."""
    from ragdesk.core.session import Session
    from ragdesk.core.snapshots import open_snapshot

    snapshot = open_snapshot(ctx.data, ctx.catalog, snapshot_name)
    session = Session(ctx)
    name = session.pack_name(pack_name, snapshot.name)
    pack = session.pack(name)
    encoder = session.question_encoder_for(pack, snapshot.encoder, snapshot.name)
    # batch encoding (eval, calibrate) computes in the precision answers use for this snapshot
    return snapshot, name, pack, encoder.at_precision(snapshot.query_precision)
