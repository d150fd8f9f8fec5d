"""The conversation store let text that is not text reach SQLite and the disk.

A lone surrogate raised a raw UnicodeEncodeError from search, title search, rename, JSON
import and export; a NUL in a search said "unterminated string"; ``export_to`` a folder
raised IsADirectoryError. Each must be a clear :class:`BadInputError` (or just work).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

import pytest

from ragdesk.core.catalog import Catalog
from ragdesk.core.conversations import ConversationStore
from ragdesk.core.errors import BadInputError
from tests.core.test_conversations import make_answer

LONE = "who \ud800 wrote it"


@pytest.fixture()
def store(tmp_path: Path) -> ConversationStore:
    s = ConversationStore(Catalog(tmp_path / "catalog.sqlite"))
    conv = s.create("Radium notes")
    s.add_answer(conv.id, make_answer("Who discovered radium?", "Marie Curie"))
    return s


def test_search_with_a_lone_surrogate(store: ConversationStore) -> None:
    with pytest.raises(BadInputError, match="unpaired surrogate"):
        store.search(LONE)
    with pytest.raises(BadInputError, match="unpaired surrogate"):
        store.search_titles(LONE)


def test_rename_and_create_with_a_lone_surrogate(store: ConversationStore) -> None:
    conv = store.list_conversations()[0]
    with pytest.raises(BadInputError, match="unpaired surrogate"):
        store.rename(conv.id, LONE)
    with pytest.raises(BadInputError, match="unpaired surrogate"):
        store.create(LONE)
    assert store.get(conv.id).title == "Radium notes"


def test_a_nul_in_a_search_is_a_word_break(store: ConversationStore) -> None:
    hits = store.search("radium\x00")
    assert [h.question for h in hits] == ["Who discovered radium?"]
    assert store.search("\x00") == []
    assert [c.title for c in store.search_titles("Radium\x00notes")] == ["Radium notes"]


def test_import_with_a_lone_surrogate_adds_nothing(store: ConversationStore,
                                                   tmp_path: Path) -> None:
    conv = store.list_conversations()[0]
    export = store.export_json(conv.id)
    cast(list[dict[str, object]], export["answers"])[0]["text"] = "Marie \udcff Curie"
    before = len(store.list_conversations())
    with pytest.raises(BadInputError, match="unpaired surrogate"):
        store.import_json(export)
    # the same through a file, where it arrives as an escape
    path = tmp_path / "c.json"
    path.write_text(json.dumps(export), encoding="utf-8")
    with pytest.raises(BadInputError, match="unpaired surrogate"):
        store.import_file(path)
    assert len(store.list_conversations()) == before


def test_import_file_refuses_deep_json(store: ConversationStore, tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"answers": ' + "[" * 50_000 + "]" * 50_000 + "}", encoding="utf-8")
    with pytest.raises(BadInputError, match="nested more than"):
        store.import_file(path)


def test_export_to_a_bad_name_or_a_folder(store: ConversationStore, tmp_path: Path) -> None:
    conv = store.list_conversations()[0]
    with pytest.raises(BadInputError, match="not valid text"):
        store.export_to(conv.id, tmp_path / "chat\ud800.json")
    with pytest.raises(BadInputError, match="is a folder"):
        store.export_to(conv.id, tmp_path)
    out = store.export_to(conv.id, tmp_path / "chat.md")
    assert "Marie Curie" in out.read_text(encoding="utf-8")
