"""What the fitting tests' rows share."""

from __future__ import annotations

from ragdesk.core.confidence import FEATURES, READING_PROBE

# The features of a row without a reading state (the probe's feature is fitted from states).
PLAIN = tuple(n for n in FEATURES if n != READING_PROBE)
