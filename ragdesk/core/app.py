"""The application context shared by the CLI and the GUI: data directory, catalog, settings."""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING

from ragdesk.core.paths import DataDir
from ragdesk.core.settings import Settings

if TYPE_CHECKING:
    from ragdesk.core.catalog import Catalog


class AppContext:
    """Opens things lazily so that ``--help`` and ``--version`` touch no disk.

    ``on_notice`` receives what the user must be told about the data directory as it is
    opened (a damaged settings file moved aside, an emptied catalog restored): the CLI
    prints it on stderr; without a callback it is only logged.
    """

    def __init__(self, data_dir: str | os.PathLike[str] | None = None,
                 on_notice: Callable[[str], None] | None = None) -> None:
        self.data = DataDir.resolve(data_dir)
        self._on_notice = on_notice

    def _notice(self, text: str | None) -> None:
        if text and self._on_notice is not None:
            self._on_notice(text)

    @cached_property
    def catalog(self) -> Catalog:
        # imported here: SQLAlchemy is half a second of a command that may not need it
        # (`ragdesk ask` answered by a running server)
        from ragdesk.core.catalog import Catalog

        self.data.ensure()
        catalog = Catalog(self.data.catalog_path)
        if catalog.problem:
            from ragdesk.core.snapshots.lifecycle import recover

            # Register the snapshot folders the restored (or new) catalog does not know.
            recover(self.data, catalog)
            self._notice(catalog.problem)
        return catalog

    @cached_property
    def settings(self) -> Settings:
        self.data.ensure()
        settings = Settings(self.data.settings_path)
        self._notice(settings.problem)
        return settings

    def close(self) -> None:
        if "catalog" in self.__dict__:
            self.catalog.close()
