"""The folds every cross-validation of the confidence fit uses."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np


def interleaved(n: int, folds: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(test, train) masks over ``n`` rows, row i in fold i mod ``folds``: reproducible, and
    each fold holds every part of the file."""
    idx = np.arange(n)
    for f in range(folds):
        test = idx % folds == f
        yield test, ~test
