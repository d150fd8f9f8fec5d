"""Honest answers: a calibrated P(right) for every answer, "not found in this snapshot" below
a measured threshold, and shown sources that hold what they are cited for."""

from ragdesk.core.confidence.features import (
    CLOSED_BOOK,
    FEATURES,
    QUOTED_PASSAGE_LP,
    READ_AGAIN,
    READING_PROBE,
    answer_features,
    holders,
)
from ragdesk.core.confidence.model import ConfidenceModel, fit_confidence, fit_logistic
from ragdesk.core.confidence.sources import SourceSummary, assign_sources, summarize_sources
from ragdesk.core.confidence.store import confidence_model, generator_key, write_snapshot_model
from ragdesk.core.confidence.wording import (
    after_streamed,
    confidence_label,
    memory_note,
    not_found_message,
    origin_note,
    shown_text,
)

__all__ = [
    "CLOSED_BOOK",
    "FEATURES",
    "QUOTED_PASSAGE_LP",
    "READING_PROBE",
    "READ_AGAIN",
    "ConfidenceModel",
    "SourceSummary",
    "after_streamed",
    "answer_features",
    "assign_sources",
    "confidence_label",
    "confidence_model",
    "fit_confidence",
    "fit_logistic",
    "generator_key",
    "holders",
    "memory_note",
    "not_found_message",
    "origin_note",
    "shown_text",
    "summarize_sources",
    "write_snapshot_model",
]
