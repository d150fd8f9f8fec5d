"""Entry point of the `ragdesk` command."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ragdesk._version import __version__
from ragdesk.cli.common import terminal_safe
from ragdesk.core.errors import Cancelled, RagdeskError
from ragdesk.core.logging_setup import setup_logging
from ragdesk.core.paths import ENV_VAR

if TYPE_CHECKING:
    from ragdesk.core.app import AppContext  # SQLAlchemy: not needed for --version / --help

log = logging.getLogger("ragdesk.cli")

EXIT_BUG = 70
EXIT_CANCELLED = 130


def build_parser() -> argparse.ArgumentParser:
    from ragdesk.cli import ask_cmd, eval_cmd, index_cmd, models_cmd, train_cmd

    parser = argparse.ArgumentParser(
        prog="ragdesk",
        description="Answer questions from local Wikipedia snapshots with Retrieval-Augmented "
        "Generation. Without a command, starts the desktop app.",
    )
    parser.add_argument("--version", action="version", version=f"ragdesk {__version__}")
    parser.add_argument(
        "--data-dir",
        metavar="DIR",
        help=f"where ragdesk keeps its catalog, snapshots, settings, logs and imported models "
        f"(default: ${ENV_VAR} or the platform's user data folder)",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="log to stderr (-vv for debug detail)")
    parser.add_argument("--self-test", action="store_true",
                        help="check that the installation works and exit (0 when all pass)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    index_cmd.register(sub)
    models_cmd.register(sub)
    ask_cmd.register(sub)
    eval_cmd.register(sub)
    train_cmd.register(sub)
    gui = sub.add_parser("gui", help="start the desktop app (the default)")
    gui.set_defaults(func=_run_gui)
    return parser


def _run_gui(args: argparse.Namespace, ctx: AppContext) -> int:
    from ragdesk.platform_check import require_gui

    # Before Qt starts: a missing display or system library would otherwise abort the
    # process (exit 134) with Qt's message instead of ours.
    require_gui()
    from ragdesk.ui.app import run_app

    return run_app(ctx)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from ragdesk.core.app import AppContext

    ctx = AppContext(args.data_dir)
    try:
        setup_logging(None, args.verbose)
        if args.self_test:
            from ragdesk.selftest import run_self_test

            return run_self_test()
        ctx.data.ensure()
        setup_logging(ctx.data.logs_dir, args.verbose)
        log.debug("ragdesk %s, data dir %s, argv %s", __version__, ctx.data.root, argv)
        func = getattr(args, "func", None) or _run_gui
        return int(func(args, ctx))
    except Cancelled:
        print("ragdesk: cancelled.", file=sys.stderr)
        return EXIT_CANCELLED
    except KeyboardInterrupt:
        print("\nragdesk: interrupted.", file=sys.stderr)
        return EXIT_CANCELLED
    except RagdeskError as exc:
        log.info("user-facing error: %s", exc.message, exc_info=True)
        # Messages quote names, paths and file contents: no terminal escapes through them.
        print(f"ragdesk: error: {terminal_safe(exc.message, newlines=True)}", file=sys.stderr)
        if exc.hint:
            print(f"  {terminal_safe(exc.hint, newlines=True)}", file=sys.stderr)
        return exc.exit_code
    except Exception as exc:
        log.exception("internal error")
        print(
            f"ragdesk: internal error: {type(exc).__name__}: {exc}\n"
            f"  This is a bug. Details are in {ctx.data.logs_dir / 'ragdesk.log'}; "
            "please report it with that file.",
            file=sys.stderr,
        )
        return EXIT_BUG
    finally:
        ctx.close()
