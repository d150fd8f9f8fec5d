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


def fallback_note(chosen: str, snapshot: str, answering: str) -> str:
    """What every front end says when the pack chosen cannot query the snapshot and the
    snapshot's own pack answers instead (:func:`ragdesk.core.session.pack_for`)."""
    return f"The {chosen} pack cannot query {snapshot}; answering with its own pack {answering}."


def chosen_or_none(settings: SettingsReader) -> str | None:
    """The pack chosen (``ragdesk models use``, the GUI's pack menu); None: never chosen."""
    value = settings.get(SETTINGS_KEY)
    return str(value) if value else None


def chosen_pack(settings: SettingsReader) -> str:
    """The pack chosen, else the starter pack. Not always the pack that answers: a snapshot
    the choice cannot query answers with its own (``ragdesk.core.session.pack_for``)."""
    return chosen_or_none(settings) or STARTER
