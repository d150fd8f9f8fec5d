"""The words every front end uses for an answer's confidence and for "not found"."""

from __future__ import annotations

from ragdesk.core.types import Answer
from ragdesk.core.units import percent

# P(right) at or above these reads as high / medium; below the second as low.
HIGH = 0.6
MEDIUM = 0.3


def shown_percent(confidence: float) -> int:
    """The whole percent a front end shows for ``confidence``."""
    return round(100 * confidence)


def confidence_level(confidence: float | None) -> str:
    """"high", "medium", "low" or "unknown" (no model judged the answer). Decided on the
    percent shown, so that the word and the number agree: 0.597 shows as 60 % and reads
    high, as 0.603 does."""
    if confidence is None:
        return "unknown"
    pct = shown_percent(confidence)
    return ("high" if pct >= round(100 * HIGH) else "medium" if pct >= round(100 * MEDIUM)
            else "low")


def confidence_label(confidence: float | None, abstained: bool = False) -> str:
    """A phrase read at a glance: "High confidence (72%)". For an answer that abstained
    (``abstained``) it speaks of the guess kept behind the not-found message, which no front
    end gives as the answer: "Low confidence in the best guess (3%)"."""
    level = confidence_level(confidence)
    if confidence is None:
        return "Confidence unknown (not calibrated for this snapshot, model and reading mode)"
    # "0%" reads as "certainly wrong", which no fitted model can say
    pct = percent(shown_percent(confidence) / 100) if confidence >= 0.005 else "under 1%"
    if abstained:
        return f"{level.capitalize()} confidence in the best guess ({pct})"
    if level == "high":
        return f"High confidence ({pct})"
    if level == "medium":
        return f"Medium confidence ({pct})"
    return f"Low confidence ({pct}): may be wrong"


def not_found_message(snapshot: str | None) -> str:
    """What an abstained answer says instead of its guess."""
    where = f"the snapshot '{snapshot}'" if snapshot else "this snapshot"
    # every front end keeps the guess within reach (a button, a line after this, a field)
    return (f"Not found in {where}: the passages retrieved do not seem to hold the answer. "
            "The closest passages and the best guess are kept for you to check.")


def memory_note(snapshot: str | None, holder: int | None = None) -> str:
    """What an answer from the reader's memory says beside its text; ``holder``: the rank
    of a passage that holds its words after all (its shown source)."""
    where = f"the snapshot '{snapshot}'" if snapshot else "this snapshot"
    if holder is not None:
        return (f"From the reader's memory, not read from the passages of {where}; passage "
                f"[{holder + 1}] holds these words.")
    return (f"From the reader's memory: the passages of {where} did not give this answer, "
            "so it has no source to check.")


def origin_note(answer: Answer) -> str | None:
    """The memory note of an answer from the reader's memory (None for any other), naming
    the passage that holds its words where one does."""
    if not answer.from_memory:
        return None
    from ragdesk.core.confidence.sources import summarize_sources

    return memory_note(answer.snapshot, summarize_sources(answer).primary)


def shown_text(answer: Answer) -> str:
    """The answer as a front end states it: the not-found message when it abstained (its
    ``text`` then holds the best guess), else its text."""
    return not_found_message(answer.snapshot) if answer.abstained else answer.text


def after_streamed(answer: Answer) -> list[str]:
    """The lines that follow an answer whose tokens were shown as they were read, where those
    tokens are not what it states: after a guess that abstained, the not-found message and
    the guess; after the passages' answer, the one kept from the reader's memory instead.
    Empty when what streamed is the answer. Streamed words cannot be taken back, so every
    streaming front end says this after them."""
    if answer.abstained:
        return [shown_text(answer), f"Best guess: {answer.text or '(empty)'}"]
    if answer.from_memory:
        return [f"Instead: {answer.text or '(empty answer)'}"]
    return []
