"""``ragdesk.min_new_tokens``: the answer length floor every other front end's answer options
have, checked by the same rule (``options.check_lengths``) and refused with the parameter
named."""

from __future__ import annotations

from typing import Any

import pytest

from ragdesk.server.answering import answer_options
from ragdesk.server.config import AnswerDefaults, ServerConfig
from ragdesk.server.shapes import RequestError, parse_chat


def _body(max_tokens: int = 6, **extra: Any) -> dict[str, Any]:
    return {"max_tokens": max_tokens, "ragdesk": extra,
            "messages": [{"role": "user", "content": "who wrote hamlet"}]}


def test_the_request_sets_the_floor_of_the_answer_length() -> None:
    req = parse_chat(_body(min_new_tokens=3), ServerConfig())
    assert req.min_new_tokens == 3
    options = answer_options(req)
    assert (options.min_new_tokens, options.max_new_tokens) == (3, 6)
    assert options.check() is options
    assert parse_chat(_body(min_new_tokens=6), ServerConfig()).min_new_tokens == 6


def test_left_out_it_is_the_default_within_max_tokens() -> None:
    assert parse_chat(_body(), ServerConfig()).min_new_tokens == 0
    config = ServerConfig(answer=AnswerDefaults(min_new_tokens=10))
    assert parse_chat(_body(max_tokens=4), config).min_new_tokens == 4
    assert parse_chat(_body(max_tokens=40), config).min_new_tokens == 10


@pytest.mark.parametrize("value", [7, -1])
def test_a_floor_no_answer_can_meet_is_refused(value: Any) -> None:
    with pytest.raises(RequestError) as ei:
        parse_chat(_body(min_new_tokens=value), ServerConfig())
    assert ei.value.param == "ragdesk.min_new_tokens" and ei.value.status == 400
    # the words of the rule the CLI's and the GUI's options are checked by
    assert "min_new_tokens must be between 0 and max_new_tokens (6)" in ei.value.message


@pytest.mark.parametrize("value", ["3", 2.5, True])
def test_a_floor_that_is_not_an_integer_is_refused_as_such(value: Any) -> None:
    """Not "must be between 0 and 6" for "3", which is within it: the type is what is wrong."""
    with pytest.raises(RequestError) as ei:
        parse_chat(_body(min_new_tokens=value), ServerConfig())
    assert ei.value.param == "ragdesk.min_new_tokens" and ei.value.status == 400
    assert ei.value.message == f"'min_new_tokens' must be an integer, not {value!r}."


@pytest.mark.parametrize("extra", [[], "", 0, False])
def test_options_that_are_not_an_object_are_refused_even_when_empty(extra: Any) -> None:
    body = {**_body(), "ragdesk": extra}
    with pytest.raises(RequestError) as ei:
        parse_chat(body, ServerConfig())
    assert ei.value.param == "ragdesk" and ei.value.status == 400


def test_the_server_answers_400_naming_the_parameter() -> None:
    from ragdesk.server.run import serve_in_thread
    from tests.server.conftest import post

    def no_engine() -> Any:
        raise AssertionError("a refused request must not reach the engine")

    with serve_in_thread(ServerConfig(port=0), no_engine) as run:
        status, body = post(run.url + "/v1/chat/completions", _body(min_new_tokens=9))
    assert status == 400 and body["error"]["param"] == "ragdesk.min_new_tokens"
