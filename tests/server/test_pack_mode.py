"""`ragdesk serve`, and `ragdesk ask` through it, read in the served pack's own mode (the
reader pack reads together) unless the user chose one, as `ragdesk ask` does on its own."""

from __future__ import annotations

import argparse
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragdesk.core.options import PACK_MODES_KEY, AnswerOptions


def _serve_args(**given: Any) -> argparse.Namespace:
    args = {"pack": None, "question_encoder": None, "generator": None, "snapshot": None}
    return argparse.Namespace(**{**args, **given})


def test_the_server_reads_in_the_served_packs_own_mode(cli: Any, data_dir: Path,
                                                       tiny_models: Any) -> None:
    from ragdesk.cli.serve_cmd import _answer_defaults
    from ragdesk.core.app import AppContext

    code, _, err = cli("models", "import", str(tiny_models.causal_lm), "--name", "chat",
                       "--question-encoder", str(tiny_models.st_encoder), "--mode", "together")
    assert code == 0, err
    ctx = AppContext(data_dir)
    try:
        assert _answer_defaults(ctx, _serve_args(pack="chat")).mode == "together"
        # the pack chosen in the settings, not named on the command line
        ctx.settings.set("model_pack", "chat")
        assert _answer_defaults(ctx, _serve_args()).mode == "together"
        # models named instead of a pack: the settings' mode (here the default)
        named = _serve_args(generator=str(tiny_models.causal_lm))
        assert _answer_defaults(ctx, named).mode == AnswerOptions().mode == "token"
        # the settings' mode (the one the window showed last, for any pack) does not
        # override the pack's own; the mode picked for this pack does
        ctx.settings.set("mode", "sequence")
        assert _answer_defaults(ctx, _serve_args(pack="chat")).mode == "together"
        ctx.settings.set(PACK_MODES_KEY, {"starter": "together", "chat": "token"})
        assert _answer_defaults(ctx, _serve_args(pack="chat")).mode == "token"
        assert _answer_defaults(ctx, named).mode == "sequence"
    finally:
        ctx.close()


def test_ask_reads_in_the_mode_picked_for_its_pack(data_dir: Path, tiny_models: Any) -> None:
    from ragdesk.cli.common import pack_answer_options
    from ragdesk.core.app import AppContext
    from ragdesk.core.models.packs import PackSpec

    reader = PackSpec(name="reader", kind="custom", question_encoder="q", passage_encoder="p",
                      generator="g", generator_kind="causal", default_mode="together")
    ctx = AppContext(data_dir)
    try:
        ctx.settings.update({"mode": "sequence", PACK_MODES_KEY: {"starter": "token"}})
        opts = AnswerOptions(mode="sequence")
        no_flag = argparse.Namespace(mode=None)
        assert pack_answer_options(opts, reader, no_flag, ctx).mode == "together"
        assert pack_answer_options(opts, None, no_flag, ctx).mode == "sequence"
        ctx.settings.set(PACK_MODES_KEY, {"reader": "token"})
        assert pack_answer_options(opts, reader, no_flag, ctx).mode == "token"
        flag = argparse.Namespace(mode="sequence")
        assert pack_answer_options(opts, reader, flag, ctx).mode == "sequence"
    finally:
        ctx.close()


@pytest.fixture()
def recorder() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A server that records each request's JSON body and refuses it (503)."""
    bodies: list[dict[str, Any]] = []

    class Recorder(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            bodies.append(json.loads(self.rfile.read(length)))
            self.send_response(503)  # refused: the caller answers locally
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", bodies
    finally:
        server.shutdown()
        server.server_close()


def test_ask_leaves_an_unchosen_mode_to_the_server(
        recorder: tuple[str, list[dict[str, Any]]]) -> None:
    from ragdesk.cli.ask_remote import ask_remote

    url, bodies = recorder
    opts = AnswerOptions(mode="sequence", n_docs=3)
    assert ask_remote(url, {}, "who wrote hamlet", None, opts, lambda _t: None,
                      send_mode=False) is None
    assert ask_remote(url, {}, "who wrote hamlet", None, opts, lambda _t: None) is None
    unchosen, chosen = (b["ragdesk"] for b in bodies)
    assert "mode" not in unchosen and unchosen["n_docs"] == 3
    assert chosen["mode"] == "sequence"
