"""How a confidence reads on the card and in the CLI."""

from __future__ import annotations

from ragdesk.core.confidence import confidence_label


def test_a_tiny_confidence_reads_under_one_percent_not_zero() -> None:
    assert confidence_label(0.002) == "Low confidence (under 1 %): may be wrong"
    assert confidence_label(0.012) == "Low confidence (1 %): may be wrong"


def test_what_follows_streamed_words_that_are_not_the_answer() -> None:
    from ragdesk.core.confidence import after_streamed, not_found_message
    from ragdesk.core.types import Answer

    def answer(**kw: object) -> Answer:
        return Answer(question="q", text="Canberra", token_ids=[], tokens=[], docs=[], logprob=-1.0,
                      mode="together", snapshot="wiki", **kw)  # type: ignore[arg-type]

    assert after_streamed(answer()) == []
    assert after_streamed(answer(from_memory=True)) == ["Instead: Canberra"]
    assert after_streamed(answer(abstained=True)) == [not_found_message("wiki"),
                                                      "Best guess: Canberra"]
    assert after_streamed(answer(abstained=True, from_memory=True))[1] == "Best guess: Canberra"
