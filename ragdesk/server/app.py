"""The Starlette application: ``/v1/models``, ``/v1/chat/completions`` (streamed as
server-sent events or not), ``/v1/retrieve``, ``/health`` and ``/v1/ragdesk/whoami``.

Requests wait for the one engine on its worker thread (see :mod:`.host`); the event loop
only parses, queues and writes, so a slow answer never blocks the others from being
admitted or refused.

Every web page the user opens can reach a loopback server: by DNS rebinding (its own name
resolved to 127.0.0.1, so the browser sends that name as ``Host``) and by "simple"
cross-site requests (a ``text/plain`` POST needs no CORS preflight). So every request must
name this server in ``Host``, a present ``Origin`` must be this server, and a body must be
declared JSON: a browser sends ``application/json`` cross-site only after a preflight,
which this server never grants (it sends no CORS headers).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Literal, TypeVar

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ragdesk.core.confidence import after_streamed
from ragdesk.core.errors import BadInputError, Cancelled, RagdeskError
from ragdesk.core.progress import CancelToken
from ragdesk.core.safe_json import loads_bounded
from ragdesk.core.streamed_text import StreamedText
from ragdesk.server import answering, discovery
from ragdesk.server.config import ANY_HOST, MODEL_ID, ServerConfig
from ragdesk.server.headers import SCHEME_PORTS, is_json_type, origin_of, split_host
from ragdesk.server.host import EngineHost, EngineUnavailable, QueueFull
from ragdesk.server.shapes import (
    AskRequest,
    RequestError,
    answer_info,
    chat_completion,
    chunk,
    completion_id,
    error_body,
    parse_chat,
    parse_retrieve,
    token_source,
)

if TYPE_CHECKING:
    from ragdesk.core.engine.api import Engine
    from ragdesk.core.types import Answer, AnswerToken, RetrievedDoc

    # What the engine thread (and the time budget) report to one answer's event stream.
    _StreamEvent = (tuple[Literal["token"], AnswerToken]
                    | tuple[Literal["citations"], list[dict[str, object]]]
                    | tuple[Literal["done"], Answer]
                    | tuple[Literal["error"], BaseException]
                    | tuple[Literal["expired"], Future[None]])

T = TypeVar("T")
log = logging.getLogger(__name__)
Handler = Callable[[Request], Awaitable[Response]]
DISCONNECT_POLL_S = 0.25
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
# Headers that decide who is asking: two copies could be read differently by a proxy.
SINGLE_HEADERS = ("host", "origin", "authorization", "content-type", "content-length")


def _error(status: int, message: str, kind: str, param: str | None = None,
           code: str | None = None) -> JSONResponse:
    return JSONResponse(error_body(message, kind, param, code), status_code=status)


class _Guard:
    """Who may ask (Host, Origin, API key) and what they may send (size, content type),
    checked before a handler reads anything."""

    def __init__(self, app: ASGIApp, config: ServerConfig) -> None:
        self.app, self.config = app, config
        self.hosts = config.host_names()
        self.any_host = ANY_HOST in config.allowed_hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self._refusal(scope)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _refusal(self, scope: Scope) -> Response | None:
        headers: dict[str, str] = {}
        for k, v in scope.get("headers", []):
            name = k.decode("latin-1").lower()
            if name in headers and name in SINGLE_HEADERS:
                return _error(400, f"The {name!r} header is sent more than once.",
                              "invalid_request_error", code="duplicate_header")
            headers[name] = v.decode("latin-1")
        return (self._who(headers) or self._key(scope, headers)
                or self._body(str(scope.get("method", "")), headers))

    def _allowed(self, name: str | None) -> bool:
        return name is not None and (self.any_host or name in self.hosts)

    def _who(self, headers: dict[str, str]) -> Response | None:
        host = split_host(headers.get("host", ""))
        if host is None or not self._allowed(host[0]):
            return _error(403, "The Host header does not name this server (allowed: "
                          f"{', '.join(sorted(self.hosts))}; `ragdesk serve --allow-host "
                          "NAME` adds one).", "invalid_request_error", code="host_not_allowed")
        origin = headers.get("origin")
        # same origin: a page of another local server (another port) is another site and
        # must not ask; the Host's port, not the socket's, so that a forwarded port
        # (docker -p 8080:8765) is this server's too
        seen = None if origin is None else origin_of(origin)
        if origin is not None and (seen is None or not self._allowed(seen[0])
                                   or seen[1] != (SCHEME_PORTS["http"] if host[1] is None
                                                  else host[1])):
            return _error(403, "Requests from other sites' pages are refused (the Origin "
                          "is not this server).", "invalid_request_error",
                          code="origin_not_allowed")
        return None

    def _key(self, scope: Scope, headers: dict[str, str]) -> Response | None:
        key = self.config.api_key
        # the proof of identity comes before a client sends its key, so it needs none
        if not key or scope.get("path") == discovery.WHOAMI_PATH:
            return None
        auth = headers.get("authorization", "")
        given = auth[7:].strip() if auth[:7].lower() == "bearer " else ""
        if not hmac.compare_digest(given.encode("latin-1"), key.encode("ascii")):
            return _error(401, "Missing or wrong API key: send 'Authorization: Bearer "
                          "KEY'.", "invalid_request_error", code="invalid_api_key")
        return None

    def _body(self, method: str, headers: dict[str, str]) -> Response | None:
        length = headers.get("content-length")
        if length is not None and (not length.isdigit()
                                   or int(length) > self.config.max_body_bytes):
            return _error(413, f"The request body is larger than "
                          f"{self.config.max_body_bytes} bytes.", "invalid_request_error",
                          code="request_too_large")
        if method in BODY_METHODS and not is_json_type(headers.get("content-type", "")):
            return _error(415, "The request body must be sent as 'Content-Type: "
                          "application/json' (UTF-8).", "invalid_request_error",
                          code="unsupported_media_type")
        return None


async def _json_body(request: Request, config: ServerConfig) -> object:
    limit = config.max_body_bytes
    size = 0
    parts: list[bytes] = []
    async for part in request.stream():  # a chunked body has no Content-Length to check
        size += len(part)
        if size > limit:
            raise RequestError(f"The request body is larger than {limit} bytes.", None, 413,
                               "request_too_large")
        parts.append(part)
    try:
        return loads_bounded(b"".join(parts), max_depth=config.max_json_depth,
                             max_bytes=limit)
    except BadInputError as exc:  # too deep, not UTF-8, not JSON, a lone surrogate
        raise RequestError(f"The request body {exc.message}") from exc


class _Budget:
    """A request's time limit, from its arrival: when it is up the answer is cancelled
    (cut off where it is, or never started), and the budget remembers that it, not the
    client, was the reason."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.cancel = CancelToken()
        self.expired = False
        self.on_expire: Callable[[], None] | None = None  # runs on the event loop
        self._timer = asyncio.get_running_loop().call_later(seconds, self._expire)

    def _expire(self) -> None:
        self.expired = True
        self.cancel.cancel()
        if self.on_expire is not None:
            self.on_expire()

    def stop(self) -> None:
        self._timer.cancel()

    def refusal(self) -> JSONResponse:
        return _error(503, self.message(), "server_error", code="time_budget_exceeded")

    def message(self) -> str:
        return (f"No answer within this server's time budget of {self.seconds:g} s per "
                "request (the engine was busy with other requests).")

    def truncation(self) -> dict[str, object]:
        return {"truncated": "time_budget", "time_budget_s": self.seconds}


def _handled(fn: Handler) -> Handler:
    """Every failure becomes an OpenAI-shaped error with the right status."""

    async def wrapper(request: Request) -> Response:
        try:
            return await fn(request)
        except RequestError as exc:
            return _error(exc.status, exc.message, "invalid_request_error", exc.param,
                          exc.code)
        except QueueFull as exc:
            return _error(429, str(exc), "rate_limit_error", code="queue_full")
        except EngineUnavailable as exc:
            return _error(503, str(exc), "server_error", code="engine_unavailable")
        except ClientDisconnect:  # left mid-body (or cut off as too slow): nobody to answer
            return _error(499, "The client closed the request.", "invalid_request_error")
        except RagdeskError as exc:  # bad question, missing snapshot, encoder mismatch...
            return _error(400, exc.text_for("server", sep=" "), "invalid_request_error")
        except Exception:
            log.exception("internal error answering %s", request.url.path)
            return _error(500, "Internal error; see the server log.", "server_error")

    return wrapper


def create_app(host: EngineHost, config: ServerConfig) -> ASGIApp:
    async def models(request: Request) -> Response:
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "ragdesk"}
                for m in _model_ids(host)]
        return JSONResponse({"object": "list", "data": data})

    async def health(request: Request) -> Response:
        return JSONResponse({"status": host.state, "error": host.error,
                             "in_flight": host.in_flight, "queue_limit": host.queue_limit})

    async def whoami(request: Request) -> Response:
        return _whoami(request, config)

    async def chat(request: Request) -> Response:
        return await _chat(request, host, config)

    async def retrieve(request: Request) -> Response:
        return await _retrieve(request, host, config)

    routes = [Route("/v1/models", _handled(models), methods=["GET"]),
              Route("/health", _handled(health), methods=["GET"]),
              Route(discovery.WHOAMI_PATH, _handled(whoami), methods=["GET"]),
              Route("/v1/chat/completions", _handled(chat), methods=["POST"]),
              Route("/v1/retrieve", _handled(retrieve), methods=["POST"])]
    return _Guard(Starlette(routes=routes), config)


def _whoami(request: Request, config: ServerConfig) -> Response:
    """This start's proof of identity: HMAC(secret in server.json, the client's challenge)."""
    challenge = request.query_params.get("challenge", "")
    if config.instance_secret is None:
        return _error(404, "This server has no identity to prove.", "invalid_request_error",
                      code="not_found")
    if not discovery.is_challenge(challenge):
        raise RequestError("'challenge' must be 32 to 128 lower-case hex digits.",
                           "challenge")
    return JSONResponse({"proof": discovery.proof(config.instance_secret, challenge),
                         "pid": os.getpid()})


async def _chat(request: Request, host: EngineHost, config: ServerConfig) -> Response:
    req = parse_chat(await _json_body(request, config), config)
    budget = _Budget(config.request_timeout_s)
    if req.stream:
        return await _stream_chat(host, req, budget)
    try:
        result = await _run_watched(request, host.submit(
            lambda e: answering.ask(e, req, cancel=budget.cancel)), budget.cancel)
    finally:
        budget.stop()
    if result is None:
        return _unanswered(budget)
    ans, cites = result
    body = chat_completion(completion_id(), req.model, ans, cites)
    if ans.cancelled and budget.expired:
        body["choices"][0]["finish_reason"] = "length"
        body["ragdesk"].update(budget.truncation())
    return JSONResponse(body)


async def _retrieve(request: Request, host: EngineHost, config: ServerConfig) -> Response:
    query, n_docs, snapshot, retriever = parse_retrieve(await _json_body(request, config),
                                                        config)
    budget = _Budget(config.request_timeout_s)

    def work(engine: Engine) -> tuple[list[RetrievedDoc], list[dict[str, object]]]:
        budget.cancel.raise_if_cancelled()  # it waited out its budget in the queue
        return answering.retrieve_with_citations(engine, query, n_docs, snapshot, retriever)

    try:
        result = await _run_watched(request, host.submit(work), budget.cancel)
    finally:
        budget.stop()
    if result is None:
        return _unanswered(budget)
    return JSONResponse({"object": "list", "data": result[1]})


def _unanswered(budget: _Budget) -> Response:
    """Cancelled before it produced anything: its time ran out, or its client left ("client
    closed request": for the log only, nobody reads it)."""
    if budget.expired:
        return budget.refusal()
    return _error(499, "The client closed the request.", "invalid_request_error")


def _known_snapshot(host: EngineHost, name: str) -> None:
    """Raise the catalog's error for a snapshot name it does not hold (as /v1/models reads
    it); nothing while the engine loads, or for a library without a catalog: the answer
    says then."""
    try:
        catalog = getattr(host.engine.library, "catalog", None)
    except EngineUnavailable:
        return
    if catalog is not None:
        catalog.get_snapshot(name)


def _model_ids(host: EngineHost) -> list[str]:
    ids = [MODEL_ID]
    try:
        # a library that finds snapshots by name has a catalog; another lists no more
        catalog = getattr(host.engine.library, "catalog", None)
        if catalog is None:
            return ids
        ids += [f"{MODEL_ID}/{s.name}" for s in catalog.list_snapshots() if s.state == "ready"]
    except (EngineUnavailable, AttributeError, RagdeskError):
        pass  # while loading, only the default model is listed
    return ids


async def _run_watched(request: Request, job: Future[T], cancel: CancelToken) -> T | None:
    """Wait for ``job``; if the client goes away meanwhile (it timed out in the queue, say),
    cancel it so that the engine moves on to requests someone still waits for. None: it
    was cancelled (by the client leaving or by its time budget) before it produced
    anything."""
    done = asyncio.wrap_future(job)
    while not cancel.cancelled:
        finished, _ = await asyncio.wait({done}, timeout=DISCONNECT_POLL_S)
        if finished:
            break
        if await request.is_disconnected():
            cancel.cancel()
    if job.cancel():  # still queued: dropped now, not when the engine reaches it
        return None
    try:
        return await done
    except Cancelled:
        return None  # nobody is listening for the answer, or its time is up


async def _stream_chat(host: EngineHost, req: AskRequest, budget: _Budget) -> Response:
    """Admitted (or refused with 429/503) before the first byte, so that a refusal is a
    real HTTP status and not an error event inside a 200 stream."""
    if req.snapshot is not None:
        _known_snapshot(host, req.snapshot)  # a name no snapshot has: 400, not an event
    loop = asyncio.get_running_loop()
    events: asyncio.Queue[_StreamEvent] = asyncio.Queue()

    def put(event: _StreamEvent) -> None:
        loop.call_soon_threadsafe(events.put_nowait, event)

    def work(engine: Engine) -> None:
        try:
            ans, _ = answering.ask(engine, req, lambda t: put(("token", t)), budget.cancel,
                                   lambda cites: put(("citations", cites)))
            put(("done", ans))
        except BaseException as exc:
            put(("error", exc))

    try:
        job = host.submit(work)
    except BaseException:
        budget.stop()
        raise
    budget.on_expire = lambda: events.put_nowait(("expired", job))
    return StreamingResponse(_sse(events, budget, req.model), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache"})


async def _sse(events: asyncio.Queue[_StreamEvent], budget: _Budget,
               model: str) -> AsyncIterator[str]:
    stream = _Stream(budget, model)
    try:
        while not stream.ended:
            for event in stream.on(await events.get()):
                yield event
    finally:
        budget.stop()
        budget.cancel.cancel()  # the client went away (or the answer ended): stop decoding


class _Stream:
    """One answer's server-sent events, from what the engine thread reports."""

    def __init__(self, budget: _Budget, model: str) -> None:
        self.budget, self.model = budget, model
        self.cid = completion_id()
        self.text = StreamedText()
        self.ended = False

    def on(self, event: _StreamEvent) -> list[str]:
        match event:
            case ("citations", cites):
                return [self._chunk({"role": "assistant", "content": ""}, {"citations": cites})]
            case ("token", token):
                return [self._chunk({"content": self.text.piece(token.text)},
                                    {"token": token_source(token)})]
            case ("expired", job):
                if not job.cancel():
                    return []  # it is answering: it stops at its next step and sends "done"
                return self._end(error_body(self.budget.message(), "server_error",
                                            code="time_budget_exceeded"))
            case ("done", ans):
                # the whole answer as Answer.to_json gives it: `ragdesk ask` rebuilds the
                # same Answer from it as if it had answered itself
                cut = ans.cancelled and self.budget.expired
                extra = {**answer_info(ans), "text": ans.text, "answer": ans.to_json(),
                         **(self.budget.truncation() if cut else {})}
                # the words streamed cannot be taken back: what the answer states instead
                # follows them, so that the concatenated content says it too
                after = "\n".join(after_streamed(ans))
                delta: dict[str, object] = {"content": f"\n\n{after}"} if after else {}
                return self._end(chunk(self.cid, self.model, delta,
                                       "length" if cut else "stop", extra=extra))
            case (_, exc):
                return self._end(_stream_error(exc, self.budget))

    def _chunk(self, delta: dict[str, object], extra: dict[str, object]) -> str:
        return _event(chunk(self.cid, self.model, delta, extra=extra))

    def _end(self, last: dict[str, object]) -> list[str]:
        self.ended = True
        return [_event(last), "data: [DONE]\n\n"]


def _stream_error(exc: BaseException, budget: _Budget) -> dict[str, object]:
    if isinstance(exc, Cancelled) and budget.expired:
        return error_body(budget.message(), "server_error", code="time_budget_exceeded")
    if isinstance(exc, RagdeskError):
        return error_body(exc.message, "invalid_request_error")
    log.error("internal error while streaming", exc_info=exc)
    return error_body("Internal error; see the server log.", "server_error")


def _event(obj: dict[str, object]) -> str:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"
