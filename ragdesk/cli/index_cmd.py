"""`ragdesk index ...`: import, quantize, list, switch, verify and remove snapshots."""

from __future__ import annotations

import argparse

from ragdesk.cli.common import human_bytes, print_json, print_table
from ragdesk.core.app import AppContext


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("index", help="manage index snapshots")
    isub = p.add_subparsers(dest="index_command", metavar="ACTION", required=True)

    ls = isub.add_parser("list", help="list snapshots")
    ls.add_argument("--json", action="store_true", help="print JSON")
    ls.set_defaults(func=cmd_list)


def cmd_list(args: argparse.Namespace, ctx: AppContext) -> int:
    snaps = ctx.catalog.list_snapshots()
    if args.json:
        print_json([s.to_json() for s in snaps])
        return 0
    if not snaps:
        print("No snapshots yet. Import one with `ragdesk index import` (see --help).")
        return 0
    rows = []
    for s in snaps:
        variants = ", ".join(
            f"{v.variant} ({human_bytes(v.bytes)}"
            + (f", R@20 {v.recall_at_20:.3f}" if v.recall_at_20 is not None else "")
            + ")"
            for v in s.variants
        )
        rows.append(["*" if s.active else "", s.name, s.state, f"{s.passages:,}",
                     f"{s.encoder_id or '-'} ({s.dim or '-'}d)", variants or "-",
                     s.created_at])
    print_table(["", "name", "state", "passages", "encoder", "variants", "created"], rows)
    return 0
