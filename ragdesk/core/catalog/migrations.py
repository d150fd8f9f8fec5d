"""Versioned schema migrations, applied in place on open.

The schema version lives in SQLite's ``PRAGMA user_version``. A new catalog runs every step
from version 0, so fresh and upgraded catalogs go through the same code. Each step runs in
one transaction together with the version bump: a crash mid-migration leaves the old schema.
Never edit a released step; append a new one.
"""

from __future__ import annotations

from sqlalchemy import Connection, text

STEPS: list[list[str]] = [
    # 1: the first schema.
    [
        """CREATE TABLE snapshots (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            slug TEXT NOT NULL UNIQUE,
            folder TEXT NOT NULL,
            state TEXT NOT NULL CHECK (state IN ('importing', 'ready', 'failed')),
            passages INTEGER NOT NULL DEFAULT 0,
            encoder_id TEXT,
            dim INTEGER,
            source TEXT,
            error TEXT,
            created_at TEXT NOT NULL
        )""",
        """CREATE TABLE index_variants (
            id INTEGER PRIMARY KEY,
            snapshot_id INTEGER NOT NULL REFERENCES snapshots(id) ON DELETE CASCADE,
            variant TEXT NOT NULL,
            file TEXT NOT NULL,
            bytes INTEGER NOT NULL DEFAULT 0,
            recall_at_20 REAL,
            created_at TEXT NOT NULL,
            UNIQUE (snapshot_id, variant)
        )""",
        """CREATE TABLE import_jobs (
            id INTEGER PRIMARY KEY,
            snapshot_id INTEGER REFERENCES snapshots(id) ON DELETE SET NULL,
            kind TEXT NOT NULL,
            state TEXT NOT NULL,
            done INTEGER NOT NULL DEFAULT 0,
            total INTEGER,
            message TEXT,
            started_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        )""",
        "CREATE TABLE app_state (key TEXT PRIMARY KEY, value TEXT)",
    ],
    # 2: model packs, encoder family and per-variant measurements.
    [
        "ALTER TABLE snapshots ADD COLUMN encoder_family TEXT",
        "ALTER TABLE snapshots ADD COLUMN default_pack TEXT",
        "ALTER TABLE index_variants ADD COLUMN bytes_per_passage REAL",
        "ALTER TABLE index_variants ADD COLUMN params TEXT",
        "ALTER TABLE import_jobs ADD COLUMN pid INTEGER",
        """CREATE TABLE model_packs (
            name TEXT PRIMARY KEY,
            kind TEXT NOT NULL,
            question_encoder TEXT,
            passage_encoder TEXT,
            generator TEXT,
            generator_kind TEXT,
            details TEXT,
            created_at TEXT NOT NULL
        )""",
    ],
    # 3: what an unfinished import can already answer from. NULL: nothing; 'sparse': its
    # passages and BM25 index are complete in the staging folder, dense vectors pending.
    [
        "ALTER TABLE snapshots ADD COLUMN stage TEXT",
    ],
    # 4: conversations. An answer keeps its passages' text (answer_passages), so it reopens
    # with its citations, heat map and inspector after its snapshot is removed. A deleted
    # conversation is only marked (deleted_at) until it is purged, which is what "undo"
    # restores. answers_fts indexes questions and answer texts (external content: the text
    # is stored once, in answers; the triggers keep the index in step).
    [
        """CREATE TABLE conversations (
            id INTEGER PRIMARY KEY,
            title TEXT NOT NULL,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            deleted_at TEXT
        )""",
        """CREATE TABLE answers (
            id INTEGER PRIMARY KEY,
            conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            position INTEGER NOT NULL,
            question TEXT NOT NULL,
            text TEXT NOT NULL,
            mode TEXT NOT NULL,
            decoding TEXT,
            snapshot TEXT,
            pack TEXT,
            options TEXT NOT NULL DEFAULT '{}',
            logprob REAL NOT NULL,
            temperature REAL NOT NULL DEFAULT 1.0,
            style TEXT,
            grounded INTEGER NOT NULL DEFAULT 0,
            retriever TEXT,
            cancelled INTEGER NOT NULL DEFAULT 0,
            token_ids TEXT NOT NULL DEFAULT '[]',
            tokens TEXT NOT NULL DEFAULT '[]',
            timings TEXT NOT NULL DEFAULT '{}',
            created_at TEXT NOT NULL,
            UNIQUE (conversation_id, position)
        )""",
        """CREATE TABLE answer_passages (
            answer_id INTEGER NOT NULL REFERENCES answers(id) ON DELETE CASCADE,
            rank INTEGER NOT NULL,
            passage_id INTEGER NOT NULL,
            title TEXT NOT NULL,
            text TEXT NOT NULL,
            score REAL NOT NULL,
            prob REAL NOT NULL,
            snapshot TEXT,
            PRIMARY KEY (answer_id, rank)
        )""",
        "CREATE INDEX conversations_by_update ON conversations (deleted_at, updated_at)",
        """CREATE VIRTUAL TABLE answers_fts USING fts5(
            question, text, content='answers', content_rowid='id',
            tokenize='unicode61 remove_diacritics 2'
        )""",
        """CREATE TRIGGER answers_fts_insert AFTER INSERT ON answers BEGIN
            INSERT INTO answers_fts (rowid, question, text)
            VALUES (new.id, new.question, new.text);
        END""",
        """CREATE TRIGGER answers_fts_delete AFTER DELETE ON answers BEGIN
            INSERT INTO answers_fts (answers_fts, rowid, question, text)
            VALUES ('delete', old.id, old.question, old.text);
        END""",
        """CREATE TRIGGER answers_fts_update AFTER UPDATE OF question, text ON answers BEGIN
            INSERT INTO answers_fts (answers_fts, rowid, question, text)
            VALUES ('delete', old.id, old.question, old.text);
            INSERT INTO answers_fts (rowid, question, text)
            VALUES (new.id, new.question, new.text);
        END""",
    ],
    # 5: honest answers. An answer's P(right) (NULL: no model judged it), whether it said
    # "not found in this snapshot", and (in the tokens' JSON, a fourth element) each token's
    # shown source, so a reopened answer reads as it was given.
    [
        "ALTER TABLE answers ADD COLUMN confidence REAL",
        "ALTER TABLE answers ADD COLUMN abstained INTEGER NOT NULL DEFAULT 0",
    ],
    # 6: an answer the reader gave from memory (no passage in its prompt) reopens as one.
    [
        "ALTER TABLE answers ADD COLUMN from_memory INTEGER NOT NULL DEFAULT 0",
    ],
]

SCHEMA_VERSION = len(STEPS)


def current_version(conn: Connection) -> int:
    return int(conn.execute(text("PRAGMA user_version")).scalar_one())


def migrate(conn: Connection, target: int = SCHEMA_VERSION) -> int:
    """Bring the schema to ``target``; returns the version found before. Caller commits."""
    found = current_version(conn)
    for version in range(found + 1, target + 1):
        for statement in STEPS[version - 1]:
            conn.execute(text(statement))
        # PRAGMA cannot take bound parameters; version is an int we computed.
        conn.execute(text(f"PRAGMA user_version = {int(version)}"))
    return found
