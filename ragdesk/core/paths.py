"""Every location ragdesk writes to, from one place.

The data directory is, in order: an explicit override (``--data-dir``), the environment
variable ``RAGDESK_DATA_DIR``, the folder chosen in the settings dialog (kept in the user's
config folder, outside the data directory it names), or the platform's user data folder
(platformdirs). Everything the app writes (catalog, snapshots, settings, logs, model
imports) lives below it.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from ragdesk.core.errors import DataDirError

ENV_VAR = "RAGDESK_DATA_DIR"
APP_NAME = "ragdesk"
LOCATION_FILE = "data-dir.txt"


def default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def location_file() -> Path:
    """Where the data folder chosen in the settings dialog is remembered."""
    return Path(platformdirs.user_config_dir(APP_NAME, appauthor=False)) / LOCATION_FILE


def chosen_data_dir() -> Path | None:
    """The data folder chosen in the settings dialog, if any (an unreadable file counts as
    no choice: the default folder is still there to start from)."""
    try:
        text = location_file().read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return Path(text).expanduser() if text else None


def resolve_data_dir(override: str | os.PathLike[str] | None = None) -> Path:
    if override:
        return Path(override).expanduser().resolve()
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser().resolve()
    return chosen_data_dir() or default_data_dir()


@dataclass(frozen=True)
class DataDir:
    root: Path

    @classmethod
    def resolve(cls, override: str | os.PathLike[str] | None = None) -> DataDir:
        return cls(resolve_data_dir(override))

    @property
    def catalog_path(self) -> Path:
        return self.root / "catalog.sqlite"

    @property
    def snapshots_dir(self) -> Path:
        return self.root / "snapshots"

    @property
    def staging_dir(self) -> Path:
        """Snapshots under construction; renamed into ``snapshots_dir`` only when complete."""
        return self.root / "staging"

    @property
    def models_dir(self) -> Path:
        """Imported models and assembled starter-pack files."""
        return self.root / "models"

    @property
    def logs_dir(self) -> Path:
        return self.root / "logs"

    @property
    def settings_path(self) -> Path:
        return self.root / "settings.json"

    def snapshot_dir(self, slug: str) -> Path:
        return self.snapshots_dir / slug

    def ensure(self) -> DataDir:
        """Create the folder tree and check that it is writable, with a clear error if not."""
        try:
            for d in (self.root, self.snapshots_dir, self.staging_dir, self.models_dir,
                      self.logs_dir):
                d.mkdir(parents=True, exist_ok=True)
            fd, probe = tempfile.mkstemp(prefix=".write-test-", dir=self.root)
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            raise DataDirError(
                f"The data directory {self.root} cannot be used: {exc.strerror or exc}."
            ) from exc
        return self
