"""`ragdesk serve`: a local OpenAI-compatible HTTP API over the snapshots."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, cast

from ragdesk.cli.common import add_json_option, print_json
from ragdesk.core.terminal_text import terminal_safe

if TYPE_CHECKING:
    from pathlib import Path

    from ragdesk.core.app import AppContext
    from ragdesk.core.engine.api import Engine
    from ragdesk.core.models.packs import PackSpec
    from ragdesk.server.config import AnswerDefaults

API_KEY_ENV = "RAGDESK_API_KEY"

KEY_FILE_MAX_BYTES = 4096

EPILOG = """\
endpoints:
  GET  /v1/models             "ragdesk" (the served snapshot) and "ragdesk/NAME" per snapshot
  POST /v1/chat/completions   OpenAI chat completions, streamed (SSE) or not; the extra field
                              "ragdesk" holds the cited passages (file, page, heading for a
                              folder snapshot) and each token's source passage
  POST /v1/retrieve           {"query": ..., "n_docs": 5}: the passages alone
  GET  /health                loading / ready / failed
  GET  /v1/ragdesk/whoami     ?challenge=HEX: proof of the secret in server.json

who may ask: Host must be 127.0.0.1, localhost, [::1], the --host address or an --allow-host
name; an Origin header must be http(s):// one of those; bodies must be application/json.

example:
  ragdesk serve --snapshot my-docs
  python -c "from openai import OpenAI; c = OpenAI(base_url='http://127.0.0.1:8765/v1', \\
      api_key='none'); print(c.chat.completions.create(model='ragdesk', \\
      messages=[{'role': 'user', 'content': 'when is the festival?'}]))"
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from ragdesk.server.config import DEFAULT_HOST, DEFAULT_PORT, ServerConfig

    p = sub.add_parser("serve", help="serve an OpenAI-compatible HTTP API on this machine",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default=DEFAULT_HOST,
                   help=f"address to listen on (default {DEFAULT_HOST}; any other needs "
                   "an API key)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT,
                   help=f"port (default {DEFAULT_PORT})")
    keys = p.add_mutually_exclusive_group()
    keys.add_argument("--api-key-file", metavar="PATH", type=Path,
                      help="require 'Authorization: Bearer KEY', KEY being this file's "
                      f"first line (or set ${API_KEY_ENV})")
    keys.add_argument("--api-key", metavar="KEY",
                      help="the key itself (discouraged: other users see it in `ps`)")
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                   help="a name clients may reach this server by, besides 127.0.0.1, "
                   "localhost, [::1] and --host (repeatable; '*': any, only with a key)")
    p.add_argument("--snapshot", metavar="NAME",
                   help="snapshot to answer from (default: the active one when each "
                   "request starts)")
    p.add_argument("--pack", metavar="P",
                   help="model pack (default: the snapshot's own, else the chosen one)")
    p.add_argument("--question-encoder", metavar="M", help="question encoder (overrides the "
                   "pack)")
    p.add_argument("--generator", metavar="M", help="generator (overrides the pack)")
    p.add_argument("--queue-limit", type=int, default=16, metavar="N",
                   help="requests admitted at once; more get 429 (default 16)")
    p.add_argument("--request-timeout", type=float,
                   default=ServerConfig.request_timeout_s, metavar="S",
                   help="a request's time from arrival to its answer's end; then the "
                   f"answer is cut off (default {ServerConfig.request_timeout_s:g})")
    add_json_option(p)
    p.set_defaults(func=cmd_serve)


def api_key_of(args: argparse.Namespace) -> str | None:
    """The key from --api-key-file, --api-key (with a warning) or the environment; an
    empty variable means no key, an empty file or flag is refused (check_bind)."""
    from ragdesk.core.errors import BadInputError

    if args.api_key_file is not None:
        path = args.api_key_file.expanduser()
        try:
            with open(path, "rb") as fh:
                data = fh.read(KEY_FILE_MAX_BYTES + 1)
        except OSError as exc:
            raise BadInputError(f"cannot be read: {exc.strerror or exc}.", path=path) from exc
        if len(data) > KEY_FILE_MAX_BYTES:
            raise BadInputError("is too long for an API key file.", path=path)
        lines = data.decode("utf-8", errors="replace").splitlines()
        _warn_if_shared(path)
        return lines[0].strip() if lines else ""
    if args.api_key is not None:
        print(f"ragdesk: warning: --api-key is visible to every user of this machine (`ps`); "
              f"use --api-key-file PATH or ${API_KEY_ENV} instead.", file=sys.stderr)
        return str(args.api_key)
    return os.environ.get(API_KEY_ENV) or None


def _warn_if_shared(path: Path) -> None:
    try:
        mode = path.stat().st_mode
    except OSError:
        return
    if os.name == "posix" and mode & 0o077:
        print(f"ragdesk: warning: {terminal_safe(path)} is readable by other users "
              f"(chmod 600 it).", file=sys.stderr)


def cmd_serve(args: argparse.Namespace, ctx: AppContext) -> int:
    from ragdesk.core.cpu import prepare_for_models
    from ragdesk.core.pack_choice import chosen_pack
    from ragdesk.server import ServerConfig, check_bind, discovery
    from ragdesk.server.run import serve

    api_key = api_key_of(args)
    secret = discovery.new_secret()
    config = ServerConfig(host=args.host, port=args.port, api_key=api_key,
                          allowed_hosts=tuple(args.allow_host), instance_secret=secret,
                          queue_limit=args.queue_limit, request_timeout_s=args.request_timeout,
                          answer=_answer_defaults(ctx, args))
    check_bind(config)  # before any model loads
    if args.snapshot is not None:
        ctx.catalog.get_snapshot(args.snapshot)  # a typo fails now, not on the first request
    prepare_for_models()
    data_dir = ctx.data.root

    def loader() -> Engine:
        engine = load_checked_engine(data_dir, args.snapshot, args.pack, args.question_encoder,
                                     args.generator)
        # /health says ready once the first request would be answered as fast as the next
        engine.warm_up(config.answer.options())
        return engine

    custom = args.question_encoder is not None or args.generator is not None
    served_pack = None if custom else args.pack or chosen_pack(ctx.settings)

    def ready(url: str) -> None:
        # `ragdesk ask` on this data directory asks this server instead of loading models,
        # once the server has proved it knows this start's secret
        discovery.publish(data_dir, discovery.ServerInfo(
            url=url, pid=os.getpid(), auth=bool(api_key), snapshot=args.snapshot,
            custom_models=custom, secret=secret, pack=served_pack))
        if args.json:  # for a script that started the server (with --port 0, say)
            print_json({"url": f"{url}/v1", "health": f"{url}/health"})
            sys.stdout.flush()
        print(f"ragdesk: serving {url}/v1 (loading models; /health says when ready). "
              "Ctrl-C stops.", file=sys.stderr, flush=True)

    # uvicorn shuts down on Ctrl-C, then raises it again; here it is the normal way to stop.
    # It raises SIGTERM again too (kill, systemd, docker stop), whose default action ends
    # the process before server.json is withdrawn: that one is made an interrupt as well.
    with contextlib.suppress(KeyboardInterrupt), _sigterm_interrupts():
        try:
            serve(config, loader, on_ready=ready)
        finally:
            discovery.withdraw(data_dir, os.getpid())
    print("ragdesk: server stopped.", file=sys.stderr)
    return 0


def load_checked_engine(data_dir: Path, snapshot: str | None, pack: str | None,
                        question_encoder: str | None, generator: str | None) -> Engine:
    """``ragdesk.load_engine``, and a check that its question encoder fits the snapshot
    (a mismatch would otherwise fail every request)."""
    import ragdesk

    engine = ragdesk.load_engine(snapshot=snapshot, question_encoder=question_encoder,
                                 generator=generator, data_dir=data_dir, pack=pack)
    try:
        index = engine.snapshot_index()
        check = getattr(index, "check_query_encoder", None)
        if check is not None:
            check(engine.question_encoder.info)
    except BaseException:
        engine.close()
        raise
    print(f"ragdesk: engine ready: snapshot {terminal_safe(index.name)!r}, generator "
          f"{terminal_safe(engine.generator.name)}", file=sys.stderr, flush=True)
    return engine


def _answer_defaults(ctx: AppContext, args: argparse.Namespace) -> AnswerDefaults:
    """The answer options a request leaves out: the settings, as for `ragdesk ask`, read in
    the mode chosen for the served pack, else in its own (the reader pack reads together; in
    RAG-Token it reads far worse and its confidence model judges nothing)."""
    from ragdesk.cli.common import chosen_mode
    from ragdesk.core.options import AnswerOptions, Mode, with_pack_mode
    from ragdesk.server.config import AnswerDefaults

    base = AnswerDefaults()
    keys = {"mode": "mode", "decoding": "decoding", "n_docs": "n_docs",
            "num_beams": "num_beams", "max_new_tokens": "max_new_tokens",
            "min_new_tokens": "min_new_tokens", "retriever": "retriever"}
    values: dict[str, object] = {}
    for field, key in keys.items():
        got = ctx.settings.get(key)
        if got is not None and type(got) is type(getattr(base, field)):
            values[field] = got
    defaults = AnswerDefaults(**{**base.__dict__, **values})
    pack = _served_pack(ctx, args)
    if pack is None:
        return defaults
    asked = AnswerOptions(mode=cast("Mode", defaults.mode))
    return replace(defaults, mode=with_pack_mode(asked, pack.default_mode,
                                                 chosen_mode(args, ctx, pack.name)).mode)


def _served_pack(ctx: AppContext, args: argparse.Namespace) -> PackSpec | None:
    """The pack the server will load (None: models named instead, or no pack can be
    resolved now; loading the engine names that problem)."""
    from ragdesk.core.errors import RagdeskError
    from ragdesk.core.models.packs import get_pack
    from ragdesk.core.session import resolve_pack_name

    if args.question_encoder is not None or args.generator is not None:
        return None
    try:
        return get_pack(ctx.catalog, resolve_pack_name(ctx, args.pack, args.snapshot), ctx.data)
    except RagdeskError:
        return None


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt while the server runs (POSIX, main thread)."""
    import signal
    import threading

    if not hasattr(signal, "SIGTERM") or threading.current_thread() is not \
            threading.main_thread():
        yield
        return

    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)
