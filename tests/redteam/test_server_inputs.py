"""Requests the API cannot serve are refused with 400 and a message naming the field, never a
500: content parts that are not text, temperatures that are not finite or out of range
(``1e-300`` was computed, then failed as "Out of range float values are not JSON
compliant"), a ``stream`` that is not a boolean (``"false"`` streamed), JSON nested 100k
deep under the size limit (a RecursionError), and lone surrogates in a question.

Against the server with tiny models, so that anything let through reaches a real engine.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.documents.conftest import QUESTION
from tests.server.conftest import send, served_data, server  # noqa: F401  (fixtures)

JSON = {"Host": "127.0.0.1", "Content-Type": "application/json"}
OPTIONS = {"retriever": "sparse", "n_docs": 2}


def _chat(run: Any, raw: bytes) -> tuple[int, dict[str, str], Any]:
    return send(run.url, "POST", "/v1/chat/completions", JSON, raw)


def _chat_body(**fields: Any) -> dict[str, Any]:
    return {"model": "ragdesk", "max_tokens": 2,
            "messages": [{"role": "user", "content": QUESTION}],
            "ragdesk": dict(OPTIONS), **fields}


def _refused(status: int, headers: dict[str, str], body: bytes, param: str | None = None
             ) -> dict[str, Any]:
    assert status == 400, (status, body[:300])
    assert headers["content-type"] == "application/json"  # not an event stream
    error: dict[str, Any] = json.loads(body)["error"]
    if param is not None:
        assert error["param"] == param, error
    return error


@pytest.mark.parametrize("content", [
    [{"type": "text", "text": 5}], [None], [{"type": "text", "text": None}],
    [{"text": "no type"}], ["a bare string"], [{"type": 3, "text": "x"}],
    [{"type": "text", "text": ["nested"]}]])
def test_content_parts_that_are_not_text_parts_get_400(server: Any,  # noqa: F811
                                                       content: Any) -> None:
    body = _chat_body(messages=[{"role": "user", "content": content}])
    _refused(*_chat(server, json.dumps(body).encode()), param="messages")


def test_text_parts_beside_other_kinds_are_read(server: Any) -> None:  # noqa: F811
    content = [{"type": "image_url", "image_url": {"url": "x"}},
               {"type": "text", "text": QUESTION}]
    status, _, body = _chat(server, json.dumps(_chat_body(
        messages=[{"role": "user", "content": content}])).encode())
    assert status == 200, body


@pytest.mark.parametrize("literal", ["Infinity", "-Infinity", "NaN", "1e-300", "1e400", "0",
                                     "-1", "0.0009", "100.5", "true", "\"1\"", "1" + "0" * 400])
def test_temperatures_out_of_range_get_400(server: Any, literal: str) -> None:  # noqa: F811
    raw = json.dumps(_chat_body()).replace('"n_docs": 2', f'"n_docs": 2, "temperature": '
                                           f'{literal}').encode()
    assert b"temperature" in raw
    error = _refused(*_chat(server, raw), param="ragdesk.temperature")
    assert "from 0.001 to 100" in error["message"]


def test_temperatures_in_range_are_served(server: Any) -> None:  # noqa: F811
    for value in (1e-3, 0.5, 100):
        body = _chat_body(ragdesk={**OPTIONS, "temperature": value})
        status, _, got = _chat(server, json.dumps(body).encode())
        assert status == 200 and json.loads(got)["ragdesk"]["temperature"] == value, got


@pytest.mark.parametrize("stream", ["false", "true", 0, 1, [], {}])
def test_a_stream_that_is_not_a_boolean_gets_400_not_a_stream(server: Any,  # noqa: F811
                                                              stream: Any) -> None:
    _refused(*_chat(server, json.dumps(_chat_body(stream=stream)).encode()), param="stream")


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/retrieve"])
@pytest.mark.parametrize("shape", ["array", "object", "in a field"])
def test_deeply_nested_json_under_the_size_limit_gets_400(server: Any,  # noqa: F811
                                                          path: str, shape: str) -> None:
    if shape == "array":
        raw = b"[" * 100_000 + b"]" * 100_000
    elif shape == "object":
        raw = b'{"a":' * 40_000 + b"1" + b"}" * 40_000
    else:
        raw = (b'{"query": "q", "messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    assert len(raw) < 256 * 1024
    status, headers, body = send(server.url, "POST", path, JSON, raw)
    error = _refused(status, headers, body)
    assert "nested" in error["message"]


def test_moderately_nested_json_is_still_read(server: Any) -> None:  # noqa: F811
    body = _chat_body()
    body["metadata"] = json.loads("[" * 20 + "]" * 20)
    status, _, got = _chat(server, json.dumps(body).encode())
    assert status == 200, got


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/retrieve"])
@pytest.mark.parametrize("escape", ["\\ud800", "\\udfff", "x\\udc80y", "\\ud83d"])
def test_a_lone_surrogate_in_the_question_gets_400(server: Any, path: str,  # noqa: F811
                                                   escape: str) -> None:
    question = "when is @@ the festival"
    doc = {"query": question, "retriever": "sparse"} if path == "/v1/retrieve" else \
        {**_chat_body(), "messages": [{"role": "user", "content": question}]}
    raw = json.dumps(doc).replace("@@", escape)  # the escape as sent, not as Python reads it
    status, headers, body = send(server.url, "POST", path, JSON, raw.encode())
    assert "surrogate" in _refused(status, headers, body)["message"]


def test_a_surrogate_pair_is_text_and_is_served(server: Any) -> None:  # noqa: F811
    raw = (b'{"query": "quokka festival \\ud83d\\ude00", "retriever": "sparse"}')
    status, _, body = send(server.url, "POST", "/v1/retrieve", JSON, raw)
    assert status == 200, body


def test_a_body_that_is_not_utf8_gets_400(server: Any) -> None:  # noqa: F811
    raw = '{"query": "caf\u00e9"}'.encode("latin-1")
    status, headers, body = send(server.url, "POST", "/v1/retrieve", JSON, raw)
    assert "UTF-8" in _refused(status, headers, body)["message"]
