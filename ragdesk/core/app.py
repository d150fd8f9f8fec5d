"""The application context shared by the CLI and the GUI: data directory, catalog, settings."""

from __future__ import annotations

import os
from functools import cached_property

from ragdesk.core.catalog import Catalog
from ragdesk.core.paths import DataDir
from ragdesk.core.settings import Settings


class AppContext:
    """Opens things lazily so that ``--help`` and ``--version`` touch no disk."""

    def __init__(self, data_dir: str | os.PathLike[str] | None = None) -> None:
        self.data = DataDir.resolve(data_dir)

    @cached_property
    def catalog(self) -> Catalog:
        self.data.ensure()
        return Catalog(self.data.catalog_path)

    @cached_property
    def settings(self) -> Settings:
        self.data.ensure()
        return Settings(self.data.settings_path)

    def close(self) -> None:
        if "catalog" in self.__dict__:
            self.catalog.close()
