"""How a confidence reads on the card and in the CLI."""

from __future__ import annotations

from ragdesk.core.confidence import confidence_label


def test_a_tiny_confidence_reads_under_one_percent_not_zero() -> None:
    assert confidence_label(0.002) == "Low confidence (under 1%): may be wrong"
    assert confidence_label(0.012) == "Low confidence (1%): may be wrong"


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


def test_the_word_agrees_with_the_percent_shown() -> None:
    """At a band's edge the rounded percent decides: "Medium confidence (60%)" never."""
    from ragdesk.core.confidence.wording import confidence_level

    assert confidence_label(0.5965) == "High confidence (60%)"
    assert confidence_label(0.6049) == "High confidence (60%)"
    assert confidence_label(0.5949) == "Medium confidence (59%)"
    assert confidence_label(0.2951) == "Medium confidence (30%)"
    assert confidence_label(0.2949) == "Low confidence (29%): may be wrong"
    assert [confidence_level(p) for p in (None, 0.5965, 0.2951, 0.2949)] == [
        "unknown", "high", "medium", "low"]


def test_an_abstained_answer_speaks_of_its_guess_not_of_an_answer() -> None:
    """The guess behind "not found" is not given as the answer: no "may be wrong" about it."""
    assert confidence_label(0.012, abstained=True) == "Low confidence in the best guess (1%)"
    assert confidence_label(0.2951, abstained=True) == (
        "Medium confidence in the best guess (30%)")
    assert confidence_label(None, abstained=True) == confidence_label(None)


def test_one_percent_style_and_labels_for_every_front_end() -> None:
    from ragdesk.core.units import logprob_text, percent, prior_text

    assert [percent(x) for x in (0.0, 0.5965, 1.0)] == ["0%", "60%", "100%"]
    assert percent(0.28449, 1) == "28.4%"
    assert prior_text(0.948) == "retrieval 95%"
    assert prior_text(0.004) == "retrieval under 1%"  # read, though all but ruled out
    assert logprob_text(-0.3931) == "log p(answer) = -0.39"
