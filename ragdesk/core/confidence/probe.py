"""A linear probe of the reader's state: how right the answer looks from inside the model.

The generator's residual stream after its middle layer, averaged over the answer's tokens as
it reads them after the passage it quotes (:mod:`ragdesk.core.engine.reading_state`), holds
something about whether the answer is right that the answer's probabilities do not (linear
probes of middle layers: Azaria & Mitchell 2023, "The Internal State of an LLM Knows When It's
Lying"; Kadavath et al. 2022). One logistic regression over that vector gives one number, the
``reading_probe`` feature, which the confidence model weighs beside the others.

It is fitted with the confidence model (:mod:`ragdesk.core.evaluation.probe_fit`).
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ragdesk.core.types import ReadingState

_DIGITS = 7  # significant digits kept in the model file (a few kB a probe)


@dataclass(frozen=True)
class Probe:
    """``score(h) = intercept + Σ weights_i h_i`` over the state after ``layer`` (0-based)."""

    layer: int
    weights: tuple[float, ...]
    intercept: float

    def score(self, state: Sequence[float]) -> float:
        if len(state) != len(self.weights):
            raise ValueError(f"a reading state of {len(state)} numbers for a probe of "
                             f"{len(self.weights)}")
        return self.intercept + float(np.dot(np.asarray(state, dtype=np.float64),
                                             np.asarray(self.weights, dtype=np.float64)))

    def reads(self, state: ReadingState) -> bool:
        """Whether ``state`` is what this probe was fitted on: its layer and its width."""
        return state.layer == self.layer and len(state.values) == len(self.weights)

    def to_json(self) -> dict[str, Any]:
        return {"layer": self.layer, "weights": [float(f"{w:.{_DIGITS}g}") for w in self.weights],
                "intercept": self.intercept}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Probe:
        layer = d.get("layer")
        raw = d.get("weights")
        if not isinstance(layer, int) or layer < 0 or not isinstance(raw, list) or not raw:
            raise ValueError("a reading probe needs a layer and its weights")
        weights = tuple(float(w) for w in raw)
        intercept = float(d["intercept"])
        if not all(math.isfinite(v) for v in (*weights, intercept)):
            raise ValueError("reading probe holds a non-finite number")
        return cls(layer, weights, intercept)


def state_json(state: ReadingState) -> dict[str, object]:
    """A reading state as an evaluation row (``eval --out``) keeps it: see :func:`row_state`."""
    return {"layer": state.layer, "float32": encode_state(state.values)}


def row_state(row: Mapping[str, object]) -> ReadingState | None:
    """The reading state an evaluation row (``eval --out``) holds, if any."""
    raw = row.get("reading_state")
    if not isinstance(raw, Mapping) or not isinstance(layer := raw.get("layer"), int):
        return None
    values = decode_state(raw.get("float32"))
    return None if values is None or layer < 0 else ReadingState(layer, values)


def encode_state(state: Sequence[float]) -> str:
    """A reading state as text for an evaluation row: float32, little-endian, base64."""
    return base64.b64encode(np.asarray(state, dtype="<f4").tobytes()).decode("ascii")


def decode_state(text: object) -> list[float] | None:
    """The state :func:`encode_state` wrote; None for anything else."""
    if not isinstance(text, str) or not text:
        return None
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except ValueError:
        return None
    if not raw or len(raw) % 4:
        return None
    values = np.frombuffer(raw, dtype="<f4").astype(np.float64)
    return values.tolist() if bool(np.isfinite(values).all()) else None
