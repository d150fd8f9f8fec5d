"""User settings: a small JSON file under the data directory, written atomically.

The GUI writes settings from more than one thread (theme and geometry on the GUI thread, the
model pack on the jobs thread) and a CLI command may run beside the app, so every write holds
a thread lock and a file lock and re-reads the file first: a write changes only its own keys
and never puts back another writer's keys as they were when this object was created.

A file that cannot be parsed is moved aside (``settings.json.corrupt-<time>``) rather than
silently overwritten, and :attr:`Settings.problem` says so, for the front end to show.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path

from filelock import FileLock

from ragdesk.core.atomic import write_json_atomic
from ragdesk.core.options import DEFAULT_OPTIONS

log = logging.getLogger(__name__)

# What a key reads as when the file does not hold it: the answer options' one set of
# defaults. The model pack has none here on purpose: a pack the user chose must be told apart
# from no choice (a snapshot's own pack comes before the starter, never before a choice).
DEFAULTS: dict[str, object] = {
    k: v for k, v in DEFAULT_OPTIONS.to_settings().items() if v is not None}

CORRUPT_SUFFIX = ".corrupt-"


class Settings:
    def __init__(self, path: Path) -> None:
        self.path = path
        # What went wrong reading the file (None when nothing did), for the front end to show.
        self.problem: str | None = None
        self._lock = threading.RLock()
        self._file_lock = FileLock(str(path.with_name(f".{path.name}.lock")))
        # Only what was read or set: the file never freezes a default into a choice.
        self._values: dict[str, object] = self._read(first=True)

    def _read(self, *, first: bool = False) -> dict[str, object]:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            if first:
                self.problem = (f"The settings file {self.path} cannot be read "
                                f"({exc.strerror or exc}); ragdesk uses its defaults.")
                log.warning("%s", self.problem)
            return {}
        try:
            loaded = json.loads(raw.decode("utf-8"))
            if not isinstance(loaded, dict):
                raise ValueError(f"a JSON {type(loaded).__name__} instead of an object")
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError, JSONDecodeError
            self._set_aside(exc)
            return {}
        return loaded

    def _set_aside(self, exc: Exception) -> None:
        # Moved, not deleted: the user may want to repair it; a rename keeps it out of the
        # way of the next write, and the warning is given once, naming the copy.
        backup = self.path.with_name(
            f"{self.path.name}{CORRUPT_SUFFIX}{time.strftime('%Y%m%d-%H%M%S')}")
        n = 1
        while backup.exists():
            n += 1
            backup = backup.with_name(f"{backup.name.split('~')[0]}~{n}")
        try:
            os.replace(self.path, backup)
            kept = f"it was moved to {backup}"
        except OSError as move_exc:
            kept = f"it could not be moved aside ({move_exc.strerror or move_exc})"
        self.problem = (f"The settings file {self.path} is damaged ({exc}); {kept}. ragdesk "
                        "uses its default settings (model pack, answer options) until you set "
                        "them again; repair that copy and move it back to keep your old ones.")
        log.warning("%s", self.problem)

    def get(self, key: str, default: object = None) -> object:
        with self._lock:
            if key in self._values:
                return self._values[key]
        return DEFAULTS.get(key, default)

    def chosen(self, key: str) -> object:
        """The value the file holds or this process set; None for a default or nothing."""
        with self._lock:
            return self._values.get(key)

    def __getitem__(self, key: str) -> object:
        with self._lock:
            if key in self._values:
                return self._values[key]
        return DEFAULTS[key]

    def set(self, key: str, value: object) -> None:
        self.update({key: value})

    def update(self, values: dict[str, object]) -> None:
        with self._lock, self._locked_file():
            # Another process (or Settings object) may have written since we read the file.
            self._values = {**self._read(), **values}
            self._write()

    def as_dict(self) -> dict[str, object]:
        with self._lock:
            return {**DEFAULTS, **self._values}

    def save(self) -> None:
        with self._lock, self._locked_file():
            self._write()

    def _locked_file(self) -> FileLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        return self._file_lock

    def _write(self) -> None:
        write_json_atomic(self.path, self._values)
