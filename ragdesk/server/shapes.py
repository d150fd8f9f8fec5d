"""Requests and responses in the OpenAI chat-completions shape, plus ragdesk's own field.

Every completion (and every streamed chunk) carries ``ragdesk``: the cited passages (with
file, page and heading for a folder snapshot) and, per answer token, the passage it mostly
came from and its distribution over the passages (RAG-Token: p(z | x, y_i, y_<i);
RAG-Sequence: the running posterior). OpenAI clients ignore the field; the Python client
exposes it as ``completion.model_extra["ragdesk"]`` (or ``chunk.model_extra``).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragdesk.core.confidence.wording import confidence_label, origin_note, shown_text
from ragdesk.core.documents import Location, citation_uri
from ragdesk.core.errors import BadInputError
from ragdesk.core.options import (
    DECODINGS,
    DEFAULT_OPTIONS,
    DEFAULT_STYLE,
    MODES,
    RETRIEVERS,
    STYLES,
    check_lengths,
)
from ragdesk.core.safe_json import as_int
from ragdesk.server.config import MODEL_ID, TEMPERATURE_RANGE, ServerConfig

if TYPE_CHECKING:
    from ragdesk.core.types import Answer, AnswerToken, RetrievedDoc


class RequestError(Exception):
    """A request that cannot be served as sent (400), with the parameter at fault."""

    def __init__(self, message: str, param: str | None = None, status: int = 400,
                 code: str | None = None) -> None:
        super().__init__(message)
        self.message, self.param, self.status, self.code = message, param, status, code


def error_body(message: str, kind: str, param: str | None = None,
               code: str | None = None) -> dict[str, object]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


@dataclass(frozen=True)
class AskRequest:
    question: str
    model: str
    stream: bool
    mode: str
    decoding: str
    n_docs: int
    num_beams: int
    max_new_tokens: int
    retriever: str
    snapshot: str | None
    style: str = DEFAULT_STYLE
    grounded: bool | None = None  # None: automatic (on for causal generators)
    temperature: float | None = None  # None: the snapshot's τ
    abstain: bool = True  # below the confidence threshold the content says "not found"
    min_new_tokens: int = DEFAULT_OPTIONS.min_new_tokens


def int_option(d: dict[str, object], key: str, default: int, low: int, high: int) -> int:
    value = d.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise RequestError(f"{key!r} must be an integer from {low} to {high}.", key)
    return value


def str_option(d: dict[str, object], key: str, default: str, choices: tuple[str, ...]) -> str:
    value = d.get(key, default)
    if value is None:
        return default
    if value not in choices:
        raise RequestError(f"{key!r} must be one of {', '.join(choices)}.", key)
    return str(value)


def _question(messages: object, limit: int) -> str:
    """The last user message: ragdesk answers one question (earlier turns are not context
    for a retriever trained on single questions)."""
    if not isinstance(messages, list) or not messages:
        raise RequestError("'messages' must be a non-empty list.", "messages")
    for msg in reversed(messages):
        if isinstance(msg, dict) and msg.get("role") == "user":
            content = msg.get("content")
            if isinstance(content, list):
                content = _text_of_parts(content)
            if not isinstance(content, str) or not content.strip():
                raise RequestError("The last user message has no text.", "messages")
            if len(content) > limit:
                raise RequestError(f"The question is longer than {limit} characters.",
                                   "messages", 413, "question_too_long")
            return content
    raise RequestError("'messages' holds no user message.", "messages")


def _text_of_parts(parts: list[object]) -> str:
    """Content parts joined: the text ones are read, other kinds (images) are skipped, and
    anything that is not a part at all is refused rather than guessed at."""
    texts: list[str] = []
    for part in parts:
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise RequestError("Each content part must be an object with a 'type'.",
                               "messages")
        if part["type"] != "text":
            continue
        text = part.get("text")
        if not isinstance(text, str):
            raise RequestError("A text content part's 'text' must be a string.", "messages")
        texts.append(text)
    return " ".join(texts)


def parse_chat(body: object, config: ServerConfig) -> AskRequest:
    if not isinstance(body, dict):
        raise RequestError("The request body must be a JSON object.")
    extra = body.get("ragdesk")
    extra = {} if extra is None else extra  # [] or "" is a mistake, not "no options"
    if not isinstance(extra, dict):
        raise RequestError("'ragdesk' must be an object of answer options.", "ragdesk")
    d = config.answer
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    model = body.get("model") or MODEL_ID
    if not isinstance(model, str):
        raise RequestError("'model' must be a string.", "model")
    stream = body.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):  # "false" is truthy: it would stream
        raise RequestError("'stream' must be true or false.", "stream")
    num_beams = int_option(extra, "num_beams", d.num_beams, 1, config.max_beams)
    max_new_tokens = int_option({"max_tokens": max_tokens}, "max_tokens", d.max_new_tokens, 1,
                                config.max_new_tokens_limit)
    req = AskRequest(
        question=_question(body.get("messages"), config.max_question_chars),
        model=model,
        stream=stream,
        mode=str_option(extra, "mode", d.mode, MODES),
        decoding=str_option(extra, "decoding", d.decoding, DECODINGS),
        n_docs=int_option(extra, "n_docs", d.n_docs, 1, config.max_docs),
        num_beams=num_beams,
        max_new_tokens=max_new_tokens,
        min_new_tokens=_min_new_tokens(extra, d.min_new_tokens, num_beams, max_new_tokens),
        retriever=str_option(extra, "retriever", d.retriever, RETRIEVERS),
        snapshot=snapshot_of_model(model),
        style=str_option(extra, "style", DEFAULT_STYLE, STYLES),
        grounded=_optional_bool(extra, "grounded"),
        temperature=_temperature(extra),
        abstain=_optional_bool(extra, "abstain") is not False,
    )
    check_work(req, config)
    return req


def check_work(req: AskRequest, config: ServerConfig) -> None:
    """Refuse a request whose decoding work is out of bounds though each option is within
    its own limit: the decoder runs n_docs × num_beams rows for up to max_tokens steps."""
    rows = req.n_docs * req.num_beams
    if rows > config.max_rows:
        raise RequestError(
            f"n_docs × num_beams is {req.n_docs} × {req.num_beams} = {rows}; this server "
            f"decodes at most {config.max_rows} rows per step.", "ragdesk.num_beams", 400,
            "work_limit")
    if rows * req.max_new_tokens > config.max_row_tokens:
        raise RequestError(
            f"n_docs × num_beams × max_tokens is {rows * req.max_new_tokens:,}; this server "
            f"allows at most {config.max_row_tokens:,} per request.", "max_tokens", 400,
            "work_limit")


def _min_new_tokens(d: dict[str, object], default: int, num_beams: int,
                    max_new_tokens: int) -> int:
    """``ragdesk.min_new_tokens``, checked by the rule every front end's answer options are
    checked by (:func:`ragdesk.core.options.check_lengths`), so it is refused here with the
    parameter named rather than failing the answer. Left out: the default, capped at this
    request's ``max_tokens`` (a short answer asked for must not be refused for a setting)."""
    value = d.get("min_new_tokens")
    if value is None:
        return min(default, max_new_tokens)
    # a bool is an int to Python, never a length to the client; "3" is a string
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(f"'min_new_tokens' must be an integer, not {value!r}.",
                           "ragdesk.min_new_tokens")
    try:
        check_lengths(num_beams, max_new_tokens, value)
    except BadInputError as exc:
        raise RequestError(exc.message, "ragdesk.min_new_tokens") from exc
    return as_int(value)


def _optional_bool(d: dict[str, object], key: str) -> bool | None:
    value = d.get(key)
    if value is None or isinstance(value, bool):
        return value
    raise RequestError(f"'ragdesk.{key}' must be true or false.", f"ragdesk.{key}")


def _temperature(d: dict[str, object]) -> float | None:
    value = d.get("temperature")
    if value is None:
        return None
    low, high = TEMPERATURE_RANGE
    # NaN and the infinities fail the comparison, and a huge int is compared exactly
    if (isinstance(value, bool) or not isinstance(value, int | float)
            or not low <= value <= high):
        raise RequestError(f"'ragdesk.temperature' must be a number from {low:g} to "
                           f"{high:g}.", "ragdesk.temperature")
    return float(value)


def snapshot_of_model(model: str) -> str | None:
    """``ragdesk`` answers from the server's snapshot; ``ragdesk/NAME`` from snapshot NAME."""
    if model == MODEL_ID:
        return None
    prefix = MODEL_ID + "/"
    if model.startswith(prefix) and len(model) > len(prefix):
        return model[len(prefix):]
    raise RequestError(f"The model {model!r} does not exist; see /v1/models.", "model", 404,
                       "model_not_found")


def citation(rank: int, doc: RetrievedDoc, location: Location | None,
             root: Path | None) -> dict[str, object]:
    out: dict[str, object] = {
        "index": rank, "id": doc.id, "title": doc.title, "text": doc.text,
        "score": float(doc.score), "prob": float(doc.prob), "snapshot": doc.snapshot,
    }
    if location is not None:
        out.update(path=location.path, page=location.page, heading=location.heading)
        if root is not None:
            out["uri"] = citation_uri(root, location)
    return out


def token_source(tok: AnswerToken) -> dict[str, object]:
    return {"id": int(tok.id), "text": tok.text, "source": int(tok.source),
            "posterior": [round(float(p), 6) for p in tok.posterior]}


def completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex}"


def chat_completion(cid: str, model: str, answer: Answer,
                    citations: list[dict[str, object]]) -> dict[str, Any]:
    n_tokens = len(answer.tokens)
    return {
        "id": cid, "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                     "message": {"role": "assistant", "content": shown_text(answer)}}],
        "usage": {"prompt_tokens": 0, "completion_tokens": n_tokens,
                  "total_tokens": n_tokens},
        "ragdesk": {**answer_info(answer), "citations": citations,
                    "tokens": [token_source(t) for t in answer.tokens]},
    }


def answer_info(answer: Answer) -> dict[str, object]:
    """What a client needs beside the content: ``guess`` is the answer's own text, which
    the content replaces with the not-found message when ``abstained``."""
    return {"snapshot": answer.snapshot, "mode": answer.mode, "decoding": answer.decoding,
            "logprob": float(answer.logprob), "temperature": float(answer.temperature),
            "confidence": answer.confidence, "abstained": bool(answer.abstained),
            "confidence_label": confidence_label(answer.confidence, answer.abstained),
            "from_memory": bool(answer.from_memory), "origin_note": origin_note(answer),
            "guess": answer.text, "message": shown_text(answer)}


def chunk(cid: str, model: str, delta: dict[str, object], finish: str | None = None,
          extra: dict[str, object] | None = None) -> dict[str, object]:
    out: dict[str, object] = {
        "id": cid, "object": "chat.completion.chunk", "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
    }
    if extra is not None:
        out["ragdesk"] = extra
    return out


def parse_retrieve(body: object, config: ServerConfig) -> tuple[str, int, str | None, str]:
    """(query, n_docs, snapshot, retriever) of a ``/v1/retrieve`` request."""
    if not isinstance(body, dict):
        raise RequestError("The request body must be a JSON object.")
    query = body.get("query")
    if not isinstance(query, str) or not query.strip():
        raise RequestError("'query' must be a non-empty string.", "query")
    if len(query) > config.max_question_chars:
        raise RequestError(f"The query is longer than {config.max_question_chars} characters.",
                           "query", 413, "question_too_long")
    snapshot = body.get("snapshot")
    if snapshot is not None and not isinstance(snapshot, str):
        raise RequestError("'snapshot' must be a snapshot name.", "snapshot")
    return (query, int_option(body, "n_docs", config.answer.n_docs, 1, config.max_docs),
            snapshot, str_option(body, "retriever", config.answer.retriever,
                                 RETRIEVERS))


