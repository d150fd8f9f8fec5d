"""How a confidence reads on the card and in the CLI."""

from __future__ import annotations

from ragdesk.core.confidence import confidence_label


def test_a_tiny_confidence_reads_under_one_percent_not_zero() -> None:
    assert confidence_label(0.002) == "Low confidence (under 1 %): may be wrong"
    assert confidence_label(0.012) == "Low confidence (1 %): may be wrong"
