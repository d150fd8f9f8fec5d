"""``calibration.json``: the retrieval temperature fitted for one snapshot.

It sits beside the manifest and is not among its checksummed files: calibrating a snapshot
changes how its scores are read, not what it holds, and may be redone at any time.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path

from ragdesk.core.atomic import write_json_atomic
from ragdesk.core.encoders import EncoderInfo
from ragdesk.core.posterior import KNOWN_TEMPERATURES, check_temperature, default_temperature

log = logging.getLogger(__name__)

CALIBRATION_FILE = "calibration.json"


@dataclass(frozen=True)
class Calibration:
    temperature: float
    questions: int
    source: str  # what it was fitted on, for the inspector and `index list`
    log_likelihood: float | None = None
    log_likelihood_at_1: float | None = None

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def read_calibration(folder: Path) -> Calibration | None:
    path = folder / CALIBRATION_FILE
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
        return Calibration(temperature=check_temperature(d["temperature"]),
                           questions=int(d["questions"]), source=str(d["source"]),
                           log_likelihood=d.get("log_likelihood"),
                           log_likelihood_at_1=d.get("log_likelihood_at_1"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
        # A damaged calibration must not make a good snapshot unusable: fall back loudly.
        log.warning("Ignoring %s (%s); using the encoder's default temperature.", path, exc)
        return None


def write_calibration(folder: Path, calibration: Calibration) -> None:
    check_temperature(calibration.temperature)
    write_json_atomic(folder / CALIBRATION_FILE, calibration.to_json())


def snapshot_temperature(folder: Path, encoder: EncoderInfo) -> tuple[float, str]:
    """τ for a snapshot and where it came from ("fitted on ...", "known", "default")."""
    cal = read_calibration(folder)
    if cal is not None:
        return cal.temperature, f"fitted on {cal.questions} questions ({cal.source})"
    t = default_temperature(encoder.id, encoder.normalize)
    if encoder.id in KNOWN_TEMPERATURES:
        return t, f"measured for {encoder.id}"
    return t, "normalized encoder default (1/20)" if encoder.normalize else "DPR (τ = 1)"
