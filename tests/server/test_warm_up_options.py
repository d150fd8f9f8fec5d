"""The server's warm-up answers with the options a request that sets none gets, so that the
prompt opening it computes is the one the first request reuses."""

from __future__ import annotations

import pytest

from ragdesk.server.answering import answer_options
from ragdesk.server.config import AnswerDefaults, ServerConfig
from ragdesk.server.shapes import parse_chat


@pytest.mark.parametrize("defaults", [
    AnswerDefaults(),
    AnswerDefaults(mode="sequence", decoding="fast", n_docs=3, num_beams=2, max_new_tokens=20,
                   min_new_tokens=2, retriever="hybrid"),
])
def test_the_warm_up_options_are_a_bare_requests(defaults: AnswerDefaults) -> None:
    config = ServerConfig(answer=defaults)
    req = parse_chat({"messages": [{"role": "user", "content": "who wrote hamlet"}]}, config)
    assert defaults.options() == answer_options(req)
    assert defaults.options().check() == defaults.options()
