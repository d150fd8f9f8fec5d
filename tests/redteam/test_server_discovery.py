"""``server.json`` outlives a killed server: after ``kill -9`` of ``serve --api-key K``, ``ask``
with ``RAGDESK_API_KEY=K`` sent the key and the question to whatever listened on that port
and printed its forged answer. Now the file holds a per-start secret (readable by its owner
only), and ``ask`` sends nothing but a random challenge until the process on the port proves
it knows the secret (and the recorded pid is alive). The key is also taken from a file or
the environment instead of ``ps``-visible argv, and a key no client can send is refused.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import served_data  # noqa: F401  (fixture)
from tests.server.test_serve_cli import read_announcement

KEY = "k3y-for-the-test"
FORGED = "FORGED ANSWER"
PACK = "starter"  # the pack these servers say they serve, the one `ask` wants


class _Impostor(BaseHTTPRequestHandler):
    """Whatever listens on a dead server's port: claims to be ready, to be anyone, and
    answers every question; records what it was sent."""

    seen: list[tuple[str, str, dict[str, str], bytes]]

    def _record(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.seen.append((self.command, self.path, dict(self.headers.items()), body))

    def _reply(self, obj: Any, ctype: str = "application/json") -> None:
        data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._record()
        if self.path.startswith("/v1/ragdesk/whoami"):
            self._reply({"proof": "0" * 64, "pid": os.getpid()})
        else:
            self._reply({"status": "ready"})

    def do_POST(self) -> None:
        self._record()
        event = {"choices": [{"index": 0, "delta": {"content": FORGED}}],
                 "ragdesk": {"token": {"id": 1, "text": FORGED, "posterior": [1.0]}}}
        self._reply(f"data: {json.dumps(event)}\n\ndata: [DONE]\n\n".encode(),
                    "text/event-stream")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture()
def impostor() -> Iterator[tuple[int, list[tuple[str, str, dict[str, str], bytes]]]]:
    seen: list[tuple[str, str, dict[str, str], bytes]] = []
    handler = type("Handler", (_Impostor,), {"seen": seen})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield httpd.server_address[1], seen
    finally:
        httpd.shutdown()
        httpd.server_close()


def _publish(data: Path, url: str, pid: int, *, auth: bool = True) -> None:
    from ragdesk.server import discovery

    discovery.publish(data, discovery.ServerInfo(url=url, pid=pid, auth=auth, snapshot=None,
                                                 custom_models=False,
                                                 secret=discovery.new_secret(), pack=PACK))


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _assert_nothing_sent(seen: list[tuple[str, str, dict[str, str], bytes]]) -> None:
    for method, path, headers, body in seen:
        assert not any(k.lower() == "authorization" for k in headers), (method, path)
        assert method == "GET" and path.startswith("/v1/ragdesk/whoami?challenge="), path
        assert not body


def test_a_stale_file_gets_neither_the_key_nor_the_question(
        tmp_path: Path, impostor: Any, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from ragdesk.cli.ask_remote import find_server
    from ragdesk.cli.main import main

    port, seen = impostor
    data = tmp_path / "data"
    data.mkdir()
    # the recorded pid is alive (pids are reused; here: this very process)
    _publish(data, f"http://127.0.0.1:{port}", os.getpid())
    monkeypatch.setenv("RAGDESK_API_KEY", KEY)
    assert find_server(data, PACK) is None
    main(["--data-dir", str(data), "ask", "what is the secret?", "--max-new-tokens", "2"])
    out = capsys.readouterr()
    assert FORGED not in out.out and "answered by the running server" not in out.err
    assert seen, "the impostor was never even challenged"
    _assert_nothing_sent(seen)


def test_a_dead_pid_is_not_even_contacted(tmp_path: Path, impostor: Any,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from ragdesk.cli.ask_remote import find_server

    port, seen = impostor
    _publish(tmp_path, f"http://127.0.0.1:{port}", _dead_pid())
    monkeypatch.setenv("RAGDESK_API_KEY", KEY)
    assert find_server(tmp_path, PACK) is None
    assert seen == []


def test_a_file_without_a_secret_is_not_trusted(tmp_path: Path, impostor: Any) -> None:
    from ragdesk.cli.ask_remote import find_server
    from ragdesk.server import discovery

    port, seen = impostor
    discovery.publish(tmp_path, discovery.ServerInfo(f"http://127.0.0.1:{port}", os.getpid(),
                                                     False, None, False, pack=PACK))
    assert find_server(tmp_path, PACK) is None and seen == []


def test_the_proof_needs_this_starts_secret() -> None:
    from ragdesk.cli.ask_remote import proves_secret
    from ragdesk.server import ServerConfig, discovery
    from ragdesk.server.run import serve_in_thread
    from tests.server.conftest import get

    secret = discovery.new_secret()
    loader: Callable[[], Any] = object  # no engine: nothing here reaches one
    with serve_in_thread(ServerConfig(port=0, api_key=KEY, instance_secret=secret),
                         loader) as run:
        assert proves_secret(run.url, secret)  # without a key: the proof comes first
        assert not proves_secret(run.url, discovery.new_secret())
        assert get(run.url + "/health")[0] == 401  # everything else still needs the key
        status, body = get(run.url + "/v1/ragdesk/whoami?challenge=short")
        assert status == 400 and body["error"]["param"] == "challenge"


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
def test_server_json_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        _publish(tmp_path, "http://127.0.0.1:1", 1)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "server.json").stat().st_mode) == 0o600


def _wait_published(data: Path, proc: subprocess.Popen[str], timeout: float = 60) -> Any:
    from ragdesk.server import discovery

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1]
        info = discovery.read(data)
        if info is not None and info.pid == proc.pid:
            return info
        time.sleep(0.1)
    raise AssertionError("the server never published itself")


def test_a_killed_serve_leaves_a_file_that_ask_does_not_trust(
        served_data: Path, tmp_path: Path,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A real `serve` (the pack's own models, as `ask` requires; whether they load does
    not matter here), killed; an impostor then takes its port."""
    from ragdesk.cli.ask_remote import find_server, proves_secret
    from ragdesk.server import discovery
    from tests.server.conftest import get

    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n", encoding="utf-8")
    key_file.chmod(0o600)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("RAGDESK_API_KEY", None)  # the server takes its key from the file
    proc = subprocess.Popen(
        [sys.executable, "-m", "ragdesk", "--data-dir", str(served_data), "serve", "--port",
         "0", "--json", "--api-key-file", str(key_file)], env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        read_announcement(proc)
        info = _wait_published(served_data, proc)
        assert info.secret and info.auth and not info.custom_models and info.pack == PACK
        if os.name == "posix":
            assert stat.S_IMODE(discovery.path_in(served_data).stat().st_mode) == 0o600
        assert proves_secret(info.url, info.secret)  # the live server proves itself
        assert get(info.url + "/health", {"Authorization": f"Bearer {KEY}"})[0] == 200
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    assert discovery.read(served_data) == info  # left behind, as by any kill -9
    seen: list[tuple[str, str, dict[str, str], bytes]] = []
    handler = type("Handler", (_Impostor,), {"seen": seen})
    httpd = _bind_when_free(int(info.url.rsplit(":", 1)[1]), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    monkeypatch.setenv("RAGDESK_API_KEY", KEY)
    assert find_server(served_data, PACK) is None and seen == []  # its pid is dead: not contacted
    # the pid may be reused by then: the impostor's (this process's) stands in for that
    discovery.publish(served_data, dataclasses.replace(info, pid=os.getpid()))
    try:
        assert find_server(served_data, PACK) is None
    finally:
        httpd.shutdown()
        httpd.server_close()
        discovery.path_in(served_data).unlink()
    assert seen, "the impostor was never even challenged"
    _assert_nothing_sent(seen)


def _bind_when_free(port: int, handler: Any) -> ThreadingHTTPServer:
    deadline = time.monotonic() + 30
    while True:
        try:
            return ThreadingHTTPServer(("127.0.0.1", port), handler)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


# ---- where the key comes from ---------------------------------------------------------------

@pytest.mark.parametrize("source", ["--api-key", "env", "file"])
@pytest.mark.parametrize("key", ["clé", "two words", "tab\tkey", "   "])
def test_a_key_no_client_can_send_is_refused_at_start(
        cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str,
        key: str) -> None:
    argv = ["serve", "--port", "0"]
    monkeypatch.delenv("RAGDESK_API_KEY", raising=False)
    if source == "--api-key":
        argv += ["--api-key", key]
    elif source == "env":
        monkeypatch.setenv("RAGDESK_API_KEY", key)
    else:
        (tmp_path / "key").write_text(key + "\n", encoding="utf-8")
        argv += ["--api-key-file", str(tmp_path / "key")]
    code, _, err = cli(*argv)
    assert code == 2, err
    assert "printable ASCII" in err or "empty" in err


def test_the_key_file_and_the_argv_warning(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from ragdesk.cli.serve_cmd import api_key_of

    path = tmp_path / "key"
    path.write_text(f"{KEY}\r\nignored second line\n", encoding="utf-8")
    path.chmod(0o644)
    assert api_key_of(argparse.Namespace(api_key_file=path, api_key=None)) == KEY
    if os.name == "posix":
        assert "readable by other users" in capsys.readouterr().err
    path.chmod(0o600)
    api_key_of(argparse.Namespace(api_key_file=path, api_key=None))
    assert "warning" not in capsys.readouterr().err
    assert api_key_of(argparse.Namespace(api_key_file=None, api_key=KEY)) == KEY
    assert "visible to every user" in capsys.readouterr().err


def test_a_missing_key_file_is_a_clear_error(cli: Any, tmp_path: Path) -> None:
    code, _, err = cli("serve", "--port", "0", "--api-key-file", str(tmp_path / "nope"))
    assert code == 2 and "nope" in err and "cannot be read" in err

