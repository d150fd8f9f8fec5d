"""The reader's answer from memory: the question alone in the prompt, judged by the confidence
model's memory part, kept only where that part finds it likelier right."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import pytest

from ragdesk.core.confidence import FEATURES, ConfidenceModel, write_snapshot_model
from ragdesk.core.confidence.memory import MEMORY_FEATURES, memory_features
from ragdesk.core.engine import Engine
from ragdesk.core.engine.generators import CausalLMGenerator, PassageText
from ragdesk.core.engine.memory_answer import memory_answer
from ragdesk.core.engine.request import keyword_request

from .test_qwen2_decoder import build_tiny_qwen2
from .test_read_together import QUESTION, _gen, _hits
from .test_true_sources import _Library, _Snap


@pytest.fixture(scope="module")
def parts(tiny_models: Any) -> tuple[Any, Any]:
    return build_tiny_qwen2(tiny_models)


def _request(gen: CausalLMGenerator, new: int = 6) -> Any:
    return keyword_request(gen, QUESTION, "together", num_beams=1, max_new_tokens=new,
                           min_new_tokens=0, style="short", grounded=True, temperature=1.0,
                           snapshot=None)


def test_the_prompt_holds_the_question_and_no_passage(parts: Any, tiny_models: Any) -> None:
    gen = _gen(parts)
    hits = _hits(tiny_models)
    ctx = gen.prepare_memory(QUESTION, [PassageText(h.title, h.text) for h in hits])
    text = str(gen.tokenizer.decode(ctx.input_ids[0]))
    assert ctx.n_docs == 1
    assert "Who wrote the first book?" in text
    assert "Who is the Eiffel Tower named after?" in text  # the worked questions stay
    assert not any(" ".join(h.text.split()[:6]) in text for h in hits)
    assert "wrought-iron" not in text  # the worked examples' passages are left out too


def test_the_answer_is_transformers_greedy_continuation_of_that_prompt(
        parts: Any, tiny_models: Any) -> None:
    import torch

    gen = _gen(parts, precision="float32")
    hits = _hits(tiny_models)
    ans = memory_answer(gen, _request(gen), hits)
    prompt = gen.prepare_memory(QUESTION, [PassageText(h.title, h.text) for h in hits])
    ids = torch.tensor([prompt.input_ids[0]])
    with torch.no_grad():
        out = parts[0].generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=6,
                                do_sample=False, eos_token_id=None, pad_token_id=0)
    reference = out[0, ids.shape[1]:].tolist()
    assert ans.from_memory and ans.token_ids
    assert ans.token_ids == reference[:len(ans.token_ids)]
    if len(ans.token_ids) < 6:  # it stopped: the reference's next token is one that ends it
        assert reference[len(ans.token_ids)] in gen.settings.eos_token_ids
    assert not ans.grounded  # no passage constrains it, whatever the request says
    assert [d.id for d in ans.docs] == [h.id for h in hits]  # the closest passages stay


def _with_memory(bias: float, memory_bias: float, threshold: float = 0.3) -> ConfidenceModel:
    n, m = len(FEATURES), len(MEMORY_FEATURES)
    part = ConfidenceModel(MEMORY_FEATURES, (0.0,) * m, (1.0,) * m, (0.0,) * m, memory_bias,
                           threshold)
    return ConfidenceModel(FEATURES, (0.0,) * n, (1.0,) * n, (0.0,) * n, bias, threshold,
                           memory=part)


@pytest.mark.parametrize("memory_bias,kept", [(3.0, True), (-3.0, False)])
def test_the_engine_keeps_the_likelier_candidate(parts: Any, tiny_models: Any, tmp_path: Path,
                                                 memory_bias: float, kept: bool) -> None:
    gen = _gen(parts, precision="float32")
    hits = _hits(tiny_models)
    write_snapshot_model(tmp_path, gen.name, _with_memory(0.0, memory_bias))
    engine = Engine(None, gen, library=_Library(_Snap(tmp_path, "snap")))  # type: ignore[arg-type]
    ans = engine.answer_from_docs(QUESTION, hits, mode="together", max_new_tokens=6,
                                  snapshot_name="snap")
    plain = Engine(None, gen).answer_from_docs(  # type: ignore[arg-type]
        QUESTION, hits, mode="together", max_new_tokens=6)
    mem = memory_answer(gen, _request(gen).on("snap", 1.0), hits)
    assert set(MEMORY_FEATURES) <= set(ans.features)
    assert ans.features["memory_confidence"] == pytest.approx(1 / (1 + math.exp(-memory_bias)))
    assert "memory_s" in ans.timings
    if kept:
        assert ans.from_memory and ans.text == mem.text and ans.other_text == plain.text
        assert ans.confidence == pytest.approx(1 / (1 + math.exp(-memory_bias)))
        assert not ans.abstained
    else:
        assert not ans.from_memory and ans.text == plain.text and ans.other_text == mem.text
        assert ans.confidence == pytest.approx(0.5)
    for tok in ans.tokens if kept else ():
        # a token read from no passage cites none, unless a passage holds the whole answer
        assert tok.source == -1 or any(ans.text in f"{d.title} {d.text}" for d in ans.docs)


def test_a_model_without_a_memory_part_reads_no_memory(parts: Any, tiny_models: Any,
                                                       tmp_path: Path) -> None:
    gen = _gen(parts, precision="float32")
    n = len(FEATURES)
    write_snapshot_model(tmp_path, gen.name, ConfidenceModel(
        FEATURES, (0.0,) * n, (1.0,) * n, (0.0,) * n, 0.0, 0.3))
    engine = Engine(None, gen, library=_Library(_Snap(tmp_path, "snap")))  # type: ignore[arg-type]
    ans = engine.answer_from_docs(QUESTION, _hits(tiny_models), mode="together",
                                  max_new_tokens=6, snapshot_name="snap")
    assert not ans.from_memory and ans.other_text is None and "memory_s" not in ans.timings


def test_reading_memory_for_fitting_keeps_the_passages_answer_and_records_both(
        parts: Any, tiny_models: Any, tmp_path: Path) -> None:
    gen = _gen(parts, precision="float32")
    hits = _hits(tiny_models)
    plain = Engine(None, gen).answer_from_docs(  # type: ignore[arg-type]
        QUESTION, hits, mode="together", max_new_tokens=6)
    mem = memory_answer(gen, _request(gen), hits)
    for model in (None, ConfidenceModel(FEATURES, (0.0,) * len(FEATURES),
                                        (1.0,) * len(FEATURES), (0.0,) * len(FEATURES), 0.0,
                                        0.3)):
        folder = tmp_path / ("none" if model is None else "plain")
        folder.mkdir()
        if model is not None:
            write_snapshot_model(folder, gen.name, model)
        engine = Engine(None, gen, library=_Library(_Snap(folder, "snap")),  # type: ignore[arg-type]
                        read_memory=True)
        ans = engine.answer_from_docs(QUESTION, hits, mode="together", max_new_tokens=6,
                                      snapshot_name="snap")
        assert not ans.from_memory and ans.text == plain.text
        assert ans.other_text == mem.text and "memory_s" in ans.timings
        assert set(MEMORY_FEATURES) <= set(ans.features)
        assert "memory_confidence" not in ans.features  # no part judged it
        assert ans.features["passage_confidence"] == (0.0 if model is None else 0.5)


def test_the_shipped_reader_model_reads_memory_and_the_starter_does_not() -> None:
    from ragdesk.core.confidence.store import reads_memory
    from ragdesk.core.models.reader import QWEN_READER
    from ragdesk.core.models.starter import GGUF_NAME

    assert reads_memory(QWEN_READER.name)
    assert reads_memory(f"/some/data/models/{QWEN_READER.name}")
    assert not reads_memory(GGUF_NAME)


@pytest.mark.parametrize("memory_bias", [3.0, -3.0])
def test_a_kept_part_gives_the_answer_kept_its_confidence(
        parts: Any, tiny_models: Any, tmp_path: Path, memory_bias: float) -> None:
    from ragdesk.core.confidence.memory import KEPT_FEATURES, kept_features

    gen = _gen(parts, precision="float32")
    hits = _hits(tiny_models)
    k = len(KEPT_FEATURES)
    weights = tuple(0.5 if n == "memory_logit" else 0.0 for n in KEPT_FEATURES)
    kept = ConfidenceModel(KEPT_FEATURES, (0.0,) * k, (1.0,) * k, weights, -1.0, 0.3)
    model = dataclasses.replace(_with_memory(0.0, memory_bias), kept=kept)
    write_snapshot_model(tmp_path, gen.name, model)
    engine = Engine(None, gen, library=_Library(_Snap(tmp_path, "snap")))  # type: ignore[arg-type]
    ans = engine.answer_from_docs(QUESTION, hits, mode="together", max_new_tokens=6,
                                  snapshot_name="snap")
    p_memory = 1 / (1 + math.exp(-memory_bias))
    assert ans.from_memory == (memory_bias > 0)
    memory = {n: ans.features[n] for n in MEMORY_FEATURES}
    want = kept.predict(kept_features(0.5, p_memory, memory, ans.from_memory))
    assert want == pytest.approx(1 / (1 + math.exp(1.0 - 0.5 * memory_bias)), rel=1e-4)
    assert ans.confidence == pytest.approx(want)
    assert ans.abstained == (want < 0.3)


def test_the_memory_part_round_trips_and_nests_once() -> None:
    model = _with_memory(0.5, -1.0)
    back = ConfidenceModel.from_json(model.to_json())
    assert back == model and back.memory is not None
    nested = model.to_json()
    nested["memory"]["memory"] = nested["memory"].copy()
    with pytest.raises(ValueError, match="memory part"):
        ConfidenceModel.from_json(nested)
    alone = _with_memory(0.5, -1.0).to_json()
    alone["kept"] = alone.pop("memory")  # a kept part judges two candidates: needs both
    with pytest.raises(ValueError, match="needs a memory part"):
        ConfidenceModel.from_json(alone)


def test_memory_features_say_whether_it_agrees_and_is_held(parts: Any,
                                                            tiny_models: Any) -> None:
    gen = _gen(parts, precision="float32")
    hits = _hits(tiny_models)
    mem = memory_answer(gen, _request(gen), hits)
    same = memory_features(mem, mem.text.upper(), 0.25)
    other = memory_features(mem, "something else entirely", 0.25)
    assert set(same) == set(MEMORY_FEATURES)
    assert same["memory_agrees"] == (1.0 if mem.text.strip() else 0.0)
    assert other["memory_agrees"] == 0.0 and other["passage_confidence"] == 0.25
    assert other["memory_log_tokens"] == pytest.approx(math.log1p(len(mem.tokens)))
    assert other["top1_score"] == hits[0].score


def test_the_note_names_a_passage_that_holds_the_words_and_every_front_end_gets_it() -> None:
    import dataclasses

    from ragdesk.core.confidence import memory_note, origin_note
    from ragdesk.core.types import Answer, AnswerToken, RetrievedDoc
    from ragdesk.server.shapes import answer_info

    docs = [RetrievedDoc(1, "Penicillin", "A mould antibiotic.", 0.6, 0.7, "snap"),
            RetrievedDoc(2, "Alexander Fleming", "Alexander Fleming found it.", 0.5, 0.3,
                         "snap")]
    free = Answer(question="who discovered penicillin", text="Alexander Fleming",
                  token_ids=[1, 2], tokens=[AnswerToken(1, "Alexander", []),
                                            AnswerToken(2, " Fleming", [])],
                  docs=docs, logprob=-1.0, mode="together", snapshot="snap",
                  confidence=0.4, from_memory=True, other_text="Louis Pasteur")
    assert origin_note(free) == memory_note("snap")
    held = dataclasses.replace(free, tokens=[dataclasses.replace(t, quoted_from=1)
                                             for t in free.tokens])
    assert origin_note(held) == memory_note("snap", 1) and "[2]" in str(origin_note(held))
    assert origin_note(dataclasses.replace(free, from_memory=False)) is None
    info = answer_info(free)
    assert info["from_memory"] is True and info["origin_note"] == memory_note("snap")
    assert info["message"] == "Alexander Fleming"  # given, not abstained: the text itself


def test_the_same_words_from_memory_keep_the_passages_answer_and_its_sources(
        parts: Any, tiny_models: Any, tmp_path: Path, monkeypatch: Any) -> None:
    from ragdesk.core.engine import api

    gen = _gen(parts, precision="float32")
    hits = _hits(tiny_models)
    plain = Engine(None, gen).answer_from_docs(  # type: ignore[arg-type]
        QUESTION, hits, mode="together", max_new_tokens=6)

    def same_words(*args: Any, **kw: Any) -> Any:
        return dataclasses.replace(plain, from_memory=True)

    monkeypatch.setattr(api, "memory_answer", same_words)
    write_snapshot_model(tmp_path, gen.name, _with_memory(-3.0, 3.0))
    engine = Engine(None, gen, library=_Library(_Snap(tmp_path, "snap")))  # type: ignore[arg-type]
    ans = engine.answer_from_docs(QUESTION, hits, mode="together", max_new_tokens=6,
                                  snapshot_name="snap")
    assert ans.features["memory_agrees"] == 1.0
    assert not ans.from_memory and ans.text == plain.text
    assert [t.source for t in ans.tokens] == [t.source for t in plain.tokens]
    assert ans.confidence == pytest.approx(1 / (1 + math.exp(-3.0)))  # the larger one
    assert not ans.abstained
