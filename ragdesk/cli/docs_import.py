"""`ragdesk index import FOLDER --format docs`: a folder of documents as a snapshot."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ragdesk.cli.common import print_json
from ragdesk.core.errors import BadInputError
from ragdesk.core.progress import terminal_printer
from ragdesk.core.terminal_text import terminal_safe

if TYPE_CHECKING:
    from ragdesk.core.app import AppContext


def import_docs(args: argparse.Namespace, ctx: AppContext) -> int:
    from ragdesk.core.documents import import_folder

    if args.limit is not None or args.embeddings is not None:
        raise BadInputError("--limit and --embeddings do not apply to a folder of documents.")
    res = import_folder(ctx.data, ctx.catalog, args.source, name=args.name,
                        encoder=args.encoder, default_pack=args.default_pack,
                        progress=terminal_printer(sys.stderr), batch_size=args.batch_size,
                        precision=args.precision)
    # Files that could not be read are listed at the end, where they are not scrolled away.
    for warning in res.warnings:
        print(f"ragdesk: warning: skipped {terminal_safe(warning)}", file=sys.stderr)
    if args.json:
        print_json(res.to_json())
        return 0
    rec = res.record
    counts = ", ".join(f"{len(files)} {what}" for what, files in (
        ("added", res.added), ("changed", res.changed), ("removed", res.removed),
        ("unchanged", res.unchanged)) if files)
    active = " It is the active snapshot." if rec.active else ""
    print(f"Imported {rec.name!r}: {res.passages:,} passages from {counts or 'no'} files "
          f"({res.encoded:,} passages encoded, {res.reused:,} reused), encoder "
          f"{terminal_safe(rec.encoder_id)} ({rec.dim}-d).{active}")
    if res.warnings:
        print(f"{len(res.warnings)} file(s) could not be imported; see the warnings above.")
    return 0
