from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from ragdesk.core.catalog import SCHEMA_VERSION, Catalog, SnapshotState
from ragdesk.core.catalog.migrations import STEPS
from ragdesk.core.errors import AlreadyExistsError, CatalogError, NotFoundError


def make_v1_catalog(path: Path) -> None:
    """A catalog as the first released schema wrote it, with rows in every table."""
    con = sqlite3.connect(path)
    for stmt in STEPS[0]:
        con.execute(stmt)
    con.execute("PRAGMA user_version = 1")
    con.execute(
        "INSERT INTO snapshots (name, slug, folder, state, passages, encoder_id, dim, source,"
        " created_at) VALUES ('wiki-2016', 'wiki-2016', 'snapshots/wiki-2016', 'ready', 1234,"
        " 'facebook/dpr-ctx_encoder-multiset-base', 768, 'psgs.tsv', '2026-01-01T00:00:00')"
    )
    con.execute(
        "INSERT INTO index_variants (snapshot_id, variant, file, bytes, recall_at_20, created_at)"
        " VALUES (1, 'flat', 'index.flat.faiss', 3790848, 1.0, '2026-01-01T00:00:00')"
    )
    con.execute(
        "INSERT INTO import_jobs (snapshot_id, kind, state, done, total, started_at, updated_at)"
        " VALUES (1, 'import', 'done', 1234, 1234, '2026-01-01', '2026-01-01')"
    )
    con.execute("INSERT INTO app_state (key, value) VALUES ('active_snapshot', 'wiki-2016')")
    con.commit()
    con.close()


def test_old_schema_is_upgraded_in_place_without_losing_rows(tmp_path: Path) -> None:
    path = tmp_path / "catalog.sqlite"
    make_v1_catalog(path)
    cat = Catalog(path)
    assert cat.schema_version() == SCHEMA_VERSION > 1
    snap = cat.get_snapshot("wiki-2016")
    assert snap.passages == 1234 and snap.dim == 768 and snap.state == "ready"
    assert snap.encoder_family is None  # new column, old row
    assert [v.variant for v in snap.variants] == ["flat"]
    assert snap.variants[0].bytes == 3790848 and snap.variants[0].recall_at_20 == 1.0
    assert cat.active_snapshot() == "wiki-2016" and snap.active
    assert cat.list_jobs()[0].done == 1234
    # New-schema features work on the upgraded file.
    cat.add_model_pack("mine", "custom", question_encoder="q", passage_encoder="p",
                       generator="g", generator_kind="bart")
    assert [p.name for p in cat.list_model_packs()] == ["mine"]
    cat.close()
    # Reopening does not migrate again.
    assert Catalog(path).schema_version() == SCHEMA_VERSION


def test_snapshot_lifecycle(tmp_path: Path) -> None:
    cat = Catalog(tmp_path / "c.sqlite")
    cat.add_snapshot("Wiki 2018", "snapshots/wiki-2018", encoder_id="e", dim=8)
    with pytest.raises(AlreadyExistsError):
        cat.add_snapshot("Wiki 2018", "x")
    with pytest.raises(CatalogError):
        cat.set_active("Wiki 2018")  # still importing
    cat.update_snapshot("Wiki 2018", state=SnapshotState.READY, passages=10)
    cat.set_active("Wiki 2018")
    cat.upsert_variant("Wiki 2018", "flat", "index.flat.faiss", bytes=320, bytes_per_passage=32)
    cat.upsert_variant("Wiki 2018", "flat", "index.flat.faiss", bytes=330, recall_at_20=1.0)
    snap = cat.get_snapshot("Wiki 2018")
    assert snap.slug == "wiki-2018" and snap.active and snap.passages == 10
    assert len(snap.variants) == 1 and snap.variants[0].bytes == 330
    cat.remove_snapshot("Wiki 2018")
    assert cat.active_snapshot() is None and cat.list_snapshots() == []
    with pytest.raises(NotFoundError):
        cat.get_snapshot("Wiki 2018")


def test_failed_transaction_leaves_nothing(tmp_path: Path) -> None:
    from sqlalchemy import text

    cat = Catalog(tmp_path / "c.sqlite")
    with pytest.raises(RuntimeError), cat.transaction() as conn:
        conn.execute(text("INSERT INTO app_state (key, value) VALUES ('k', 'v')"))
        raise RuntimeError("boom")
    assert cat.get_state("k") is None


def test_not_sqlite_file_gives_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "catalog.sqlite"
    path.write_text("this is not a database, just some text\n" * 20)
    with pytest.raises(CatalogError, match="not an SQLite database"):
        Catalog(path)
    assert path.read_text().startswith("this is not")  # untouched


def test_two_catalogs_share_one_file_safely(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    a, b = Catalog(path), Catalog(path)
    errors: list[BaseException] = []

    def writer(cat: Catalog, prefix: str) -> None:
        try:
            for i in range(25):
                cat.set_state(f"{prefix}{i}", str(i))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(c, p)) for c, p in ((a, "a"), (b, "b"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert a.get_state("b24") == "24" and b.get_state("a24") == "24"
