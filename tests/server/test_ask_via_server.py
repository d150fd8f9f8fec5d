"""`ragdesk ask` through a running `ragdesk serve` on the same data directory: the same answer
as asking the server directly, no model loaded by `ask`, and a fall-back to loading the
models whenever the server cannot stand in (none, stale, other models or another pack than
the one asked for, opted out)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.documents.conftest import QUESTION
from tests.server.conftest import SECRET, post

ASK = ["--retriever", "sparse", "--docs", "2", "--max-new-tokens", "6"]


class LoadedLocally(Exception):
    """Raised instead of loading a model: `ask` did not use the server."""


@pytest.fixture()
def no_local_models(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Loading a model records it and fails (the CLI reports the failure and exits 1)."""
    from ragdesk.core.models import loading

    loaded: list[str] = []

    def refuse(ref: Any, *a: Any, **kw: Any) -> Any:
        loaded.append(str(ref))
        raise LoadedLocally

    monkeypatch.setattr(loading, "load_question_encoder", refuse)
    monkeypatch.setattr(loading, "load_generator", refuse)
    return loaded


def _publish(data: Path, url: str, *, custom: bool = False, pack: str | None = "starter"
             ) -> None:
    """server.json as the module's server (this process, its secret) would write it, serving
    ``pack`` (the data directory chooses none: the starter)."""
    import os

    from ragdesk.server import discovery

    discovery.publish(data, discovery.ServerInfo(url=url, pid=os.getpid(), auth=False,
                                                 snapshot=None, custom_models=custom,
                                                 secret=SECRET, pack=None if custom else pack))


def _ask(data: Path, *extra: str) -> int:
    from ragdesk.cli.main import main

    return main(["--data-dir", str(data), "ask", QUESTION, *ASK, *extra])


@pytest.mark.parametrize("named", [False, True])
def test_ask_uses_the_running_server(server: Any, served_data: Path,
                                     no_local_models: list[str],
                                     capsys: pytest.CaptureFixture[str], named: bool) -> None:
    """Asked for the pack the server serves: the chosen one, or named with --pack."""
    _publish(served_data, server.url)
    try:
        assert _ask(served_data, "--json", *(["--pack", "starter"] if named else [])) == 0
    finally:
        (served_data / "server.json").unlink()
    out = capsys.readouterr()
    got = json.loads(out.out)
    status, direct = post(server.url + "/v1/chat/completions", {
        "model": "ragdesk", "max_tokens": 6, "messages": [{"role": "user", "content": QUESTION}],
        "ragdesk": {"retriever": "sparse", "n_docs": 2}})
    assert status == 200
    assert got["server"] == server.url and "answered by the running server" in out.err
    assert got["text"] == direct["choices"][0]["message"]["content"]
    assert [t["text"] for t in got["tokens"]] == [t["text"] for t in direct["ragdesk"]["tokens"]]
    assert [d["title"] for d in got["docs"]] == [c["title"] for c in direct["ragdesk"]["citations"]]
    assert got["docs"][0]["snapshot"] == "docs"
    assert no_local_models == []


def test_ask_streams_the_servers_tokens_and_prints_its_sources(
        server: Any, served_data: Path, no_local_models: list[str],
        capsys: pytest.CaptureFixture[str]) -> None:
    _publish(served_data, server.url)
    try:
        assert _ask(served_data) == 0
    finally:
        (served_data / "server.json").unlink()
    out = capsys.readouterr().out
    assert "Sources:" in out and "Wildlife Report 2026" in out
    assert no_local_models == []


@pytest.mark.parametrize("case", ["no file", "stale", "custom models", "opted out",
                                  "another pack", "a file naming no pack"])
def test_ask_loads_its_own_models_when_the_server_cannot_stand_in(
        server: Any, served_data: Path, no_local_models: list[str], case: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from ragdesk.core.models import packs

    # the test snapshot's tiny encoder fits no built-in pack: past that check, loading is
    # what shows which way `ask` went
    monkeypatch.setattr(packs, "check_pack_matches_snapshot", lambda *a: None)
    if case == "stale":
        _publish(served_data, "http://127.0.0.1:9")  # nothing listens on the discard port
    elif case == "custom models":
        _publish(served_data, server.url, custom=True)
    elif case == "opted out":
        _publish(served_data, server.url)
        monkeypatch.setenv("RAGDESK_NO_SERVER", "1")
    elif case == "another pack":  # the server loaded the reader; `ask` wants the starter
        _publish(served_data, server.url, pack="reader-1.5b")
    elif case == "a file naming no pack":  # an earlier version's server
        _publish(served_data, server.url, pack=None)
    try:
        assert _ask(served_data) != 0
        assert no_local_models, "ask did not try to load its own models"
    finally:
        (served_data / "server.json").unlink(missing_ok=True)


def test_serve_publishes_itself_and_withdraws(tmp_path: Path) -> None:
    from ragdesk.server import discovery

    info = discovery.ServerInfo("http://127.0.0.1:8765", 4242, False, None, False)
    discovery.publish(tmp_path, info)
    assert discovery.read(tmp_path) == info
    discovery.withdraw(tmp_path, pid=999)  # another server's file stays
    assert discovery.read(tmp_path) == info
    discovery.withdraw(tmp_path, pid=4242)
    assert discovery.read(tmp_path) is None
    (tmp_path / discovery.FILE_NAME).write_text("{not json", encoding="utf-8")
    assert discovery.read(tmp_path) is None
