"""Where the server listens, who may ask, and what happens when the engine is busy or
broken: without models (a stand-in engine), so the timing is under the test's control."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from tests.server.conftest import get, post


class _Snapshot:
    """What the server reads of a snapshot before retrieving (no folder: no citations)."""

    name = "stand-in"
    size = 10
    has_dense = True


class _BlockingEngine:
    """Retrieves nothing until released: holds the engine thread like a long answer."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()
        self.calls = 0

    def snapshot_index(self, snapshot: Any = None) -> Any:
        return _Snapshot()

    def retrieve(self, question: str, n_docs: int, snapshot: Any = None,
                 retriever: str = "dense") -> list[Any]:
        self.calls += 1
        self.entered.set()
        assert self.release.wait(30)
        return []


def _serve(loader: Callable[[], Any], **config: Any) -> Any:
    from ragdesk.server import ServerConfig
    from ragdesk.server.run import serve_in_thread

    return serve_in_thread(ServerConfig(port=0, **config), loader)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "example.org"])
def test_refuses_a_non_loopback_address_without_a_key(host: str) -> None:
    from ragdesk.core.errors import BadInputError
    from ragdesk.server import ServerConfig, check_bind

    with pytest.raises(BadInputError, match="Refusing to listen"):
        check_bind(ServerConfig(host=host))
    check_bind(ServerConfig(host=host, api_key="k"))  # with a key it may


def test_loopback_addresses_need_no_key() -> None:
    from ragdesk.server import ServerConfig, check_bind

    for host in ("127.0.0.1", "127.0.0.2", "::1", "localhost"):
        check_bind(ServerConfig(host=host))


def test_cli_refuses_before_loading_anything(cli: Callable[..., tuple[int, str, str]],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAGDESK_API_KEY", raising=False)
    code, _, err = cli("serve", "--host", "0.0.0.0", "--port", "0")
    assert code == 2 and "Refusing to listen on 0.0.0.0" in err and "--api-key" in err


def test_api_key_is_required_when_set() -> None:
    from openai import AuthenticationError, OpenAI

    with _serve(_BlockingEngine, api_key="s3cret") as run:
        status, body = get(run.url + "/v1/models")
        assert status == 401 and body["error"]["code"] == "invalid_api_key"
        status, _ = get(run.url + "/v1/models", {"Authorization": "Bearer wrong"})
        assert status == 401
        status, _ = post(run.url + "/v1/retrieve", {"query": "q"})
        assert status == 401
        with pytest.raises(AuthenticationError):
            OpenAI(base_url=run.url + "/v1", api_key="wrong", max_retries=0).models.list()
        ok = OpenAI(base_url=run.url + "/v1", api_key="s3cret", max_retries=0).models.list()
        assert [m.id for m in ok] == ["ragdesk"]


def test_full_queue_answers_429() -> None:
    engine = _BlockingEngine()
    with _serve(lambda: engine, queue_limit=1) as run:
        first: list[tuple[int, Any]] = []
        t = threading.Thread(target=lambda: first.append(
            post(run.url + "/v1/retrieve", {"query": "first"})))
        t.start()
        assert engine.entered.wait(30)
        status, body = post(run.url + "/v1/chat/completions",
                            {"messages": [{"role": "user", "content": "second"}]})
        assert status == 429 and body["error"]["code"] == "queue_full"
        status, body = post(run.url + "/v1/chat/completions",
                            {"stream": True, "messages": [{"role": "user", "content": "3"}]})
        assert status == 429  # a stream is refused with a status, not inside a 200
        engine.release.set()
        t.join(30)
        assert first == [(200, {"object": "list", "data": []})]
        assert run.host.in_flight == 0


def test_engine_that_failed_to_load_answers_503() -> None:
    from ragdesk.core.errors import MissingModelError

    def broken() -> Any:
        raise MissingModelError("The generator folder /nowhere does not exist.")

    with _serve(broken) as run:
        status, body = post(run.url + "/v1/chat/completions",
                            {"messages": [{"role": "user", "content": "q"}]})
        assert status == 503 and "/nowhere does not exist" in body["error"]["message"]
        assert get(run.url + "/health")[1]["status"] == "failed"
        assert get(run.url + "/v1/models")[0] == 200  # the server itself still answers


def test_engine_still_loading_answers_503() -> None:
    from ragdesk.server import ServerConfig
    from ragdesk.server.run import serve_in_thread

    gate = threading.Event()

    def slow() -> Any:
        gate.wait(30)
        return _BlockingEngine()

    with serve_in_thread(ServerConfig(port=0), slow, wait_loaded=False) as run:
        status, body = post(run.url + "/v1/retrieve", {"query": "q"})
        assert status == 503 and "still loading" in body["error"]["message"]
        assert get(run.url + "/health")[1]["status"] == "loading"
        gate.set()


def test_a_request_whose_client_left_is_dropped_from_the_queue() -> None:
    import socket
    import time

    engine = _BlockingEngine()
    with _serve(lambda: engine) as run:
        first = threading.Thread(target=post, args=(run.url + "/v1/retrieve", {"query": "a"}))
        first.start()
        assert engine.entered.wait(30)
        # A second client sends a question, then gives up while it waits in the queue.
        body = b'{"messages": [{"role": "user", "content": "who waits?"}]}'
        host, port = run.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port))) as sock:
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                         b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                         % len(body) + body)
            deadline = time.monotonic() + 10
            while run.host.in_flight < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert run.host.in_flight == 2
        time.sleep(1.0)  # the server polls for a gone client every 0.25 s
        engine.release.set()
        first.join(30)
        deadline = time.monotonic() + 10
        while run.host.in_flight and time.monotonic() < deadline:
            time.sleep(0.05)
        assert run.host.in_flight == 0
        assert engine.calls == 1  # the abandoned question never reached the engine
