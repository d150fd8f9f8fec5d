"""Reading the passages together: one prompt with all K passages, one decoder row; tokens carry
p(z|x) and cite the passage the answer is quoted from."""

from __future__ import annotations

from typing import Any

import pytest

from ragdesk.core.engine import Engine
from ragdesk.core.engine.generators import CausalLMGenerator, PassageText
from ragdesk.core.engine.rag_together import read_together_generate
from ragdesk.core.errors import BadInputError
from ragdesk.core.options import AnswerOptions, pack_mode_choices, with_pack_mode
from ragdesk.core.types import Hit

from .test_qwen2_decoder import build_tiny_qwen2

QUESTION = "who wrote the first book"


@pytest.fixture(scope="module")
def parts(tiny_models: Any) -> tuple[Any, Any]:
    return build_tiny_qwen2(tiny_models)


def _gen(parts: Any, **kw: Any) -> CausalLMGenerator:
    kw.setdefault("no_repeat_ngram_size", 0)
    return CausalLMGenerator(parts[0], parts[1], "tiny-qwen2", **kw)


def _hits(tiny_models: Any, n: int = 4) -> list[Hit]:
    corpus = list(tiny_models.corpus)[:n]
    return [Hit(i, t, " ".join(x.split()[:60]), 70.0 - i) for i, (t, x) in enumerate(corpus)]


def test_one_prompt_holds_every_passage(parts: Any, tiny_models: Any) -> None:
    gen = _gen(parts)
    hits = _hits(tiny_models)
    ids = gen.together_ids(QUESTION, [PassageText(h.title, h.text) for h in hits])
    text = str(gen.tokenizer.decode(ids))
    starts = [text.index(" ".join(h.text.split()[:8])) for h in hits]
    # rank order, the best first (best last measured no better on held-out questions)
    assert starts == sorted(starts)
    assert text.rindex("wrote the first book") > starts[-1]
    ctx = gen.prepare_together(QUESTION, [PassageText(h.title, h.text) for h in hits])
    assert ctx.n_docs == 1 and ctx.first_logits.shape[0] == 1


def test_lean_equals_transformers_and_tokens_carry_the_prior(parts: Any,
                                                            tiny_models: Any) -> None:
    import math

    hits = _hits(tiny_models)
    lean = _gen(parts, precision="float32")
    via = _gen(parts, lean_decoder=False)
    assert lean.lean_decoder is not None and via.lean_decoder is None
    for beams in (1, 2):
        a = read_together_generate(lean, QUESTION, hits, max_new_tokens=6, num_beams=beams)
        b = read_together_generate(via, QUESTION, hits, max_new_tokens=6, num_beams=beams)
        assert a.token_ids == b.token_ids and a.token_ids
        assert abs(a.logprob - b.logprob) < 1e-3
        assert a.mode == "together" and a.decoding is None
        prior = [d.prob for d in a.docs]
        assert math.isclose(sum(prior), 1.0, rel_tol=1e-5)
        for t in a.tokens:
            assert len(t.posterior) == len(hits)
            assert max(abs(x - y) for x, y in zip(t.posterior, prior, strict=True)) < 1e-6


def test_grounded_answer_cites_the_passage_that_holds_it(parts: Any, tiny_models: Any) -> None:
    from ragdesk.core.confidence import holders

    hits = _hits(tiny_models)
    engine = Engine(question_encoder=None, generator=_gen(parts))  # type: ignore[arg-type]
    streamed: list[Any] = []
    ans = engine.answer_from_docs(QUESTION, hits, mode="together", max_new_tokens=8,
                                  grounded=True, on_token=streamed.append)
    assert ans.mode == "together" and ans.text
    held = holders(ans.text, ans.docs)
    assert any(held)
    sources = {t.source for t in ans.tokens}
    assert len(sources) == 1
    (src,) = sources
    assert held[src]
    # the likeliest holder under p(z|x)
    assert src == max((z for z in range(len(hits)) if held[z]), key=lambda z: ans.docs[z].prob)
    assert [t.id for t in streamed][:len(ans.tokens)] == [t.id for t in ans.tokens]


def test_a_seq2seq_generator_cannot_read_together(tiny_models: Any) -> None:
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from ragdesk.core.engine.generators import Seq2SeqGenerator

    model = AutoModelForSeq2SeqLM.from_pretrained(str(tiny_models.bart))
    gen = Seq2SeqGenerator(model, AutoTokenizer.from_pretrained(str(tiny_models.bart)), "bart")
    with pytest.raises(BadInputError, match="together"):
        read_together_generate(gen, QUESTION, _hits(tiny_models))


def test_the_option_and_the_pack_default() -> None:
    opts = AnswerOptions(mode="together").check()
    # the pack's own mode over the settings' one; the mode chosen for the pack over both
    assert with_pack_mode(AnswerOptions(mode="sequence"), "together", None).mode == "together"
    assert with_pack_mode(AnswerOptions(), "together", "token").mode == "token"
    assert with_pack_mode(AnswerOptions(), None, "sequence").mode == "sequence"
    # a pack with no mode of its own, and no valid choice: the settings' mode
    assert with_pack_mode(AnswerOptions(mode="sequence"), None, None).mode == "sequence"
    assert with_pack_mode(AnswerOptions(), "together", "beam").mode == "together"
    assert pack_mode_choices({"reader": "together", "starter": "nonsense", "x": 3}) == {
        "reader": "together"}
    assert pack_mode_choices(["together"]) == {} and pack_mode_choices(None) == {}
    assert AnswerOptions.from_settings(opts.to_settings()).mode == "together"


def test_training_refuses_reading_together() -> None:
    from ragdesk.core.training.config import TrainConfig

    with pytest.raises(BadInputError):
        TrainConfig(mode="together").check()
