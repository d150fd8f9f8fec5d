"""A small synthetic task: each answer is in exactly one passage.

Eight people each have a secret word (the answers) and a favourite colour (a distractor
passage about the same person, without the answer).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

NAMES = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi"]
CODES = ["apple", "river", "stone", "cloud", "green", "house", "music", "water"]
COLOURS = ["red", "blue", "pink", "gold", "grey", "black", "white", "brown"]


def passages() -> list[tuple[str, str]]:
    gold = [(n, f"the secret word of {n} is {c}.") for n, c in zip(NAMES, CODES, strict=True)]
    other = [(n, f"the favourite colour of {n} is {k}.")
             for n, k in zip(NAMES, COLOURS, strict=True)]
    return gold + other


def questions() -> list[dict[str, Any]]:
    return [{"question": f"what is the secret word of {n}?", "answer": [c]}
            for n, c in zip(NAMES, CODES, strict=True)]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def build_snapshot(data_root: Path, encoder: Path, name: str = "synth") -> None:
    """Import the passages into a real snapshot under ``data_root`` (tiny encoder)."""
    from ragdesk.core.app import AppContext
    from ragdesk.core.snapshots import import_snapshot

    src = write_jsonl(data_root.parent / f"{name}-passages.jsonl",
                      [{"title": t, "text": x} for t, x in passages()])
    ctx = AppContext(data_root)
    try:
        import_snapshot(ctx.data, ctx.catalog, src, name=name, encoder=str(encoder))
        ctx.catalog.set_active(name)
    finally:
        ctx.close()


def register_tiny_pack(data_root: Path, name: str, question_encoder: Path,
                       passage_encoder: Path, generator: Path, kind: str = "seq2seq",
                       default_mode: str | None = None) -> None:
    from ragdesk.core.app import AppContext
    from ragdesk.core.models.packs import PackSpec, register_pack

    ctx = AppContext(data_root)
    try:
        register_pack(ctx.catalog, PackSpec(
            name=name, kind="custom", question_encoder=str(question_encoder),
            passage_encoder=str(passage_encoder), generator=str(generator),
            generator_kind=kind, default_mode=default_mode))
    finally:
        ctx.close()
