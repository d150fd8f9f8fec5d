"""The server's work is bounded. A request within each single limit (``max_tokens`` 512,
``n_docs`` 50, ``num_beams`` 16) ran for over 10 minutes with tiny models, 16 such were
admitted; a header sent one byte per 0.25 s was answered after 30 s; thousands of idle
connections were held. Now: the decoding work of a request is capped as a whole, every
request has a wall-time budget after which its answer is cut off through its CancelToken,
a request must arrive within a few seconds, and open connections are capped.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from ragdesk.core.progress import CancelToken
from ragdesk.core.types import Answer, AnswerToken, RetrievedDoc
from tests.documents.conftest import QUESTION
from tests.server.conftest import engine_loader, send, served_data, server  # noqa: F401

JSON = {"Host": "127.0.0.1", "Content-Type": "application/json"}


def _serve(loader: Callable[[], Any], **config: Any) -> Any:
    from ragdesk.server import ServerConfig
    from ragdesk.server.run import serve_in_thread

    return serve_in_thread(ServerConfig(port=0, **config), loader)


def _chat(url: str, stream: bool = False, **options: Any) -> tuple[int, Any, float]:
    """(status, body: JSON, or the stream's events, elapsed seconds) of one question."""
    max_tokens = options.pop("max_tokens", 4)
    body = {"messages": [{"role": "user", "content": QUESTION}], "max_tokens": max_tokens,
            "stream": stream, "ragdesk": {"retriever": "sparse", **options}}
    t0 = time.monotonic()
    status, _, raw = send(url, "POST", "/v1/chat/completions", JSON, json.dumps(body).encode())
    elapsed = time.monotonic() - t0
    if stream and status == 200:
        events = [json.loads(line[5:]) for line in raw.decode().splitlines()
                  if line.startswith("data:") and line != "data: [DONE]"]
        return status, events, elapsed
    return status, json.loads(raw), elapsed


# ---- the work a request may ask for ---------------------------------------------------------

def test_the_reports_request_is_refused_at_once(server: Any) -> None:  # noqa: F811
    status, body, elapsed = _chat(server.url, max_tokens=512, n_docs=50, num_beams=16)
    assert status == 400 and body["error"]["code"] == "work_limit", body
    assert elapsed < 5


@pytest.mark.parametrize("options", [{"n_docs": 8, "num_beams": 9},  # 72 rows
                                     {"n_docs": 4, "num_beams": 16, "max_tokens": 512}])
def test_work_beyond_the_caps_is_refused(server: Any, options: dict[str, Any]) -> None:  # noqa: F811
    status, body, _ = _chat(server.url, **options)
    assert status == 400 and body["error"]["code"] == "work_limit", body


@pytest.fixture(scope="module")
def budget_server(served_data: Path, tiny_models: Any) -> Iterator[Any]:  # noqa: F811
    """The tiny models behind a server whose time budget is 4 s a request."""
    with _serve(engine_loader(served_data, tiny_models), request_timeout_s=4.0) as run:
        assert run.host.state == "ready", run.host.error
        yield run


MAXIMAL = [  # at the caps: 64 rows (n_docs × num_beams), 16,384 row-tokens
    {"mode": "token", "n_docs": 4, "num_beams": 16, "max_tokens": 256},
    {"mode": "sequence", "decoding": "thorough", "n_docs": 4, "num_beams": 16,
     "max_tokens": 256},
    {"mode": "sequence", "decoding": "fast", "n_docs": 8, "num_beams": 8, "max_tokens": 256},
]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("options", MAXIMAL)
def test_a_maximal_request_ends_within_its_time_budget(budget_server: Any, stream: bool,
                                                       options: dict[str, Any]) -> None:
    status, body, elapsed = _chat(budget_server.url, stream, **dict(options))
    print(f"maximal request {options} stream={stream}: {elapsed:.2f} s")
    assert status == 200, body
    last = body[-1] if stream else body
    finish = last["choices"][0]["finish_reason"]
    assert finish in ("stop", "length")
    if finish == "length":  # cut off: says so
        assert last["ragdesk"]["truncated"] == "time_budget"
    assert elapsed < 4.0 + 6.0  # the budget, and one decoding step and retrieval past it


# ---- the time budget, through the answer's CancelToken --------------------------------------

class _Snapshot:
    name = "stand-in"
    size = 3
    has_dense = True


class _Endless:
    """Decodes one token every 50 ms until its CancelToken is set, as the engine does, and
    returns what it has (``cancelled=True``), as the engine does."""

    def __init__(self) -> None:
        self.block: threading.Event | None = None  # set: the first answer waits on it

    def snapshot_index(self, snapshot: Any = None) -> Any:
        return _Snapshot()

    def retrieve(self, question: str, n_docs: int, snapshot: Any = None,
                 retriever: str = "dense") -> list[RetrievedDoc]:
        return [RetrievedDoc(0, "T", "passage", 1.0, 1.0, "stand-in")]

    def ask_from_docs(self, question: str, hits: Any, options: Any, *, on_token: Any = None,
                      cancel: CancelToken | None = None, **_: Any) -> Answer:
        assert cancel is not None
        if self.block is not None:
            self.block.wait(30)
        tokens: list[AnswerToken] = []
        while not cancel.cancelled and len(tokens) < 2000:
            tokens.append(AnswerToken(len(tokens), " tick", [1.0]))
            if on_token is not None:
                on_token(tokens[-1])
            time.sleep(0.05)
        return Answer(question=question, text="".join(t.text for t in tokens).strip(),
                      token_ids=[t.id for t in tokens], tokens=tokens, docs=[], logprob=0.0,
                      mode="token", cancelled=cancel.cancelled)


@pytest.mark.parametrize("stream", [False, True])
def test_the_budget_cuts_an_answer_off_and_says_so(stream: bool) -> None:
    with _serve(_Endless, request_timeout_s=1.5) as run:
        status, body, elapsed = _chat(run.url, stream)
    assert status == 200, body
    last = body[-1] if stream else body
    assert last["choices"][0]["finish_reason"] == "length"
    assert last["ragdesk"]["truncated"] == "time_budget"
    assert last["ragdesk"]["time_budget_s"] == 1.5
    assert 1.4 < elapsed < 4.0  # 2,000 ticks (100 s) unless the budget stops it
    text = last["ragdesk"]["text"] if stream else last["choices"][0]["message"]["content"]
    assert text.startswith("tick tick")


def test_a_request_that_waits_out_its_budget_in_the_queue_gets_503() -> None:
    engine = _Endless()
    engine.block = threading.Event()
    with _serve(lambda: engine, request_timeout_s=1.5) as run:
        first: list[Any] = []
        t = threading.Thread(target=lambda: first.append(_chat(run.url)))
        t.start()
        time.sleep(0.3)  # the first holds the engine (blocked), the second queues
        status, body, elapsed = _chat(run.url)
        engine.block.set()
        t.join(30)
    assert status == 503 and body["error"]["code"] == "time_budget_exceeded", body
    assert 1.4 < elapsed < 4.0
    assert first and first[0][0] == 200  # the first one's answer, cut at its own budget


# ---- connections: slow requests, idle ones, too many ----------------------------------------

class _NoEngine:
    pass


@pytest.fixture()
def default_server() -> Iterator[Any]:
    """A server with the shipped connection limits (no models needed for these)."""
    with _serve(_NoEngine) as run:
        yield run


def _connect(run: Any) -> socket.socket:
    parts = urlsplit(run.url)
    return socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 0),
                                    timeout=30)


def _trickle(sock: socket.socket, data: bytes, every_s: float, deadline_s: float
             ) -> tuple[bytes, float, int]:
    """Send ``data`` one byte per ``every_s``; (what came back, when the server closed,
    bytes sent by then)."""
    t0 = time.monotonic()
    sent = 0
    sock.settimeout(every_s)
    reply = b""
    while time.monotonic() - t0 < deadline_s:
        if sent < len(data):
            try:
                sock.sendall(data[sent:sent + 1])
                sent += 1
            except OSError:
                break
        try:
            got = sock.recv(65536)
        except TimeoutError:
            continue
        except OSError:
            break
        if not got:
            break
        reply += got
    return reply, time.monotonic() - t0, sent


SLOW_REQUEST = b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: " + b"s" * 40 + \
    b"\r\nAccept: */*\r\n\r\n"


def test_a_header_sent_a_byte_at_a_time_is_cut_off(default_server: Any) -> None:
    from ragdesk.server import ServerConfig

    limit = ServerConfig().header_timeout_s
    with _connect(default_server) as sock:
        reply, closed_at, sent = _trickle(sock, SLOW_REQUEST, 0.25, 40)
    print(f"slow header: cut off after {closed_at:.2f} s, {sent} bytes")
    assert sent < len(SLOW_REQUEST)  # the request never arrived whole
    assert reply.startswith(b"HTTP/1.1 408"), reply
    assert limit - 0.5 < closed_at < limit + 2.0


def test_a_body_sent_a_byte_at_a_time_is_cut_off(default_server: Any) -> None:
    from ragdesk.server import ServerConfig

    limit = ServerConfig().header_timeout_s
    body = json.dumps({"query": "q" * 200}).encode()
    head = (b"POST /v1/retrieve HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
            b"\r\nContent-Length: %d\r\n\r\n" % len(body))
    with _connect(default_server) as sock:
        sock.sendall(head)
        reply, closed_at, sent = _trickle(sock, body, 0.25, 40)
    assert sent < len(body) and closed_at < limit + 2.0, (closed_at, sent)
    assert reply.startswith(b"HTTP/1.1 408"), reply


def test_idle_connections_are_closed_and_the_server_still_answers(default_server: Any
                                                                  ) -> None:
    from ragdesk.server import ServerConfig

    limit = ServerConfig().header_timeout_s
    t0 = time.monotonic()
    with ExitStack() as stack:
        idle = [stack.enter_context(_connect(default_server)) for _ in range(40)]
        for sock in idle:
            sock.settimeout(limit + 5)
            assert sock.recv(65536).startswith(b"HTTP/1.1 408")  # then closed
            assert sock.recv(65536) == b""
    assert time.monotonic() - t0 < limit + 3
    assert send(default_server.url, "GET", "/v1/models", {"Host": "127.0.0.1"})[0] == 200


def test_connections_beyond_the_cap_are_refused_at_once() -> None:
    with _serve(_NoEngine, max_connections=8, header_timeout_s=3.0) as run, \
            ExitStack() as stack:
        held = [stack.enter_context(_connect(run)) for _ in range(8)]
        time.sleep(0.3)
        t0 = time.monotonic()
        with _connect(run) as extra:
            reply = extra.recv(65536)
        assert reply.startswith(b"HTTP/1.1 503") and b"too_many_connections" in reply
        assert time.monotonic() - t0 < 1.5
        for sock in held:  # the held ones end at the request deadline, freeing the slots
            sock.settimeout(10)
            while sock.recv(65536):
                pass
        time.sleep(0.2)
        assert send(run.url, "GET", "/v1/models", {"Host": "127.0.0.1"})[0] == 200
