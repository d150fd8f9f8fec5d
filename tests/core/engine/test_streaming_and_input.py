"""Streaming, cancellation, the generator input format and bad input."""

from __future__ import annotations

from typing import Any

import pytest

from ragdesk.core.engine.generators import PassageText, Seq2SeqGenerator, rag_input_text
from ragdesk.core.engine.rag_sequence import rag_sequence_generate
from ragdesk.core.engine.rag_token import rag_token_generate
from ragdesk.core.errors import BadInputError, MissingModelError, RagdeskError
from ragdesk.core.progress import CancelToken
from ragdesk.core.types import AnswerToken, Hit

from .conftest import reference_inputs

NEW = 10


def _generate(gen: Any, case: Any, mode: str, decoding: str, beams: int, **kw: Any) -> Any:
    if mode == "token":
        return rag_token_generate(gen, case.question, case.hits, num_beams=beams,
                                  max_new_tokens=NEW, **kw)
    return rag_sequence_generate(gen, case.question, case.hits, decoding=decoding,
                                 num_beams=beams, max_new_tokens=NEW, **kw)


@pytest.mark.parametrize(("mode", "decoding", "beams"), [
    ("token", "thorough", 1), ("token", "thorough", 3), ("sequence", "thorough", 1),
    ("sequence", "thorough", 3), ("sequence", "fast", 1), ("sequence", "fast", 3)])
def test_streamed_tokens_are_the_answer(bart_gen: Any, make_cases: Any, mode: str,
                                        decoding: str, beams: int) -> None:
    case = make_cases(0)
    streamed: list[AnswerToken] = []
    ans = _generate(bart_gen, case, mode, decoding, beams, on_token=streamed.append)
    assert streamed == ans.tokens
    assert "".join(t.text for t in ans.tokens).strip() == ans.text
    assert ans.text == bart_gen.decode(ans.token_ids).strip()


def test_rag_token_greedy_streams_while_decoding(bart_gen: Any, make_cases: Any) -> None:
    """Each token arrives before the next one is computed: cancelling from the callback
    stops decoding right there."""
    case = make_cases(1)
    full = _generate(bart_gen, case, "token", "thorough", 1, min_new_tokens=NEW)
    cancel = CancelToken()
    got: list[AnswerToken] = []

    def on_token(tok: AnswerToken) -> None:
        got.append(tok)
        if len(got) == 3:
            cancel.cancel()

    ans = _generate(bart_gen, case, "token", "thorough", 1, min_new_tokens=NEW,
                    on_token=on_token, cancel=cancel)
    assert ans.cancelled
    assert ans.token_ids == full.token_ids[:3]
    assert ans.tokens == got


@pytest.mark.parametrize(("mode", "decoding", "beams"), [
    ("token", "thorough", 2), ("sequence", "thorough", 1), ("sequence", "thorough", 2),
    ("sequence", "fast", 2)])
def test_cancel_before_the_end_returns_what_is_there(bart_gen: Any, make_cases: Any,
                                                     mode: str, decoding: str,
                                                     beams: int) -> None:
    case = make_cases(2)
    cancel = CancelToken()
    cancel.cancel()  # checked between steps: the first step still runs
    ans = _generate(bart_gen, case, mode, decoding, beams, min_new_tokens=NEW, cancel=cancel)
    assert ans.cancelled
    assert len(ans.token_ids) <= 1
    assert all(abs(sum(t.posterior) - 1) < 1e-5 for t in ans.tokens)
    done = _generate(bart_gen, case, mode, decoding, beams, min_new_tokens=NEW)
    assert not done.cancelled and len(done.token_ids) > len(ans.token_ids)


# ---------------------------------------------------------------- input format ---------


def test_input_ids_equal_rag_retriever(bart_gen: Any, rag_token_ref: Any) -> None:
    titles = ['"Quoted" title', '""Double""', "Plain  spaced", 'ends with "quote"']
    texts = ["Some  text with  double spaces.", "Text   with three spaces.", "x", " lead"]
    q = "what  is it?"
    hits = [Hit(i, t, x, 0.0) for i, (t, x) in enumerate(zip(titles, texts, strict=True))]
    ids, mask = reference_inputs(bart_gen.tokenizer, rag_token_ref.config, q, hits)
    for i, h in enumerate(hits):
        ours = bart_gen.input_ids(q, PassageText(h.title, h.text))
        assert ours == ids[i][mask[i].bool()].tolist()
    assert rag_input_text('"A"', "b", "c") == "A / b // c"


def test_long_passage_is_cut_not_the_question(bart_gen: Any, tiny_models: Any) -> None:
    long_text = " ".join(t for _, t in tiny_models.corpus[:20])
    q = "which of these places was founded first and by whom exactly"
    ids = bart_gen.input_ids(q, PassageText("Title", long_text))
    assert len(ids) == 300
    tail = bart_gen.tokenizer(" // " + q, add_special_tokens=False)["input_ids"]
    assert ids[-len(tail) - 1:-1] == tail
    assert ids[-1] == bart_gen.tokenizer.eos_token_id


def test_question_longer_than_the_window_keeps_the_question(bart_gen: Any) -> None:
    q = " ".join(["why"] * 170)
    tail = bart_gen.tokenizer(" // " + q, add_special_tokens=False)["input_ids"]
    assert 300 < len(tail) < bart_gen.max_positions - 20
    ids = bart_gen.input_ids(q, PassageText("Title", "a passage " * 50))
    assert ids[-len(tail) - 1:-1] == tail
    assert len(ids) > len(tail) + 2  # some of the passage is still there
    assert len(ids) <= bart_gen.max_positions


@pytest.mark.parametrize("question", ["", "   \n\t"])
def test_empty_question(bart_gen: Any, make_cases: Any, question: str) -> None:
    case = make_cases(0)
    with pytest.raises(BadInputError, match="empty"):
        rag_token_generate(bart_gen, question, case.hits)


def test_question_too_long_for_the_generator(bart_gen: Any, make_cases: Any) -> None:
    case = make_cases(0)
    with pytest.raises(BadInputError, match=r"question is \d+ tokens long"):
        rag_sequence_generate(bart_gen, " ".join(["why"] * 700), case.hits)


@pytest.mark.parametrize("kw", [{"num_beams": 0}, {"max_new_tokens": 0},
                                {"min_new_tokens": 50}, {"decoding": "slow"}])
def test_bad_options(bart_gen: Any, make_cases: Any, kw: dict[str, Any]) -> None:
    case = make_cases(0)
    with pytest.raises(BadInputError):
        rag_sequence_generate(bart_gen, case.question, case.hits, **kw)


def test_no_passages(bart_gen: Any) -> None:
    with pytest.raises(BadInputError, match="No passages"):
        rag_token_generate(bart_gen, "who?", [])


def test_generator_without_tokenizer(bart_gen: Any) -> None:
    with pytest.raises(MissingModelError, match="no tokenizer"):
        # deliberately no tokenizer: the runtime check is what is tested
        Seq2SeqGenerator(bart_gen.model, None, "x")  # type: ignore[arg-type]


def test_loading_folders_that_are_not_generators(tmp_path: Any, tiny_models: Any) -> None:
    import shutil

    from ragdesk.core.models import load_generator

    no_tok = tmp_path / "no-tokenizer"
    no_tok.mkdir()
    for f in ("config.json", "model.safetensors", "generation_config.json"):
        shutil.copy(tiny_models.bart / f, no_tok / f)
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "notes.txt").write_text("not a model")
    for folder in (no_tok, junk, tmp_path / "missing"):
        with pytest.raises(RagdeskError):
            load_generator(str(folder))
