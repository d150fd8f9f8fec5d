"""Shown sources hold what they are cited for, over many generated answers, and the
engine judges every answer (features, confidence, abstention)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from ragdesk.core.confidence import (
    CLOSED_BOOK,
    FEATURES,
    QUOTED_PASSAGE_LP,
    READ_AGAIN,
    READING_PROBE,
    ConfidenceModel,
    assign_sources,
    summarize_sources,
    write_snapshot_model,
)
from ragdesk.core.confidence.probe import Probe
from ragdesk.core.engine.api import Engine
from ragdesk.core.engine.closed_book import closed_book
from ragdesk.core.engine.contracts import PassageText
from ragdesk.core.engine.generators import CausalLMGenerator
from ragdesk.core.engine.reading_state import middle_layer, read_again
from ragdesk.core.matching import answer_tokens
from ragdesk.core.types import Answer, AnswerToken, RetrievedDoc

NEW = 8


def _words(text: str) -> list[str]:
    # SQuAD normalization with words split at dashes, as DPR's tokenizer splits them
    return answer_tokens(re.sub("[-\u2010-\u2015\u2212]", " ", text))


def _normalized(title: str, text: str) -> str:
    return " " + " ".join(_words(f"{title} {text}")) + " "


@pytest.mark.parametrize("which", ["bart", "causal"])
@pytest.mark.parametrize("mode,num_beams", [("token", 1), ("token", 3), ("sequence", 1),
                                            ("sequence", 3)])
def test_every_grounded_answer_cites_a_passage_that_holds_it(
        bart_gen: Any, causal_gen: Any, make_cases: Any, which: str, mode: str,
        num_beams: int) -> None:
    engine = Engine(None, bart_gen if which == "bart" else causal_gen)  # type: ignore[arg-type]
    checked = 0
    for seed in range(12):
        case = make_cases(seed)
        ans = engine.answer_from_docs(case.question, case.hits, mode=mode, decoding="fast",
                                      num_beams=num_beams, max_new_tokens=NEW, grounded=True)
        words = _words(ans.text)
        if not words:
            continue  # an answer of punctuation alone holds no words to cite
        summary = summarize_sources(ans)
        assert summary.primary is not None
        top = ans.docs[summary.primary]
        # the independent check: the normalized answer, as whole words, in the cited passage
        assert " " + " ".join(words) + " " in _normalized(top.title, top.text), (
            ans.text, top.title)
        assert not summary.mixed
        for tok in ans.tokens:
            piece = " ".join(_words(tok.text))
            cited = ans.docs[tok.source]
            assert piece in _normalized(cited.title, cited.text), (tok.text, cited.title)
        checked += 1
    assert checked >= 8, "too few answers held words to make the check meaningful"


def _doc(k: int, title: str, text: str, prob: float) -> RetrievedDoc:
    return RetrievedDoc(id=k, title=title, text=text, score=prob, prob=prob)


def test_a_pieced_together_answer_is_marked_mixed_and_never_cites_a_non_holder() -> None:
    """The zorblat case: "July 19" pieced from "28 July 1914" while the posterior leads with
    the passage about the festival, which holds neither word."""
    docs = [_doc(0, "Zorblat festival", "It is held on the third Sunday of May.", 0.9),
            _doc(1, "World War I", "The war began on 28 July 1914.", 0.1)]
    toks = [AnswerToken(1, "July", [0.99, 0.01]), AnswerToken(2, " 19", [0.98, 0.02])]
    ans = Answer(question="when is the zorblat festival held", text="July 19", token_ids=[1, 2],
                 tokens=toks, docs=docs, logprob=-1.0, mode="token")
    assign_sources(ans)
    assert [t.source for t in ans.tokens] == [1, 1]
    summary = summarize_sources(ans)
    assert summary.mixed and summary.holders == [False, False]


def test_an_answer_held_by_a_passage_is_quoted_from_the_holder_with_the_most_mass() -> None:
    docs = [_doc(0, "A", "Jane Austen wrote it.", 0.5), _doc(1, "B", "no such words", 0.3),
            _doc(2, "C", "Jane Austen was born in 1775.", 0.2)]
    toks = [AnswerToken(1, "Jane", [0.2, 0.7, 0.1]), AnswerToken(2, " Austen", [0.1, 0.3, 0.6])]
    ans = Answer(question="who wrote pride and prejudice", text="Jane Austen", token_ids=[1, 2],
                 tokens=toks, docs=docs, logprob=-1.0, mode="token")
    assign_sources(ans)
    assert [t.source for t in ans.tokens] == [2, 2]  # C: 0.7 of mass against A's 0.3
    s = summarize_sources(ans)
    assert s.primary == 2 and s.shares[2] == 1.0 and not s.mixed


class _Snap:
    def __init__(self, folder: Path, name: str) -> None:
        self.folder, self.name = folder, name

        class _Enc:
            id = "tiny-encoder"

        self.encoder = _Enc()


class _Library:
    def __init__(self, snap: _Snap) -> None:
        self.snap = snap

    def get(self, name: str) -> _Snap:
        assert name == self.snap.name
        return self.snap

    def current(self) -> _Snap:
        return self.snap

    def close(self) -> None:
        pass


def _model(threshold: float, bias: float, reads: tuple[str, ...] = (),
           modes: tuple[str, ...] = (), probe: Probe | None = None) -> ConfidenceModel:
    n = len(FEATURES)
    weights = tuple(1e-9 if f in reads else 0.0 for f in FEATURES)
    return ConfidenceModel(FEATURES, (0.0,) * n, (1.0,) * n, weights, bias, threshold,
                           modes=modes, probe=probe)


def _judged(gen: Any, folder: Path, model: ConfidenceModel, every_feature: bool,
            case: Any) -> Answer:
    """The case's answer from an engine whose snapshot in ``folder`` holds ``model``."""
    write_snapshot_model(folder, gen.name, model)
    engine = Engine(None, gen, library=_Library(_Snap(folder, "snap")),  # type: ignore[arg-type]
                    every_feature=every_feature)
    ans = engine.answer_from_docs(case.question, case.hits, max_new_tokens=NEW,
                                  snapshot_name="snap")
    assert ans.text.strip()
    return ans


@pytest.mark.parametrize("bias,abstains", [(-3.0, True), (3.0, False)])
def test_the_engine_judges_answers_with_the_snapshots_model(
        causal_gen: Any, make_cases: Any, tmp_path: Path, bias: float, abstains: bool) -> None:
    write_snapshot_model(tmp_path, causal_gen.name, _model(0.5, bias, reads=CLOSED_BOOK))
    snap = _Snap(tmp_path, "snap")
    engine = Engine(None, causal_gen, library=_Library(snap))  # type: ignore[arg-type]
    case = make_cases(0)
    ans = engine.answer_from_docs(case.question, case.hits, max_new_tokens=NEW,
                                  snapshot_name="snap")
    assert ans.confidence == pytest.approx(1 / (1 + math.exp(-bias)))
    assert ans.abstained is abstains
    assert set(ans.features) == set(FEATURES) - set(READ_AGAIN)  # GPT-2 has no lean decoder
    kept = engine.answer_from_docs(case.question, case.hits, max_new_tokens=NEW,
                                   snapshot_name="snap", abstain=False)
    assert not kept.abstained and kept.text == ans.text  # the guess is the same either way
    stored = json.loads((tmp_path / "confidence.json").read_text())
    assert list(stored["models"]) == ["tiny-gpt2"]


def test_without_a_model_an_answer_has_no_confidence_and_never_abstains(
        causal_gen: Any, make_cases: Any) -> None:
    case = make_cases(1)
    ans = Engine(None, causal_gen).answer_from_docs(  # type: ignore[arg-type]
        case.question, case.hits, max_new_tokens=NEW)
    assert ans.confidence is None and not ans.abstained and ans.features


@pytest.mark.parametrize("modes,judged", [(("token",), True), (("token", "sequence"), True),
                                          (("sequence",), False), ((), True)])
def test_a_model_judges_only_answers_read_in_the_modes_it_was_fitted_on(
        causal_gen: Any, make_cases: Any, tmp_path: Path, modes: tuple[str, ...],
        judged: bool) -> None:
    write_snapshot_model(tmp_path, causal_gen.name,
                         _model(0.5, -3.0, reads=CLOSED_BOOK, modes=modes))
    engine = Engine(None, causal_gen, library=_Library(_Snap(tmp_path, "snap")))  # type: ignore[arg-type]
    case = make_cases(3)
    ans = engine.answer_from_docs(case.question, case.hits, max_new_tokens=NEW,
                                  snapshot_name="snap", mode="token")
    assert ans.mode == "token" and ans.text.strip()
    assert (ans.confidence is not None) is judged
    assert ans.abstained is judged  # the bias puts every judged answer under the threshold
    assert ("closed_book_s" in ans.timings) is judged  # no pass for a model not applied


@pytest.mark.parametrize("every_feature,reads,runs", [
    (False, (), False), (False, ("logprob",), False), (False, CLOSED_BOOK, True),
    (True, (), True)])
def test_the_closed_book_pass_runs_only_when_its_features_are_read_or_collected(
        causal_gen: Any, make_cases: Any, tmp_path: Path, every_feature: bool,
        reads: tuple[str, ...], runs: bool) -> None:
    case = make_cases(2)
    ans = _judged(causal_gen, tmp_path, _model(0.5, 0.0, reads=reads), every_feature, case)
    assert ("closed_book_s" in ans.timings) is runs
    plain = set(FEATURES) - set(READ_AGAIN)  # GPT-2 has no lean decoder to read again
    assert set(ans.features) == (plain if runs else plain - set(CLOSED_BOOK))
    if runs:
        prior = closed_book(causal_gen, case.question, ans.text, ans.style)
        assert ans.features["closed_book_lp"] == pytest.approx(prior.logprob, abs=1e-5)


@pytest.mark.parametrize("with_probe,reads_lp,every_feature", [
    (True, False, False), (False, True, False), (False, False, True), (False, False, False)])
def test_the_answer_is_read_again_after_the_quoted_passage_when_a_model_reads_it(
        gemma_parts: Any, make_cases: Any, tmp_path: Path, with_probe: bool, reads_lp: bool,
        every_feature: bool) -> None:
    import numpy as np

    model, tok = gemma_parts
    gen = CausalLMGenerator(model, tok, "tiny-gemma3")
    layers = gen.model.config.num_hidden_layers
    weights = np.random.default_rng(0).normal(size=gen.model.config.hidden_size)
    probe = Probe(middle_layer(layers), tuple(map(float, weights)), 0.25)
    case = make_cases(4)
    reads = (READING_PROBE, *((QUOTED_PASSAGE_LP,) if reads_lp else ()))
    ans = _judged(gen, tmp_path, _model(0.5, 0.0, reads=reads,
                                        probe=probe if with_probe else None),
                  every_feature, case)
    runs = with_probe or reads_lp or every_feature
    assert ("reading_state_s" in ans.timings) is runs
    assert (ans.reading_state is not None) is runs
    assert (QUOTED_PASSAGE_LP in ans.features) is runs
    assert (READING_PROBE in ans.features) is with_probe
    assert "reading_state" not in ans.to_json()  # hundreds of numbers: evaluation only
    if ans.reading_state is None:
        return
    expected = read_again(gen, case.question, [PassageText(d.title, d.text) for d in ans.docs],
                          summarize_sources(ans).primary, ans.text, ans.mode, ans.style)
    assert expected is not None and ans.reading_state.layer == expected.state.layer
    assert ans.reading_state.values == pytest.approx(expected.state.values, abs=1e-5)
    assert ans.features[QUOTED_PASSAGE_LP] == pytest.approx(expected.logprob, abs=1e-4)
    if with_probe:
        assert ans.features[READING_PROBE] == pytest.approx(
            probe.score(expected.state.values), abs=1e-4)


def test_a_probe_of_another_width_is_passed_over_not_an_error(
        gemma_parts: Any, make_cases: Any, tmp_path: Path) -> None:
    model, tok = gemma_parts
    gen = CausalLMGenerator(model, tok, "tiny-gemma3")
    layer = middle_layer(gen.model.config.num_hidden_layers)
    probe = Probe(layer, (1.0,) * (gen.model.config.hidden_size + 3), 0.0)
    ans = _judged(gen, tmp_path, _model(0.5, 0.0, reads=(READING_PROBE,), probe=probe),
                  False, make_cases(4))
    assert ans.reading_state is not None and READING_PROBE not in ans.features
    assert ans.confidence == pytest.approx(0.5)  # judged on the other features alone
