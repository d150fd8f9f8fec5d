"""Entry point of the `ragdesk` command."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

from ragdesk._version import __version__
from ragdesk.cli.common import print_json
from ragdesk.core.errors import BadInputError, Cancelled, RagdeskError
from ragdesk.core.logging_setup import setup_logging
from ragdesk.core.paths import ENV_VAR
from ragdesk.core.terminal_text import terminal_safe

if TYPE_CHECKING:
    from ragdesk.core.app import AppContext  # SQLAlchemy: not needed for --version / --help

log = logging.getLogger("ragdesk.cli")

EXIT_USAGE = 2
EXIT_BUG = 70
EXIT_CANCELLED = 130


class UsageError(Exception):
    """A command line argparse rejects; reported by :func:`main` (as JSON under --json)."""

    def __init__(self, message: str, usage: str) -> None:
        super().__init__(message)
        self.message, self.usage = message, usage


class _Parser(argparse.ArgumentParser):
    # argparse prints its error and exits from deep inside parse_args; raising instead lets
    # main() report it like any other error (as JSON on stdout under --json). Subcommand
    # parsers are made by add_parser with the parent's class, so they do the same.
    def error(self, message: str) -> NoReturn:
        raise UsageError(message, self.format_usage().strip())


def build_parser() -> argparse.ArgumentParser:
    from ragdesk.cli import (
        ask_cmd,
        encode_cmd,
        eval_cmd,
        index_cmd,
        models_cmd,
        serve_cmd,
        train_cmd,
        tune_cmd,
    )

    parser: argparse.ArgumentParser = _Parser(
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
    tune_cmd.register(sub)
    serve_cmd.register(sub)
    encode_cmd.register(sub)
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


def _report(message: str, hint: str, code: int, as_json: bool, label: str = "error") -> int:
    """Print an error for people (stderr) or, under --json, as one JSON object on stdout:
    ``{"error": message, "hint": hint, "exit": code}``; returns ``code``."""
    if as_json:
        text = message if label == "error" else f"{label}: {message}"
        print_json({"error": text, "hint": hint or None, "exit": code})
        return code
    # Messages quote names, paths and file contents: no terminal escapes through them.
    print(f"ragdesk: {label}: {terminal_safe(message, newlines=True)}", file=sys.stderr)
    if hint:
        print(f"  {terminal_safe(hint, newlines=True)}", file=sys.stderr)
    return code


def _warn(text: str) -> None:
    # On stderr in every mode (stdout stays one JSON document under --json), as soon as the
    # settings or catalog are opened: silently falling back to default settings once led
    # `ask` to set up the starter pack (1.3 GB) and fail with an encoder mismatch.
    print(f"ragdesk: warning: {terminal_safe(text, newlines=True)}", file=sys.stderr)


def _internal_error(exc: Exception, ctx: AppContext | None, as_json: bool) -> int:
    if isinstance(exc, BrokenPipeError) and _stdout_closed():
        raise exc  # not a bug: the reader went away; main() ends quietly
    log.exception("internal error")
    logs = ctx.data.logs_dir / "ragdesk.log" if ctx is not None else "the log file"
    return _report(f"{type(exc).__name__}: {exc}",
                   f"This is a bug. Details are in {logs}; please report it with that "
                   "file.", EXIT_BUG, as_json, "internal error")


def _stdout_closed() -> bool:
    """Whether stdout is a pipe whose reader has gone (``| head``): a BrokenPipeError from
    anything else (a socket) is a real error."""
    try:
        import select

        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(ev & select.POLLERR for _, ev in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll (Windows), no real stdout
        return True


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; a reader that stops reading (``| head -1``, ``| true``) ends it
    quietly with exit 0, as ``ls`` and ``git`` do."""
    try:
        code = _main(argv)
        sys.stdout.flush()  # here, not at exit, where a closed pipe prints a traceback
        return code
    except BrokenPipeError:
        if not _stdout_closed():
            raise
        try:  # what is still buffered must not fail again when Python exits
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 0


def run() -> NoReturn:
    """The console entry point: :func:`main`, then the exit.

    Once torch is loaded, the interpreter's own teardown (thousands of modules, the models'
    tensors) took about 2 s at the end of a one-shot `ragdesk ask`, after its answer was
    printed. By then the command has written and closed what it writes, so the process ends
    at once (logs and standard streams flushed) unless another thread is still working,
    which a normal exit waits for. The one such thread an answer leaves on purpose, which
    stores the generator's weight copies for the next start, is waited for here."""
    code = main()
    copies = sys.modules.get("ragdesk.core.models.weight_copies")
    if copies is not None:
        copies.wait_for_writes()
    others = [t for t in threading.enumerate()
              if t is not threading.current_thread() and not t.daemon]
    if "torch" in sys.modules and not others:
        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(code)
    raise SystemExit(code)


def _main(argv: Sequence[str] | None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args = parser.parse_args(args_list)
    except UsageError as exc:
        # Not every command has --json; a usage error under --json is JSON all the same.
        if "--json" in args_list:
            return _report(exc.message, exc.usage, EXIT_USAGE, True)
        print(exc.usage, file=sys.stderr)
        print(f"{parser.prog}: error: {exc.message}", file=sys.stderr)
        return EXIT_USAGE
    as_json = bool(getattr(args, "json", False))
    from ragdesk.core.app import AppContext

    ctx: AppContext | None = None
    try:
        if args.data_dir is not None and not args.data_dir.strip():
            # An empty value (an unset shell variable) would silently mean the default folder.
            raise BadInputError("--data-dir is empty.",
                                hint="Give a folder (--data-dir DIR), or leave the option out to "
                                f"use ${ENV_VAR} or the platform's user data folder.")
        ctx = AppContext(args.data_dir, on_notice=_warn)
        setup_logging(None, args.verbose)
        if args.self_test:
            from ragdesk.selftest import run_self_test

            # Before the settings are read: the self-test works in a folder of its own and
            # leaves the user's data directory untouched (not even created).
            return run_self_test()
        from ragdesk.core.preferences import apply_environment

        apply_environment(ctx.settings)  # device, HF cache, threads: before torch is imported
        ctx.data.ensure()
        setup_logging(ctx.data.logs_dir, args.verbose)
        log.debug("ragdesk %s, data dir %s, argv %s", __version__, ctx.data.root, argv)
        func = getattr(args, "func", None) or _run_gui
        from ragdesk.core.hf_progress import hf_progress_bars

        with hf_progress_bars(shown=bool(args.verbose)):
            return int(func(args, ctx))
    except Cancelled as exc:
        hint = exc.hint_for("cli")  # how to go on, where the work can be resumed
        if as_json:
            return _report("Cancelled.", hint, EXIT_CANCELLED, True)
        print("ragdesk: cancelled." + (f" {hint}" if hint else ""), file=sys.stderr)
        return EXIT_CANCELLED
    except KeyboardInterrupt:
        if as_json:
            return _report("Interrupted.", "", EXIT_CANCELLED, True)
        print("\nragdesk: interrupted.", file=sys.stderr)
        return EXIT_CANCELLED
    except RagdeskError as exc:
        log.info("user-facing error: %s", exc.message, exc_info=True)
        return _report(exc.message, exc.hint_for("cli"), exc.exit_code, as_json)
    except Exception as exc:
        return _internal_error(exc, ctx, as_json)
    finally:
        if ctx is not None:
            ctx.close()
