"""Conversations in the catalog: round trips, FTS5 search, delete/undo, answers that outlive
their snapshot, exports, and the schema-4 migration of a catalog written by the v3 code."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from ragdesk.core.catalog import SCHEMA_VERSION, Catalog
from ragdesk.core.catalog.migrations import migrate
from ragdesk.core.conversation_types import HIT_END, HIT_START, UNTITLED
from ragdesk.core.conversations import ConversationStore, fts_query
from ragdesk.core.errors import BadInputError, NotFoundError
from ragdesk.core.export import answer_from_json
from ragdesk.core.types import Answer, AnswerToken, RetrievedDoc

FIXTURES = Path(__file__).parent / "fixtures"


def make_answer(question: str, text: str, *, k: int = 3, snapshot: str | None = "wiki",
                docs: list[RetrievedDoc] | None = None) -> Answer:
    words = text.split()
    if docs is None:
        docs = [RetrievedDoc(100 + j, f"Title {j}", f"passage {j} about {question}",
                             80.0 - j, [0.5, 0.3, 0.2, 0.0][j % 4], snapshot)
                for j in range(k)]
    k = len(docs)
    # Posteriors with values JSON and binary floats disagree on when written carelessly.
    tokens = [AnswerToken(7 + i, ("" if i == 0 else " ") + w,
                          [1 / 3, 2 / 3 - 1e-17, 1e-300][:k] if k == 3 else [1 / k] * k)
              for i, w in enumerate(words)]
    return Answer(question=question, text=text, token_ids=[0, *[t.id for t in tokens], 2],
                  tokens=tokens, docs=docs, logprob=-1.234567890123, mode="token",
                  decoding=None, snapshot=snapshot,
                  timings={"retrieve_s": 0.012, "generate_s": 1.5}, temperature=0.05,
                  style="short", grounded=True, retriever="hybrid")


@pytest.fixture()
def catalog(tmp_path: Path) -> Catalog:
    return Catalog(tmp_path / "catalog.sqlite")


def test_answer_round_trips_through_a_closed_and_reopened_catalog(tmp_path: Path) -> None:
    path = tmp_path / "catalog.sqlite"
    cat = Catalog(path)
    store = ConversationStore(cat)
    conv = store.create()
    original = make_answer("Who discovered radium?", "Marie and Pierre Curie")
    original.cancelled = True
    saved = store.add_answer(conv.id, original, pack="starter",
                             options={"n_docs": 3, "mode": "token", "decoding": "fast"})
    cat.close()

    store2 = ConversationStore(Catalog(path))
    [loaded] = store2.answers(conv.id)
    assert loaded.id == saved.id and loaded.position == 0
    # Dataclass equality compares every field, posteriors float for float.
    assert loaded.answer == original
    assert loaded.answer.tokens[0].posterior == [1 / 3, 2 / 3 - 1e-17, 1e-300]
    assert [t.source for t in loaded.answer.tokens] == [t.source for t in original.tokens]
    assert loaded.pack == "starter"
    assert loaded.options == {"n_docs": 3, "mode": "token", "decoding": "fast"}
    assert store2.get_answer(saved.id).answer == original


def test_titles_order_and_rename(catalog: Catalog) -> None:
    store = ConversationStore(catalog)
    first = store.create()
    assert first.title == UNTITLED and not first.named and first.answers == 0
    store.add_answer(first.id, make_answer("  What is   the capital of France? ", "Paris"))
    second = store.create("Chemistry")
    store.add_answer(second.id, make_answer("Symbol of gold?", "Au"))
    listed = store.list_conversations()
    assert [c.id for c in listed] == [second.id, first.id]  # most recently changed first
    assert listed[1].title == "What is the capital of France?" and listed[1].answers == 1
    assert store.rename(first.id, "  Geography\n quiz ").title == "Geography quiz"
    assert store.rename(first.id, "").title == "What is the capital of France?"
    with pytest.raises(NotFoundError):
        store.rename(999, "x")
    # "New" twice gives one empty conversation; once it has an answer, a fresh one.
    empty = store.new_conversation()
    assert store.new_conversation().id == empty.id and empty.id not in (first.id, second.id)
    store.add_answer(empty.id, make_answer("Symbol of iron?", "Fe"))
    assert store.new_conversation().id not in (first.id, second.id, empty.id)
    # Names are searched too, word by word, with LIKE's wildcards taken literally.
    store.rename(first.id, "Geography 100% quiz")
    assert [c.id for c in store.search_titles("QUIZ geo")] == [first.id]
    assert [c.id for c in store.search_titles("100%")] == [first.id]
    assert store.search_titles("10_%") == []
    assert [c.id for c in store.search_titles("chem")] == [second.id]
    assert store.search_titles("capital") == []  # an unnamed title is its question: FTS's job
    positions = [a.position for a in store.answers(second.id)]
    store.add_answer(second.id, make_answer("Symbol of silver?", "Ag"))
    assert [a.position for a in store.answers(second.id)] == [*positions, 1]


def brute_force(corpus: dict[int, str], query: str) -> set[int]:
    """Answers whose words include every query word, the last one as a prefix: FTS5's
    semantics for the quoted query, recomputed on plain ASCII text."""
    words = [w.lower() for w in re.findall(r"\w+", query)]
    found = set()
    for aid, body in corpus.items():
        have = [w.lower() for w in re.findall(r"\w+", body)]
        if all(w in have for w in words[:-1]) and any(h.startswith(words[-1]) for h in have):
            found.add(aid)
    return found


def test_search_finds_old_answers_like_a_brute_force_scan(catalog: Catalog) -> None:
    store = ConversationStore(catalog)
    qa = [("Who discovered radium?", "Marie and Pierre Curie"),
          ("Where did Marie Curie work?", "In Paris at the Radium Institute"),
          ("What is the capital of France?", "Paris"),
          ("Who painted the Mona Lisa?", "Leonardo da Vinci"),
          ("When did the Berlin Wall fall?", "In 1989"),
          ("What is radiation?", "Energy emitted as waves or particles")]
    convs = [store.create() for _ in range(3)]
    corpus: dict[int, str] = {}
    for i, (q, a) in enumerate(qa):
        corpus[store.add_answer(convs[i // 2].id, make_answer(q, a)).id] = q + " " + a
    for query in ["radium", "radi", "curie paris", "Paris", "1989", "mona", "wall fall",
                  "nothing here", "Who", "in pa"]:
        got = {h.answer_id for h in store.search(query)}
        assert got == brute_force(corpus, query), query
    hit = store.search("Leonardo")[0]
    assert hit.question == "Who painted the Mona Lisa?"
    assert f"{HIT_START}Leonardo{HIT_END}" in hit.snippet
    assert hit.conversation_id == convs[1].id
    assert hit.conversation_title == "What is the capital of France?"  # its first question
    # Diacritics fold both ways (tokenize = unicode61 remove_diacritics 2).
    conv = store.create("Food")
    cafe = store.add_answer(conv.id, make_answer("Where is the Café de Flore?", "Paris"))
    assert cafe.id in {h.answer_id for h in store.search("cafe")}
    # What a user types is text, never FTS5 syntax.
    for hostile in ['"', "AND", "-", "*", "NEAR(", "x:y", ")", "a\"b", "OR radium"]:
        store.search(hostile)
    assert store.search("   ") == []
    assert fts_query('say "hi" now') == '"say" """hi""" "now"*'


def test_a_judged_answer_reopens_with_its_confidence_and_shown_sources(tmp_path: Path) -> None:
    """Confidence, "not found" and each token's shown source (which may differ from its
    posterior's argmax) come back as they were given; so does an answer stored before."""
    import dataclasses
    import sqlite3

    path = tmp_path / "catalog.sqlite"
    cat = Catalog(path)
    store = ConversationStore(cat)
    conv = store.create()
    judged = make_answer("when is the zorblat festival held", "July 19")
    judged.tokens = [dataclasses.replace(t, quoted_from=2) for t in judged.tokens]
    judged.confidence, judged.abstained = 0.0731, True
    assert judged.tokens[0].source == 2  # not the posterior's argmax (1)
    store.add_answer(conv.id, judged)
    plain = make_answer("Who discovered radium?", "Marie Curie")
    store.add_answer(conv.id, plain)
    cat.close()
    with sqlite3.connect(path) as con:  # an answer written before tokens had 4 elements
        con.execute("UPDATE answers SET tokens = ? WHERE position = 1",
                    (json.dumps([[t.id, t.text, t.posterior] for t in plain.tokens]),))
    first, second = (s.answer for s in ConversationStore(Catalog(path)).answers(conv.id))
    assert first == judged and [t.source for t in first.tokens] == [2, 2]
    assert second == plain and second.confidence is None and not second.abstained


def test_delete_hides_and_undo_restores_until_purged(catalog: Catalog) -> None:
    store = ConversationStore(catalog)
    keep = store.create("keep")
    store.add_answer(keep.id, make_answer("Largest planet?", "Jupiter"))
    gone = store.create()
    store.add_answer(gone.id, make_answer("Who wrote Hamlet?", "William Shakespeare"))
    store.add_answer(gone.id, make_answer("When was he born?", "In 1564"))
    before = store.answers(gone.id)

    store.delete(gone.id)
    assert [c.id for c in store.list_conversations()] == [keep.id]
    assert store.search("shakespeare") == []
    assert store.get(gone.id).deleted_at is not None
    with pytest.raises(NotFoundError):
        store.add_answer(gone.id, make_answer("x", "y"))

    restored = store.restore(gone.id)
    assert restored.deleted_at is None and restored.answers == 2
    assert {c.id for c in store.list_conversations()} == {keep.id, gone.id}
    assert store.answers(gone.id) == before
    assert [h.answer_id for h in store.search("shakespeare")] == [before[0].id]

    store.delete(gone.id)
    assert store.purge_deleted() == 0  # deleted just now: still undoable for 30 days
    with sqlite3.connect(catalog.path) as con:  # as if deleted 31 days ago
        con.execute("UPDATE conversations SET deleted_at = '2000-01-01T00:00:00+00:00' "
                    "WHERE id = ?", (gone.id,))
    assert store.purge_deleted() == 1
    with pytest.raises(NotFoundError):
        store.restore(gone.id)
    with sqlite3.connect(catalog.path) as con:  # cascades reached answers and passages
        assert con.execute("SELECT COUNT(*) FROM answers").fetchone()[0] == 1
        assert con.execute("SELECT COUNT(*) FROM answer_passages").fetchone()[0] == 3
        # The FTS index forgot them too (its own row count, not through the store).
        assert con.execute("SELECT COUNT(*) FROM answers_fts WHERE answers_fts MATCH "
                           "'shakespeare'").fetchone()[0] == 0


def test_export_json_round_trips_and_markdown_names_sources(catalog: Catalog,
                                                            tmp_path: Path) -> None:
    store = ConversationStore(catalog)
    conv = store.create("Science")
    a = make_answer("Who discovered radium?", "Marie Curie")
    store.add_answer(conv.id, a, pack="starter", options={"n_docs": 3})
    exported = store.export_json(conv.id)
    text = json.dumps(exported)  # plain JSON, nothing Python-only
    back = json.loads(text)
    assert back["format"] == "ragdesk-conversation" and back["title"] == "Science"
    assert answer_from_json(back["answers"][0]) == a
    copy = store.import_json(back)
    assert copy.id != conv.id and copy.title == "Science"
    [again] = store.answers(copy.id)
    assert again.answer == a and again.pack == "starter" and again.options == {"n_docs": 3}

    # A damaged export is refused whole, naming the answer; nothing is added.
    before = len(store.list_conversations())
    broken = json.loads(text)
    broken["answers"].append({"question": "no text"})
    with pytest.raises(BadInputError, match="Answer 2"):
        store.import_json(broken)
    with pytest.raises(BadInputError):
        store.import_json({"title": "x"})
    assert len(store.list_conversations()) == before
    as_file = store.export_to(conv.id, tmp_path / "science.json")
    assert json.loads(as_file.read_text(encoding="utf-8")) == back
    md_file = store.export_to(conv.id, tmp_path / "science.md")
    assert md_file.read_text(encoding="utf-8") == store.export_markdown(conv.id)
    md = store.export_markdown(conv.id)
    assert md.startswith("# Science\n")
    # Every token's posterior peaks on the second passage: one citation, [2].
    assert "## Who discovered radium?" in md and "Marie Curie [2]" in md
    assert "**Title 0**" in md and "(retrieved, not cited)" in md


@pytest.fixture(scope="module")
def dpr_ctx(tiny_models: Any) -> Any:
    from ragdesk.core.encoders import load_encoder

    return load_encoder(tiny_models.ctx_encoder, role="passage")


def test_answer_whose_snapshot_was_removed_still_loads_with_its_passages(
        tmp_path: Path, dpr_ctx: Any) -> None:
    from ragdesk.core.paths import DataDir
    from ragdesk.core.snapshots import import_snapshot, open_snapshot, remove_snapshot

    data = DataDir(tmp_path / "data").ensure()
    cat = Catalog(data.catalog_path)
    src = tmp_path / "s.jsonl"
    src.write_text("".join(json.dumps({"title": f"Article {i}", "text": f"words of {i} " * 30})
                           + "\n" for i in range(6)), encoding="utf-8")
    import_snapshot(data, cat, src, name="Old wiki", encoder=dpr_ctx)
    index = open_snapshot(data, cat, "Old wiki")
    passages = index.get_passages([4, 1])
    index.close()
    docs = [RetrievedDoc(p.id, p.title, p.text, 70.0 - r, 0.8 - 0.6 * r, "Old wiki")
            for r, p in enumerate(passages)]
    store = ConversationStore(cat)
    conv = store.create()
    saved = store.add_answer(conv.id, make_answer("What are the words of 4?", "words of 4",
                                                  snapshot="Old wiki", docs=docs))
    remove_snapshot(data, cat, "Old wiki")
    cat.close()
    assert not any(data.snapshots_dir.iterdir())

    cat2 = Catalog(data.catalog_path)
    assert cat2.list_snapshots() == []
    loaded = ConversationStore(cat2).get_answer(saved.id).answer
    assert [(d.id, d.title, d.text) for d in loaded.docs] == \
        [(p.id, p.title, p.text) for p in passages]
    assert loaded.snapshot == "Old wiki"
    # The heat map's input: one posterior per token over the stored passages.
    assert all(len(t.posterior) == len(loaded.docs) for t in loaded.tokens)


def check_v3_rows_survived(cat: Catalog) -> None:
    snap = cat.get_snapshot("wiki-2016")
    assert snap.passages == 1234 and snap.dim == 768 and snap.default_pack == "rag-token-nq"
    assert [(v.variant, v.bytes) for v in snap.variants] == [("flat", 3790848)]
    assert cat.active_snapshot() == "wiki-2016"
    assert cat.list_jobs()[0].done == 1234
    assert [p.name for p in cat.list_model_packs()] == ["mine"]
    assert cat.get_state("window_geometry") == "abc"


def test_catalog_file_written_by_the_v3_code_upgrades_to_conversations(tmp_path: Path) -> None:
    # tests/core/fixtures/catalog-v3.sqlite was written by the released code (schema 3,
    # before conversations) through its own Catalog API, with a row in every table.
    path = tmp_path / "catalog.sqlite"
    shutil.copyfile(FIXTURES / "catalog-v3.sqlite", path)
    with sqlite3.connect(path) as con:
        assert con.execute("PRAGMA user_version").fetchone()[0] == 3
    cat = Catalog(path)
    assert cat.schema_version() == SCHEMA_VERSION == 6
    check_v3_rows_survived(cat)
    store = ConversationStore(cat)
    conv = store.create()
    a = make_answer("Who discovered radium?", "Marie Curie")
    store.add_answer(conv.id, a)
    assert store.answers(conv.id)[0].answer == a
    assert [h.question for h in store.search("radium")] == ["Who discovered radium?"]
    cat.close()
    cat = Catalog(path)  # reopening does not migrate again, and keeps everything
    assert cat.schema_version() == SCHEMA_VERSION
    assert ConversationStore(cat).list_conversations()[0].answers == 1


def test_v3_catalog_made_by_the_migrations_upgrades_with_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "catalog.sqlite"
    cat = Catalog(path)
    cat.close()
    path.unlink()
    # Steps 1-3 as they are today, then rows written by the Catalog API at version 3 ...
    from sqlalchemy import create_engine

    engine = create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        assert migrate(conn, target=3) == 0
    engine.dispose()
    with sqlite3.connect(path) as con:
        con.execute("INSERT INTO snapshots (name, slug, folder, state, passages, created_at) "
                    "VALUES ('w', 'w', 'snapshots/w', 'ready', 5, '2026-01-01')")
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
    assert "conversations" not in tables
    # ... and the Catalog brings it to the current version.
    cat = Catalog(path)
    assert cat.schema_version() == SCHEMA_VERSION and cat.get_snapshot("w").passages == 5
    assert ConversationStore(cat).list_conversations() == []


def test_answers_saved_from_several_threads_and_catalogs_keep_their_order(
        tmp_path: Path) -> None:
    import threading

    path = tmp_path / "catalog.sqlite"
    conv = ConversationStore(Catalog(path)).create("busy")
    errors: list[BaseException] = []

    def writer(w: int) -> None:
        store = ConversationStore(Catalog(path))  # its own engine, as another process has
        try:
            for i in range(8):
                store.add_answer(conv.id, make_answer(f"q{w}-{i}?", f"a{w}-{i}"))
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    stored = ConversationStore(Catalog(path)).answers(conv.id)
    assert [a.position for a in stored] == list(range(32))
    # Each writer's answers in the order it wrote them.
    for w in range(4):
        mine = [a.answer.question for a in stored if a.answer.question.startswith(f"q{w}-")]
        assert mine == [f"q{w}-{i}?" for i in range(8)]


def test_an_answer_from_memory_reopens_as_one_with_tokens_that_cite_nothing(
        tmp_path: Path) -> None:
    import dataclasses

    path = tmp_path / "catalog.sqlite"
    store = ConversationStore(Catalog(path))
    conv = store.create()
    base = make_answer("Who discovered penicillin?", "Alexander Fleming")
    original = dataclasses.replace(
        base, from_memory=True, confidence=0.4,
        tokens=[dataclasses.replace(t, posterior=[]) for t in base.tokens])
    store.add_answer(conv.id, original, pack="reader-1.5b")
    [loaded] = ConversationStore(Catalog(path)).answers(conv.id)
    assert loaded.answer == original and loaded.answer.from_memory
    assert {t.source for t in loaded.answer.tokens} == {-1}
