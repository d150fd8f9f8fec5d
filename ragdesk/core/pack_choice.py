"""The model pack the user chose: the settings key it is kept under, the pack that answers
when none was chosen, and reading the choice.

Kept apart from :mod:`ragdesk.core.models.packs` (which defines the packs and re-exports
these) so that the GUI can read the choice on its own thread while the window opens:
importing the models package there would load numpy and cost the start half a second.
"""

from __future__ import annotations

from typing import Protocol

SETTINGS_KEY = "model_pack"
STARTER = "starter"


class SettingsReader(Protocol):
    """What reading the choice needs of ``ragdesk.core.settings.Settings``."""

    def get(self, key: str, default: object = None) -> object: ...


def chosen_pack(settings: SettingsReader) -> str:
    """The pack chosen (``ragdesk models use``, the GUI's pack menu), else the starter pack."""
    return str(settings.get(SETTINGS_KEY) or STARTER)
