"""`ragdesk serve` driven by the official openai client: chat completions streamed and not,
with the citations field pointing at the PDF page that answers the question."""

from __future__ import annotations

from typing import Any, cast

from tests.documents.conftest import QUESTION
from tests.server.conftest import get, post

OPTIONS = {"ragdesk": {"retriever": "sparse", "n_docs": 2}}  # BM25: the tiny encoder is random


def _client(server: Any, key: str = "unused") -> Any:
    from openai import OpenAI

    return OpenAI(base_url=server.url + "/v1", api_key=key, max_retries=0, timeout=60)


def _check_pdf_citation(cites: list[dict[str, Any]]) -> None:
    top = cites[0]
    assert top["index"] == 1 and "quokka festival" in top["text"]
    assert top["title"] == "Wildlife Report 2026" and top["snapshot"] == "docs"
    assert top["path"] == "report.pdf" and top["page"] == 2
    assert top["uri"].startswith("file://") and top["uri"].endswith("/report.pdf#page=2")
    # BM25 returns only passages sharing a word with the question: here, one or two.
    assert 1 <= len(cites) <= 2 and abs(sum(c["prob"] for c in cites) - 1) < 1e-5


def test_chat_completion_cites_the_pdf_page(server: Any) -> None:
    client = _client(server)
    done = client.chat.completions.create(
        model="ragdesk", max_tokens=6, extra_body=OPTIONS,
        messages=[{"role": "system", "content": "be brief"},
                  {"role": "user", "content": QUESTION}])
    assert done.object == "chat.completion" and done.choices[0].finish_reason == "stop"
    assert isinstance(done.choices[0].message.content, str)
    extra = done.model_extra["ragdesk"]
    _check_pdf_citation(extra["citations"])
    tokens = extra["tokens"]
    k = len(extra["citations"])
    assert 1 <= len(tokens) == done.usage.completion_tokens <= 6
    for tok in tokens:
        assert len(tok["posterior"]) == k and abs(sum(tok["posterior"]) - 1) < 1e-4
        assert tok["source"] == max(range(k), key=tok["posterior"].__getitem__)
    assert extra["mode"] == "token" and extra["snapshot"] == "docs"


def test_streamed_answer_equals_the_whole_one(server: Any) -> None:
    client = _client(server)
    whole = client.chat.completions.create(
        model="ragdesk", max_tokens=6, extra_body=OPTIONS,
        messages=[{"role": "user", "content": QUESTION}])
    chunks = list(client.chat.completions.create(
        model="ragdesk", max_tokens=6, extra_body=OPTIONS, stream=True,
        messages=[{"role": "user", "content": QUESTION}]))
    first, last = chunks[0], chunks[-1]
    assert first.choices[0].delta.role == "assistant"
    _check_pdf_citation(first.model_extra["ragdesk"]["citations"])
    assert first.model_extra["ragdesk"]["citations"] == whole.model_extra["ragdesk"]["citations"]
    token_chunks = chunks[1:-1]
    streamed = [c.model_extra["ragdesk"]["token"] for c in token_chunks]
    assert streamed == whole.model_extra["ragdesk"]["tokens"]  # same tokens, same sources
    # the deltas join to the whole answer's content, without the first token's space
    assert "".join(c.choices[0].delta.content for c in token_chunks) == \
        whole.choices[0].message.content
    assert last.choices[0].finish_reason == "stop"
    assert last.model_extra["ragdesk"]["text"] == whole.choices[0].message.content
    assert len({c.id for c in chunks}) == 1


def test_models_and_retrieve(server: Any) -> None:
    ids = [m.id for m in _client(server).models.list()]
    assert ids == ["ragdesk", "ragdesk/docs"]
    status, body = post(server.url + "/v1/retrieve",
                        {"query": QUESTION, "n_docs": 2, "retriever": "sparse"})
    assert status == 200
    _check_pdf_citation(body["data"])
    status, health = get(server.url + "/health")
    assert status == 200 and health["status"] == "ready" and health["in_flight"] == 0


def test_a_named_snapshot_model_and_an_unknown_one(server: Any) -> None:
    from openai import NotFoundError

    client = _client(server)
    done = client.chat.completions.create(
        model="ragdesk/docs", max_tokens=2, extra_body=OPTIONS,
        messages=[{"role": "user", "content": QUESTION}])
    assert done.model_extra["ragdesk"]["snapshot"] == "docs"
    try:
        client.chat.completions.create(model="gpt-4", messages=[{"role": "user",
                                                                  "content": "hi"}])
    except NotFoundError as exc:
        assert cast(dict[str, object], exc.body)["code"] == "model_not_found"
    else:
        raise AssertionError("an unknown model was served")
    # streamed or not, a snapshot that does not exist is a refused request, not a 200
    # stream carrying an error event
    from openai import BadRequestError

    for stream in (False, True):
        try:
            client.chat.completions.create(
                model="ragdesk/nope", max_tokens=2, extra_body=OPTIONS, stream=stream,
                messages=[{"role": "user", "content": QUESTION}])
        except BadRequestError as exc:
            assert "There is no snapshot named 'nope'" in str(exc)
        else:
            raise AssertionError(f"a missing snapshot was answered (stream={stream})")


def test_bad_requests_are_refused_in_openai_shape(server: Any) -> None:
    url = server.url + "/v1/chat/completions"
    status, body = post(url, {"model": "ragdesk", "messages": []})
    assert status == 400 and body["error"]["param"] == "messages"
    status, body = post(url, {"messages": [{"role": "user", "content": "q"}],
                              "ragdesk": {"n_docs": 0}})
    assert status == 400 and body["error"]["param"] == "n_docs"
    status, body = post(url, None, raw=b"{not json")
    assert status == 400 and "not valid JSON" in body["error"]["message"]
    status, body = post(url, {"messages": [{"role": "user", "content": "x" * 300_000}]})
    assert status == 413 and body["error"]["code"] == "request_too_large"
    status, body = post(url, {"messages": [{"role": "user", "content": "x" * 9000}]})
    assert status == 413 and body["error"]["code"] == "question_too_long"
