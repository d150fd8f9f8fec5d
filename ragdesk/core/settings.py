"""User settings: a small JSON file under the data directory, written atomically."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from ragdesk.core.atomic import write_json_atomic

log = logging.getLogger(__name__)

DEFAULTS: dict[str, Any] = {
    "model_pack": "starter",
    "mode": "token",
    "decoding": "fast",
    "n_docs": 5,
    "num_beams": 1,
    "max_new_tokens": 32,
    "retriever": "dense",
}


class Settings:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._values: dict[str, Any] = dict(DEFAULTS)
        if path.exists():
            try:
                loaded = json.loads(path.read_text(encoding="utf-8"))
                if isinstance(loaded, dict):
                    self._values.update(loaded)
            except (OSError, ValueError) as exc:
                # A damaged settings file must not stop the app; defaults are safe.
                log.warning("Ignoring unreadable settings file %s: %s", path, exc)

    def get(self, key: str, default: Any = None) -> Any:
        return self._values.get(key, default)

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def set(self, key: str, value: Any) -> None:
        self._values[key] = value
        self.save()

    def update(self, values: dict[str, Any]) -> None:
        self._values.update(values)
        self.save()

    def as_dict(self) -> dict[str, Any]:
        return dict(self._values)

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.path, self._values)
