"""Answer-option names shared by the engine, the CLI and the GUI (no heavy imports, so the
CLI can build its argument choices without loading the engine)."""

from __future__ import annotations

# "short": the answer alone (a name, date, number or phrase), what factoid questions want;
# "sentence": a full sentence.
STYLES = ("short", "sentence")
DEFAULT_STYLE = "short"
