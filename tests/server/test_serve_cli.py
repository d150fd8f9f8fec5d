"""`ragdesk serve` as a user starts it: its own process, ready on /health, one question
through the openai client, Ctrl-C ends it cleanly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from tests.documents.conftest import QUESTION


def _wait_ready(url: str, proc: subprocess.Popen[str], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1]
        try:
            req = urllib.request.Request(url + "/health",
                                         headers={"Authorization": "Bearer from-env"})
            with urllib.request.urlopen(req, timeout=5) as resp:
                if json.loads(resp.read())["status"] == "ready":
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError("ragdesk serve did not get ready")


def read_announcement(proc: subprocess.Popen[str]) -> Any:
    """The JSON document `serve --json` prints once it listens (one line to a pipe; lines
    are read until they parse, should it ever be indented)."""
    assert proc.stdout is not None
    text = ""
    for line in iter(proc.stdout.readline, ""):
        text += line
        try:
            return json.loads(text)
        except ValueError:
            continue
    raise AssertionError(f"serve printed no announcement: {text!r}")


def _serve(data: Path, tiny_models: Any, **env: str) -> subprocess.Popen[str]:
    """`ragdesk serve --port 0 --json` on ``data`` with the tiny models, one thread."""
    return subprocess.Popen(
        [sys.executable, "-m", "ragdesk", "--data-dir", str(data), "serve", "--port", "0",
         "--json", "--question-encoder", str(tiny_models.question_encoder), "--generator",
         str(tiny_models.bart)], env={**os.environ, "OMP_NUM_THREADS": "1", **env},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_serve_command(served_data: Path, tiny_models: Any) -> None:
    from openai import OpenAI

    proc = _serve(served_data, tiny_models, RAGDESK_API_KEY="from-env")
    try:
        assert proc.stdout is not None
        announced = read_announcement(proc)
        url = announced["url"].removesuffix("/v1")  # port 0: the port the system chose
        port = int(url.rsplit(":", 1)[1])
        assert port > 0 and announced["health"] == url + "/health"
        _wait_ready(url, proc)
        client = OpenAI(base_url=url + "/v1", api_key="from-env", max_retries=0, timeout=60)
        done = client.chat.completions.create(
            model="ragdesk", max_tokens=3, messages=[{"role": "user", "content": QUESTION}],
            extra_body={"ragdesk": {"retriever": "sparse", "n_docs": 1}})
        assert done.model_extra is not None
        cite = done.model_extra["ragdesk"]["citations"][0]
        assert (cite["path"], cite["page"]) == ("report.pdf", 2)
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert f"serving http://127.0.0.1:{port}/v1" in err and "engine ready" in err
    assert "server stopped" in err


def test_sigterm_stops_the_server_as_ctrl_c_does(served_data: Path, tiny_models: Any) -> None:
    """kill, systemd and docker stop send SIGTERM: the server withdraws server.json (no
    later `ask` reads a stale one) and says it stopped."""
    proc = _serve(served_data, tiny_models)
    try:
        url = read_announcement(proc)["url"].removesuffix("/v1")
        _wait_ready(url, proc)
        assert (served_data / "server.json").exists()
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "server stopped" in err
    assert not (served_data / "server.json").exists()
