"""Answer-option names shared by the engine, the CLI and the GUI (no heavy imports, so the
CLI can build its argument choices without loading the engine)."""

from __future__ import annotations

# "short": the answer alone (a name, date, number or phrase), what factoid questions want;
# "sentence": a full sentence.
STYLES = ("short", "sentence")
DEFAULT_STYLE = "short"

# Grounded decoding (answers are spans of the passages): None means "automatic", on for
# causal generators — measured on the starter pack, where it raised exact match (see
# docs/benchmarks.md) — and off for seq2seq RAG checkpoints, which the paper ran free.
GROUNDED_AUTO = None


def resolve_grounded(grounded: bool | None, generator_kind: str) -> bool:
    if grounded is None:
        return generator_kind == "causal"
    return bool(grounded)
