"""The engine's warm-up: a made-up question answered once after loading, so that the first real
question reuses the prompt openings it computed and is answered exactly as without it."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from ragdesk.core.confidence import FEATURES, ConfidenceModel, write_snapshot_model
from ragdesk.core.confidence.memory import MEMORY_FEATURES
from ragdesk.core.engine import Engine
from ragdesk.core.engine.causal_decoder import common_prefix_len
from ragdesk.core.engine.generators import CausalLMGenerator, PassageText
from ragdesk.core.engine.warm_up import WARM_UP_QUESTION, made_up_passages
from ragdesk.core.options import AnswerOptions

from .test_qwen2_decoder import build_tiny_qwen2
from .test_read_together import QUESTION, _gen, _hits
from .test_true_sources import _Library, _Snap

OPTIONS = AnswerOptions(mode="together", n_docs=4, max_new_tokens=6)


@pytest.fixture(scope="module")
def parts(tiny_models: Any) -> tuple[Any, Any]:
    return build_tiny_qwen2(tiny_models)


def _counted(gen: CausalLMGenerator) -> list[int]:
    """Count the tokens the lean decoder runs through its layers (prompts and steps)."""
    decoder = gen.lean_decoder
    assert decoder is not None
    forward = decoder.forward
    seen: list[int] = []

    def counting(ids: Any, *args: Any, **kw: Any) -> Any:
        seen.append(int(ids.shape[0] * ids.shape[1]))
        return forward(ids, *args, **kw)

    decoder.forward = counting  # type: ignore[method-assign,assignment]
    return seen


def _engine(gen: CausalLMGenerator, folder: Path) -> Engine:
    # a model with a memory part: every answer is also read without passages
    n, m = len(FEATURES), len(MEMORY_FEATURES)
    part = ConfidenceModel(MEMORY_FEATURES, (0.0,) * m, (1.0,) * m, (0.0,) * m, 0.0, 0.3)
    write_snapshot_model(folder, gen.name, ConfidenceModel(
        FEATURES, (0.0,) * n, (1.0,) * n, (0.0,) * n, 0.0, 0.3, memory=part))
    return Engine(None, gen, library=_Library(_Snap(folder, "snap")))  # type: ignore[arg-type]


def test_the_first_answer_reuses_the_openings_and_is_the_same(
        parts: Any, tiny_models: Any, tmp_path: Path) -> None:
    hits = _hits(tiny_models)
    runs = {}
    for warm in (False, True):
        gen = _gen(parts, precision="float32")
        folder = tmp_path / str(warm)
        folder.mkdir()
        engine = _engine(gen, folder)
        if warm:
            assert engine.warm_up(OPTIONS) > 0
        seen = _counted(gen)
        ans = engine.ask_from_docs(QUESTION, hits, OPTIONS, snapshot_name="snap")
        runs[warm] = (ans, sum(seen))
    (cold, cold_tokens), (warmed, warm_tokens) = runs[False], runs[True]
    assert warmed.text == cold.text and warmed.other_text == cold.other_text
    assert warmed.from_memory == cold.from_memory
    assert warmed.confidence == pytest.approx(cold.confidence, abs=1e-6)
    assert [t.id for t in warmed.tokens] == [t.id for t in cold.tokens]
    # the answers' log-probabilities and every other feature the confidence reads
    assert warmed.features == pytest.approx(cold.features, abs=1e-5)
    # what the warm-up computed is the start the real prompts share with the made-up ones:
    # the instructions and worked examples, before the first passage
    gen = _gen(parts)
    real = gen.prompts(QUESTION, [PassageText(h.title, h.text) for h in hits], together=True)
    made_up = gen.prompts(WARM_UP_QUESTION, [PassageText(h.title, h.text)
                                             for h in made_up_passages(4)], together=True)
    shared = common_prefix_len([real[0], made_up[0]])
    assert shared > 20
    assert cold_tokens - warm_tokens >= shared - 1


def test_without_a_snapshot_it_still_answers_from_its_passages(
        parts: Any, caplog: pytest.LogCaptureFixture) -> None:
    gen = _gen(parts, precision="float32")
    seen = _counted(gen)
    engine = Engine(None, gen)  # type: ignore[arg-type]
    with caplog.at_level(logging.INFO, logger="ragdesk.core.engine.warm_up"):
        engine.warm_up(OPTIONS)
    assert "no retrieval" in caplog.text
    assert sum(seen) > 0  # the prompt and the steps ran


def test_a_failure_is_logged_not_raised(parts: Any, caplog: pytest.LogCaptureFixture,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    gen = _gen(parts, precision="float32")
    engine = Engine(None, gen)  # type: ignore[arg-type]

    def broken(*_a: Any, **_k: Any) -> Any:
        raise RuntimeError("out of memory")

    monkeypatch.setattr(engine, "ask_from_docs", broken)
    with caplog.at_level(logging.WARNING, logger="ragdesk.core.engine.warm_up"):
        engine.warm_up(OPTIONS)
    assert "not answered" in caplog.text and "out of memory" in caplog.text


def test_the_made_up_passages_hold_answers_of_the_questions_kind() -> None:
    hits = made_up_passages(5)
    assert len(hits) == 5 and len({h.id for h in hits}) == 5
    assert all(any(w.isdigit() and len(w) == 4 for w in h.text.split()) for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert len(made_up_passages(0)) == 1
