"""The Starlette application: ``/v1/models``, ``/v1/chat/completions`` (streamed as
server-sent events or not), ``/v1/retrieve`` and ``/health``.

Requests wait for the one engine on its worker thread (see :mod:`.host`); the event loop
only parses, queues and writes, so a slow answer never blocks the others from being
admitted or refused.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import Future
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ragdesk.core.errors import Cancelled, RagdeskError
from ragdesk.core.progress import CancelToken
from ragdesk.server import answering
from ragdesk.server.config import MODEL_ID, ServerConfig
from ragdesk.server.host import EngineHost, EngineUnavailable, QueueFull
from ragdesk.server.shapes import (
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

log = logging.getLogger(__name__)
Handler = Callable[[Request], Awaitable[Response]]
DISCONNECT_POLL_S = 0.25


def _error(status: int, message: str, kind: str, param: str | None = None,
           code: str | None = None) -> JSONResponse:
    return JSONResponse(error_body(message, kind, param, code), status_code=status)


class _Guard:
    """API key and request size, checked before a handler reads anything."""

    def __init__(self, app: ASGIApp, config: ServerConfig) -> None:
        self.app, self.config = app, config

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", [])}
        refusal = self._refusal(headers)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _refusal(self, headers: dict[str, str]) -> Response | None:
        key = self.config.api_key
        if key:
            auth = headers.get("authorization", "")
            given = auth[7:].strip() if auth[:7].lower() == "bearer " else ""
            if not hmac.compare_digest(given.encode(), key.encode()):
                return _error(401, "Missing or wrong API key: send 'Authorization: Bearer "
                              "KEY'.", "invalid_request_error", code="invalid_api_key")
        length = headers.get("content-length")
        if length is not None and (not length.isdigit()
                                   or int(length) > self.config.max_body_bytes):
            return _error(413, f"The request body is larger than "
                          f"{self.config.max_body_bytes} bytes.", "invalid_request_error",
                          code="request_too_large")
        return None


async def _json_body(request: Request, limit: int) -> Any:
    size = 0
    parts: list[bytes] = []
    async for part in request.stream():  # a chunked body has no Content-Length to check
        size += len(part)
        if size > limit:
            raise RequestError(f"The request body is larger than {limit} bytes.", None, 413,
                               "request_too_large")
        parts.append(part)
    try:
        return json.loads(b"".join(parts))
    except ValueError as exc:
        raise RequestError(f"The request body is not valid JSON ({exc}).") from exc


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
        except RagdeskError as exc:  # bad question, missing snapshot, encoder mismatch...
            msg = exc.message + (f" {exc.hint}" if exc.hint else "")
            return _error(400, msg, "invalid_request_error")
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

    async def chat(request: Request) -> Response:
        req = parse_chat(await _json_body(request, config.max_body_bytes), config)
        if req.stream:
            return await _stream_chat(host, req)
        cancel = CancelToken()
        result = await _run_watched(request, host.submit(
            lambda e: answering.ask(e, req, cancel=cancel)), cancel)
        if result is None:  # the client left; "client closed request", for the log only
            return _error(499, "The client closed the request.", "invalid_request_error")
        ans, cites = result
        return JSONResponse(chat_completion(completion_id(), req.model, ans, cites))

    async def retrieve(request: Request) -> Response:
        body = await _json_body(request, config.max_body_bytes)
        query, n_docs, snapshot, retriever = parse_retrieve(body, config)
        _, cites = await _run(host, lambda e: answering.retrieve_with_citations(
            e, query, n_docs, snapshot, retriever))
        return JSONResponse({"object": "list", "data": cites})

    routes = [Route("/v1/models", _handled(models), methods=["GET"]),
              Route("/health", _handled(health), methods=["GET"]),
              Route("/v1/chat/completions", _handled(chat), methods=["POST"]),
              Route("/v1/retrieve", _handled(retrieve), methods=["POST"])]
    return _Guard(Starlette(routes=routes), config)


def _model_ids(host: EngineHost) -> list[str]:
    ids = [MODEL_ID]
    try:
        catalog = host.engine.library.catalog
        ids += [f"{MODEL_ID}/{s.name}" for s in catalog.list_snapshots() if s.state == "ready"]
    except (EngineUnavailable, AttributeError, RagdeskError):
        pass  # while loading, only the default model is listed
    return ids


async def _run(host: EngineHost, fn: Callable[[Any], Any]) -> Any:
    return await asyncio.wrap_future(host.submit(fn))


async def _run_watched(request: Request, job: Future[Any], cancel: CancelToken) -> Any:
    """Wait for ``job``; if the client goes away meanwhile (it timed out in the queue, say),
    cancel it so that the engine moves on to requests someone still waits for."""
    done = asyncio.wrap_future(job)
    while not cancel.cancelled:
        finished, _ = await asyncio.wait({done}, timeout=DISCONNECT_POLL_S)
        if finished:
            break
        if await request.is_disconnected():
            cancel.cancel()
    try:
        return await done
    except Cancelled:
        return None  # nobody is listening for the answer


async def _stream_chat(host: EngineHost, req: Any) -> Response:
    """Admitted (or refused with 429/503) before the first byte, so that a refusal is a
    real HTTP status and not an error event inside a 200 stream."""
    loop = asyncio.get_running_loop()
    events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
    cancel = CancelToken()

    def put(kind: str, value: Any) -> None:
        loop.call_soon_threadsafe(events.put_nowait, (kind, value))

    def work(engine: Any) -> None:
        try:
            ans, _ = answering.ask(engine, req, lambda t: put("token", t), cancel,
                                   lambda cites: put("citations", cites))
            put("done", ans)
        except BaseException as exc:
            put("error", exc)

    host.submit(work)
    return StreamingResponse(_sse(events, cancel, req.model), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache"})


async def _sse(events: asyncio.Queue[tuple[str, Any]], cancel: CancelToken,
               model: str) -> AsyncIterator[str]:
    cid = completion_id()
    try:
        while True:
            kind, value = await events.get()
            if kind == "citations":
                yield _event(chunk(cid, model, {"role": "assistant", "content": ""},
                                   extra={"citations": value}))
            elif kind == "token":
                yield _event(chunk(cid, model, {"content": value.text},
                                   extra={"token": token_source(value)}))
            elif kind == "done":
                # the whole answer as Answer.to_json gives it: `ragdesk ask` rebuilds the
                # same Answer from it as if it had answered itself
                yield _event(chunk(cid, model, {}, "stop",
                                   extra={**answer_info(value), "text": value.text,
                                          "answer": value.to_json()}))
                yield "data: [DONE]\n\n"
                return
            else:
                yield _event(_stream_error(value))
                yield "data: [DONE]\n\n"
                return
    finally:
        cancel.cancel()  # the client went away (or the answer ended): stop decoding


def _stream_error(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, RagdeskError):
        return error_body(exc.message, "invalid_request_error")
    log.error("internal error while streaming", exc_info=exc)
    return error_body("Internal error; see the server log.", "server_error")


def _event(obj: dict[str, Any]) -> str:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"
