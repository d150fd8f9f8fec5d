"""A question longer than the engine answers is refused before any work, counted in the
generator's own tokens (special strings made inert, as the prompts make them)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import pytest

from ragdesk.core.engine.request import MAX_QUESTION_TOKENS
from ragdesk.core.errors import BadInputError
from ragdesk.core.types import Hit

if TYPE_CHECKING:
    from ragdesk.core.encoders.runtime import TextEncoder


def test_a_question_of_too_many_tokens_is_refused_before_any_work(bart_gen: Any) -> None:
    from ragdesk.core.engine import Engine

    engine = Engine(cast("TextEncoder", None), bart_gen)
    docs = [Hit(id=0, score=1.0, title="t", text="the city was founded in 1850")]
    long_question = "when " * (MAX_QUESTION_TOKENS + 10)
    assert bart_gen.question_tokens(long_question) > MAX_QUESTION_TOKENS
    with pytest.raises(BadInputError, match="tokens long"):
        engine.ask_from_docs(long_question, docs)
    special = "<s></s>" * (MAX_QUESTION_TOKENS // 2)  # few characters, many tokens
    assert len(special) < 8_000 and bart_gen.question_tokens(special) > MAX_QUESTION_TOKENS
    with pytest.raises(BadInputError, match="tokens long"):
        engine.ask_from_docs(special, docs)
    ans = engine.ask_from_docs("when was the city founded", docs)
    assert ans.tokens
