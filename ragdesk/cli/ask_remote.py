"""`ragdesk ask` through a running `ragdesk serve` on the same data directory.

Loading the models is most of a command-line answer's time (the answer itself takes about a
second on a laptop); a server that already holds them answers at once. ``ask`` uses one only
when the answer would be the same as its own: the server was started without models of its
own choosing, the options it is asked for are ones the API carries, and it is ready. Anything
else (no server, a stale file, a server still loading or failing) falls back to loading the
models here, so this path can only make ``ask`` faster, never different.

Standard library only (``http.client``): the point is to import nothing heavy.
"""

from __future__ import annotations

import hmac
import http.client
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ragdesk.core.errors import BadInputError
from ragdesk.core.safe_json import as_float, as_int, as_list, as_object, loads_bounded
from ragdesk.core.types import Answer, AnswerToken

if TYPE_CHECKING:
    from ragdesk.core.options import AnswerOptions

API_KEY_ENV = "RAGDESK_API_KEY"
NO_SERVER_ENV = "RAGDESK_NO_SERVER"  # set to ask without a server even when one runs
HEALTH_TIMEOUT_S = 0.5
ANSWER_TIMEOUT_S = 600.0
# what is read of one answer from whatever listens at server.json's address: an answer with
# its passages and tokens is far smaller
_MAX_BODY = 16 << 20


def find_server(data_root: Path, pack: str) -> tuple[str, dict[str, str]] | None:
    """(url, headers) of a ready server on ``data_root`` that ``ask`` may use for ``pack``'s
    models (a server that loaded another pack, or models of its own, answers otherwise),
    else None.

    ``server.json`` may be a killed server's, with anything listening on its port now: the
    key and the question go only to a live process that proves it knows the secret that
    this start of the server wrote there (a challenge answered with its HMAC)."""
    from ragdesk.server.discovery import read

    if os.environ.get(NO_SERVER_ENV):
        return None
    info = read(data_root)
    if info is None or info.custom_models or info.secret is None:
        return None  # no secret: a file no client can check, so it is not trusted
    if info.pack != pack:
        return None  # another pack's models (None: its own, or a file that did not say)
    if not pid_alive(info.pid):
        return None  # a stale file: the server is gone
    headers = {"Content-Type": "application/json"}
    try:
        if not proves_secret(info.url, info.secret):
            return None
        if info.auth:
            key = os.environ.get(API_KEY_ENV)
            if not key:
                return None
            headers["Authorization"] = f"Bearer {key}"
        status, body = _request(info.url, "GET", "/health", None, headers, HEALTH_TIMEOUT_S)
        ready = status == 200 and as_object(loads_bounded(body)).get("status") == "ready"
    except (OSError, ValueError, TypeError, BadInputError, http.client.HTTPException):
        return None  # gone, or something else answers on its port
    return (info.url, headers) if ready else None


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` names a live process. A first, cheap filter only: the secret's proof
    decides (a recycled pid cannot prove the old server's secret). No ``os.kill(pid, 0)``:
    on Windows signal 0 is CTRL_C_EVENT."""
    if pid <= 0:
        return False
    proc = Path("/proc")
    if proc.is_dir():
        return (proc / str(pid)).exists()
    try:
        import psutil
    except ImportError:
        return True
    return bool(psutil.pid_exists(pid))


def proves_secret(url: str, secret: str) -> bool:
    """Whether the server at ``url`` answers a fresh random challenge with the HMAC of the
    secret in server.json; sends nothing else (no key, no question)."""
    from ragdesk.server.discovery import WHOAMI_PATH, new_challenge, proof

    challenge = new_challenge()
    status, body = _request(url, "GET", f"{WHOAMI_PATH}?challenge={challenge}", None, {},
                            HEALTH_TIMEOUT_S)
    if status != 200:
        return False
    got = as_object(loads_bounded(body)).get("proof")
    return isinstance(got, str) and hmac.compare_digest(got, proof(secret, challenge))


def ask_remote(url: str, headers: dict[str, str], question: str, snapshot: str | None,
               opts: AnswerOptions, on_token: Callable[[AnswerToken], None], *,
               send_mode: bool = True) -> Answer | None:
    """The server's answer to ``question`` from ``snapshot`` (None: the active one; the
    server reads the same catalog), streamed token by token to ``on_token``; None when the
    server refused or failed before the first token (the caller answers locally then).
    ``send_mode=False``: the server reads in its default mode (its pack's own)."""
    from ragdesk.core.export import answer_from_json

    model = "ragdesk" if snapshot is None else f"ragdesk/{snapshot}"
    extra: dict[str, object] = {
        "decoding": opts.decoding, "n_docs": opts.n_docs, "num_beams": opts.num_beams,
        "retriever": opts.retriever, "style": opts.style, "grounded": opts.grounded,
        "temperature": opts.temperature}
    if send_mode:
        extra["mode"] = opts.mode
    body = {"model": model, "stream": True,
            "messages": [{"role": "user", "content": question}],
            "max_tokens": opts.max_new_tokens, "ragdesk": extra}
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port,
                                      timeout=ANSWER_TIMEOUT_S)
    streamed = False
    try:
        conn.request("POST", "/v1/chat/completions", json.dumps(body), headers)
        resp = conn.getresponse()
        if resp.status != 200:
            return None
        for event in _events(resp):
            extra = as_object(event.get("ragdesk") or {})
            if "token" in extra:
                tok = as_object(extra["token"])
                streamed = True
                # the delta, not the token's own text: the deltas join to the answer's
                # text, without the tokenizer's leading space
                on_token(AnswerToken(as_int(tok.get("id", -1)), _delta_text(event),
                                     [as_float(p) for p in as_list(tok["posterior"])]))
            elif "answer" in extra:
                return answer_from_json(as_object(extra["answer"]))
            elif "error" in event:
                if streamed:
                    raise RemoteFailed(str(as_object(event["error"]).get("message", "")))
                return None
        return None
    except (OSError, http.client.HTTPException, ValueError, KeyError, IndexError,
            TypeError, AttributeError, BadInputError) as exc:
        if streamed:
            raise RemoteFailed(str(exc)) from exc
        return None
    finally:
        conn.close()


class RemoteFailed(Exception):
    """The server failed in the middle of an answer (tokens were already printed)."""


def _delta_text(event: dict[str, object]) -> str:
    choice = as_object(as_list(event["choices"])[0])
    content = as_object(choice["delta"]).get("content")
    return content if isinstance(content, str) else ""


def _events(resp: http.client.HTTPResponse) -> Iterator[dict[str, object]]:
    """The JSON objects of a server-sent event stream, up to ``[DONE]``."""
    for raw in resp:
        line = raw.decode("utf-8").strip()
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            return
        yield as_object(loads_bounded(data, max_bytes=_MAX_BODY))


def _request(url: str, method: str, path: str, body: str | None, headers: dict[str, str],
             timeout: float) -> tuple[int, bytes]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port,
                                      timeout=timeout)
    try:
        conn.request(method, path, body, headers)
        resp = conn.getresponse()
        got = resp.read(_MAX_BODY + 1)
        if len(got) > _MAX_BODY:
            raise ValueError(f"the server's answer is larger than {_MAX_BODY:,} bytes")
        return resp.status, got
    finally:
        conn.close()


def note(url: str) -> None:
    print(f"ragdesk: answered by the running server at {url} (ragdesk serve; "
          f"{NO_SERVER_ENV}=1 loads the models here instead)", file=sys.stderr)
