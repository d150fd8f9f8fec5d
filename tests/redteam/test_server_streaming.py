"""A streamed answer's text is the whole answer's: the tokens' own texts carry the
tokenizer's word-leading space (" July"), which the streamed deltas began with while the
whole answer's content (stripped) did not, and ``ask`` through the server printed it."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ragdesk.core.types import Answer, AnswerToken, RetrievedDoc
from tests.server.conftest import send

PIECES = [" July", " 4", ",", " 2026", " "]  # as a BPE tokenizer decodes them
WHOLE = "July 4, 2026"


def test_the_deltas_join_to_the_whole_text() -> None:
    from ragdesk.core.streamed_text import StreamedText

    text = StreamedText()
    deltas = [text.piece(p) for p in PIECES]
    assert deltas == ["July", " 4", ",", " 2026", ""]
    assert "".join(deltas) == WHOLE
    lead = StreamedText()
    assert [lead.piece(p) for p in (" ", "\n", " A", "  ", "b ")] == ["", "", "A", "", "  b"]


class _Snapshot:
    name = "stand-in"
    size = 1
    has_dense = True


class _Dated:
    """An engine whose answer is made of PIECES, streamed as the engine streams tokens."""

    def snapshot_index(self, snapshot: Any = None) -> Any:
        return _Snapshot()

    def retrieve(self, question: str, n_docs: int, snapshot: Any = None,
                 retriever: str = "dense") -> list[RetrievedDoc]:
        return [RetrievedDoc(0, "Calendar", "The fair is on July 4, 2026.", 1.0, 1.0,
                             "stand-in")]

    def ask_from_docs(self, question: str, hits: Any, options: Any, *, on_token: Any = None,
                      **_: Any) -> Answer:
        tokens = [AnswerToken(i, p, [1.0]) for i, p in enumerate(PIECES)]
        for tok in tokens:
            if on_token is not None:
                on_token(tok)
        return Answer(question=question, text="".join(PIECES).strip(),
                      token_ids=[t.id for t in tokens], tokens=tokens,
                      docs=[RetrievedDoc(0, "Calendar", "The fair is on July 4, 2026.", 1.0,
                                         1.0, "stand-in")],
                      logprob=-1.0, mode="token", snapshot="stand-in")


@pytest.fixture()
def dated_server() -> Any:
    from ragdesk.server import ServerConfig, discovery
    from ragdesk.server.run import serve_in_thread

    secret = discovery.new_secret()
    loader: Callable[[], Any] = _Dated  # an engine stand-in (see _Dated)
    with serve_in_thread(ServerConfig(port=0, instance_secret=secret), loader) as run:
        served: Any = run  # a Running, with the secret the tests prove alongside
        served.secret = secret
        yield served


def _ask_body(stream: bool) -> bytes:
    return json.dumps({"messages": [{"role": "user", "content": "when is the fair?"}],
                       "stream": stream}).encode()


def test_streamed_content_equals_the_whole_content(dated_server: Any) -> None:
    headers = {"Host": "127.0.0.1", "Content-Type": "application/json"}
    _, _, whole = send(dated_server.url, "POST", "/v1/chat/completions", headers,
                       _ask_body(False))
    content = json.loads(whole)["choices"][0]["message"]["content"]
    _, _, raw = send(dated_server.url, "POST", "/v1/chat/completions", headers,
                     _ask_body(True))
    events = [json.loads(line[5:]) for line in raw.decode().splitlines()
              if line.startswith("data:") and line != "data: [DONE]"]
    deltas = [e["choices"][0]["delta"].get("content", "") for e in events]
    assert content == WHOLE
    assert "".join(deltas) == content and not deltas[1].startswith(" ")
    # each token's own text (and its source) is still there, unchanged
    assert [e["ragdesk"]["token"]["text"] for e in events[1:-1]] == PIECES


def test_ask_through_the_server_prints_no_leading_space(
        dated_server: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ragdesk.cli.main import main
    from ragdesk.server import discovery

    data = tmp_path / "data"
    data.mkdir()
    # serving the pack `ask` wants: none is chosen in this data directory, so the starter
    discovery.publish(data, discovery.ServerInfo(dated_server.url, os.getpid(), False, None,
                                                 False, dated_server.secret, pack="starter"))
    assert main(["--data-dir", str(data), "ask", "when is the fair?"]) == 0
    out = capsys.readouterr()
    assert "answered by the running server" in out.err
    assert out.out.startswith(WHOLE + "\n"), out.out[:80]
